"""The safe expression language (CONTRACT §1, "Expressions"): evaluation, exact derivatives, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mbsim.scene.expr import FUNCTIONS, Expression, ExpressionError, compile_expression


def value(text: str, t: float | None = None, parameters: dict | None = None, **env: float) -> float:
    names = set(env) | ({"t"} if t is not None else set())
    expr = compile_expression(text, parameters, frozenset(names))
    if t is not None:
        env["t"] = t
    return float(expr(env))


# ----------------------------------------------------------------------------- evaluation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.5e-3", 2.5e-3),
        ("-3", -3.0),
        ("+4", 4.0),
        ("1_000", 1000.0),
        ("7/2", 3.5),  # true division, never integer division
        ("2 + 3*4**2", 50.0),
        ("-2**2", -4.0),  # Python precedence: -(2**2)
        ("2**3**2", 512.0),  # right associative
        ("(1 + 2)/4", 0.75),
        ("2**-1", 0.5),
        ("pi", math.pi),
        ("e", math.e),
        ("2*pi*e", 2 * math.pi * math.e),
        ("  1 + 1  ", 2.0),
    ],
)
def test_numbers_and_operators(text: str, expected: float) -> None:
    expr = compile_expression(text)
    assert expr.is_constant
    assert expr.variables == frozenset()
    assert float(expr()) == pytest.approx(expected, rel=1e-15)


def test_numbers_pass_through() -> None:
    for number in (3, -1.5, 0):
        expr = compile_expression(number)
        assert expr.is_constant
        assert float(expr()) == float(number)


def test_parameters_are_folded_to_constants() -> None:
    params = {"L": 0.02, "m": 3.0}
    expr = compile_expression("0.2*L*sin(2*pi*m/12)", params)
    assert expr.is_constant
    assert expr.variables == frozenset()
    assert float(expr()) == pytest.approx(0.2 * 0.02 * math.sin(2 * math.pi * 3 / 12), rel=1e-15)


def test_time_and_state_variables() -> None:
    params = {"A": 2.0, "w": 3.0}
    expr = compile_expression("A*sin(w*t) - 0.5*vx**2 + x", params, frozenset({"t", "x", "vx"}))
    assert not expr.is_constant
    assert expr.variables == frozenset({"t", "x", "vx"})
    assert float(expr({"t": 0.7, "x": 0.1, "vx": -2.0})) == pytest.approx(
        2.0 * math.sin(2.1) - 0.5 * 4.0 + 0.1, rel=1e-15
    )
    # unused allowed names are not variables of the expression
    assert compile_expression("2*t", None, frozenset({"t", "x"})).variables == frozenset({"t"})


def test_vectorised_evaluation() -> None:
    expr = compile_expression("where(t < 1, t**2, 2*t - 1) + max(t, 0.5)", None, frozenset({"t"}))
    t = np.array([0.0, 0.5, 1.0, 2.0])
    got = expr({"t": t})
    assert got.shape == (4,)
    np.testing.assert_allclose(got, np.where(t < 1, t**2, 2 * t - 1) + np.maximum(t, 0.5), rtol=1e-15)


# each function of the language, checked against the math module at a point where it is defined
FUNCTION_CASES = {
    "sin": ("sin(t)", 0.3, math.sin(0.3)),
    "cos": ("cos(t)", 0.3, math.cos(0.3)),
    "tan": ("tan(t)", 0.3, math.tan(0.3)),
    "asin": ("asin(t)", 0.3, math.asin(0.3)),
    "acos": ("acos(t)", 0.3, math.acos(0.3)),
    "atan": ("atan(t)", 3.0, math.atan(3.0)),
    "atan2": ("atan2(t, -1)", 0.5, math.atan2(0.5, -1.0)),  # second quadrant: not atan(y/x)
    "sinh": ("sinh(t)", 1.2, math.sinh(1.2)),
    "cosh": ("cosh(t)", 1.2, math.cosh(1.2)),
    "tanh": ("tanh(t)", 1.2, math.tanh(1.2)),
    "exp": ("exp(t)", 1.2, math.exp(1.2)),
    "log": ("log(t)", 7.0, math.log(7.0)),  # natural logarithm
    "sqrt": ("sqrt(t)", 7.0, math.sqrt(7.0)),
    "abs": ("abs(t)", -2.5, 2.5),
    "min": ("min(t, 2, -1, 3)", 0.5, -1.0),
    "max": ("max(t, 2, -1, 3)", 0.5, 3.0),
    "floor": ("floor(t)", -2.5, -3.0),
    "mod": ("mod(t, 0.8)", -0.5, 0.3),  # Python's %: the sign of the divisor
    "ceil": ("ceil(t)", -2.5, -2.0),
    "sign": ("sign(t)", -2.5, -1.0),
    "where": ("where(t > 1, 10, 20)", 0.5, 20.0),
}


def test_every_function_has_a_case() -> None:
    assert set(FUNCTION_CASES) == set(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTION_CASES))
def test_function_values(name: str) -> None:
    text, t, expected = FUNCTION_CASES[name]
    assert value(text, t) == pytest.approx(expected, rel=1e-14, abs=1e-15)
    # the same function of a constant argument (here t given as a parameter) is folded at compile time
    constant = compile_expression(text, {"t": t})
    assert constant.is_constant
    assert float(constant()) == pytest.approx(expected, rel=1e-14, abs=1e-15)


def test_min_max_where_pick_the_right_branch() -> None:
    assert value("min(t, 1)", 3.0) == 1.0
    assert value("min(t, 1)", -3.0) == -3.0
    assert value("max(t, 1)", 3.0) == 3.0
    assert value("max(t, 1)", -3.0) == 1.0
    assert value("where(t > 1, 10, 20)", 1.5) == 10.0
    assert value("where(t, 10, 20)", 0.0) == 20.0  # a number is a condition: non-zero is true
    assert value("where(t, 10, 20)", -0.1) == 10.0


@pytest.mark.parametrize(
    ("text", "t", "expected"),
    [
        ("t < 1", 0.5, 1.0),
        ("t < 1", 1.0, 0.0),
        ("t <= 1", 1.0, 1.0),
        ("t > 1", 1.0, 0.0),
        ("t >= 1", 1.0, 1.0),
        ("t == 1", 1.0, 1.0),
        ("t == 1", 1.5, 0.0),
        ("t != 1", 1.5, 1.0),
        ("0 < t < 1", 0.5, 1.0),  # chained: both must hold
        ("0 < t < 1", 1.5, 0.0),
        ("0 < t < 1", -0.5, 0.0),
        ("2*(t > 1) + 1", 2.0, 3.0),
    ],
)
def test_comparisons(text: str, t: float, expected: float) -> None:
    assert value(text, t) == expected


def test_constant_comparisons_fold() -> None:
    """A condition on parameters is a constant: usable where a number is expected."""
    expr = compile_expression("where(L > 1, 2*L, 3)", {"L": 2.0})
    assert expr.is_constant
    assert float(expr()) == 4.0
    assert compile_expression("1 < 2 < 3").is_constant
    assert float(compile_expression("1 < 2 < 3")()) == 1.0
    assert float(compile_expression("1 < 3 < 2")()) == 0.0


# ----------------------------------------------------------------------------- derivatives

# every differentiable function, powers with constant and variable exponents, quotients, parameters;
# all smooth on the sample points (away from the kinks of abs, min, max and where)
DERIVATIVE_CASES = [
    "sin(2*t) + cos(t**2)",
    "tan(t/2)",
    "asin(t/2)",
    "acos(t/3 - 0.1)",
    "atan(3*t)",
    "atan2(sin(t), 2 + cos(t))",
    "atan2(t, -1)",
    "sinh(t) * cosh(t/2)",
    "tanh(2*t - 1)",
    "exp(-t) * sin(5*t)",
    "log(1 + t**2)",
    "sqrt(1 + t)",
    "abs(t - 1.1)",
    "abs(sin(3*t))",
    "min(t**2, t)",
    "max(sin(t), cos(t))",
    "min(t, 2*t, 0.5 + t**2)",
    "where(t < 1, t**3, 2*t - 1)",
    "where(0.5 < t < 1.5, sin(t), exp(t))",
    "t**3",
    "t**-2",
    "t**2.5",
    "(1 + t)**0.5",
    "t**t",
    "2**t",
    "e**(t**2)",
    "(1 + t)**sin(t)",
    "sqrt(t)**(t/2)",
    "1/t",
    "sin(t)/(1 + t**2)",
    "(t - 1)/(t + 2)**2",
    "A*sin(w*t + phi)",
    "-(t**2) / -(3 + t)",
    "floor(t) + ceil(t) + sign(t - 1)",
    "mod(3*t, 0.8) * sin(t)",
    "mod(t**2, 1 + t)",
    "t + 2*(t > 1)",
    "3.5",
    "L",
]
PARAMETERS = {"A": 0.3, "w": 2.0 * math.pi, "phi": 0.25, "L": 1.5}
POINTS = [0.3, 0.7, 1.3, 1.8]


def _central(expr: Expression, t: float, h: float = 1e-5) -> float:
    return float((expr({"t": t + h}) - expr({"t": t - h})) / (2 * h))


@pytest.mark.parametrize("text", DERIVATIVE_CASES)
def test_first_and_second_derivative_against_finite_differences(text: str) -> None:
    f = compile_expression(text, PARAMETERS, frozenset({"t"}))
    d1 = f.derivative("t")
    d2 = d1.derivative("t")
    assert isinstance(d1, Expression) and isinstance(d2, Expression)
    assert d1.variables <= {"t"} and d2.variables <= {"t"}
    for t in POINTS:
        # central differences are O(h^2) ~ 1e-10 here; roundoff ~ 1e-16/h ~ 1e-11
        assert float(d1({"t": t})) == pytest.approx(_central(f, t), rel=1e-7, abs=1e-8), t
        assert float(d2({"t": t})) == pytest.approx(_central(d1, t), rel=1e-7, abs=1e-8), t


def test_derivatives_are_exact() -> None:
    f = compile_expression("A*sin(w*t + phi)", PARAMETERS, frozenset({"t"}))
    A, w, phi = PARAMETERS["A"], PARAMETERS["w"], PARAMETERS["phi"]
    for t in POINTS:
        assert float(f.derivative()({"t": t})) == pytest.approx(A * w * math.cos(w * t + phi), rel=1e-14)
        assert float(f.derivative().derivative()({"t": t})) == pytest.approx(
            -A * w * w * math.sin(w * t + phi), rel=1e-14
        )
    ttt = compile_expression("t**t", None, frozenset({"t"})).derivative()
    assert float(ttt({"t": 2.0})) == pytest.approx(4.0 * (math.log(2.0) + 1.0), rel=1e-15)


def test_derivative_of_a_constant_is_zero() -> None:
    for text in ("3.5", "L*pi", "x**2"):
        d = compile_expression(text, {"L": 2.0}, frozenset({"t", "x"})).derivative("t")
        assert d.is_constant
        assert float(d()) == 0.0


def test_derivative_with_respect_to_another_variable() -> None:
    f = compile_expression("x**2 * t + sin(x)", None, frozenset({"t", "x"}))
    dx = f.derivative("x")
    assert dx.variables == frozenset({"t", "x"})
    assert float(dx({"t": 3.0, "x": 0.5})) == pytest.approx(2 * 0.5 * 3.0 + math.cos(0.5), rel=1e-15)
    dxx = dx.derivative("x")
    assert dxx.variables == frozenset({"t", "x"})
    assert float(dxx({"t": 3.0, "x": 0.5})) == pytest.approx(2 * 3.0 - math.sin(0.5), rel=1e-15)


def test_derivative_of_abs_min_max_where_follows_the_branch() -> None:
    assert float(compile_expression("abs(t)", None, {"t"}).derivative()({"t": -2.0})) == -1.0
    assert float(compile_expression("min(3*t, 1)", None, {"t"}).derivative()({"t": 0.1})) == 3.0
    assert float(compile_expression("min(3*t, 1)", None, {"t"}).derivative()({"t": 1.0})) == 0.0
    assert float(compile_expression("max(3*t, 1)", None, {"t"}).derivative()({"t": 1.0})) == 3.0
    where = compile_expression("where(t < 1, 5*t, t**2)", None, {"t"}).derivative()
    assert float(where({"t": 0.5})) == 5.0
    assert float(where({"t": 3.0})) == 6.0


# ----------------------------------------------------------------------------- refusals

REJECTED = [
    ("t.real", ".real"),
    ("pi.__class__", "__class__"),
    ("(1).__class__.__bases__", "__bases__"),
    ("lambda: 1", "Lambda"),
    ("(lambda: 1)()", "lambda"),
    ("t[0]", "Subscript"),
    ("foo + 1", "'foo'"),
    ("x", "'x'"),  # a state variable where only t is allowed
    ("sin", "'sin'"),  # a function is not a value
    ("__builtins__", "'__builtins__'"),
    ("bar(t)", "'bar'"),
    ("eval('1')", "'eval'"),
    ("pi(1)", "'pi'"),
    ("__import__('os')", "'__import__'"),
    ("__import__('os').system('true')", "__import__"),
    ("getattr(t, 'real')", "'getattr'"),
    ("min(t, b=2)", "'b'"),
    ("sin(t, **d)", "keyword"),
    ("sin(t, t)", "sin()"),
    ("atan2(t)", "atan2()"),
    ("where(t > 1, 1)", "where()"),
    ("max(t)", "max()"),
    ("sin()", "sin()"),
    ("sin(*t)", "Starred"),
    ("'abc'", "'abc'"),
    ("b'abc'", "b'abc'"),
    ("True", "True"),
    ("False + 1", "False"),
    ("None", "None"),
    ("1j", "1j"),
    ("t if t else 1", "IfExp"),
    ("[t, 1]", "List"),
    ("(t, 1)", "Tuple"),
    ("{t: 1}", "Dict"),
    ("~t", "Invert"),
    ("t // 2", "FloorDiv"),
    ("t % 2", "Mod"),
    ("t @ t", "MatMult"),
    ("t << 1", "LShift"),
    ("t is 1", "Is"),
    ("t in t", "In"),
    ("(t := 3)", "NamedExpr"),
    ("f'{t}'", "JoinedStr"),
    ("[i for i in t]", "ListComp"),
    ("2*(", "syntax error"),
    ("", "syntax error"),
    ("1; 2", "syntax error"),
    ("import os", "syntax error"),
]


@pytest.mark.parametrize(("text", "offending"), REJECTED, ids=[t or "<empty>" for t, _ in REJECTED])
def test_rejected_constructs(text: str, offending: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(text, {"L": 1.0}, frozenset({"t"}))
    message = str(info.value)
    assert offending in message
    assert f"'{text.strip()}'" in message  # the expression itself is quoted in the message


def test_rejected_non_text() -> None:
    for thing in (True, False):
        with pytest.raises(ExpressionError, match=repr(thing)):
            compile_expression(thing)


def test_too_long_or_too_deep() -> None:
    with pytest.raises(ExpressionError, match="longer than 2000"):
        compile_expression("1+" * 1000 + "1")
    with pytest.raises(ExpressionError, match="nested"):
        compile_expression("-" * 1999 + "t", None, {"t"})
    with pytest.raises(ExpressionError, match="nested"):
        compile_expression("sin(" * 150 + "t" + ")" * 150, None, {"t"})
    # a realistic long expression is fine
    expr = compile_expression(" + ".join(f"{k}*t**{k}" for k in range(30)), None, {"t"})
    assert float(expr({"t": 1.0})) == sum(range(30))
    assert float(expr.derivative().derivative()({"t": 1.0})) == sum(k * k * (k - 1) for k in range(30))


def test_expression_error_is_a_value_error() -> None:
    assert issubclass(ExpressionError, ValueError)


def test_mod_makes_periodic_signals() -> None:
    """mod(t, T) repeats every T (the pulsatile inlet of papers/creeping-robot-spatial-operator-algebra.txt
    eq. (1) has T = 0.8 s); its derivative is 1 between the jumps."""
    f = compile_expression("mod(t, 0.8)", None, frozenset({"t"}))
    t = np.array([0.1, 0.9, 1.7, 2.5, -0.7])
    np.testing.assert_allclose(f({"t": t}), 0.1, atol=1e-12)
    assert float(f.derivative()({"t": 0.3})) == 1.0
    assert value("mod(7, 3)", 0.0) == 1.0
