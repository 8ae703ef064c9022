"""Benchmark of ``mbsim sweep`` (parameter studies on Dask): speed-up and per-case overhead.

    python benchmarks/sweep.py            # full: 16 four-box chains of 10 s (about two minutes on 2 cores)
    python benchmarks/sweep.py --quick    # smoke run: 4 chains of 2 s, fewer overhead cases

1. Speed-up. The four-box chain (scenes/four_box_chain.yaml as shipped: 10 s, lagrange + rk4,
   step 0.002) swept over 16 values of gravity (``--param gravity[2]=linspace(-9.8,-9.0,16)``;
   every case costs the same) on the embedded LocalCluster of 2 worker processes: the wall time
   of the whole sweep (checking the cases, starting and closing the cluster, writing 16 result
   files and the tables) against the same 16 runs one after another in one warm process
   (``load_scene`` + ``simulate.run`` each). The ratio is the speed-up (target: 1.7 or more on
   2 cores). For scale, the same cases as a shell loop of ``mbsim run`` processes: a few are timed
   and the loop's time is that mean times 16.
2. Per-case overhead of the Dask path against a plain run: a sweep of tiny cases (the chain for
   10 steps) on one worker; the interval at which they finish (the slope of the finishing times,
   first to last) minus the cost of one such plain run in process (load + compile + run + write)
   is what a case pays for going through Dask (shipping the scene, the task, the result file's
   bytes back, the atomic write, the bookkeeping). Target: under 0.5 s. The fixed cost of a sweep
   (checking, starting and closing the local cluster, the workers' first imports) is the sweep's
   wall time minus N per-case intervals.

Times are ``time.perf_counter`` wall seconds; nothing here asserts on a time. Result files go to
a temporary directory. ``section(quick)`` returns the markdown section for BENCHMARKS.md.
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAIN = ROOT / "scenes" / "four_box_chain.yaml"
SPEEDUP_TARGET = 1.7
OVERHEAD_TARGET_S = 0.5

FULL = {"cases": 16, "t_end": None, "workers": 2, "shell_runs": 3, "overhead_cases": 24, "tiny_steps": 10}
QUICK = {"cases": 4, "t_end": 2.0, "workers": 2, "shell_runs": 1, "overhead_cases": 8, "tiny_steps": 10}


@dataclass
class SweepBench:
    cases: int
    t_end: float
    workers: int
    serial_s: float
    serial_run_s: list[float]
    sweep_s: float
    sweep_completed: int
    shell_per_case_s: float
    tiny_cases: int
    tiny_sweep_s: float
    tiny_per_case_s: float
    tiny_first_s: float
    plain_tiny_s: float
    serial_other_cores: float = 0.0
    sweep_other_cores: float = 0.0

    @property
    def speedup(self) -> float:
        return self.serial_s / self.sweep_s

    @property
    def shell_s(self) -> float:
        return self.shell_per_case_s * self.cases

    @property
    def shell_speedup(self) -> float:
        return self.shell_s / self.sweep_s

    @property
    def overhead_s(self) -> float:
        return self.tiny_per_case_s - self.plain_tiny_s

    @property
    def fixed_s(self) -> float:
        return self.tiny_sweep_s - self.tiny_cases * self.tiny_per_case_s


class OtherLoad:
    """CPU time the rest of the machine used while a block ran, in cores (from /proc/stat and this
    process tree's rusage): the speed-up of 2 workers on 2 cores means nothing when others use one."""

    def __enter__(self) -> OtherLoad:
        self.start = (time.perf_counter(), _busy_s(), _own_s())
        self.cores = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.start[0]
        if wall > 0 and self.start[1] is not None:
            busy = _busy_s() - self.start[1]
            self.cores = max(0.0, (busy - (_own_s() - self.start[2])) / wall)


def _busy_s() -> float | None:
    """Busy CPU seconds of the whole machine since boot (Linux), or None."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_s() -> float:
    """CPU seconds of this process and its finished children (the cluster's workers, once closed)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _gravity_param(n: int) -> str:
    return f"gravity[2]=linspace(-9.8,-9.0,{n})"


def _sweep(param: str, overrides: list[str], workers: int, outdir: Path) -> tuple[float, int, list[float]]:
    """Wall time of a whole sweep (plan, cluster, runs, files, tables), its completed cases, and
    the time since the start at which each case finished."""
    from mbsim.sweep import parse_params, plan_sweep, run_sweep

    start = time.perf_counter()
    finished: list[float] = []

    def progress(row, done, total) -> None:
        if row is not None:
            finished.append(time.perf_counter() - start)

    plan = plan_sweep(str(CHAIN), parse_params([param]), overrides=overrides)
    result = run_sweep(plan, outdir, workers=workers, progress=progress)
    return time.perf_counter() - start, result.counts()["completed"], finished


def _serial(values: list[str], base: list[str], out: Path) -> list[float]:
    """Wall time of each case run one after another in this process (load + run)."""
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import run

    times = []
    for k, value in enumerate(values):
        start = time.perf_counter()
        run(load_scene(str(CHAIN), [*base, f"gravity[2]={value}"]), out / f"serial{k}.h5")
        times.append(time.perf_counter() - start)
    return times


def bench_sweep(quick: bool = False) -> SweepBench:
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import run
    from mbsim.sweep import expand, parse_params

    plan = QUICK if quick else FULL
    n, workers = plan["cases"], plan["workers"]
    base = [] if plan["t_end"] is None else [f"time.end={plan['t_end']}"]
    t_end = plan["t_end"] or 10.0
    param = _gravity_param(n)
    values = [text for _, text, _ in (c[0] for c in expand(parse_params([param])))]
    with tempfile.TemporaryDirectory(prefix="mbsim-bench-sweep-") as tmp:
        out = Path(tmp)
        # a first run in this process (imports, caches) before timing the serial runs
        run(load_scene(str(CHAIN), ["time.end=0.01"]), out / "warm.h5")
        serial_load, sweep_load = OtherLoad(), OtherLoad()
        with serial_load:
            serial = _serial(values, base, out)
        shell = []
        for value in values[: plan["shell_runs"]]:
            cmd = [sys.executable, "-m", "mbsim", "run", str(CHAIN), "-q", "-o", str(out / "shell.h5")]
            start = time.perf_counter()
            subprocess.run([*cmd, *(f"--set={s}" for s in [*base, f"gravity[2]={value}"])], check=True)
            shell.append(time.perf_counter() - start)
        with sweep_load:
            sweep_s, completed, _ = _sweep(param, base, workers, out / "sweep")
        # per-case overhead: tiny cases one after another on one worker; the slope of the
        # finishing times leaves the cluster's start and the first case's warm-up out
        tiny = [f"time.end={plan['tiny_steps'] * 0.002}"]
        tiny_n = plan["overhead_cases"]
        tiny_s, _, finished = _sweep(_gravity_param(tiny_n), tiny, 1, out / "tiny")
        plain = []
        for k in range(5):
            start = time.perf_counter()
            run(load_scene(str(CHAIN), [*tiny, "gravity[2]=-9.5"]), out / f"tiny{k}.h5")
            plain.append(time.perf_counter() - start)
    return SweepBench(
        cases=n,
        t_end=t_end,
        workers=workers,
        serial_s=sum(serial),
        serial_run_s=serial,
        sweep_s=sweep_s,
        sweep_completed=completed,
        shell_per_case_s=statistics.mean(shell),
        tiny_cases=tiny_n,
        tiny_sweep_s=tiny_s,
        tiny_per_case_s=(finished[-1] - finished[0]) / (len(finished) - 1),
        tiny_first_s=finished[0],
        plain_tiny_s=statistics.median(plain),
        serial_other_cores=serial_load.cores,
        sweep_other_cores=sweep_load.cores,
    )


def section_lines(b: SweepBench, quick: bool) -> list[str]:
    """The markdown section from a measurement."""
    verdict = "meets" if b.speedup >= SPEEDUP_TARGET else "misses"
    over = "meets" if b.overhead_s < OVERHEAD_TARGET_S else "misses"
    return [
        "## Parameter sweeps on Dask (`mbsim sweep`)",
        "",
        f"{b.cases} cases of `scenes/four_box_chain.yaml` ({b.t_end:g} s, lagrange + rk4, step 0.002), "
        f"`--param {_gravity_param(b.cases)}` (every case costs the same), on the embedded LocalCluster of "
        f"{b.workers} worker processes" + (" (--quick: shortened)" if quick else "") + ".",
        "",
        "| | wall s | per case s | speed-up |",
        "| --- | ---: | ---: | ---: |",
        f"| one after another, one warm process (load + run) | {b.serial_s:.2f} | {b.serial_s / b.cases:.3f} | 1 |",
        f"| a shell loop of `mbsim run` processes ({b.cases} x the mean of the timed ones) | "
        f"{b.shell_per_case_s * b.cases:.2f} | {b.shell_per_case_s:.3f} | {b.serial_s / b.shell_s:.2f} |",
        f"| `mbsim sweep`, {b.workers} workers (plan + cluster start + runs + files + tables + close) | "
        f"{b.sweep_s:.2f} | {b.sweep_s / b.cases:.3f} | **{b.speedup:.2f}** |",
        "",
        f"Speed-up over one after another: {b.speedup:.2f}x; target {SPEEDUP_TARGET:g}x: {verdict} it "
        f"({b.sweep_completed}/{b.cases} cases completed). Over the shell loop: {b.shell_speedup:.2f}x. "
        f"Other processes on the machine used {b.serial_other_cores:.2f} cores during the serial runs and "
        f"{b.sweep_other_cores:.2f} during the sweep (2 cores in all; a speed-up measured while others "
        "use a core says little).",
        "",
        f"Per-case overhead of the Dask path: {b.tiny_cases} cases of the chain cut to 10 steps, one after another "
        f"on one worker, finished every {b.tiny_per_case_s:.3f} s (the slope of their finishing times, which leaves "
        f"the cluster's start and the first case's warm-up out); a plain in-process run of such a case (load + "
        f"compile + run + write) takes {b.plain_tiny_s:.3f} s: overhead **{b.overhead_s:.3f} s per case**; target "
        f"under {OVERHEAD_TARGET_S:g} s: {over} it. Fixed cost of a sweep (checking the cases, starting the local "
        f"cluster, the workers' first imports, closing it): {b.fixed_s:.2f} s ({b.tiny_sweep_s:.2f} s for the "
        f"{b.tiny_cases} tiny cases in all).",
    ]


def section(quick: bool = False) -> list[str]:
    """Run the benchmark and return its markdown section (for benchmarks/run.py and BENCHMARKS.md)."""
    return section_lines(bench_sweep(quick), quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 shorter cases, fewer overhead cases")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print("\n".join(section(args.quick)))
    print(f"\n(took {time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":  # the local cluster's worker processes import this module: guard the run
    sys.exit(main())
