"""Benchmark of method ``recursive`` (O(N) spatial-operator-algebra dynamics) on the N-link
revolute chain of ``benchmarks.run.chain_scene``, beside method ``lagrange`` on the same chains.

    python benchmarks/recursive.py            # full: N = 10, 30, 100, 300, 1000, more repeats
    python benchmarks/recursive.py --quick    # smoke run: the same N, fewer repeats and steps

Prints a markdown section; ``section(quick)`` returns its lines (benchmarks/run.py includes it).

Per N, one compiled model serves both methods (``recursive.create`` on the model ``lagrange``
was prepared with). Times (``time.perf_counter``, median of batches, each batch long enough to
swamp the timer):

- *forward dynamics*: one ``Solver.forward_dynamics`` call -- the kinematics sweep, the model's
  applied forces (gravity here), the articulated-body sweeps and the Python around them: what one
  right-hand side of the integrator costs; and the articulated-body kernel alone (the part that
  compares with Pinocchio's ``aba``);
- *step*: one ``Solver.step`` with ``rk4`` (four evaluations), h = 1e-3 s, no recording;
- ``lagrange``: one acceleration solve (``OdeSolver.acceleration``: frames, forces, constraint
  Jacobian, Schur complement; sparse above 150 velocities) and one ``rk4`` step with its
  position and velocity projection, as the scene asks.

The growth exponent is the least-squares slope of log(time) against log(N); fixed per-call costs
flatten it at small N, so it is also fitted over N >= 100.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIZES = (10, 30, 100, 300, 1000)
# measured elsewhere, quoted by issue 7 (not measured by mbsim)
REFERENCES = (
    "Pinocchio (C++ ABA): 6.6 µs at N = 10, 49 µs at N = 100, 204 µs at N = 400 per forward-dynamics evaluation",
    "Exudyn (maximal coordinates): 10.7 ms per step at N = 1000",
    "MuJoCo: 70 ms per step at N = 1000",
)
TARGET_EXPONENT = 1.15
TARGET_EVAL_S_AT_1000 = 10e-3


def _chain_module():
    """benchmarks/run.py (for ``write_chain_scene``), imported by path so that this file also runs standalone."""
    name = "mbsim_benchmarks_run"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _timed(fn, batch_s: float, batches: int) -> float:
    """Median seconds per call of ``fn()`` over ``batches`` batches of about ``batch_s`` each."""
    fn()  # warm (compiled kernels, caches)
    start = time.perf_counter()
    calls = 1
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(batch_s / once))
    out = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - start) / calls)
    return statistics.median(out)


@dataclass
class Row:
    n: int
    nv_recursive: int
    nv_lagrange: int
    eval_s: float  # recursive forward dynamics, full call
    aba_s: float  # articulated-body kernel alone
    step_s: float  # recursive rk4 step
    lagrange_eval_s: float | None = None
    lagrange_step_s: float | None = None
    setup_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def _measure_one(n: int, directory: str, quick: bool, with_lagrange: bool) -> Row:
    from mbsim.model.model import State
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare
    from mbsim.solvers import recursive
    from mbsim.solvers.recursive import soa_kernels

    batch_s, batches = (0.05, 3) if quick else (0.3, 5)
    start = time.perf_counter()
    spec = load_scene(str(_chain_module().write_chain_scene(directory, n)))
    model, lag = prepare(spec)
    rec = recursive.create(model, spec.ctx, spec.solver)
    row = Row(n, rec.nv, model.nv, 0.0, 0.0, 0.0, setup_s=time.perf_counter() - start)
    state = rec.initial_state()
    q, v = state.q, state.v
    row.eval_s = _timed(lambda: rec.forward_dynamics(0.0, q, v), batch_s, batches)
    s = rec.space
    kin = rec.kinematics(q, v)
    ext, tau = np.zeros((n, 6)), np.zeros(rec.nv)
    presc = np.zeros(rec.nv, dtype=bool)
    args = (s.order, s.parent, s.vadr, s.nvj, rec._mass, rec._inertia, rec._gravity)
    geometry = (kin.rot, kin.o, kin.com, kin.V, kin.Hs, kin.acor)
    row.aba_s = _timed(
        lambda: soa_kernels.articulated_body(*args, *geometry, ext, tau, presc, tau, np.zeros_like(tau)),
        batch_s,
        batches,
    )
    row.step_s = _timed(lambda: rec.step(state, 1e-3), batch_s, batches)
    if with_lagrange:
        q0, v0 = model.q0.copy(), model.v0.copy()
        start_state = State(0.0, q0, v0, 0.0)
        lag_batch = batch_s if n < 300 else batch_s / 2
        row.lagrange_eval_s = _timed(lambda: lag.acceleration(0.0, q0, v0), lag_batch, batches)
        row.lagrange_step_s = _timed(lambda: lag.step(start_state, 1e-3), lag_batch, batches)
    return row


def measure(sizes=SIZES, quick: bool = False, with_lagrange: bool = True) -> list[Row]:
    """Time both methods on the chain for each N (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        return [_measure_one(n, tmp, quick, with_lagrange) for n in sizes]


def exponent(ns, times) -> float:
    """Least-squares slope of log(time) against log(N)."""
    return float(np.polyfit(np.log(np.asarray(ns, float)), np.log(np.asarray(times, float)), 1)[0])


def _us(x: float | None) -> str:
    return "-" if x is None else (f"{1e6 * x:.1f}" if x < 1e-2 else f"{1e6 * x:.0f}")


def section(quick: bool = False, sizes=SIZES) -> list[str]:
    """The markdown section (lines) of this benchmark."""
    rows = measure(sizes, quick)
    ns = [r.n for r in rows]
    lines = [
        "## Recursive dynamics (method `recursive`) against `lagrange` on the N-link chain",
        "",
        "The N-link revolute chain of section 2 (`benchmarks.chain.chain_scene`: boxes on revolute joints about x, "
        "hanging, tilted 0.1 rad), once in joint coordinates with method `recursive` (N coordinates, spatial "
        "operator algebra: kinematics sweep, applied forces, articulated-body sweeps; compiled (Cython), one kernel "
        "per sweep over the bodies in tree order) and once in body coordinates with `lagrange` (6N coordinates, "
        "5N constraint rows). *fwd dyn* is one forward-dynamics evaluation (what one right-hand side of the "
        "integrator costs), *ABA kernel* the articulated-body sweeps alone, *step* one `rk4` step "
        "(four evaluations; `lagrange` adds its projection), h = 1e-3 s, nothing recorded. Medians of "
        f"{'3 short' if quick else '5'} batches; `benchmarks/recursive.py`"
        f"{' --quick' if quick else ''}.",
        "",
        "| N | recursive fwd dyn µs | µs per link | ABA kernel µs | recursive µs/step | lagrange acceleration µs "
        "| lagrange µs/step | lagrange / recursive per step |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ratio = f"{r.lagrange_step_s / r.step_s:.0f}x" if r.lagrange_step_s else "-"
        lines.append(
            f"| {r.n} | {_us(r.eval_s)} | {1e6 * r.eval_s / r.n:.2f} | {_us(r.aba_s)} | {_us(r.step_s)} "
            f"| {_us(r.lagrange_eval_s)} | {_us(r.lagrange_step_s)} | {ratio} |"
        )
    big = [r for r in rows if r.n >= 100]
    fits = [
        ("recursive fwd dyn", [r.eval_s for r in rows], [r.eval_s for r in big]),
        ("recursive ABA kernel", [r.aba_s for r in rows], [r.aba_s for r in big]),
        ("recursive step", [r.step_s for r in rows], [r.step_s for r in big]),
    ]
    if all(r.lagrange_step_s for r in rows):
        fits.append(("lagrange step", [r.lagrange_step_s for r in rows], [r.lagrange_step_s for r in big]))
    lines += ["", "Growth exponent of the time against N (least squares in log-log):", ""]
    for name, all_t, big_t in fits:
        tail = f", over N >= 100: **{exponent([r.n for r in big], big_t):.2f}**" if len(big) >= 2 else ""
        lines.append(f"- {name}: over all N {exponent(ns, all_t):.2f}{tail}")
    at_1000 = next((r for r in rows if r.n == 1000), None)
    lines.append("")
    if at_1000 is not None:
        ok = "meets" if at_1000.eval_s < TARGET_EVAL_S_AT_1000 else "misses"
        lines.append(
            f"At N = 1000 one forward-dynamics evaluation takes {1e3 * at_1000.eval_s:.2f} ms ({ok} the 10 ms "
            f"target) and one rk4 step {1e3 * at_1000.step_s:.2f} ms"
            + (
                f", {at_1000.lagrange_step_s / at_1000.step_s:.0f} times less than `lagrange` "
                f"({1e3 * at_1000.lagrange_step_s:.1f} ms)."
                if at_1000.lagrange_step_s
                else "."
            )
        )
        lines.append("")
    lines += ["For scale (issue 7, measured elsewhere, not by this script):", ""]
    lines += [f"- {ref}" for ref in REFERENCES]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = parser.parse_args(argv)
    print("\n".join(section(quick=args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
