"""``mbsim validate``: load and check a scene; nothing is simulated, nothing is written."""

from __future__ import annotations

import click
import numpy as np

from mbsim.cli.options import debug_option, emit_json, handle_errors, json_option, set_option, strict_option
from mbsim.errors import plural
from mbsim.scene.spec import load_scene


def mass_properties(spec, model) -> list[dict]:
    """Each body's mass and inertia as the model uses them, and whether they were derived from
    its density and shapes (3D: the inertia's diagonal here; the full matrix is in the result file)."""
    out = []
    for b, body in enumerate(spec.bodies):
        inertia = model.body_inertia[b]
        out.append(
            {
                "body": body.name,
                "mass": float(model.body_mass[b]),
                "inertia": float(inertia[0, 0]) if model.dimension == 2 else [float(v) for v in np.diag(inertia)],
                "inertia_matrix": inertia.tolist(),
                "from_density": body.density is not None,
                "density": body.density,
            }
        )
    return out


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
    from mbsim.simulate import prepare  # here: a scene refused while loading needs no solver (~0.2 s of CPU)

    # a check of the scene: a start at the static equilibrium is found by run (and mbsim equilibrium), not here
    model, solver = prepare(spec, strict=strict, initial="given")
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
        "integrator": solver.integrator_label,
        "t_end": model.t_end,
        "step": model.step,
        "assembly": model.assembly_report,
        "notes": list(solver.notes),
        "mass_properties": mass_properties(spec, model),
        "actuators": [{"name": a.name, "joint": a.joint} for a in model.actuators],
        "limited_joints": [j.name for j in model.joints if j.limits is not None],
        "outputs": [name for name, _ in model.outputs],
        "imported": [
            {
                "file": m.file,
                "format": m.format,
                "bodies": m.bodies,
                "joints": m.joints,
                "actuators": m.actuators,
                "skipped": m.skipped,
            }
            for m in spec.imported
        ],
    }
    if as_json:
        emit_json(report)
        return
    click.echo(
        f"{scene}: ok: '{spec.name}', {model.dimension}D, {plural(model.nbody, 'body', 'bodies')}, "
        f"{plural(len(model.joints), 'joint')} ({plural(model.nc, 'equation')}), "
        f"{plural(dof, 'degree', 'degrees')} of freedom if independent; "
        f"{spec.solver.method}/{solver.integrator_label}, t_end {model.t_end:g} s, step {model.step:g} s"
    )
    for item in spec.imported:
        click.echo(
            f"  {item.file}: {plural(item.bodies, 'body', 'bodies')}, {plural(item.joints, 'joint')}"
            + (f", {plural(item.actuators, 'actuator')}" if item.actuators else "")
            + " imported"
        )
        for what in item.skipped:
            click.echo(f"    skipped: {what}")
    for key, what in (("actuators", "actuator"), ("limited_joints", "joint with limits"), ("outputs", "output")):
        if report[key]:
            names = [a["name"] if isinstance(a, dict) else a for a in report[key]]
            shown = ", ".join(names[:10]) + (f", ... ({len(names) - 10} more)" if len(names) > 10 else "")
            click.echo(
                f"  {plural(len(names), what, what.replace('joint', 'joints') if ' ' in what else None)}: {shown}"
            )
    for item in report["mass_properties"]:
        if item["from_density"]:
            inertia = item["inertia"]
            shown = f"{inertia:.6g}" if model.dimension == 2 else "[" + ", ".join(f"{v:.6g}" for v in inertia) + "]"
            click.echo(
                f"  {item['body']}: mass {item['mass']:.6g} kg and inertia {shown} kg m^2 (about the centre of "
                f"mass, body axes{'' if model.dimension == 2 else ': xx, yy, zz'}) from density {item['density']:g} "
                f"and its shapes"
            )
    for note in solver.notes:
        click.echo(f"  note: {note}")
    for r in model.assembly_report:
        click.echo(f"  assembly moves {r['body']} by {r['distance']:.3g} m and {r['rotation']:.3g} rad")
