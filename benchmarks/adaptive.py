"""Benchmark: the compiled embedded pair DOP853 against RK4 and against MuJoCo RK4 at equal accuracy (issue 29).

    python benchmarks/adaptive.py            # the section alone (printed), well under a minute
    python benchmarks/adaptive.py --quick    # one repeat, 1 s simulated, a shorter tolerance ladder

The four-box chain (scenes/four_box_chain.yaml: lagrange, projection on, output every 5 steps, as
shipped; only the integrator and its tolerances overridden), run by ``mbsim.simulate.run`` in this
process and timed by the run itself (``RunSummary.wall_time_s``: the stepping loop with its
projection, checks and recording, the set-up not). Two measurements:

(a) Cost of a step: ``rk4`` (h = 0.002 s) against ``scipy:DOP853`` at the scene's default
    tolerances (rtol 1e-8, atol 1e-10), wall time per accepted step (``wall_time_s / steps``), the
    step counts and the right-hand-side evaluations per step (the compiled pair's counters). A run
    has a fixed cost beside its steps, which weighs ~20x more on DOP853's few hundred steps than on
    RK4's 5,000: each is also run for 0.01 s, and the cost per step beyond that short run's,
    (wall - wall_short) / (steps - steps_short), is reported beside, and the same difference of the
    process CPU time of the two ``run()`` calls (CPU time is less disturbed by a loaded machine).
(b) Whole run at equal accuracy: the error of box4's centre of mass at the end (t = 10 s) against a
    reference, mbsim ``scipy:DOP853`` at rtol = atol = 1e-13, checked against MuJoCo RK4 at h/8 and
    h/16 (their distances say how well the references agree; MuJoCo's own convergence, h -> h/16,
    says its order). MuJoCo RK4 at the scene's step h reaches some error; the loosest tolerance of
    the ladder (rtol = atol = 1e-6 ... 1e-11) at which mbsim's error is at most that, and every
    tighter rung's too, is compared by whole-run time: mbsim's ``wall_time_s`` against MuJoCo's
    ``mj_step(model, data, nstep=steps)`` (benchmarks/peers/mujoco.py's MJCF and runner, as the
    peers' four-box case). The same for the issue's figure of 1.5e-7 m. Beside the wall times, CPU
    times: MuJoCo's of the same ``mj_step`` call, mbsim's of the ``run()`` call less the set-up inside
    it (estimated by the 0.01 s run: its CPU time less its loop's wall time, an upper bound).

Every configuration runs once untimed first (its error, counts and caches come from that run), then
all are timed round robin (MuJoCo, then each mbsim run) ``repeats`` times in one process, so a change
of the machine's load hits all of them alike; medians. Single-threaded BLAS when run as a script (as
benchmarks/run.py). Result files go to a temporary directory.

Targets (issue 29): a DOP853 step at most 3x an RK4 step of the same scene; the four-box chain at
equal accuracy at most 1x MuJoCo RK4's whole run. Nothing here asserts on a time.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # as the mbsim command: single-threaded BLAS, set before numpy loads
    for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.shared import FOUR_BOX_SCENE  # noqa: E402

BODY = "box4"  # the body whose centre of mass at the end is compared
DOP853 = ("solver.integrator=scipy:DOP853",)
LADDER = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11)  # rtol = atol of the equal-accuracy runs
QUICK_LADDER = (1e-7, 1e-9, 1e-11)
REFERENCE_TOL = 1e-13  # rtol = atol of mbsim's reference run
MUJOCO_REFINEMENTS = (8, 16)  # MuJoCo RK4 at h / k: the check of the reference
QUICK_T_END = 1.0  # s, --quick
SHORT_T = 0.01  # s: the short run whose wall time is a run's fixed cost
ISSUE_ERROR = 1.5e-7  # m at t = 10 s: the issue's "equal accuracy"
STEP_TARGET = 3.0  # a DOP853 step at most 3x an RK4 step
RUN_TARGET = 1.0  # the whole run at equal accuracy at most 1x MuJoCo RK4's
HEADING = "## Adaptive steps: DOP853 against RK4, and against MuJoCo RK4 at equal accuracy"


@dataclass
class Run:
    """One mbsim configuration of the four-box chain: untimed facts from its first run, then the timed walls."""

    label: str
    overrides: tuple[str, ...]
    tol: float | None = None  # rtol = atol of a ladder rung
    steps: int = 0
    nfev: int = 0  # right-hand-side evaluations (the compiled pair's counter; 0 for fixed steps)
    rejected: int = 0
    error: float = float("nan")  # m, box4's centre of mass at the end against the reference
    wall_s: list[float] = field(default_factory=list)  # RunSummary.wall_time_s per timed repeat
    cpu_s: list[float] = field(default_factory=list)  # process CPU time of the run() call per timed repeat
    failure: str = ""

    @property
    def wall(self) -> float:
        return statistics.median(self.wall_s) if self.wall_s else float("nan")

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_s) if self.cpu_s else float("nan")

    @property
    def us_per_step(self) -> float:
        return 1e6 * self.wall / self.steps if self.steps else float("nan")


@dataclass
class Peer:
    """MuJoCo RK4 at the scene's step: its error at the end and the timed ``mj_step`` walls."""

    steps: int = 0
    error: float = float("nan")
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)  # process CPU time of the same mj_step call
    note: str = ""  # why it did not run

    @property
    def wall(self) -> float:
        return statistics.median(self.wall_s) if self.wall_s else float("nan")

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_s) if self.cpu_s else float("nan")


@dataclass
class Result:
    t_end: float
    step: float
    repeats: int
    shortened: bool  # t_end not the scene's (--quick)
    reference: np.ndarray  # box4's centre of mass at t_end, mbsim DOP853 at REFERENCE_TOL
    reference_steps: int
    refined: list[tuple[int, float]]  # (k, distance of MuJoCo RK4 at h / k from the reference)
    refined_convergence: float  # distance between MuJoCo at the two finest refinements
    rk4: Run
    dop853: Run  # the scene's default tolerances
    rk4_short: Run
    dop853_short: Run
    ladder: list[Run]
    mujoco: Peer
    load: tuple[float | None, float | None]  # 1-minute load average at the start and the end
    defaults: tuple[float, float]  # the scene's rtol, atol

    def marginal_us(self, full: Run, short: Run, cpu: bool = False) -> float:
        """µs per step beyond the short run's (wall time of the loop, or CPU time of the run() call):
        the run's fixed cost taken out."""
        if full.steps <= short.steps or not full.wall_s or not short.wall_s:
            return float("nan")
        spent = full.cpu - short.cpu if cpu else full.wall - short.wall
        return 1e6 * spent / (full.steps - short.steps)

    def loop_cpu(self, run: Run) -> float:
        """CPU seconds of ``run``'s stepping loop: its run() call's less the set-up and closing inside
        run() (the short run of its integrator: CPU time of the call less the wall time of its loop, so
        at most its set-up's: an upper bound of the loop's CPU time)."""
        short = self.rk4_short if run is self.rk4 else self.dop853_short
        return run.cpu - max(short.cpu - short.wall, 0.0)


def loosest(ladder: list[Run], error: float) -> Run | None:
    """The loosest rung whose error is at most ``error`` with every tighter rung's at most that too
    (the error at one time is not monotone in the tolerance: a loose rung can land near the
    reference by chance); None if the tightest rung misses it."""
    chosen = None
    for run in sorted(ladder, key=lambda r: r.tol):  # tightest first
        if run.failure or not run.error <= error:
            break
        chosen = run
    return chosen


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None


def _mbsim(overrides: tuple[str, ...], out: Path):
    """(summary, solver, process CPU seconds of the run() call: set-up not) of one run of the
    four-box chain with ``overrides``."""
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare, run

    spec = load_scene(str(FOUR_BOX_SCENE), list(overrides))
    prepared = prepare(spec)
    gc.collect()  # the garbage of earlier runs collected outside the timed call
    start = time.process_time()
    summary = run(spec, out, prepared=prepared)
    return summary, prepared[1], time.process_time() - start


def _mujoco(sim, steps: int) -> tuple[float, float]:
    """(wall, process CPU) seconds of ``mj_step(model, data, nstep=steps)`` from fresh data (MujocoSim.run
    with the CPU time beside)."""
    data = sim.fresh()
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    sim.mujoco.mj_step(sim.model, data, nstep=steps)
    return time.perf_counter() - wall, time.process_time() - cpu


def _end_position(path: Path, t_end: float) -> np.ndarray:
    """BODY's centre of mass in the last row of a result file, which must be at ``t_end``."""
    import h5py

    with h5py.File(path, "r") as f:
        t = float(f["time"][-1])
        p = np.asarray(f[f"bodies/{BODY}/position"][-1], dtype=float)
    if abs(t - t_end) > 1e-9:
        raise RuntimeError(f"the last row is at t = {t!r} s, not {t_end!r}")
    return p


def _first(run: Run, out: Path, t_end: float, reference: np.ndarray | None) -> np.ndarray | None:
    """The untimed first run of ``run``: its steps, counters and error (or its failure)."""
    try:
        summary, solver, _ = _mbsim(run.overrides, out)
        if summary.status != "completed":
            raise RuntimeError(f"{summary.status}: {summary.message}")
        run.steps = summary.steps
        work = getattr(solver, "_work", None)  # the compiled integrator's state (integrate.Work)
        run.nfev, run.rejected = int(getattr(work, "nfev", 0)), int(getattr(work, "rejected", 0))
        p = _end_position(out, t_end)
        if reference is not None:
            run.error = float(np.linalg.norm(p - reference))
        return p
    except Exception as exc:  # reported in the table, the others still run
        run.failure = f"{type(exc).__name__}: {exc}"
        return None


def measure(
    repeats: int = 7,
    t_end: float | None = None,
    ladder: tuple[float, ...] = LADDER,
    refinements: tuple[int, ...] = MUJOCO_REFINEMENTS,
    log: Callable[[str], None] = print,
) -> Result:
    """Everything the section reports; ``t_end`` shortens the runs (the scene's 10 s by default)."""
    from benchmarks.peers.mujoco import MujocoSim, mjcf_tree
    from benchmarks.peers.shared import _peer_or_note, system_of
    from mbsim.scene.spec import load_scene

    load_start = _loadavg()
    spec = load_scene(str(FOUR_BOX_SCENE))
    t_end = float(spec.t_end) if t_end is None else float(t_end)
    h = float(spec.step)
    end = (f"time.end={t_end!r}",)
    defaults = (float(spec.solver.rtol), float(spec.solver.atol))

    def tol(value: float) -> tuple[str, ...]:
        return (*DOP853, f"solver.rtol={value!r}", f"solver.atol={value!r}", *end)

    rk4 = Run("rk4 (as shipped)", end)
    dop853 = Run(f"scipy:DOP853, rtol {_g(defaults[0])}, atol {_g(defaults[1])} (the defaults)", (*DOP853, *end))
    rk4_short = Run("rk4, 0.01 s", (f"time.end={SHORT_T!r}",))
    dop853_short = Run("scipy:DOP853 defaults, 0.01 s", (*DOP853, f"time.end={SHORT_T!r}"))
    rungs = [Run(f"scipy:DOP853, rtol = atol = {_g(v)}", tol(v), tol=v) for v in ladder]
    reference_run = Run(f"scipy:DOP853, rtol = atol = {_g(REFERENCE_TOL)} (reference)", tol(REFERENCE_TOL))
    mujoco = Peer(steps=round(t_end / h))

    with tempfile.TemporaryDirectory(prefix="mbsim_adaptive_") as tmp:
        work = Path(tmp)
        log(f"  reference: mbsim {reference_run.label}")
        reference = _first(reference_run, work / "reference.h5", t_end, None)
        if reference is None:
            raise RuntimeError(f"the reference run failed: {reference_run.failure}")

        # MuJoCo RK4 at h (the contender) and at h / k (the reference's check)
        refined: list[tuple[int, float]] = []
        finest: list[np.ndarray] = []
        system = system_of(spec)
        sim, mujoco.note = _peer_or_note("mujoco", lambda: MujocoSim(mjcf_tree(system), system))
        if sim is not None:
            log(f"  MuJoCo RK4 at h and h / {', h / '.join(map(str, refinements))}")
            mujoco.error = float(np.linalg.norm(sim.com(sim.simulate(mujoco.steps), BODY) - reference))
            for k in refinements:
                sim.model.opt.timestep = h / k
                got = sim.com(sim.simulate(mujoco.steps * k), BODY)
                refined.append((k, float(np.linalg.norm(got - reference))))
                finest.append(got)
            sim.model.opt.timestep = h
        convergence = float(np.linalg.norm(finest[-1] - finest[-2])) if len(finest) >= 2 else float("nan")

        runs = [rk4, dop853, rk4_short, dop853_short, *rungs]
        for k, r in enumerate(runs):
            log(f"  first run: {r.label}")
            short = r in (rk4_short, dop853_short)  # no error: they end at SHORT_T
            _first(r, work / f"first-{k}.h5", SHORT_T if short else t_end, None if short else reference)
        for rep in range(repeats):
            log(f"  timed, round {rep + 1} of {repeats}")
            if sim is not None:
                wall, cpu = _mujoco(sim, mujoco.steps)
                mujoco.wall_s.append(wall)
                mujoco.cpu_s.append(cpu)
            for k, r in enumerate(runs):
                if r.failure:
                    continue
                try:
                    summary, _, cpu = _mbsim(r.overrides, work / f"timed-{k}-{rep}.h5")
                    r.wall_s.append(summary.wall_time_s)
                    r.cpu_s.append(cpu)
                except Exception as exc:  # reported in the table
                    r.failure = f"{type(exc).__name__}: {exc}"
    return Result(
        t_end, h, repeats, t_end != float(spec.t_end), reference, reference_run.steps, refined, convergence,
        rk4, dop853, rk4_short, dop853_short, rungs, mujoco, (load_start, _loadavg()), defaults,
    )  # fmt: skip


def _g(value: float) -> str:
    """A tolerance as the scene writes it: 1e-8, not 1e-08."""
    return f"{value:g}".replace("e-0", "e-")


def _num(value: float, spec: str = ".1f") -> str:
    return format(value, spec) if np.isfinite(value) else "-"


def _ratio(a: float, b: float) -> float:
    return a / b if np.isfinite(a) and np.isfinite(b) and b > 0 else float("nan")


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x" if np.isfinite(ratio) else "-"


def _load_text(load: tuple[float | None, float | None]) -> str:
    if None in load:
        return "the load average is not available here"
    return f"1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} at the end, on {os.cpu_count()} cores"


def step_lines(res: Result) -> list[str]:
    """(a): the cost of a step, RK4 against DOP853."""
    rows = []
    for run, short in ((res.rk4, res.rk4_short), (res.dop853, res.dop853_short)):
        if run.failure or not run.wall_s:
            rows.append(f"| {run.label} | - | - | - | - | - | - | {run.failure} |")
            continue
        per = f"{run.nfev / run.steps:.2f}" if run.nfev else "4 (fixed)"
        rejected = str(run.rejected) if run.nfev else "-"
        marginal = res.marginal_us(run, short)
        rows.append(
            f"| {run.label} | {run.steps} | {per} | {rejected} | {run.us_per_step:.1f} | {_num(marginal)} | "
            f"{_num(res.marginal_us(run, short, cpu=True))} | |"
        )
    ratio = _ratio(res.dop853.us_per_step, res.rk4.us_per_step)
    marginal = _ratio(res.marginal_us(res.dop853, res.dop853_short), res.marginal_us(res.rk4, res.rk4_short))
    cpu = _ratio(
        res.marginal_us(res.dop853, res.dop853_short, cpu=True), res.marginal_us(res.rk4, res.rk4_short, cpu=True)
    )
    verdict = (
        f"This run: a DOP853 step costs {_num(ratio, '.2f')}x an RK4 step ({_num(marginal, '.2f')}x beyond the "
        f"fixed cost of a run, {_num(cpu, '.2f')}x by CPU time beyond it), "
        f"{'within' if ratio <= STEP_TARGET else 'over'} the target."
        if np.isfinite(ratio)
        else "Not measured."
    )
    return [
        "### Cost of a step: DOP853 against RK4",
        "",
        "µs/step: `RunSummary.wall_time_s / steps`; beyond a 0.01 s run: (wall - wall of the same run ended at "
        "0.01 s) / (steps - its steps), the run's fixed cost taken out; CPU: the same difference of the process "
        "CPU time of the two `run()` calls (less disturbed by the machine's load than wall time).",
        "",
        "| integrator | steps | f evaluations per step | rejected | µs/step | µs/step beyond a 0.01 s run "
        "| CPU µs/step beyond it | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        *rows,
        "",
        f"Target: a DOP853 step at most {STEP_TARGET:g}x an RK4 step of the same scene. {verdict} The pair of "
        "order 8 evaluates the right-hand side 12 times per try, accepted or rejected (first same as last), and "
        "once more per accepted step (f recomputed at the state the quaternions' rescaling and the projection "
        "corrected), against RK4's 4 per step; its rejected tries are scipy's step control's. The projection and "
        "the recording cost the same per step for both.",
        "",
    ]


def accuracy_lines(res: Result) -> list[str]:
    """(b): the whole run at equal accuracy against MuJoCo RK4."""
    mj = res.mujoco
    at = f"t = {res.t_end:g} s"
    refs = ", ".join(f"h/{k} {d:.1e} m" for k, d in res.refined)
    check = (
        f"MuJoCo RK4 at {refs} from it (h/{res.refined[-2][0]} to h/{res.refined[-1][0]}: "
        f"{res.refined_convergence:.1e} m apart)"
        if len(res.refined) >= 2
        else "no MuJoCo check"
    )

    def times(wall: float, cpu: float) -> str:
        return f"{1e3 * wall:.2f} | {_x(_ratio(wall, mj.wall))} | {_num(1e3 * cpu, '.2f')} | {_x(_ratio(cpu, mj.cpu))}"

    rows = []
    if mj.wall_s:
        rows.append(f"| MuJoCo RK4, h = {res.step:g} | {mj.steps} | {mj.error:.2e} | {times(mj.wall, mj.cpu)} |")
    elif mj.note:
        rows.append(f"| MuJoCo RK4 | - | - | - | - | - | {mj.note} |")
    for run in (res.rk4, *res.ladder):
        if run.failure or not run.wall_s:
            rows.append(f"| mbsim {run.label} | - | - | - | - | - | {run.failure or 'not timed'} |")
            continue
        cpu = res.loop_cpu(run)
        rows.append(f"| mbsim {run.label} | {run.steps} | {run.error:.2e} | {times(run.wall, cpu)} |")

    def verdict(target: float, what: str) -> str:
        chosen = loosest(res.ladder, target)
        if chosen is None:
            return f"At {what} ({target:.2e} m): no rung of the ladder reaches it."
        ratio = _ratio(chosen.wall, mj.wall)
        within = "within" if ratio <= RUN_TARGET else "over"
        return (
            f"At {what} ({target:.2e} m): the loosest tolerance is rtol = atol = {_g(chosen.tol)} (error "
            f"{chosen.error:.2e} m, {chosen.steps} steps, {chosen.us_per_step:.1f} µs/step), its whole run "
            + (
                f"{ratio:.2f}x MuJoCo RK4's ({_x(_ratio(res.loop_cpu(chosen), mj.cpu))} by CPU time), {within} the "
                "target."
                if np.isfinite(ratio)
                else "not compared (MuJoCo not timed)."
            )
        )

    verdicts = []
    if np.isfinite(mj.error):
        verdicts.append("- " + verdict(mj.error, f"MuJoCo RK4's error at h = {res.step:g}"))
    verdicts.append("- " + verdict(ISSUE_ERROR, "the issue's 1.5e-7 m"))
    return [
        f"### Whole run at equal accuracy against MuJoCo RK4 ({at})",
        "",
        f"Error: the distance of {BODY}'s centre of mass at {at} from the reference, mbsim scipy:DOP853 at "
        f"rtol = atol = {_g(REFERENCE_TOL)} ({res.reference_steps} steps): {check}. Whole run: mbsim's stepping "
        f"loop (`RunSummary.wall_time_s`, recording every 5th step as shipped; CPU: process CPU time of the "
        "`run()` call less the set-up inside it, estimated by the 0.01 s run of the same integrator as its CPU "
        f"time less its loop's wall time: an upper bound), MuJoCo's `mj_step(nstep={mj.steps})` (wall and CPU).",
        "",
        f"| run | steps | error at {at}, m | whole run ms | vs MuJoCo RK4 | CPU ms | CPU vs MuJoCo |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        f"Target: the four-box chain at equal accuracy at most {RUN_TARGET:g}x MuJoCo RK4's whole run; the "
        "tolerance is the loosest rung whose error, and every tighter rung's, is at most the accuracy asked.",
        "",
        *verdicts,
        "",
    ]


def markdown(res: Result) -> list[str]:
    """The section's lines (its first line the heading, as benchmarks/run.py numbers it)."""
    shortened = f" (--quick: {res.t_end:g} s simulated instead of 10 s)" if res.shortened else ""
    return [
        HEADING,
        "",
        "`scenes/four_box_chain.yaml` (lagrange, projection on, output every 5 steps, as shipped; the integrator and "
        "its tolerances overridden), `mbsim.simulate.run` in one process, timed by the run itself "
        "(`RunSummary.wall_time_s`: the stepping loop with its projection and recording, set-up not). Every "
        "configuration runs once untimed, then all are timed round robin with MuJoCo, medians of "
        f"{res.repeats} round(s){shortened}; single-threaded BLAS; {_load_text(res.load)}.",
        "",
        *step_lines(res),
        *accuracy_lines(res),
    ]


def section(quick: bool = False, log: Callable[[str], None] | None = None) -> list[str]:
    """Run the benchmark and return its markdown section (for benchmarks/run.py and BENCHMARKS.md)."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    try:
        res = measure(1, QUICK_T_END, QUICK_LADDER, log=log) if quick else measure(7, log=log)
    except Exception as exc:  # the reference run failed: the other sections still run
        return [HEADING, "", f"Not run: {type(exc).__name__}: {exc}", ""]
    return markdown(res)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, 1 s simulated, a shorter ladder")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print("\n".join(section(args.quick)))
    print(f"\n(took {time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
