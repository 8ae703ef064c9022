"""Benchmark: ``event_driven`` against ``timestepping`` on impacts, at the accuracy each reaches.

    python benchmarks/events.py            # the section alone (printed), and the figure
    python benchmarks/events.py --quick    # shorter runs (the smoke test)

1. Bouncing ball (scenes/bouncing_ball.yaml: e = 0.8, from 1 m, 3.5 s, 7 impacts). Errors: the
   first five impact times against t1 (1 + 2 (e + ... + e^(k-1))), t1 = sqrt(2/g), and the first
   five apex heights against 0.64^k m. timestepping records every step: an impact is the step
   where the ball's vertical velocity turns up (its time: that step's midpoint), an apex the
   largest recorded height of a flight; event_driven's impacts are its /events, its apexes
   z + vz^2 / 2g at the post-impact rows (free flight conserves it).
2. The paper's four-bar against the wall (scenes/four_bar_wall_2d.yaml, 0.2 s: the first 8
   impacts of point a). Reference: event_driven at rtol = atol = 1e-12; error: the first eight
   impact times. timestepping's impact: the step whose normal impulse is positive after one
   without (its midpoint).

The ratio reported is wall time at equal accuracy: timestepping's wall time at its finest step
against event_driven's at the loosest tolerance that is at least as accurate. Figure: the
x-velocity of point a (bar 1's top end) under both methods, docs/figures/four_bar_wall_point_a.png.

Times are ``time.perf_counter`` wall seconds of ``simulate.run`` (the kernels loaded before);
nothing here asserts on a time. ``section(quick)`` returns the markdown for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BALL = ROOT / "scenes" / "bouncing_ball.yaml"
FOUR_BAR = ROOT / "scenes" / "four_bar_wall_2d.yaml"
FIGURE = ROOT / "docs" / "figures" / "four_bar_wall_point_a.png"
G, E = 9.81, 0.8
L1 = 0.2


def _run(scene: Path, overrides: list[str], out: Path):
    """(wall seconds, result dict of the datasets used, summary) of one run."""
    import h5py

    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare, run

    spec = load_scene(str(scene), overrides)
    model, solver = prepare(spec)
    solver.load_compiled()
    started = time.perf_counter()
    summary = run(spec, out, prepared=(model, solver))
    wall = time.perf_counter() - started
    data = {}
    with h5py.File(out, "r") as f:

        def keep(name, obj):
            if isinstance(obj, h5py.Dataset) and (
                name.startswith(("bodies", "events", "diagnostics")) or name == "time"
            ):
                data[name] = obj[()]

        f.visititems(keep)
    return wall, data, summary


def _ts_impacts(t: np.ndarray, rising: np.ndarray, h: float) -> np.ndarray:
    """Midpoints of the steps where ``rising`` (a boolean per row) turns true."""
    idx = np.nonzero(rising[1:] & ~rising[:-1])[0] + 1
    return t[idx] - 0.5 * h


def _ball_errors(data: dict, method: str, n: int) -> tuple[float, float]:
    t1 = np.sqrt(2.0 / G)
    expected_t = t1 * (1 + 2 * np.cumsum(np.r_[0.0, E ** np.arange(1, n)]))
    expected_apex = E ** (2 * np.arange(1, n + 1))
    t, z = data["time"], data["bodies/ball/position"][:, 2] - 0.1
    vz = data["bodies/ball/velocity"][:, 2]
    if method == "event_driven":
        kinds = [k.decode() if isinstance(k, bytes) else k for k in data["events/kind"]]
        impacts = np.array([ti for ti, k in zip(data["events/time"], kinds, strict=True) if k == "impact"])[:n]
        rows = [int(np.searchsorted(t, ti)) for ti in impacts]
        apex = z[rows] + vz[rows] ** 2 / (2 * G)
    else:
        h = float(np.median(np.diff(t)))
        impacts = _ts_impacts(t, vz > 0, h)[:n]
        bounds = np.r_[impacts, t[-1]]
        apex = np.array([np.max(z[(t > a) & (t < b)]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])[:n]
    if len(impacts) < n or len(apex) < n:
        return np.nan, np.nan
    return float(np.max(np.abs(impacts - expected_t))), float(np.max(np.abs(apex / expected_apex - 1)))


def _four_bar_impacts(data: dict, method: str, n: int) -> np.ndarray:
    if method == "event_driven":
        kinds = [k.decode() if isinstance(k, bytes) else k for k in data["events/kind"]]
        return np.array([ti for ti, k in zip(data["events/time"], kinds, strict=True) if k == "impact"])[:n]
    t = data["time"]
    h = float(np.median(np.diff(t)))
    return _ts_impacts(t, data["diagnostics/contacts/normal_impulse"] > 0, h)[:n]


def _point_a_velocity(data: dict) -> tuple[np.ndarray, np.ndarray]:
    angle, omega = data["bodies/bar1/angle"], data["bodies/bar1/angular_velocity"]
    v = data["bodies/bar1/velocity"]
    return data["time"], v[:, 0] - omega * 0.5 * L1 * np.sin(angle)


def measure(quick: bool = False) -> dict:
    ball_end = "2.0" if quick else "3.5"
    n_ball = 3 if quick else 5
    ts_steps = (1e-3, 1e-4) if quick else (1e-3, 1e-4, 1e-5)
    ed_tols = (1e-6, 1e-10) if quick else (1e-6, 1e-8, 1e-10, 1e-12)
    bar_end = "0.1" if quick else "0.2"
    n_bar = 3 if quick else 8
    out: dict = {"ball": [], "four_bar": [], "quick": quick}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        _run(BALL, ["solver.method=event_driven", "time.end=0.5"], work / "warm.h5")  # first-call imports
        for h in ts_steps:
            wall, data, s = _run(BALL, ["time.end=" + ball_end, f"time.step={h}", "output.every=1"], work / "b.h5")
            out["ball"].append(
                ("timestepping", f"h = {h:g} s", wall, s.steps, *_ball_errors(data, "timestepping", n_ball))
            )
        for tol in ed_tols:
            over = ["time.end=" + ball_end, "solver.method=event_driven", f"solver.rtol={tol}", f"solver.atol={tol}",
                    "output.every=1"]  # fmt: skip
            wall, data, s = _run(BALL, over, work / "b.h5")
            out["ball"].append(
                ("event_driven", f"rtol = {tol:g}", wall, s.steps, *_ball_errors(data, "event_driven", n_ball))
            )
        ed = ["solver.method=event_driven", "output.every=1", "time.end=" + bar_end]
        _, ref, _ = _run(FOUR_BAR, [*ed, "solver.rtol=1e-12", "solver.atol=1e-12"], work / "ref.h5")
        reference = _four_bar_impacts(ref, "event_driven", n_bar)
        curves = {}
        for h in (1e-3, 1e-4) if quick else (1e-3, 1e-4, 1e-5):
            wall, data, s = _run(FOUR_BAR, [f"time.step={h}", "output.every=1", "time.end=" + bar_end], work / "f.h5")
            got = _four_bar_impacts(data, "timestepping", n_bar)
            err = float(np.max(np.abs(got - reference))) if len(got) == n_bar else np.nan
            out["four_bar"].append(("timestepping", f"h = {h:g} s", wall, s.steps, err))
            if h == 1e-4:
                curves["timestepping (h = 1e-4 s)"] = _point_a_velocity(data)
        for tol in ed_tols[:-1]:
            wall, data, s = _run(FOUR_BAR, [*ed, f"solver.rtol={tol}", f"solver.atol={tol}"], work / "f.h5")
            got = _four_bar_impacts(data, "event_driven", n_bar)
            err = float(np.max(np.abs(got - reference))) if len(got) == n_bar else np.nan
            out["four_bar"].append(("event_driven", f"rtol = {tol:g}", wall, s.steps, err))
        fine = ["solver.method=event_driven", "solver.rtol=1e-10", "solver.atol=1e-10", "solver.max_step=2e-4",
                "time.end=0.3"]  # fmt: skip
        curves["event_driven (DOP853, rtol = 1e-10)"] = _point_a_velocity(_run(FOUR_BAR, fine, work / "g.h5")[1])
        curves["timestepping (h = 1e-4 s)"] = _point_a_velocity(
            _run(FOUR_BAR, ["time.step=1e-4", "time.end=0.3"], work / "h.h5")[1]
        )
        out["curves"] = curves
    return out


def ratio(rows: list, column: int) -> tuple[str, str, float] | None:
    """timestepping's finest row against the loosest event_driven row at least as accurate."""
    ts = [r for r in rows if r[0] == "timestepping" and np.isfinite(r[column])]
    ed = [r for r in rows if r[0] == "event_driven" and np.isfinite(r[column])]
    if not ts or not ed:
        return None
    best = min(ts, key=lambda r: r[column])
    good = [r for r in ed if r[column] <= best[column]]
    if not good:
        return None
    cheapest = min(good, key=lambda r: r[2])
    return best[1], cheapest[1], best[2] / cheapest[2]


def figure(curves: dict, path: Path = FIGURE) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for label, (t, v) in curves.items():
        ax.plot(t, v, label=label, lw=1.0)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("x-velocity of point a [m/s]")
    ax.set_title("Four-bar against the wall (paper §4): T = 10 N m, e = 0.8")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(quick: bool = False) -> list[str]:
    import platform

    from mbsim.output.tables import cell, markdown_rows

    m = measure(quick)
    figure(m["curves"])
    out = [
        "## Impacts: `event_driven` against `timestepping`",
        "",
        f"`benchmarks/events.py` ({platform.processor() or platform.machine()}; "
        + ("quick runs" if quick else "full runs")
        + "). Wall: `simulate.run` with every step recorded. Ball: e = 0.8 from 1 m; errors of the "
        "first impact times against the closed form (s) and of the apex heights (relative).",
        "",
    ]
    body = [[r[0], r[1], cell(r[2], ".3g"), str(r[3]), cell(r[4], ".1e"), cell(r[5], ".1e")] for r in m["ball"]]
    out += markdown_rows(["method", "setting", "wall [s]", "steps", "impact time error [s]", "apex error (rel.)"],
                         [False, False, True, True, True, True], body)  # fmt: skip
    r = ratio(m["ball"], 5)
    if r:
        out += ["", f"Apex heights: timestepping at {r[0]} against event_driven at {r[1]} (more accurate): "
                    f"**{r[2]:.0f}x** the wall time."]  # fmt: skip
    out += ["", "Four-bar against the wall (paper §4): error of the first impact times of point a against "
                "event_driven at rtol = 1e-12 (s).", ""]  # fmt: skip
    body = [[r[0], r[1], cell(r[2], ".3g"), str(r[3]), cell(r[4], ".1e")] for r in m["four_bar"]]
    out += markdown_rows(["method", "setting", "wall [s]", "steps", "impact time error [s]"],
                         [False, False, True, True, True], body)  # fmt: skip
    r = ratio(m["four_bar"], 4)
    if r:
        out += ["", f"Impact times: timestepping at {r[0]} against event_driven at {r[1]} (more accurate): "
                    f"**{r[2]:.1f}x** the wall time."]  # fmt: skip
    out += ["", f"![x-velocity of point a](docs/figures/{FIGURE.name})"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print("\n".join(section(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
