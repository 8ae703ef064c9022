"""``mbsim export``: a result file's motion as a glTF binary or a page that plays it (CONTRACT §7)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from mbsim.cli.options import debug_option, handle_errors, quiet_option

if TYPE_CHECKING:
    from mbsim.output.export import Exported


def report(exported: Exported, quiet: bool) -> None:
    """The written file on stdout; what was left out on stderr."""
    click.echo(str(exported.file))
    if not quiet:
        for note in exported.notes:
            click.echo(f"mbsim: note: {note}", err=True)


@click.command()
@click.argument("result", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="FILE.glb (glTF 2.0 binary) or FILE.html (a self-contained page that plays the motion); "
    "default: RESULT with the suffix .glb.",
)
@click.option(
    "--fps", type=float, default=None, help="Key the animation at T0, T0 + 1/F, ... instead of the recorded times."
)
@click.option(
    "--from", "t_from", type=float, default=None, metavar="T0", help="Start at T0 seconds (default: the first row)."
)
@click.option("--to", "t_to", type=float, default=None, metavar="T1", help="End at T1 seconds (default: the last row).")
@quiet_option
@debug_option
@handle_errors
def export(
    result: str,
    output: str | None,
    fps: float | None,
    t_from: float | None,
    t_to: float | None,
    quiet: bool,
    debug: bool,
) -> None:
    """Write the motion of RESULT as a .glb or a self-contained .html page."""
    from mbsim.output.export import export_results

    out = Path(output) if output else Path(result).with_suffix(".glb")
    report(export_results([(result, None)], out, fps, t_from, t_to), quiet)
