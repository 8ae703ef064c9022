"""``mbsim equilibrium``: the static equilibrium of a scene, as a one-row result file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mbsim import errors, interrupts
from mbsim.cli.options import debug_option, emit_json, handle_errors, json_option, set_option, strict_option
from mbsim.errors import EXIT_CODES
from mbsim.output.safety import claim_result
from mbsim.scene.spec import load_scene


@click.command()
@click.argument("scene", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Result file (default: outputs/<scene stem>-equilibrium.h5, or output.file with -equilibrium).",
)
@set_option
@json_option
@strict_option
@debug_option
@handle_errors
def equilibrium(
    scene: str, output: str | None, overrides: tuple[str, ...], as_json: bool, strict: bool, debug: bool
) -> None:
    """Find the static equilibrium of SCENE and write it as a one-row result file.

    Newton on the constraint manifold from the scene's (assembled) start, under gravity, springs,
    the actuators' forces at t = 0 and loads; prints the residual, the iterations, whether it is
    stable and the state. Exit 3 with the reason when there is none (the file says failed).
    """
    spec = load_scene(scene, overrides)
    # here, not at module level: the solvers and the model compiler cost ~0.2 s of CPU
    from mbsim.simulate import derived_output, prepare_claimed, write_start

    claim = claim_result(Path(output) if output else derived_output(spec, "equilibrium"))
    model, solver = prepare_claimed(spec, claim, strict=strict, initial="equilibrium")
    found = model.equilibrium
    attrs = {
        "residual": found.residual,
        "iterations": found.iterations,
        "stable": bool(found.stable),
        "smallest_eigenvalue": found.smallest_eigenvalue,
        "stiffness_error": found.stiffness_error,
    }
    status, message = write_start(spec, claim, model, solver, attrs)
    names = model.coordinate_names()[0]
    summary = {
        "scene": spec.name,
        "file": str(claim.path),
        "status": status,
        "message": message,
        **attrs,
        "degrees_of_freedom": int(found.basis.shape[1]),
        "q": dict(zip(names, (float(x) for x in found.q), strict=True)),
    }
    if as_json:
        emit_json(summary)
    else:
        click.echo(f"scene      {spec.name}")
        click.echo(f"status     {status}" + (f": {message}" if message else ""))
        click.echo(f"residual   {found.residual:.3e} (max |Q - J^T lambda|, N and N m)")
        click.echo(f"iterations {found.iterations}")
        click.echo(
            f"stable     {'yes' if found.stable else 'no'} (smallest eigenvalue of the reduced stiffness "
            f"{found.smallest_eigenvalue:.6g} s^-2, difference error {found.stiffness_error:.1e})"
        )
        click.echo(f"result     {claim.path}")
        width = max((len(n) for n in names), default=0)
        for name, value in zip(names, found.q, strict=True):
            click.echo(f"  {name:<{width}}  {value: .12g}")
    if status != "completed":
        if not as_json:
            click.echo(f"mbsim: {message}", err=True)
        signum = interrupts.received()
        sys.exit(errors.signal_exit_code(signum) if signum is not None else EXIT_CODES["simulation"])
