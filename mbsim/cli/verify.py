"""``mbsim verify``: the benchmark problems with their references (CONTRACT §6; mbsim.verify)."""

from __future__ import annotations

import signal
import sys

import click

from mbsim import errors, interrupts
from mbsim.cli.options import debug_option, handle_errors, json_option, quiet_option


@click.command(
    short_help="Run the benchmark problems (all, or each PROBLEM) against their published or closed-form references."
)  # the docstring's first sentence is too long for `mbsim --help` (mbsim.cli.main.COMMANDS)
@click.argument("problems", nargs=-1, metavar="[PROBLEM]...")
@click.option(
    "--method",
    "methods",
    multiple=True,
    metavar="METHOD",
    help="Run only the problems' solver specs of this method (repeatable).",
)
@click.option("--quick", is_flag=True, help="The shortened variants (documented per problem), for CI.")
@click.option("--list", "list_only", is_flag=True, help="List the problems (id, source, title) and run nothing.")
@click.option(
    "-o",
    "--outdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory of the result files (default: outputs/verify/ or outputs/verify-quick/).",
)
@json_option
@quiet_option
@debug_option
@handle_errors
def verify(
    problems: tuple[str, ...],
    methods: tuple[str, ...],
    quick: bool,
    list_only: bool,
    outdir: str | None,
    as_json: bool,
    quiet: bool,
    debug: bool,
) -> None:
    """Run the benchmark problems (all shipped ones, or PROBLEM: an id such as A02, or a folder with
    problem.yaml, or a folder of such folders) under their solver specs and compare each with its
    published or closed-form reference. One row per (problem, method); exit 0 when every row passes
    (or fails where the problem expects it), 4 when any fails."""
    from mbsim.verify.problem import find_problems
    from mbsim.verify.runner import render
    from mbsim.verify.runner import verify as run_verification

    found = find_problems(problems)
    if list_only:
        for p in found:
            click.echo(f"{p.id:16s} {p.source:40s} {p.title}")
        return

    def note(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    result = run_verification(found, methods, quick, outdir, note)
    click.echo(render(result, "json" if as_json else "table").rstrip("\n"))
    if result.interrupted:
        sys.exit(errors.signal_exit_code(interrupts.received() or signal.SIGINT))
    if result.error is not None:
        raise result.error  # exit 2, after the rows that did run
    if result.failed:
        sys.exit(4)
