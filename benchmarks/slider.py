"""Section 3, the slider-crank through its singular positions (scenes/slider_crank_singular_2d.yaml as
shipped: 10 s, rk4, step 0.002, projection on) with lagrange, null_space, gauss (kkt, slsqp, pso) and
augmented_lagrangian: stepping-loop time (median of repeats) and µs/step, the cost ratios the issue
targets, violation, energy drift and the slider's error against the one-coordinate reference; what
the particle swarm costs and buys (from its result file); and, informational, the paper's runs
without projection (one each): how far each gets."""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.shared import ROOT, _fmt_list, _short

SLIDER_SCENE = ROOT / "scenes" / "slider_crank_singular_2d.yaml"
SLIDER_EXUDYN_S = 0.16  # the number for this scene on this machine; not measured by mbsim
SLIDER_COST_TARGET = 2.0  # gauss:kkt and null_space per step, at most this times lagrange
SLIDER_PSO_TARGET = 10.0  # gauss:pso per step, under this times gauss:kkt
NO_PROJECTION = ("solver.projection.position=false", "solver.projection.velocity=false")
SLIDER_OFF_M = 1e-3  # a slider error past this counts as having left the reference motion

# (label, overrides): the timed methods on the scene as shipped (rk4, step 0.002, projection on)
SLIDER_METHODS = (
    ("lagrange", ("solver.method=lagrange",)),
    ("null_space", ("solver.method=null_space",)),
    ("gauss:kkt", ("solver.method=gauss", "solver.optimizer=kkt")),
    ("gauss:slsqp", ("solver.method=gauss", "solver.optimizer=slsqp")),
    ("gauss:pso", ("solver.method=gauss", "solver.optimizer=pso")),
    ("augmented_lagrangian", ("solver.method=augmented_lagrangian",)),
)
# (label, overrides, what the paper reports): its runs without violation correction, one run each
SLIDER_PAPER_CASES = (
    (
        "augmented_lagrangian case 1",
        ("solver.method=augmented_lagrangian", "solver.mu=10", "solver.omega=1", *NO_PROJECTION),
        "case 1: accurate and stable over the 10 s (Fig. 3)",
    ),
    (
        "augmented_lagrangian case 2",
        ("solver.method=augmented_lagrangian", "solver.mu=5", "solver.omega=3", *NO_PROJECTION),
        "case 2: fails from about 8 s (Fig. 3)",
    ),
    ("null_space", ("solver.method=null_space", *NO_PROJECTION), "diverges from about 5 s (Fig. 2)"),
    (
        "gauss:kkt",
        ("solver.method=gauss", "solver.optimizer=kkt", *NO_PROJECTION),
        "Gauss (PSO): stable, violation about 1e-20 (Fig. 2)",
    ),
    (
        "gauss:pso",
        ("solver.method=gauss", "solver.optimizer=pso", *NO_PROJECTION),
        "Gauss (PSO): stable, violation about 1e-20 (Fig. 2)",
    ),
    ("lagrange", ("solver.method=lagrange", *NO_PROJECTION), "not run in the paper"),
)


def _slider_reference(t: np.ndarray, theta0: float = 0.0, w0: float = 6.0) -> np.ndarray:
    """Slider position x = 2 L cos(theta1) of the one-coordinate slider-crank (theta2 = -theta1).

    A copy of ``slider_crank_reference`` in tests/solvers/test_singular.py (the benchmarks do not
    import the tests). Bars: m = 6 kg, L = 1 m, I = m L^2 / 12 about their centres; slider 2 kg;
    gravity 9.81 down. Kinetic energy 1/2 I(theta) w^2 with I(theta) = I_O + m (9/4 sin^2 +
    1/4 cos^2) L^2 + I_c + 4 m_s L^2 sin^2; potential m g L sin(theta). Integrated by DOP853 at
    rtol = atol = 1e-12.
    """
    from scipy.integrate import solve_ivp

    m, ms, L, g = 6.0, 2.0, 1.0, 9.81
    ic = m * L**2 / 12

    def inertia(th):
        s, c = np.sin(th), np.cos(th)
        return ic + m * L**2 / 4 + m * L**2 * (2.25 * s * s + 0.25 * c * c) + ic + 4 * ms * L**2 * s * s

    def d_inertia(th):
        s, c = np.sin(th), np.cos(th)
        return m * L**2 * 4.0 * s * c + 8 * ms * L**2 * s * c

    def rhs(_, y):
        th, w = y
        return [w, (-m * g * L * np.cos(th) - 0.5 * d_inertia(th) * w * w) / inertia(th)]

    t = np.asarray(t, dtype=float)
    t_max = float(t.max()) if t.size else 0.0
    if t_max <= 0.0:
        return np.full(t.shape, 2 * L * np.cos(theta0))
    sol = solve_ivp(rhs, (0, t_max), [theta0, w0], method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True)
    return 2 * L * np.cos(sol.sol(t)[0])


@dataclass
class SliderRun:
    """One method on the slider-crank: ``repeats`` runs (timed methods) or one (the paper's cases)."""

    label: str
    overrides: tuple[str, ...]
    loop_s: list[float] = field(default_factory=list)  # the stepping loop (RunSummary.wall_time_s), per repeat
    total_s: list[float] = field(default_factory=list)  # load + compile + run, per repeat
    steps: int = 0
    t_end: float = 0.0  # the time the (last) run reached
    status: str = ""
    message: str = ""
    max_position_violation: float = 0.0
    energy_drift: float = 0.0
    max_slider_error: float = float("nan")  # max |x - reference| over the recorded times
    off_reference_s: float | None = None  # first recorded time with |x - reference| > SLIDER_OFF_M
    # /diagnostics/solver/<name>[1:] of the last run (the first row is the start, before any step)
    diagnostics: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def loop_median(self) -> float:
        return statistics.median(self.loop_s) if self.loop_s else float("nan")

    @property
    def total_median(self) -> float:
        return statistics.median(self.total_s) if self.total_s else float("nan")

    @property
    def us_per_step(self) -> float:
        return 1e6 * self.loop_median / max(self.steps, 1)

    @property
    def options(self) -> str:
        """The overrides other than the method, as `key=value` text."""
        rest = [o for o in self.overrides if not o.startswith("solver.method=")]
        if all(o in rest for o in NO_PROJECTION):
            rest = [o for o in rest if o not in NO_PROJECTION] + ["projection off"]
        return ", ".join(o.removeprefix("solver.") for o in rest) if rest else "defaults"


@dataclass
class SliderResults:
    t_end: float  # the simulated time asked for
    repeats: int
    methods: list[SliderRun]
    paper: list[SliderRun]

    def get(self, label: str) -> SliderRun | None:
        return next((r for r in self.methods if r.label == label), None)


def _run_slider(r: SliderRun, out: Path, t_end: float | None) -> None:
    """One run of the slider-crank scene with ``r.overrides``; fills ``r`` from the summary and the file."""
    import h5py

    from mbsim.scene.spec import load_scene
    from mbsim.simulate import run

    overrides = [*r.overrides, *([f"time.end={t_end!r}"] if t_end is not None else [])]
    start = time.perf_counter()
    summary = run(load_scene(str(SLIDER_SCENE), overrides), out)
    r.total_s.append(time.perf_counter() - start)
    r.loop_s.append(summary.wall_time_s)
    r.steps, r.t_end, r.status, r.message = summary.steps, summary.t_end, summary.status, summary.message
    r.max_position_violation, r.energy_drift = summary.max_position_violation, summary.energy_drift
    with h5py.File(out, "r") as f:
        t = f["time"][...]
        x = f["bodies/slider/position"][:, 0]
        group = f.get("diagnostics/solver")
        r.diagnostics = {name: group[name][1:] for name in group} if group is not None else {}
    error = np.abs(x - _slider_reference(t)) if t.size else np.full(1, np.nan)
    r.max_slider_error = float(np.max(error))
    off = np.nonzero(error > SLIDER_OFF_M)[0]
    r.off_reference_s = float(t[off[0]]) if off.size else None


def bench_slider(repeats: int = 3, t_end: float | None = None, workdir: str | Path | None = None) -> SliderResults:
    """The slider-crank through its singular positions (scenes/slider_crank_singular_2d.yaml).

    Every method of SLIDER_METHODS runs ``repeats`` times, round robin (so that a change of the
    machine's load hits all methods alike); the paper's cases without projection run once each.
    ``t_end`` shortens the runs (quick mode). Result files go to a temporary directory.
    """
    methods = [SliderRun(label, overrides) for label, overrides in SLIDER_METHODS]
    paper = [SliderRun(label, overrides) for label, overrides, _ in SLIDER_PAPER_CASES]
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for k in range(repeats):
            for i, r in enumerate(methods):
                _run_slider(r, Path(tmp) / f"slider_{i}_{k}.h5", t_end)
        for i, r in enumerate(paper):
            _run_slider(r, Path(tmp) / f"slider_paper_{i}.h5", t_end)
    from mbsim.scene.spec import load_scene

    asked = t_end if t_end is not None else load_scene(str(SLIDER_SCENE)).t_end
    return SliderResults(float(asked), repeats, methods, paper)


def _status(r: SliderRun) -> str:
    return r.status if not r.message else f"{r.status}: {_short(r.message, 60)}"


def _diag_max(r: SliderRun | None, name: str) -> float | None:
    values = None if r is None else r.diagnostics.get(name)
    if values is None or not np.any(np.isfinite(values)):
        return None
    return float(np.nanmax(values))


def slider_table(res: SliderResults) -> list[str]:
    base = res.get("lagrange")
    lines = [
        f"| method | options | loop s (median of {res.repeats}) | µs/step | per step vs lagrange | "
        "load + compile + run s | status | max position violation | energy drift | max acceleration residual | "
        "max slider error, m |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in res.methods:
        ratio = f"{r.us_per_step / base.us_per_step:.2f}x" if base and base.steps else "-"
        residual = _diag_max(r, "acceleration_residual")
        lines.append(
            f"| {r.label} | {r.options} | **{r.loop_median:.3f}** ({_fmt_list(r.loop_s)}) | {r.us_per_step:.1f} | "
            f"{ratio} | {r.total_median:.3f} | {_status(r)} | {r.max_position_violation:.3g} | {r.energy_drift:.3g} | "
            f"{'-' if residual is None else f'{residual:.3g}'} | {r.max_slider_error:.3g} |"
        )
    return lines


def slider_targets(res: SliderResults) -> list[str]:
    """The ratios the issue targets, and the comparison with Exudyn, as markdown bullets."""
    lag, kkt, ns, pso = (res.get(k) for k in ("lagrange", "gauss:kkt", "null_space", "gauss:pso"))
    lines = []

    def verdict(ratio: float, target: float, word: str) -> str:
        return f"{'within' if ratio <= target else 'over'} the target ({word} {target:g}x)"

    for r in (kkt, ns):
        if r and lag:
            ratio = r.us_per_step / lag.us_per_step
            lines.append(
                f"- {r.label} costs **{ratio:.2f}x** lagrange per step ({r.us_per_step:.1f} vs "
                f"{lag.us_per_step:.1f} µs): {verdict(ratio, SLIDER_COST_TARGET, 'at most')}."
            )
    if pso and kkt:
        ratio = pso.us_per_step / kkt.us_per_step
        lines.append(
            f"- gauss:pso costs **{ratio:.2f}x** gauss:kkt per step ({pso.us_per_step:.1f} vs "
            f"{kkt.us_per_step:.1f} µs): {'within' if ratio < SLIDER_PSO_TARGET else 'over'} the target "
            f"(under {SLIDER_PSO_TARGET:g}x)."
        )
    fastest = min((r for r in res.methods if r.status == "completed"), key=lambda r: r.total_median, default=None)
    if kkt and fastest:
        lines.append(
            f"- Exudyn takes {SLIDER_EXUDYN_S:g} s for this case on this machine: a number quoted in the issue, not "
            f"measured by this suite. mbsim, load + compile + run over {res.t_end:g} s simulated: gauss:kkt "
            f"{kkt.total_median:.2f} s ({kkt.total_median / SLIDER_EXUDYN_S:.1f}x Exudyn), the fastest method "
            f"({fastest.label}) {fastest.total_median:.2f} s ({fastest.total_median / SLIDER_EXUDYN_S:.1f}x)"
            + (" -- shorter than the issue's 10 s, so not comparable." if res.t_end != 10 else ".")
        )
    return lines


def slider_swarm(res: SliderResults) -> list[str]:
    """What the swarm costs and what it buys, from the gauss:pso run's result file."""
    from mbsim.solvers.gauss import PSO_FIELDS, RESULT_CODES

    pso, kkt, ns = (res.get(k) for k in ("gauss:pso", "gauss:kkt", "null_space"))
    if pso is None or "iterations" not in pso.diagnostics or pso.diagnostics["iterations"].size == 0:
        return ["The gauss:pso run recorded no swarm diagnostics."]
    it = pso.diagnostics["iterations"]
    codes = pso.diagnostics.get("optimizer_result", np.zeros(0))
    patience = int(PSO_FIELDS["patience"].default)
    n_swarm = int(np.sum(codes == RESULT_CODES["swarm"]))
    n_refined = int(np.sum(codes == RESULT_CODES["refined"]))
    solves = max(1, round(float(it.min()) / patience))
    stalled = int(np.sum(it == solves * patience))
    lines = [
        f"- Swarm iterations per step (`/diagnostics/solver/iterations`, {it.size} steps): mean {it.mean():.2f}, "
        f"max {it.max():g}, min {it.min():g}. A solve whose best value never improves stops after patience = "
        f"{patience} iterations, so the smallest row, {it.min():g}, is {solves} solves"
        + (
            " -- not rk4's 4: every step is recorded here, and the first stage of a step reuses the derivative "
            "computed when the previous state was recorded, a solve whose iterations the row does not count. "
            if solves < 4 and it.size == pso.steps
            else ". "
        )
        + f"In {stalled} of {it.size} steps every counted solve stopped there: the swarm never improved on its best "
        "initial particle (the unconstrained optimum and the previous solve's optimum join the swarm).",
        f"- Which point was kept (`/diagnostics/solver/optimizer_result`, the last solve of each step): the swarm's "
        f"own best (2) in **{n_swarm}** steps, the local refinement (3) in **{n_refined}** steps. "
        + (
            "The swarm's point never beat the refinement."
            if n_swarm == 0
            else f"The swarm's point beat the refinement in {n_swarm / max(codes.size, 1):.1%} of the steps."
        ),
    ]
    res_pso, res_kkt = _diag_max(pso, "acceleration_residual"), _diag_max(kkt, "acceleration_residual")
    if res_pso is not None and res_kkt is not None:
        lines.append(
            f"- Max acceleration residual max |J v_dot - gamma| (`/diagnostics/solver/acceleration_residual`): "
            f"gauss:pso {res_pso:.3g}, gauss:kkt {res_kkt:.3g}."
        )
    if kkt and ns:
        lines.append(
            f"- Cost: gauss:pso takes {pso.us_per_step:.1f} µs/step against {kkt.us_per_step:.1f} for gauss:kkt. The "
            f"refinement is the null-space formula (the exact minimiser over the constraint set), so the swarm's own "
            f"cost is about pso minus null_space: {pso.us_per_step - ns.us_per_step:.1f} µs/step "
            f"({pso.us_per_step / ns.us_per_step:.2f}x null_space)."
        )
    return lines


def slider_paper_table(res: SliderResults) -> list[str]:
    notes = {label: note for label, _, note in SLIDER_PAPER_CASES}
    lines = [
        "| case | options | status | time reached, s | max slider error while running, m | "
        f"slider error past {SLIDER_OFF_M:g} m from, s | max position violation | energy drift | message | "
        "the paper (no correction) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in res.paper:
        off = "never" if r.off_reference_s is None else f"{r.off_reference_s:.3f}"
        lines.append(
            f"| {r.label} | {r.options} | {r.status} | {r.t_end:.3f} | {r.max_slider_error:.3g} | {off} | "
            f"{r.max_position_violation:.3g} | {r.energy_drift:.3g} | {_short(r.message) or '-'} | "
            f"{notes.get(r.label, '')} |"
        )
    return lines


def slider_section(res: SliderResults | None) -> list[str]:
    """Section 3 of the report."""
    out = ["## 3. Slider-crank through singular positions", ""]
    if res is None:
        return [*out, "Not run.", ""]
    shipped = "as shipped" if res.t_end == 10 else f"shortened to {res.t_end:g} s (`time.end={res.t_end:g}`)"
    return [
        *out,
        f"`scenes/slider_crank_singular_2d.yaml` {shipped}: crank and rod of equal length (uniform bars, 6 kg, "
        "1 m) and a 2 kg slider, started flat with the crank turning at 6 rad/s, so it goes round and passes "
        "a singular position (both bars vertical, the constraint Jacobian loses rank) twice per turn; "
        "`rk4`, step 0.002 s, position and velocity projection on. Each method runs "
        f"{res.repeats} time(s), round robin; *loop s* is the stepping loop (`RunSummary.wall_time_s`), "
        "µs/step is its median / steps; *load + compile + run* adds reading and compiling the scene. "
        "Status, violation, drift, residual and slider error come from the last run; the max acceleration "
        "residual is `/diagnostics/solver/acceleration_residual` (methods that record it). The slider error is "
        "max |x - x_ref| over all recorded times, x_ref from the one-coordinate model (theta2 = -theta1, "
        "x = 2 L cos theta1) integrated by DOP853 at tolerance 1e-12 (`benchmarks.slider._slider_reference`, a "
        "copy of the reference in tests/solvers/test_singular.py). Result files in a temporary directory. "
        "`lagrange` works on this scene because no step lands exactly on a singular position.",
        "",
        *slider_table(res),
        "",
        "Targets of the issue:",
        "",
        *slider_targets(res),
        "",
        "### What the swarm costs and what it buys",
        "",
        "From the gauss:pso run's result file (default swarm: 20 particles, at most 40 iterations, seed 0).",
        "",
        *slider_swarm(res),
        "",
        "### The paper's cases without violation correction (informational)",
        "",
        "papers/singular-positions-gauss-pso.txt runs the slider-crank without violation correction "
        "(`solver.projection.position=false`, `solver.projection.velocity=false`; rk4, step 0.002 s, 10 s). "
        "One run each, not timed; a run ends (status failed) when the position violation passes "
        "`solver.max_violation` (default 1e-3) or the method fails. The slider error is max |x - x_ref| over "
        "the recorded times the run reached (including the state that ended it); the next column is the first "
        f"recorded time at which it passed {SLIDER_OFF_M:g} m (the run has left the reference motion, for example "
        "onto the folded branch at a singular position), whatever the status. `augmented_lagrangian` uses "
        "its default penalty 1e6 and tolerance 1e-6, as the paper does. The last column is what the paper "
        "reports (its figures), not measured here.",
        "",
        *slider_paper_table(res),
        "",
    ]
