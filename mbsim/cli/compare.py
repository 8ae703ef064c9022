"""``mbsim compare``: run a scene with several solvers and print the table (mbsim.compare)."""

from __future__ import annotations

import signal
import sys

import click

from mbsim import interrupts
from mbsim.cli.options import debug_option, handle_errors, quiet_option, set_option
from mbsim.compare import FORMATS, parse_reference, parse_solver_list, render
from mbsim.compare import compare as run_comparison
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
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs per solver; the table shows the median wall time.",
)
@click.option(
    "-o",
    "--outdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory of the result files, compare.json, compare.md and plots (default: outputs/compare-<scene stem>/).",
)
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Format of the table."
)
@set_option
@quiet_option
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
    debug: bool,
) -> None:
    """Run SCENE once per solver spec and compare wall time, violations, energy drift and error."""
    choices = parse_solver_list(solvers, "--solvers")
    ref = parse_reference(reference) if reference is not None else None

    def note(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    result = run_comparison(scene, choices, ref, overrides, repeat, outdir, note)
    click.echo(render(result, fmt).rstrip("\n"))
    note(f"mbsim: results in {result.outdir}")
    if result.interrupted:
        sys.exit(interrupts.exit_code(interrupts.received() or signal.SIGINT))
