"""``mbsim sweep``: run a scene over a grid of parameter values on Dask (mbsim.sweep)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from mbsim import errors
from mbsim.assertions import parse_assertions
from mbsim.cli.options import assert_option, debug_option, handle_errors, quiet_option, set_option, strict_option
from mbsim.sweep import FORMATS, SweepRow, parse_params, plan_sweep, render, run_sweep
from mbsim.sweep.execute import check_options, probe_scheduler
from mbsim.sweep.table import render_chunks


class CaseProgress:
    """Cases done out of all on stderr: a bar on a terminal, else one line per finished case."""

    def __init__(self, bar: bool, quiet: bool) -> None:
        self.bar = bar
        self.quiet = quiet
        self.start = time.perf_counter()
        self.failed = 0
        self.shown = False

    def __call__(self, row: SweepRow | None, done: int, total: int) -> None:
        if self.quiet:
            return
        if row is not None and row.status != "completed":
            self.failed += 1
        if self.bar:
            width = 30
            frac = done / total if total else 1.0
            bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
            failed = f", {self.failed} failed" if self.failed else ""
            elapsed = time.perf_counter() - self.start
            sys.stderr.write(f"\r[{bar}] {done}/{total} cases{failed}  {elapsed:6.1f} s ")
            sys.stderr.flush()
            self.shown = True
        elif row is not None:
            params = " ".join(
                f"{k}={format(v, '.6g') if isinstance(v, float) else v}" for k, v in row.parameters.items()
            )
            wall = f", {row.wall_time_s:.3g} s" if row.wall_time_s is not None else ""
            tries = f", attempt {row.attempts}" if row.attempts > 1 else ""
            click.echo(f"case {row.case} ({done}/{total}) {params}: {row.status}{wall}{tries}", err=True)

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.shown = False


@click.command()
@click.argument("scene", type=click.Path(dir_okay=False))
@click.option(
    "--param",
    "params",
    multiple=True,
    required=True,
    metavar="KEY=V1,V2,...",
    help="A scene path and its values (repeatable): a list, or linspace(a,b,n), logspace(a,b,n) "
    "(10**a to 10**b) or geomspace(a,b,n), e.g. contacts[0].stiffness=logspace(6,8,3).",
)
@click.option("--zip", "zipped", is_flag=True, help="Take the values element by element instead of every combination.")
@click.option(
    "-o",
    "--outdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory of the result files and sweep.json/csv/md (default: outputs/sweep-<scene stem>/); "
    "only files mbsim wrote there are replaced.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Worker processes of the embedded local Dask cluster (default: the number of cores; at most 4 per core).",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="Run on the Dask cluster of this scheduler (tcp://host:port) instead of a local one.",
)
@click.option(
    "--retries",
    type=int,
    default=1,
    show_default=True,
    help="Times (0 to 100) a case that failed or whose worker died is run again before it counts as failed.",
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Format of the table."
)
@set_option
@assert_option
@strict_option
@quiet_option
@debug_option
@handle_errors
def sweep(
    scene: str,
    params: tuple[str, ...],
    zipped: bool,
    outdir: str | None,
    workers: int | None,
    scheduler: str | None,
    retries: int,
    fmt: str,
    overrides: tuple[str, ...],
    assertions: tuple[str, ...],
    strict: bool,
    quiet: bool,
    debug: bool,
) -> None:
    """Run SCENE once per combination of --param values, on Dask, one result file per case.

    Each case is `mbsim run` with the values as --set overrides. Rerunning the same sweep skips
    the cases whose result file is completed for the same scene and parameters. Exit code: 0
    every case completed and every --assert held; 2 the scene, an option or OUTDIR is wrong;
    3 a case failed; 4 an assertion failed (and no case failed); 128 + N a signal N ended it
    (130 SIGINT, 143 SIGTERM, 129 SIGHUP: the cases in flight are recorded interrupted, the
    finished ones and the tables are kept).
    """
    # the quick checks first: a bad option is refused before the scene is even read
    address = check_options(workers, scheduler, retries)
    checks = parse_assertions(assertions)
    parsed = parse_params(params)
    if address:
        probe_scheduler(address)
    plan = plan_sweep(scene, parsed, zipped, overrides, strict)
    out = Path(outdir) if outdir else Path("outputs") / f"sweep-{Path(scene).stem}"

    def note(text: str) -> None:
        if not quiet:
            progress.close()
            click.echo(f"mbsim: {text}", err=True)

    progress = CaseProgress(sys.stderr.isatty(), quiet)
    try:
        result = run_sweep(
            plan,
            out,
            workers=workers,
            scheduler=scheduler,
            retries=retries,
            assertions=checks,
            note=note,
            progress=progress,
            debug=debug,
        )
    finally:
        progress.close()
    if fmt == "json":  # piece by piece: 100,000 rows are tens of MB of text
        for piece in render_chunks(result, fmt):
            click.echo(piece, nl=False)
        click.echo()
    else:
        click.echo(render(result, fmt).rstrip("\n"))
    for row in result.rows:
        for a in row.assertions:
            if not a["passed"]:
                values = ", ".join(f"{n} = {'nan' if v is None else format(v, '.6g')}" for n, v in a["values"].items())
                click.echo(f"mbsim: assertion failed: case {row.case}: {a['expression']} ({values})", err=True)
    note(f"results in {result.outdir}")
    if result.interrupted and result.signum:
        click.echo(f"mbsim: {errors.interrupted_message(result.signum)}", err=True)
    if result.exit_code:
        sys.exit(result.exit_code)
