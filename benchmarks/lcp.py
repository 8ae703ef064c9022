"""Section 5, second part: Lemke against PGS on scenes/four_bar_wall_2d.yaml and scenes/box_stack.yaml
(cut to 1 s): cost, LCP iterations, penetration, the distance between the two runs' bodies, and
Lemke's failures."""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.shared import ROOT, _fmt_list, _passes, _short

LCP_SCENES = (
    ("four-bar against a wall (2D)", ROOT / "scenes" / "four_bar_wall_2d.yaml", ()),
    ("box stack (3D)", ROOT / "scenes" / "box_stack.yaml", ("time.end=1.0",)),
)


@dataclass
class LCPRun:
    """One scene with one LCP solver: ``repeats`` timed runs and one run recording every step."""

    scene: str
    path: Path
    lcp: str
    overrides: tuple[str, ...]
    loop_s: list[float] = field(default_factory=list)  # RunSummary.wall_time_s, per repeat
    total_s: list[float] = field(default_factory=list)  # load + compile + run, per repeat
    steps: int = 0
    t_end: float = 0.0
    t_asked: float = 0.0
    status: str = ""
    message: str = ""
    # the run with output.every=1
    diag_iterations: np.ndarray = field(default_factory=lambda: np.zeros(0))  # /diagnostics/solver/iterations[1:]
    lcp_iterations: np.ndarray = field(default_factory=lambda: np.zeros(0))  # sweeps or pivots per LCP solved
    lcp_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0))  # contacts k per LCP solved
    lcp_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # 0-based step of each
    max_penetration: float = 0.0
    final_contacts: int = 0
    time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    centres: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))  # (rows, bodies, d)
    failure: dict = field(default_factory=dict)  # Lemke's failing LCP: what it looks like

    @property
    def loop_median(self) -> float:
        return statistics.median(self.loop_s) if self.loop_s else float("nan")

    @property
    def total_median(self) -> float:
        return statistics.median(self.total_s) if self.total_s else float("nan")

    @property
    def us_per_step(self) -> float:
        return 1e6 * self.loop_median / max(self.steps, 1)


@dataclass
class LCPResults:
    repeats: int
    runs: list[LCPRun]

    def pair(self, scene: str) -> tuple[LCPRun, LCPRun]:
        got = {r.lcp: r for r in self.runs if r.scene == scene}
        return got["pgs"], got["lemke"]


def _lemke_failure(M: np.ndarray, q: np.ndarray, contacts: int) -> dict:
    """What Lemke's failing LCP looks like, and whether a 1e-12 I shift lets Lemke solve it (the shifted
    solution's natural residual is taken on the original M, q)."""
    from mbsim.solvers.numerics.lcp import LCPError, complementarity_error, lemke

    k = contacts
    out = {
        "n": len(q),
        "k": k,
        "rank_nn": int(np.linalg.matrix_rank(M[:k, :k])),
        "zero_q": int(np.sum(np.abs(q[:k]) <= 1e-12)),
    }
    try:
        shifted = lemke(M + 1e-12 * np.eye(len(q)), q)
        out["shifted"] = (shifted.iterations, complementarity_error(M, q, shifted.x))
    except LCPError as exc:
        out["shifted"] = str(exc)
    return out


def _run_lcp_detail(r: LCPRun, out: Path) -> None:
    """One run with every step recorded and the solver's LCP calls counted."""
    import h5py

    import mbsim.solvers.numerics.contact_lcp as contact_lcp_module
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare, run

    spec = load_scene(str(r.path), [*r.overrides, "output.every=1"])
    model, solver = prepare(spec)
    # timestepping's compiled step solves its LCPs in compiled code, past the counter below: this
    # run takes the Python step, which gives the same states to round-off
    if getattr(solver, "compiled", False):
        solver._free = None
    calls: list[tuple[float, float, float]] = []
    solve = solver._solve_lcp
    failing: list = []
    original_lemke = contact_lcp_module.lemke

    def counted(A, b, batch, k, t, *rows):  # rows: the joint stops' and friction rows (issue 30)
        x, iterations, residual = solve(A, b, batch, k, t, *rows)
        calls.append((iterations, k, t))
        return x, iterations, residual

    def keep(M, q, **kwargs):
        failing[:] = [np.array(M), np.array(q)]
        return original_lemke(M, q, **kwargs)

    solver._solve_lcp = counted
    contact_lcp_module.lemke = keep
    try:
        summary = run(spec, out, prepared=(model, solver))
    finally:
        contact_lcp_module.lemke = original_lemke
    if summary.status != "completed" and r.lcp == "lemke" and failing and "Lemke" in summary.message:
        k = len(failing[1]) // (1 + 2 * (model.dimension - 1) + 1)
        r.failure = _lemke_failure(*failing, k)
    arr = np.array(calls, dtype=float).reshape(-1, 3)
    r.lcp_iterations, r.lcp_sizes = arr[:, 0], arr[:, 1]
    r.lcp_steps = np.round(arr[:, 2] / model.step).astype(np.int64)
    with h5py.File(out, "r") as f:
        r.diag_iterations = f["diagnostics/solver/iterations"][1:]
        r.max_penetration = float(np.max(f["diagnostics/contacts/max_penetration"][...], initial=0.0))
        count = f["diagnostics/contacts/count"][...]
        r.final_contacts = int(count[-1]) if count.size else 0
        r.time = f["time"][...]
        r.centres = np.stack([f[f"bodies/{name}/position"][...] for name in model.body_names], axis=1)


def bench_lcp(repeats: int = 3, t_end: float | None = None, workdir: str | Path | None = None) -> LCPResults:
    """Lemke against PGS on the four-bar against a wall (as shipped, 1 s) and the box stack (cut to 1 s).

    Each scene and solver (``solver.lcp=pgs`` / ``lemke``, the scene's other settings) runs
    ``repeats`` times round robin, timed as the other sections (``mbsim.simulate.run``); then once
    more with ``output.every=1`` and its LCP calls counted, for the iterations, penetration and
    trajectories. A run that fails (Lemke's ray termination) is reported with its message. ``t_end``
    shortens both scenes (quick mode).
    """
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import run

    runs = []
    for label, path, extra in LCP_SCENES:
        extra = (*(o for o in extra if not o.startswith("time.end=")), f"time.end={t_end!r}") if t_end else extra
        for lcp in ("pgs", "lemke"):
            runs.append(LCPRun(label, path, lcp, (*extra, f"solver.lcp={lcp}")))
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for k in range(repeats):
            for i, r in enumerate(runs):
                start = time.perf_counter()
                spec = load_scene(str(r.path), list(r.overrides))
                summary = run(spec, Path(tmp) / f"lcp_{i}_{k}.h5")
                r.total_s.append(time.perf_counter() - start)
                r.loop_s.append(summary.wall_time_s)
                r.steps, r.t_end, r.status, r.message = summary.steps, summary.t_end, summary.status, summary.message
                r.t_asked = float(spec.t_end)
        for i, r in enumerate(runs):
            _run_lcp_detail(r, Path(tmp) / f"lcp_detail_{i}.h5")
    return LCPResults(repeats, runs)


def lcp_difference(pgs_run: LCPRun, lemke_run: LCPRun) -> tuple[float, float, float] | None:
    """(last common time, max centre distance there, max over all common times), m; None if none."""
    _, ia, ib = np.intersect1d(np.round(pgs_run.time, 9), np.round(lemke_run.time, 9), return_indices=True)
    if ia.size == 0 or pgs_run.centres.shape[1:] != lemke_run.centres.shape[1:]:
        return None
    dist = np.linalg.norm(pgs_run.centres[ia] - lemke_run.centres[ib], axis=2).max(axis=1)
    return float(pgs_run.time[ia[-1]]), float(dist[-1]), float(dist.max())


def lcp_table(res: LCPResults) -> list[str]:
    lines = [
        f"| scene | LCP | status | simulated s | steps | loop s (median of {res.repeats}) | µs/step | "
        "load + compile + run s | iterations per step, `/diagnostics/solver/iterations` (mean, max) | "
        "per LCP solved (mean, max) | steps with an LCP | contacts per LCP (mean) | max penetration, m | "
        "contacts at the end |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in res.runs:
        status = r.status if not r.message else f"{r.status}: {_short(r.message, 70)}"
        lines.append(
            f"| {r.scene} | {r.lcp} | {status} | {r.t_end:.3g} of {r.t_asked:g} | {r.steps} | "
            f"**{r.loop_median:.3f}** ({_fmt_list(r.loop_s)}) | {r.us_per_step:.1f} | {r.total_median:.3f} | "
            f"{_passes(r.diag_iterations)} | {_passes(r.lcp_iterations)} | {len(r.lcp_steps)} | "
            f"{float(np.mean(r.lcp_sizes)) if r.lcp_sizes.size else 0:.1f} | {r.max_penetration:.3g} | "
            f"{r.final_contacts} |"
        )
    return lines


def lcp_accuracy_table(res: LCPResults) -> list[str]:
    lines = [
        "| scene | compared at t, s | max centre distance PGS - Lemke there, m | max over all common times, m | note |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for scene, _, _ in LCP_SCENES:
        pgs_run, lemke_run = res.pair(scene)
        diff = lcp_difference(pgs_run, lemke_run)
        if diff is None:
            lines.append(f"| {scene} | - | - | - | no common recorded time |")
            continue
        t, last, worst = diff
        both = pgs_run.status == "completed" and lemke_run.status == "completed"
        note = "the final state of both runs" if both else "the last state Lemke reached before it failed"
        lines.append(f"| {scene} | {t:.3f} | {last:.3g} | {worst:.3g} | {note} |")
    return lines


def lcp_notes(res: LCPResults) -> list[str]:
    lines = []
    for r in res.runs:
        if r.status != "completed":
            lines.append(f"- {r.scene}, {r.lcp}: **{r.message}**")
        f = r.failure
        if f:
            shifted = f["shifted"]
            verdict = (
                f"Lemke solves the LCP with M + 1e-12 I in {shifted[0]} pivots, and that z has natural residual "
                f"{shifted[1]:.2g} on the original M, q: the LCP has a solution, and the ray termination is the "
                "pivoting failing on a degenerate problem, not an infeasible one"
                if isinstance(shifted, tuple) and shifted[1] < 1e-8
                else f"Lemke on M + 1e-12 I: {shifted}"
            )
            lines.append(
                f"  The failing LCP: {f['n']} unknowns (Stewart-Trinkle form, {f['k']} contacts); its normal block "
                f"M_NN has rank {f['rank_nn']} of {f['k']}"
                + (" (redundant contact points)" if f["rank_nn"] < f["k"] else "")
                + f"; {f['zero_q']} of the {f['k']} q_N are 0 within 1e-12"
                + (" (degenerate)" if f["zero_q"] else "")
                + f". {verdict}."
            )
        n = r.diag_iterations.size
        own = np.zeros(n)  # the LCP's sweeps or pivots per step, 0 without an LCP
        solved = np.zeros(n, dtype=bool)
        inside = r.lcp_steps < n
        own[r.lcp_steps[inside]] = r.lcp_iterations[inside]
        solved[r.lcp_steps[inside]] = True
        other = r.diag_iterations != own
        if np.any(other):
            without, zero = int(np.sum(other & ~solved)), int(np.sum(other & solved & (own == 0)))
            lines.append(
                f"- {r.scene}, {r.lcp}: in {int(other.sum())} of {n} steps `/diagnostics/solver/iterations` is not the "
                f"LCP's count ({without} steps without an LCP, no contact within the margin; {zero} steps whose LCP "
                "took 0 iterations, e.g. Lemke with q >= 0): it records the projection's Newton passes there "
                f"(mean {float(np.mean(r.diag_iterations[other])):.2f}; `StepInfo(iterations=iterations or newton)` in "
                "`timestepping.Solver.step`), so the column mixes two counts; *per LCP solved* counts the solver's "
                "own calls."
            )
    return lines


def lcp_section(lcp: LCPResults) -> list[str]:
    """Section 5's second part: Lemke against PGS."""
    return [
        "### Lemke against PGS",
        "",
        "`scenes/four_bar_wall_2d.yaml` (as shipped, unless shortened) and `scenes/box_stack.yaml` (cut to "
        "1 s) each with `--set solver.lcp=pgs` and `--set solver.lcp=lemke`, the scene's other settings (the "
        "stack: PGS at most 2000 sweeps, tolerance 1e-12, warm start; the four-bar: PGS defaults). Timed as "
        f"sections 3 and 4 ({lcp.repeats} run(s) each, round robin, scene output). Then one more run each with "
        "`output.every=1` and the solver's LCP calls counted: *iterations per step* is "
        "`/diagnostics/solver/iterations` over all steps; *per LCP solved* counts the PGS sweeps or Lemke "
        "pivots of the steps that solved an LCP; the max penetration is the largest "
        "`/diagnostics/contacts/max_penetration` (every step). Accuracy: the largest distance between the "
        "body centres of the two runs (positions recorded every step), at the last time both reached and over "
        "all common times. In 3D the two solvers use different friction sets: PGS the box |P_t1|, |P_t2| <= mu "
        "P_N, Lemke the Stewart-Trinkle cone spanned by +-t1, +-t2 (|P_t1| + |P_t2| <= mu P_N); in 2D (the "
        "four-bar, friction 0 anyway) they are the same.",
        "",
        *lcp_table(lcp),
        "",
        *lcp_accuracy_table(lcp),
        "",
        *lcp_notes(lcp),
        "",
    ]
