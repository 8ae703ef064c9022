"""Benchmark: what recording costs, every step against every 100th, per method (issue 29).

    python benchmarks/recording.py            # the section alone (printed), a minute or two
    python benchmarks/recording.py --quick    # one repeat, shorter runs

For one scene per method (``CASES``: shipped scenes, the method set where the scene has another),
the same run twice in this process, once with ``output.every=1`` and once with ``output.every=100``:
``mbsim.simulate.run`` on the loaded scene, timed by the run itself (``RunSummary.wall_time_s``: the
stepping loop with its recording, the result file's rows included, the set-up not). Per case, the
median over the repeats of the wall time per step of each, and their ratio. A first run of each
case, not timed, loads what it needs. Result files go to a temporary directory.

Target (issue 29): recording every step costs at most 1.3x recording every 100th, for every
method. Nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

SCENES = ROOT / "scenes"

# (method, scene in scenes/, overrides): a few thousand steps each
CASES = (
    ("lagrange", "four_box_chain.yaml", ("time.end=4.0",)),
    ("variational", "four_box_chain.yaml", ("solver.method=variational", "time.end=4.0")),
    ("recursive", "four_box_chain.yaml", ("solver.method=recursive", "time.end=4.0")),
    ("null_space", "parallelogram_redundant_2d.yaml", ("time.end=4.0",)),
    ("gauss", "slider_crank_singular_2d.yaml", ("time.end=4.0",)),
    ("augmented_lagrangian", "slider_crank_singular_2d.yaml", ("solver.method=augmented_lagrangian", "time.end=4.0")),
    ("timestepping", "box_stack.yaml", ("time.end=0.5",)),
    ("compliant contact (lagrange)", "blocks_elastic.yaml", ("time.end=0.02",)),
    ("event_driven", "bouncing_ball.yaml", ("solver.method=event_driven", "time.end=2.0")),
)
SPARSE_EVERY = 100
TARGET_RATIO = 1.3


@dataclass
class Case:
    method: str
    scene: str
    overrides: tuple[str, ...]
    steps: int = 0
    every_step_s: list[float] = field(default_factory=list)  # wall per step, output.every=1
    sparse_s: list[float] = field(default_factory=list)  # wall per step, output.every=SPARSE_EVERY
    failure: str = ""

    @property
    def ratio(self) -> float:
        if not self.every_step_s or not self.sparse_s:
            return float("nan")
        return statistics.median(self.every_step_s) / statistics.median(self.sparse_s)


def _time_run(scene: Path, overrides: tuple[str, ...], every: int, out: Path) -> tuple[float, int, str]:
    """(wall seconds per step, steps, failure message or '') of one run."""
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import run

    spec = load_scene(str(scene), [*overrides, f"output.every={every}"])
    summary = run(spec, out)
    failure = "" if summary.status == "completed" else f"{summary.status}: {summary.message}"
    return summary.wall_time_s / max(summary.steps, 1), summary.steps, failure


def measure(repeats: int = 3, cases=CASES, shorten: float = 1.0, log: Callable[[str], None] = print) -> list[Case]:
    """Each case with every step and every 100th recorded, ``repeats`` times each after one untimed run;
    ``shorten`` scales the end time (quick runs)."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (method, scene, overrides) in enumerate(cases):
            over = tuple(
                f"time.end={float(o.split('=', 1)[1]) * shorten!r}" if o.startswith("time.end=") else o
                for o in overrides
            )
            case = Case(method, scene, over)
            log(f"  {method}: {scene} {' '.join(over)}")
            try:
                _time_run(SCENES / scene, over, SPARSE_EVERY, Path(tmp) / f"{k}-warm.h5")
                for r in range(repeats):
                    for every, into in ((1, case.every_step_s), (SPARSE_EVERY, case.sparse_s)):
                        per_step, case.steps, failure = _time_run(
                            SCENES / scene, over, every, Path(tmp) / f"{k}-{r}-{every}.h5"
                        )
                        case.failure = case.failure or failure
                        into.append(per_step)
            except Exception as exc:  # a broken case is reported in the table, the others still run
                case.failure = f"{type(exc).__name__}: {exc}"
            results.append(case)
    return results


def markdown(cases: list[Case], repeats: int, quick: bool = False) -> list[str]:
    """The section's lines (its first line the heading, as benchmarks/run.py numbers it)."""
    rows = []
    for c in cases:
        over = f" (`{' '.join(c.overrides)}`)" if c.overrides else ""
        if c.every_step_s and c.sparse_s:
            every, sparse = 1e6 * statistics.median(c.every_step_s), 1e6 * statistics.median(c.sparse_s)
            verdict = "yes" if c.ratio <= TARGET_RATIO else "**no**"
            cells = f"{c.steps} | {every:.1f} | {sparse:.1f} | {c.ratio:.2f}x | {verdict}"
        else:
            cells = "- | - | - | - | -"
        note = f" {c.failure}" if c.failure else ""
        rows.append(f"| {c.method} | `scenes/{c.scene}`{over} | {cells} |{note}")
    measured = [c for c in cases if c.every_step_s and c.sparse_s]
    worst = max(measured, key=lambda c: c.ratio) if measured else None
    verdict = (
        f"Target: recording every step at most {TARGET_RATIO:g}x recording every {SPARSE_EVERY}th, for every method. "
        + (
            f"This run: at most {worst.ratio:.2f}x ({worst.method}), "
            f"{'within' if all(c.ratio <= TARGET_RATIO for c in measured) else 'over'} the target."
            if worst
            else "Nothing measured."
        )
    )
    return [
        "## Recording: every step against every 100th",
        "",
        "The same run twice in one process, `output.every=1` and `output.every=100`: wall time per step of the "
        "stepping loop with its recording (`RunSummary.wall_time_s`, the result file's rows included, set-up not), "
        f"medians of {repeats} run(s) after one untimed run{' (--quick: shortened runs)' if quick else ''}.",
        "",
        "| method | scene | steps | every step µs/step | every 100th µs/step | ratio | within 1.3x |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        *rows,
        "",
        verdict,
        "",
    ]


def section(quick: bool = False, log: Callable[[str], None] | None = None) -> list[str]:
    """Run the benchmark and return its markdown section (for benchmarks/run.py and BENCHMARKS.md)."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    repeats = 1 if quick else 3
    return markdown(measure(repeats, shorten=0.1 if quick else 1.0, log=log), repeats, quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat of shortened runs")
    args = parser.parse_args(argv)
    print("\n".join(section(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
