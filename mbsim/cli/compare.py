"""``mbsim compare``: run a scene with several solvers and print the table (mbsim.compare)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from mbsim import errors, interrupts
from mbsim.cli.options import debug_option, export_option, handle_errors, quiet_option, set_option
from mbsim.compare import FORMATS, parse_reference, parse_solver_list, render
from mbsim.compare import compare as run_comparison
from mbsim.errors import SimulationError, UsageError
from mbsim.output.export import export_motions
from mbsim.output.motion import read_motion
from mbsim.output.safety import check_export_target
from mbsim.solvers import SOLVERS


@click.command()
@click.argument("scene", type=click.Path(dir_okay=False))
@click.option(
    "--solvers",
    required=True,
    metavar="SPEC[,SPEC...]",
    help="Comma-separated solver specs METHOD or METHOD:key=value,key=value (quote them in the shell), "
    f"e.g. lagrange,'lagrange:integrator=euler'. Methods: {', '.join(sorted(SOLVERS))}.",
)
@click.option(
    "--reference",
    default=None,
    metavar="METHOD[:opts]",
    help="A solver spec run as the reference; adds the RMS error of /q against it, "
    "e.g. 'lagrange:integrator=scipy:DOP853,rtol=1e-12'.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1, max=1000),  # a count that cannot finish is refused (exit 2), not run
    default=1,
    show_default=True,
    help="Runs per solver (1 to 1000); the table shows the median wall time.",
)
@click.option(
    "-o",
    "--outdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory of the result files, compare.json, compare.md and plots (default: outputs/compare-<scene stem>/); "
    "only files mbsim wrote there are replaced.",
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Format of the table."
)
@set_option
@quiet_option
@export_option
@debug_option
@handle_errors
def compare(
    scene: str,
    solvers: str,
    reference: str | None,
    repeat: int,
    outdir: str | None,
    fmt: str,
    overrides: tuple[str, ...],
    quiet: bool,
    export_to: str | None,
    debug: bool,
) -> None:
    """Run SCENE once per solver spec and compare wall time, violations, energy drift and error.

    With --export, the solvers' motions stand side by side in one .glb or page, one copy of the
    mechanism per solver, in the order of --solvers.
    """
    if export_to is not None:
        check_export_target(export_to)
    choices = parse_solver_list(solvers, "--solvers")
    ref = parse_reference(reference) if reference is not None else None

    def note(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    result = run_comparison(scene, choices, ref, overrides, repeat, outdir, note)
    click.echo(render(result, fmt).rstrip("\n"))
    note(f"mbsim: results in {result.outdir}")
    if export_to is not None and not result.interrupted:
        runs = [(row.file, row.solver) for row in result.rows if row.file and Path(row.file).is_file()]
        motions = []
        for file, label in runs:
            try:
                motions.append(read_motion(file, label=label))
            except UsageError as exc:  # a run that stopped before its first row: nothing to show
                note(f"mbsim: note: {label} is not in the export: {exc}")
        if motions:
            exported = export_motions(motions, export_to)
            note(f"mbsim: export in {exported.file} ({exported.bytes / 1e6:.2f} MB)")
    if result.interrupted:
        sys.exit(errors.signal_exit_code(interrupts.received() or signal.SIGINT))
    # a solver whose result file could not keep its run (a full disk, the file taken away) is a
    # lost output, not a finding of the comparison: the table is kept, the command fails (exit 3)
    lost = [row for row in (*result.rows, result.reference) if row is not None and row.file_failure]
    for row in lost:
        click.echo(f"mbsim: {SimulationError.label}: {row.solver}: {row.file_failure}", err=True)
    if lost:
        sys.exit(SimulationError.exit_code)
