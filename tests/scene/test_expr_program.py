"""Expression bytecode (mbsim.scene.expr.compile_programs) run by the compiled interpreter
(mbsim.model.expr_kernel): the same float64 bits as ``Expression.__call__``.

Arithmetic, comparisons, logic, ``where``, ``min``, ``max``, ``floor``, ``ceil``, ``mod``, ``sign``,
``abs``, ``sqrt`` and powers by -1, 0.5 and 2 are exact operations: equal bits on any machine.
The other elementary functions and general powers come from the C library in the kernel, and from
numpy's own SIMD code where numpy dispatches to it (AVX2 tanh, AVX-512 exp, log, pow, tan, ...;
up to 3 ulp apart): in-process they are checked to a tolerance, and bit for bit in a subprocess in
which numpy's SIMD dispatch is switched off (numpy then calls the same C library).
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from mbsim.model.expr_kernel import run_expression
from mbsim.scene.expr import FUNCTIONS, OPCODES, Expression, _postorder, compile_expression, compile_programs

NAMES = ("t", "x", "y")

# exact operations only
EXACT = [
    "t",
    "1.5",
    "-0.0",
    "t + x",
    "t - x",
    "t * x",
    "t / x",
    "-t",
    "-(t - x) * y",
    "t**2",
    "t**0.5",
    "t**-1",
    "(t * x)**2 / y - 1 / t",
    "t < x",
    "t <= x",
    "t > x",
    "t >= x",
    "t == x",
    "t != x",
    "sqrt(t)",
    "abs(t)",
    "floor(t)",
    "ceil(t)",
    "sign(t)",
    "mod(t, x)",
    "mod(t, 0)",
    "mod(-t, y) + mod(x, -2.5)",
    "min(t, x)",
    "max(t, x)",
    "min(t, x, y)",
    "max(t, x, y, 1)",
    "min(max(t, x), y, -t)",
    "where(t, x, y)",
    "where(t > x, t, y)",
    "where(t < 1, t**2, 2*t - 1)",
    "where(t > 1, t > 2, x)",
    "t and x",
    "t or x",
    "not t",
    "t and x or y",
    "not (t > 1) or x",
    "(t > 1) and (x > 1)",
    "0 < t < x",
    "t < x <= y < 2",
    "t == x != y",
    "(t > 1) * 3",
    "(t > 1)**2",
    "(t > 1) / 0",
    "(t > 1) * x + (x < 2) * y",
    "x * (t > 1) - y",
    "sqrt(t) * (x > 0) + 1",
]
# C-library functions and general powers
LIBM = [
    "sin(t)",
    "cos(t)",
    "tan(t)",
    "asin(t)",
    "acos(t)",
    "atan(t)",
    "atan2(t, x)",
    "sinh(t)",
    "cosh(t)",
    "tanh(t)",
    "exp(t)",
    "log(t)",
    "t**x",
    "t**3",
    "x**(1/3)",
    "exp(-t) * cos(2*pi*x) + log(abs(y))",
]
DRIVE = "0.5*sin(2*t)**3 + where(t < 1, t**2, 2*t - 1)"  # its derivatives use sin, cos and powers
EXACT_DRIVE = "0.5*t**2*x + where(t < 1, t**2, 2*t - 1) - mod(t, 2)*x / (1 + t**2) + max(t, x, 0)"

# the edge values of the brief: zeros of both signs, NaN, infinities, denormals, fractional powers
EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -8.0, 1 / 3, 0.1, 7.0, -7.5]
EDGE += [np.nan, np.inf, -np.inf, 5e-324, 1e308, -1e-300]


def _points() -> np.ndarray:
    """(n, 3) values of (t, x, y): every pair of edge values for (t, x), then random rows."""
    rng = np.random.default_rng(20240607)
    edge = np.array(EDGE)
    t, x = (a.ravel() for a in np.meshgrid(edge, edge))
    pairs = np.stack([t, x, np.resize(edge[::-1], t.size)], axis=1)
    scales = np.repeat([1e-3, 0.5, 3.0, 50.0], 40)[:, None]
    rows = rng.normal(size=(scales.size, 3)) * scales
    whole = rng.integers(-4, 5, size=(40, 3)).astype(np.float64)  # mod, floor and powers of whole numbers
    return np.concatenate([pairs, rows, whole])


POINTS = _points()


def _compile(texts: list[str]) -> list[Expression]:
    return [compile_expression(text, variables=frozenset(NAMES)) for text in texts]


def evaluate(exprs: list[Expression], points: np.ndarray = POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(compiled, reference) values, (len(exprs), len(points)): one program for all expressions,
    run point by point as the simulator will; the reference is ``Expression`` on Python floats."""
    p = compile_programs(exprs, NAMES)
    regs = np.full(p.nreg, np.nan)  # stale values between expressions must not matter
    got = np.empty((len(exprs), len(points)))
    want = np.empty_like(got)
    for j, point in enumerate(points):
        env = dict(zip(NAMES, (float(v) for v in point), strict=True))
        regs[: len(NAMES)] = point
        for k, expr in enumerate(exprs):
            got[k, j] = run_expression(p.op, p.dst, p.args, p.imm, p.start, p.stop, p.result, k, regs)
            want[k, j] = float(expr(env))
    return got, want


def assert_bitwise(got: np.ndarray, want: np.ndarray, label: str) -> None:
    np.testing.assert_array_equal(got, want, err_msg=label)  # NaN equals NaN here, and 0.0 equals -0.0
    real = ~np.isnan(want)
    np.testing.assert_array_equal(got[real].view(np.int64), want[real].view(np.int64), err_msg=f"{label}: bits")


def bitwise_mismatches() -> list[str]:
    """Texts whose compiled values differ in any bit (NaNs aside) from ``Expression``; run by the subprocess."""
    exprs = _compile(EXACT + LIBM)
    drive = compile_expression(DRIVE, variables=frozenset({"t"}))
    exprs += [drive, drive.derivative("t"), drive.derivative("t").derivative("t")]
    got, want = evaluate(exprs)
    out = []
    for expr, g, w in zip(exprs, got, want, strict=True):
        real = ~np.isnan(w)
        if not (np.array_equal(np.isnan(g), ~real) and np.array_equal(g[real].view(np.int64), w[real].view(np.int64))):
            out.append(expr.text)
    return out


# ------------------------------------------------------------------------------ semantics


def test_exact_operations_match_bit_for_bit() -> None:
    got, want = evaluate(_compile(EXACT))
    for text, g, w in zip(EXACT, got, want, strict=True):
        assert_bitwise(g, w, text)


@pytest.mark.parametrize("text", LIBM)
def test_elementary_functions_match_within_rounding(text: str) -> None:
    (got,), (want,) = evaluate(_compile([text]))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=text)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300, err_msg=text)


def test_drive_and_its_derivatives_match() -> None:
    for text, names in ((EXACT_DRIVE, ("t", "x")), (DRIVE, ("t",))):
        drive = compile_expression(text, variables=frozenset(names))
        first = drive.derivative("t")
        exprs = [drive, first, first.derivative("t")]
        got, want = evaluate(exprs)
        for expr, g, w in zip(exprs, got, want, strict=True):
            if text == EXACT_DRIVE:
                assert_bitwise(g, w, expr.text)
            else:  # sin, cos and x**3: see the module docstring
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=expr.text)


def _numpy_dispatch_features() -> list[str]:
    """The SIMD features numpy dispatches to on this machine (numpy's own listing, as np.show_runtime)."""
    from numpy._core import _multiarray_umath as umath

    return [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]


_CHILD = """
import importlib.util, json, sys
from numpy._core import _multiarray_umath as umath
spec = importlib.util.spec_from_file_location("test_expr_program_child", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
active = [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]
print(json.dumps({"active": active, "mismatches": module.bitwise_mismatches()}))
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="numpy's baseline may be SIMD here")
def test_every_form_matches_bit_for_bit_when_numpy_uses_the_c_library() -> None:
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(_numpy_dispatch_features()))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, __file__], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["active"] == []
    assert report["mismatches"] == []


# ------------------------------------------------------------------------------ layout


def test_layout_of_a_program() -> None:
    exprs = _compile(["t", "2.5", "min(t, x, y) + t*x", "y"])
    p = compile_programs(exprs, NAMES)
    n = p.op.size
    assert (p.op.dtype, p.dst.dtype, p.args.dtype, p.imm.dtype) == (np.int64, np.int64, np.int64, np.float64)
    assert p.args.shape == (n, 3) and p.dst.shape == p.imm.shape == (n,)
    assert p.start.shape == p.stop.shape == p.result.shape == (4,) and p.variables == NAMES
    assert not p.op.flags.writeable
    # a bare variable is no instruction, a constant one CONST
    assert (p.start[0], p.stop[0], p.result[0]) == (0, 0, 0)
    assert p.stop[1] - p.start[1] == 1 and p.op[p.start[1]] == OPCODES["CONST"] and p.imm[p.start[1]] == 2.5
    assert (p.stop[3] - p.start[3], p.result[3]) == (0, 2)
    # min of three operands is two binary MINs; unused arguments are -1
    ops = list(p.op[p.start[2] : p.stop[2]])
    assert ops.count(OPCODES["MIN"]) == 2 and ops.count(OPCODES["MUL"]) == 1 and ops.count(OPCODES["ADD"]) == 1
    assert np.all(p.args[p.start[2] : p.stop[2], 2] == -1)
    assert p.nreg == len(NAMES) + max(p.stop - p.start)
    assert np.all(p.dst >= len(NAMES)) and np.all(p.dst < p.nreg) and np.all(p.args < p.nreg)


def test_every_function_has_an_opcode() -> None:
    assert {f.upper() for f in FUNCTIONS} <= set(OPCODES)
    assert sorted(OPCODES.values()) == list(range(len(OPCODES)))


def test_shared_subtrees_run_once() -> None:
    """Derivatives share subtrees: one instruction per distinct node at most, equal ones merged."""
    drive = compile_expression(DRIVE, variables=frozenset({"t"}))
    second = drive.derivative("t").derivative("t")
    p = compile_programs([second], ("t",))
    assert p.stop[0] - p.start[0] <= len(_postorder(second.tree))
    rows = {(int(o), tuple(a), float(v).hex()) for o, a, v in zip(p.op, p.args.tolist(), p.imm, strict=True)}
    assert len(rows) == p.op.size


def test_deep_expression_without_recursion() -> None:
    text = "t"
    for k in range(29):  # three levels each: + of * of min
        text = f"min({text}, x) * t + {k % 5}"
    drive = compile_expression(text, variables=frozenset(NAMES))
    exprs = [drive, drive.derivative("t"), drive.derivative("t").derivative("t")]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 40)  # far below the nesting: a recursive compiler would fail
    try:
        compile_programs(exprs, NAMES)
    finally:
        sys.setrecursionlimit(limit)
    got, want = evaluate(exprs, POINTS[::7])
    for expr, g, w in zip(exprs, got, want, strict=True):
        assert_bitwise(g, w, expr.text)


def test_unknown_or_repeated_variables_are_refused() -> None:
    expr = compile_expression("t + vx", variables=frozenset({"t", "vx"}))
    with pytest.raises(ValueError, match="'vx'"):
        compile_programs([expr], ("t", "x"))
    with pytest.raises(ValueError, match="repeated"):
        compile_programs([expr], ("t", "vx", "t"))


def test_empty_program() -> None:
    p = compile_programs([], NAMES)
    assert p.op.shape == (0,) and p.args.shape == (0, 3) and p.start.shape == (0,) and p.nreg == 3
