"""``mbsim plot``: PNG plots of a result file."""

from __future__ import annotations

from pathlib import Path

import click

from mbsim.cli.options import debug_option, handle_errors
from mbsim.errors import UsageError
from mbsim.output.plot import plot_result
from mbsim.output.summary import check_result_path


@click.command()
@click.argument("result", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Picture file: .png, .pdf or .svg (default: next to RESULT, same stem, .png).",
)
@click.option(
    "--what",
    default="energy,violation",
    show_default=True,
    help="Comma-separated: energy, violation, quaternion, iterations, step_size, contacts, "
    "outputs (a panel per output), outputs/NAME, actuators (forces; powers), actuators/NAME, "
    "joints (joint positions; velocities), joints/NAME, "
    "BODY (its position), BODY.position|velocity|angle|angular_velocity|orientation[.x|y|z|w], "
    "JOINT.reaction, JOINT.drive_force, JOINT.position|velocity|limit_force|friction_force, q:NAME, v:NAME.",
)
@debug_option
@handle_errors
def plot(result: str, output: str | None, what: str, debug: bool) -> None:
    """Plot quantities of RESULT against time into a PNG file."""
    check_result_path(result)
    out = Path(output) if output else Path(result).with_suffix(".png")
    if not what.replace(",", "").strip():
        raise UsageError(f"expected a comma-separated list of quantities, got '{what}'", file="--what")
    plot_result(result, out, what)  # split there: a name may hold a comma
    click.echo(str(out))
