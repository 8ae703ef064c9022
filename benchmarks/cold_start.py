"""Benchmark: the first run, every cache empty (issue 29), against the same run warm.

    python benchmarks/cold_start.py              # the section alone (printed), about a minute
    python benchmarks/cold_start.py --quick      # one repeat of each run
    python benchmarks/cold_start.py --install    # and the README's first command from a fresh clone (minutes)

For one scene per method (``CASES``: shipped scenes, cut to short end times, so that stepping is a
small part of each run), the whole command ``python -m mbsim run SCENE -o OUT --quiet --set ...``
in a fresh process with ``MBSIM_CACHE`` pointed at a new, empty temporary directory (the first
run), then the same command again with the cache the first run left (warm); and ``mbsim validate``
of a small scene, the same way. Measured per command: CPU, the user + system time of the child
(``resource.getrusage(RUSAGE_CHILDREN)`` before and after), and wall (``time.perf_counter``), each
the median of the repeats (a new empty cache for every first run). Python's bytecode caches
(``__pycache__``) and the operating system's file cache stay as earlier runs left them; the fresh
clone of ``--install`` has no bytecode of mbsim.

With ``--install`` (off by default: it downloads every dependency and builds the compiled core,
minutes of both cores): ``git clone`` of this repository (its committed HEAD), ``python -m venv``,
``pip install -e .`` with an empty pip cache, then ``mbsim run scenes/four_box_chain.yaml`` in the
clone, the README's first command, each step timed.

Targets (issue 29): a first run at most 3 s CPU and within 1.5 s CPU of the same run warm;
``mbsim validate`` at most 0.3 s; the install and the flagship run at most 6 min wall, the run at
most 2 s. Nothing here asserts on a time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENES = ROOT / "scenes"

# (method, scene in scenes/, overrides): the scene's own method where a shipped scene has it
CASES = (
    ("lagrange", "four_box_chain.yaml", ("time.end=1.0",)),
    ("variational", "four_box_chain.yaml", ("solver.method=variational", "time.end=1.0")),
    ("recursive", "four_box_chain.yaml", ("solver.method=recursive", "time.end=1.0")),
    ("null_space", "parallelogram_redundant_2d.yaml", ("time.end=1.0",)),
    ("gauss", "slider_crank_singular_2d.yaml", ("time.end=1.0",)),
    ("augmented_lagrangian", "slider_crank_singular_2d.yaml", ("solver.method=augmented_lagrangian", "time.end=1.0")),
    ("timestepping", "box_stack.yaml", ("time.end=0.1",)),
    ("compliant contact (lagrange)", "blocks_elastic.yaml", ("time.end=0.005",)),
    ("event_driven", "bouncing_ball.yaml", ("solver.method=event_driven", "time.end=0.5")),
)
VALIDATE_SCENE = "pendulum_2d.yaml"
FLAGSHIP = "scenes/four_box_chain.yaml"

FIRST_RUN_CPU_S = 3.0  # a first run at most this CPU ...
FIRST_RUN_EXTRA_S = 1.5  # ... and at most this much CPU more than the same run warm
VALIDATE_S = 0.3  # mbsim validate of a small scene
INSTALL_S = 360.0  # clone + venv + pip install -e . + the flagship run, wall
FLAGSHIP_S = 2.0  # the flagship run alone, wall

RUN_TIMEOUT_S = 900.0
INSTALL_TIMEOUT_S = 3600.0


@dataclass
class Timed:
    """CPU and wall seconds of one command, and how it ended."""

    cpu: float
    wall: float
    code: int | None  # exit code; None: timed out
    tail: str = ""  # the last line of its stderr when it failed

    @property
    def ok(self) -> bool:
        return self.code == 0


def timed(command: list[str], env: dict[str, str], cwd: Path, timeout: float = RUN_TIMEOUT_S) -> Timed:
    """Run ``command`` to its end; its CPU is the change of this process's RUSAGE_CHILDREN."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        code, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired:  # subprocess.run killed and reaped it
        code, err = None, f"timed out after {timeout:g} s"
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in (err or "").splitlines() if line.strip()]
    tail = "" if code == 0 else (lines[-1].strip() if lines else f"exit {code}")
    return Timed(cpu, wall, code, tail[:200])


@dataclass
class Pair:
    """One command, first with an empty cache and then warm, ``repeats`` times."""

    label: str
    scene: str
    overrides: tuple[str, ...]
    cold: list[Timed] = field(default_factory=list)
    warm: list[Timed] = field(default_factory=list)

    @property
    def failure(self) -> str:
        bad = next((t for t in (*self.cold, *self.warm) if not t.ok), None)
        return "" if bad is None else (bad.tail or f"exit {bad.code}")

    def median(self, which: str, what: str) -> float:
        values = [getattr(t, what) for t in getattr(self, which)]
        return statistics.median(values) if values else float("nan")

    @property
    def extra_cpu(self) -> float:
        return self.median("cold", "cpu") - self.median("warm", "cpu")


@dataclass
class Step:
    label: str
    result: Timed | None  # None: not run (an earlier step failed)


@dataclass
class ColdStart:
    repeats: int
    runs: list[Pair]
    validate: Pair
    install: list[Step] | None = None  # --install only


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["MBSIM_CACHE"] = str(cache)
    return env


def _pair(pair: Pair, command: Callable[[Path], list[str]], work: Path, k: int) -> None:
    """A first run into a new empty cache, then the same command warm."""
    cache = work / f"cache_{k}"
    cache.mkdir()
    pair.cold.append(timed(command(work / f"cold_{k}.h5"), _env(cache), ROOT))
    pair.warm.append(timed(command(work / f"warm_{k}.h5"), _env(cache), ROOT))


def measure(
    repeats: int = 3,
    cases: tuple[tuple[str, str, tuple[str, ...]], ...] = CASES,
    validate_scene: str = VALIDATE_SCENE,
    log: Callable[[str], None] = print,
) -> ColdStart:
    """Every case and the validate command, cold then warm, round robin ``repeats`` times."""
    runs = [Pair(label, scene, tuple(overrides)) for label, scene, overrides in cases]
    check = Pair("mbsim validate", validate_scene, ())
    mbsim = [sys.executable, "-m", "mbsim"]
    with tempfile.TemporaryDirectory(prefix="mbsim-bench-cold-") as tmp:
        for k in range(repeats):
            for i, r in enumerate(runs):
                work = Path(tmp) / f"run_{i}_{k}"
                work.mkdir()
                sets = [a for o in r.overrides for a in ("--set", o)]

                def run(out: Path, r: Pair = r, sets: list[str] = sets) -> list[str]:
                    return [*mbsim, "run", str(SCENES / r.scene), "-o", str(out), "--quiet", *sets]

                _pair(r, run, work, k)
                log(f"  {r.label:30} first {r.cold[-1].cpu:6.2f} s CPU, warm {r.warm[-1].cpu:6.2f} s CPU")
            work = Path(tmp) / f"validate_{k}"
            work.mkdir()
            _pair(check, lambda _out: [*mbsim, "validate", str(SCENES / validate_scene)], work, k)
            log(f"  {'mbsim validate':30} first {check.cold[-1].cpu:6.2f} s CPU, warm {check.warm[-1].cpu:6.2f} s CPU")
    return ColdStart(repeats, runs, check)


def measure_install(log: Callable[[str], None] = print) -> list[Step]:
    """A fresh clone, venv and ``pip install -e .`` (empty pip cache), then the flagship run, each step timed."""
    with tempfile.TemporaryDirectory(prefix="mbsim-bench-install-") as tmp:
        work = Path(tmp)
        clone, venv = work / "mbsim", work / "venv"
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
        here = Path(sys.prefix) / "bin"  # this interpreter's environment: not on the fresh one's PATH
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != here]
        env.update(
            PATH=os.pathsep.join([str(venv / "bin"), *path]),
            VIRTUAL_ENV=str(venv),
            PIP_CACHE_DIR=str(work / "pip-cache"),
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            MBSIM_CACHE=str(work / "mbsim-cache"),
        )
        plan = (
            ("git clone (the committed HEAD)", ["git", "clone", "--quiet", str(ROOT), str(clone)], work),
            ("python -m venv", [sys.executable, "-m", "venv", str(venv)], work),
            ("pip install -e .", [str(venv / "bin" / "pip"), "install", "-e", "."], clone),
            (f"mbsim run {FLAGSHIP}", [str(venv / "bin" / "mbsim"), "run", FLAGSHIP], clone),
        )
        steps: list[Step] = []
        for label, command, cwd in plan:
            if steps and not steps[-1].result.ok:
                steps.append(Step(label, None))
                continue
            log(f"  {label} ...")
            steps.append(Step(label, timed(command, env, cwd, INSTALL_TIMEOUT_S)))
            log(f"    {steps[-1].result.wall:.1f} s wall, {steps[-1].result.cpu:.1f} s CPU")
    return steps


# ----------------------------------------------------------------------------- report


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _scene(r: Pair) -> str:
    own = ", ".join(f"`{o}`" for o in r.overrides)
    return f"`scenes/{r.scene}`" + (f" ({own})" if own else "")


def run_table(res: ColdStart) -> list[str]:
    lines = [
        "| method | scene (overrides) | first run CPU s | wall s | warm CPU s | wall s | first - warm CPU s | "
        f"first run <= {FIRST_RUN_CPU_S:g} s CPU | within {FIRST_RUN_EXTRA_S:g} s CPU of warm |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in res.runs:
        if r.failure:
            lines.append(f"| {r.label} | {_scene(r)} | - | - | - | - | - | failed: {r.failure} | - |")
            continue
        cold, warm = r.median("cold", "cpu"), r.median("warm", "cpu")
        lines.append(
            f"| {r.label} | {_scene(r)} | {cold:.2f} | {r.median('cold', 'wall'):.2f} | {warm:.2f} | "
            f"{r.median('warm', 'wall'):.2f} | {r.extra_cpu:.2f} | {_met(cold <= FIRST_RUN_CPU_S)} | "
            f"{_met(r.extra_cpu <= FIRST_RUN_EXTRA_S)} |"
        )
    return lines


def run_verdict(res: ColdStart) -> str:
    ran = [r for r in res.runs if not r.failure]
    first = [r.label for r in ran if r.median("cold", "cpu") > FIRST_RUN_CPU_S]
    extra = [r.label for r in ran if r.extra_cpu > FIRST_RUN_EXTRA_S]
    failed = [r.label for r in res.runs if r.failure]
    if not ran:
        return "No first run completed."
    worst = max(ran, key=lambda r: r.median("cold", "cpu"))
    parts = [
        f"Targets: a first run at most {FIRST_RUN_CPU_S:g} s CPU, "
        + ("**met** by every method" if not first else f"**not met** by {', '.join(first)}")
        + f" (the most: {worst.label}, {worst.median('cold', 'cpu'):.2f} s); within {FIRST_RUN_EXTRA_S:g} s CPU of "
        "the same run warm, "
        + ("**met** by every method" if not extra else f"**not met** by {', '.join(extra)}")
        + f" (the largest difference: {max(r.extra_cpu for r in ran):.2f} s)."
    ]
    if failed:
        parts.append(f"Failed: {', '.join(failed)} (see the table).")
    return " ".join(parts)


def validate_lines(res: ColdStart) -> list[str]:
    v = res.validate
    if v.failure:
        return [f"`mbsim validate scenes/{v.scene}` failed: {v.failure}"]
    cpu, wall = v.median("warm", "cpu"), v.median("warm", "wall")
    return [
        f"| `mbsim validate scenes/{v.scene}` | CPU s | wall s |",
        "| --- | ---: | ---: |",
        f"| first (empty cache) | {v.median('cold', 'cpu'):.2f} | {v.median('cold', 'wall'):.2f} |",
        f"| warm | {cpu:.2f} | {wall:.2f} |",
        "",
        f"Target: `mbsim validate` of a small scene at most {VALIDATE_S:g} s: warm {cpu:.2f} s CPU, {wall:.2f} s "
        f"wall, {_met(max(cpu, wall) <= VALIDATE_S)}.",
    ]


def install_lines(steps: list[Step] | None) -> list[str]:
    if steps is None:
        return [
            "Not measured in this run (it downloads every dependency and builds the compiled core): "
            "`python benchmarks/run.py --install` or `python benchmarks/cold_start.py --install`."
        ]
    lines = ["| step | wall s | CPU s | status |", "| --- | ---: | ---: | --- |"]
    for s in steps:
        t = s.result
        if t is None:
            lines.append(f"| {s.label} | - | - | not run |")
        else:
            lines.append(f"| {s.label} | {t.wall:.1f} | {t.cpu:.1f} | {'ok' if t.ok else f'failed: {t.tail}'} |")
    done = [s.result for s in steps if s.result is not None]
    if len(done) < len(steps) or not all(t.ok for t in done):
        return [*lines, "", "The install did not complete: no verdict."]
    total, flagship = sum(t.wall for t in done), done[-1].wall
    return [
        *lines,
        f"| **all** | **{total:.1f}** | {sum(t.cpu for t in done):.1f} | |",
        "",
        f"Targets: fresh clone, fresh venv, install and the flagship run at most {INSTALL_S / 60:g} min wall: "
        f"{total / 60:.1f} min, {_met(total <= INSTALL_S)}; the flagship run at most {FLAGSHIP_S:g} s: "
        f"{flagship:.2f} s wall, {_met(flagship <= FLAGSHIP_S)}.",
    ]


def markdown(res: ColdStart, quick: bool = False) -> list[str]:
    """The section's lines (its first line the heading, as benchmarks/run.py numbers it)."""
    return [
        "## First run: every cache empty, `mbsim run` in a fresh process",
        "",
        "For one scene per method, the whole command `python -m mbsim run SCENE -o OUT --quiet --set ...` in a "
        "fresh process with `MBSIM_CACHE` an empty temporary directory (the first run: start-up, imports, loading "
        "the compiled core, reading and compiling the scene, building any signed distance field, stepping, "
        "writing the result), then the same command again with the cache it left (warm). CPU is the child's user + "
        "system time (`resource.getrusage(RUSAGE_CHILDREN)`), wall `time.perf_counter`; medians of "
        f"{res.repeats} run(s), a new empty cache for each first run{' (--quick)' if quick else ''}. The end times are "
        "cut so that stepping is a small part of each run. Python's bytecode caches and the operating system's "
        "file cache stay warm (the install below starts without mbsim's bytecode).",
        "",
        *run_table(res),
        "",
        run_verdict(res),
        "",
        "### `mbsim validate`",
        "",
        *validate_lines(res),
        "",
        "### Fresh clone, fresh venv, the README's first command",
        "",
        "`git clone` of this repository (its committed HEAD), `python -m venv`, `pip install -e .` with an empty "
        f"pip cache (every dependency downloaded, the compiled core built), then `mbsim run {FLAGSHIP}` in the "
        "clone with an empty `MBSIM_CACHE`.",
        "",
        *install_lines(res.install),
        "",
    ]


def section(quick: bool = False, install: bool = False, log: Callable[[str], None] | None = None) -> list[str]:
    """Run the benchmark and return its markdown section (for benchmarks/run.py and BENCHMARKS.md)."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    res = measure(repeats=1 if quick else 3, log=log)
    if install:
        res.install = measure_install(log)
    return markdown(res, quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat of each run")
    parser.add_argument(
        "--install", action="store_true", help="also time a fresh clone + venv + pip install -e . + the flagship run"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print("\n".join(section(args.quick, args.install)))
    print(f"\n(took {time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
