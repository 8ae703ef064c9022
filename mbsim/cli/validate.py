"""``mbsim validate``: load and check a scene; nothing is simulated, nothing is written."""

from __future__ import annotations

import click

from mbsim.cli.options import debug_option, emit_json, handle_errors, json_option, set_option, strict_option
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare


@click.command()
@click.argument("scene", type=click.Path(dir_okay=False))
@set_option
@json_option
@strict_option
@debug_option
@handle_errors
def validate(scene: str, overrides: tuple[str, ...], as_json: bool, strict: bool, debug: bool) -> None:
    """Check SCENE (keys, types, values, bodies, joints, solver, assembly) without simulating."""
    spec = load_scene(scene, overrides)
    model, _ = prepare(spec, strict=strict)
    dof = model.nv - model.nc
    report = {
        "status": "ok",
        "scene": spec.name,
        "file": scene,
        "dimension": model.dimension,
        "bodies": model.nbody,
        "joints": len(model.joints),
        "constraint_equations": model.nc,
        "degrees_of_freedom": dof,
        "method": spec.solver.method,
        "integrator": spec.solver.integrator,
        "t_end": model.t_end,
        "step": model.step,
        "assembly": model.assembly_report,
    }
    if as_json:
        emit_json(report)
        return
    bodies = f"{model.nbody} {'body' if model.nbody == 1 else 'bodies'}"
    joints = f"{len(model.joints)} {'joint' if len(model.joints) == 1 else 'joints'}"
    click.echo(
        f"{scene}: ok: '{spec.name}', {model.dimension}D, {bodies}, {joints} ({model.nc} equations), "
        f"{dof} degrees of freedom if independent; {spec.solver.method}/{spec.solver.integrator}, "
        f"t_end {model.t_end:g} s, step {model.step:g} s"
    )
    for r in model.assembly_report:
        click.echo(f"  assembly moves {r['body']} by {r['distance']:.3g} m and {r['rotation']:.3g} rad")
