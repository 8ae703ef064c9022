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
@click.option(
    "--mode",
    type=int,
    default=None,
    metavar="K",
    help="Animate mode K (1-based, as 'mbsim modes' lists them) of a modes file: one period looped over 2 s; "
    "default -o: RESULT.modeK.glb.",
)
@click.option(
    "--amplitude",
    type=float,
    default=None,
    metavar="A",
    help="With --mode: the amplitude in units of the mass-normalised shape (default: the largest point "
    "moves 10 % of the mechanism's size, no body turns more than 0.3 rad).",
)
@quiet_option
@debug_option
@handle_errors
def export(
    result: str,
    output: str | None,
    fps: float | None,
    t_from: float | None,
    t_to: float | None,
    mode: int | None,
    amplitude: float | None,
    quiet: bool,
    debug: bool,
) -> None:
    """Write the motion of RESULT as a .glb or a self-contained .html page."""
    from mbsim.output.export import export_results

    if mode is not None or amplitude is not None:
        report(_export_mode(result, output, fps, t_from, t_to, mode, amplitude), quiet)
        return
    out = Path(output) if output else Path(result).with_suffix(".glb")
    report(export_results([(result, None)], out, fps, t_from, t_to), quiet)


def _export_mode(
    result: str,
    output: str | None,
    fps: float | None,
    t_from: float | None,
    t_to: float | None,
    mode: int | None,
    amplitude: float | None,
) -> Exported:
    """``--mode K``: mode K of a modes file as one looped period (mbsim.output.mode_motion)."""
    from mbsim.errors import UsageError
    from mbsim.output.export import export_motions
    from mbsim.output.mode_motion import mode_motion
    from mbsim.output.safety import check_export_target
    from mbsim.output.summary import check_result_path

    if mode is None:
        raise UsageError("--amplitude sets the amplitude of a mode; give the mode with --mode K", file="--amplitude")
    if t_from is not None or t_to is not None:
        raise UsageError(
            "--mode animates one period of a mode; --from/--to choose rows of a recorded run", file="--mode"
        )
    out = Path(output) if output else Path(result).with_suffix(f".mode{mode}.glb")
    check_export_target(out)  # before reading anything: a wrong name is refused at once
    check_result_path(result)
    return export_motions([mode_motion(result, mode, fps, amplitude)], out)
