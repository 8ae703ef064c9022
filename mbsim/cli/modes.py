"""``mbsim modes`` and ``mbsim linearize``: the linearised mechanism about one state (CONTRACT §9).

The state: ``--at initial`` (default) the scene's assembled initial state at t = 0; ``--at
equilibrium`` the static equilibrium of mbsim.analysis.equilibrium; ``--from OUT.h5 [--time T]``
the recorded row of a result file of the same scene at T (default the last row).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mbsim import interrupts
from mbsim.cli.options import debug_option, emit_json, handle_errors, json_option, set_option
from mbsim.errors import UsageError
from mbsim.scene.spec import load_scene

if TYPE_CHECKING:
    import numpy as np

    from mbsim.model.model import Model
    from mbsim.scene.spec import SceneSpec


def _options(func):
    for option in reversed(
        [
            click.argument("scene", type=click.Path(dir_okay=False)),
            click.option(
                "--at",
                type=click.Choice(["initial", "equilibrium"]),
                default=None,
                help="The state: the scene's initial state (default) or its static equilibrium.",
            ),
            click.option(
                "--from",
                "from_file",
                type=click.Path(dir_okay=False),
                default=None,
                help="A result file of the same scene: linearise about its recorded row at --time.",
            ),
            click.option(
                "--time", "at_time", type=float, default=None, help="With --from: the row's time, s (default the last)."
            ),
            click.option(
                "-o",
                "--output",
                type=click.Path(dir_okay=False),
                default=None,
                help="Result file (default: outputs/<scene stem>-<command>.h5, or output.file with -<command>).",
            ),
            set_option,
            json_option,
            debug_option,
        ]
    ):
        func = option(func)
    return func


def _row_state(model: Model, path: str, at_time: float | None) -> tuple[float, np.ndarray, np.ndarray]:
    """(t, q, v) of a result file's recorded row at ``at_time`` (the last by default), in the model's
    body coordinates (rebuilt from /bodies, so any method's file serves)."""
    import h5py
    import numpy as np

    from mbsim.model.spatial import quat_to_matrix
    from mbsim.names import hdf5_name
    from mbsim.output.safety import is_result_file

    if not Path(path).is_file() or not is_result_file(path):
        raise UsageError("expected an mbsim result file of this scene", file=f"--from {path}")
    with h5py.File(path, "r") as f:
        scene_name = f.attrs.get("scene_name", "")
        bodies = f.get("bodies")
        names = set(bodies.keys()) if bodies is not None else set()
        wanted = {hdf5_name(name) for name in model.body_names}
        if scene_name != model.name or not wanted <= names or int(f.attrs.get("dimension", 0)) != model.dimension:
            raise UsageError(
                f"a result file of another scene: expected '{model.name}' with its bodies, got '{scene_name}'",
                file=f"--from {path}",
            )
        times = np.asarray(f["time"][:], dtype=float)
        if len(times) == 0:
            raise UsageError("the file has no recorded rows", file=f"--from {path}")
        if at_time is None:
            row = len(times) - 1
        else:
            if not times[0] - 1e-12 <= at_time <= times[-1] + 1e-9 * max(1.0, abs(times[-1])):
                raise UsageError(
                    f"expected a time within the recorded rows, {times[0]:g} to {times[-1]:g} s, got {at_time:g} s",
                    file=f"--from {path}",
                    key_path="--time",
                )
            row = int(np.argmin(np.abs(times - at_time)))
        nb, d = model.nbody, model.dimension
        w, wq = model.body_width, model.body_qwidth
        q, v = np.zeros((nb, wq)), np.zeros((nb, w))
        for b, name in enumerate(model.body_names):
            group = bodies[hdf5_name(name)]
            q[b, :d] = group["position"][row]
            v[b, :d] = group["velocity"][row]
            if d == 3:
                quat = np.asarray(group["orientation"][row], dtype=float)
                q[b, 3:] = quat / np.linalg.norm(quat)
                # the file's angular velocities are in world axes, the model's in body axes
                v[b, 3:] = quat_to_matrix(q[b, 3:]).T @ np.asarray(group["angular_velocity"][row], dtype=float)
            else:
                q[b, 2] = group["angle"][row]
                v[b, 2] = group["angular_velocity"][row]
    return float(times[row]), q.reshape(-1), v.reshape(-1)


def _point(spec: SceneSpec, model: Model, at: str | None, from_file: str | None, at_time: float | None):
    """(how the state was chosen, t, q, v) of the linearisation."""
    import numpy as np

    if from_file is not None:
        if at is not None:
            raise UsageError("--at and --from exclude each other: give one", file="command line")
        t, q, v = _row_state(model, from_file, at_time)
        return f"row t = {t:g} s of {from_file}", t, q, v
    if at_time is not None:
        raise UsageError("--time needs --from OUT.h5", file="command line")
    if at == "equilibrium":
        from mbsim.analysis.equilibrium import require_equilibrium  # here: only --at equilibrium needs it

        found = require_equilibrium(model, "--at equilibrium")
        return "equilibrium", 0.0, np.asarray(found.q, dtype=float), np.zeros(model.nv)
    return "initial", 0.0, model.q0.copy(), model.v0.copy()


def _write(model: Model, spec: SceneSpec, claim, t: float, q, v, datasets: dict, attrs: dict, root: dict):
    """A one-row result file (the state) plus the analysis' datasets into the claimed file; status
    failed with the signal's message when one came (the command then exits 128 + N)."""
    import numpy as np

    from mbsim.errors import interrupted_message
    from mbsim.output.hdf5 import ResultWriter

    writer = ResultWriter(claim, model, {"scene_name": spec.name, "method": spec.solver.method, "integrator": "none"})
    frames = model.frames(q, v)
    nb = model.nbody
    row: dict[str, Any] = {
        "time": t,
        "q": q,
        "v": v,
        "bodies/{body}/position": frames.pos[:nb],
        "bodies/{body}/velocity": frames.vel[:nb],
        "bodies/{body}/angular_velocity": frames.omega[:nb],
    }
    if model.dimension == 3:
        row["bodies/{body}/orientation"] = q.reshape(nb, 7)[:, 3:]
    else:
        row["bodies/{body}/angle"] = frames.angle[:nb]
    writer.append(row)
    writer.write_group("/", {key: np.asarray(value, dtype=float) for key, value in datasets.items()}, {}, attrs, True)
    signum = interrupts.received()
    if signum is not None:
        return writer.close("failed", interrupted_message(signum), steps=0, **root)
    return writer.close("completed", "", steps=0, **root)


@contextlib.contextmanager
def _claimed(spec: SceneSpec, path: Path):
    """(the claim of the result file, the prepared model): the file is claimed before anything is
    compiled (a busy or foreign target is refused at once, CONTRACT §4); an error before it is
    written releases the claim untouched, a signal leaves a file with status failed."""
    from mbsim.errors import Interrupted
    from mbsim.output.hdf5 import write_stub
    from mbsim.output.safety import claim_result
    from mbsim.simulate import prepare_claimed  # here: the model compiler costs ~0.2 s of CPU

    interrupts.check()
    claim = claim_result(path)
    model, _ = prepare_claimed(spec, claim)  # releases the claim on a scene error or a signal
    try:
        yield claim, model
    except Interrupted as exc:
        attrs = {"scene_name": spec.name, "method": spec.solver.method, "integrator": "none"}
        write_stub(claim, spec.raw.to_yaml(), attrs | {"dimension": spec.dimension}, "failed", str(exc))
        raise
    except BaseException:
        claim.abandon()
        raise


def _linearized(scene: str, overrides, output: str | None, tag: str, at, from_file, at_time, analyse):
    """The steps ``modes`` and ``linearize`` share: the scene, its result file (``-TAG`` beside the
    run's by default, claimed before compiling), the Linearization about the chosen state and
    ``analyse(lin)`` of it, both while the claim is held (an error gives it up, a signal leaves a
    failed file). Returns (spec, path, claim, model, how the state was chosen, t, lin, analysed)."""
    from mbsim.analysis.modes import linearize as linearize_model
    from mbsim.simulate import derived_output

    spec = load_scene(scene, overrides)
    path = Path(output) if output else derived_output(spec, tag)
    with _claimed(spec, path) as (claim, model):
        how, t, q, v = _point(spec, model, at, from_file, at_time)
        lin = linearize_model(model, q, v, t)
        interrupts.check()
        analysed = analyse(lin)
    return spec, path, claim, model, how, t, lin, analysed


def _point_summary(lin) -> dict:
    """What both commands record about the linearisation point: root attributes and JSON fields."""
    return {
        "dof": lin.dof,
        "force_residual": lin.force_residual,
        "equilibrium": lin.equilibrium,
        "frame_rate": [float(x) for x in lin.frame_rate],
        "steady": lin.steady,
    }


def _frozen_note(lin) -> str | None:
    """What the user must know about a linearisation away from an equilibrium, or None."""
    import numpy as np

    if lin.equilibrium:
        return None
    if float(np.max(np.abs(lin.v), initial=0.0)) > 0.0:
        if not lin.steady:
            return (
                f"the state moves, and steadily in no rotating frame (max |a - Omega x v| = "
                f"{lin.steady_residual:.2g} of the accelerations): the frozen linearisation of a time-varying "
                "system, along its motion in world axes"
            )
        rate = float(np.linalg.norm(lin.frame_rate))
        if rate == 0.0:
            return "the state moves steadily in world axes: linearised along its motion (frequencies in world axes)"
        axis = ", ".join(f"{x:.6g}" for x in lin.frame_rate / rate)
        return (
            f"the state moves steadily in a frame turning at {rate:.6g} rad/s about ({axis}) (a relative "
            "equilibrium, such as a top in steady precession): linearised in that frame, the frequencies seen from it"
        )
    return (
        f"the state is not an equilibrium (max |N^T Q| = {lin.force_residual:.3g}, "
        f"{lin.force_residual / max(lin.force_scale, 1e-300):.2g} of the forces): a frozen linearisation, "
        "whose stiffness depends on the coordinates; --at equilibrium gives the modes about the rest state"
    )


def _state_names(model: Model) -> list[str]:
    qn, vn = model.coordinate_names()
    return qn + vn


@click.command()
@_options
@handle_errors
def modes(
    scene: str,
    at: str | None,
    from_file: str | None,
    at_time: float | None,
    output: str | None,
    overrides: tuple[str, ...],
    as_json: bool,
    debug: bool,
) -> None:
    """Natural frequencies, damping ratios and mode shapes of SCENE about a state.

    The constrained equations are linearised about the state in independent coordinates of the
    constraint manifold (rigid-body modes included: k = the degrees of freedom) and written to
    /modes of the result file.
    """
    import numpy as np

    from mbsim.analysis.modes import modes as compute_modes
    from mbsim.names import hdf5_name

    spec, path, claim, model, how, t, lin, result = _linearized(
        scene, overrides, output, "modes", at, from_file, at_time, compute_modes
    )
    datasets = {
        "modes/frequency_hz": result.frequency_hz,
        "modes/damping_ratio": result.damping_ratio,
        "modes/eigenvalue": result.eigenvalue,
        "modes/state": np.concatenate([lin.q, lin.v]),
    }
    for b, name in enumerate(model.body_names):
        datasets[f"modes/shape/{hdf5_name(name)}"] = result.shape[:, b, :]
    attrs = {"modes/state": {"names": _state_names(model), "time": t, "point": how}}
    root = {"modes_at": how, **_point_summary(lin)}
    status, message = _write(model, spec, claim, t, lin.q, lin.v, datasets, attrs, root)
    note = _frozen_note(lin)
    if note and not as_json:
        click.echo(f"mbsim: note: {note}", err=True)
    if as_json:
        emit_json(
            {
                "scene": spec.name,
                "at": how,
                "time": t,
                **_point_summary(lin),
                "frequency_hz": result.frequency_hz,
                "damping_ratio": result.damping_ratio,
                "eigenvalue": result.eigenvalue,
                "file": str(path),
                "status": status,
            }
        )
    else:
        click.echo(f"scene      {spec.name}")
        click.echo(f"state      {how} (max |N^T Q| = {lin.force_residual:.3g})")
        click.echo(f"dof        {lin.dof} (rank of the constraint Jacobian {lin.rank})")
        click.echo(f"{'mode':>4}  {'frequency Hz':>14}  {'damping ratio':>14}  {'Re lambda':>12}  {'Im lambda':>12}")
        for k in range(lin.dof):
            re, im = result.eigenvalue[k]
            f, zeta = result.frequency_hz[k], result.damping_ratio[k]
            click.echo(f"{k + 1:>4}  {f:>14.6g}  {zeta:>14.6g}  {re:>12.6g}  {im:>12.6g}")
        click.echo(f"result     {path}")
    if status != "completed":
        raise UsageError(f"{path}: {message}")


@click.command()
@_options
@handle_errors
def linearize(
    scene: str,
    at: str | None,
    from_file: str | None,
    at_time: float | None,
    output: str | None,
    overrides: tuple[str, ...],
    as_json: bool,
    debug: bool,
) -> None:
    """State-space matrices A, B, C, D of SCENE about a state.

    States: the independent coordinates x of the constraint manifold and their rates; inputs: the
    actuators' forces; outputs: the scene's outputs. Written to /linearize of the result file.
    """
    from mbsim.analysis.modes import state_space

    spec, path, claim, model, how, t, lin, ss = _linearized(
        scene, overrides, output, "linearize", at, from_file, at_time, state_space
    )
    datasets = {
        "linearize/A": ss.A,
        "linearize/B": ss.B,
        "linearize/C": ss.C,
        "linearize/D": ss.D,
        "linearize/basis": lin.basis,
        "linearize/mass": lin.mass,
        "linearize/damping": lin.damping,
        "linearize/stiffness": lin.stiffness,
    }
    attrs = {
        "linearize/A": {"states": ss.states},
        "linearize/B": {"states": ss.states, "inputs": ss.inputs},
        "linearize/C": {"outputs": ss.outputs, "states": ss.states},
        "linearize/D": {"outputs": ss.outputs, "inputs": ss.inputs},
        "linearize/basis": {"names": model.coordinate_names()[1]},
    }
    root = {"linearized_at": how, **_point_summary(lin)}
    status, message = _write(model, spec, claim, t, lin.q, lin.v, datasets, attrs, root)
    note = _frozen_note(lin)
    if note and not as_json:
        click.echo(f"mbsim: note: {note}", err=True)
    summary = {
        "scene": spec.name,
        "at": how,
        "time": t,
        **_point_summary(lin),
        "states": ss.states,
        "inputs": ss.inputs,
        "outputs": ss.outputs,
        "A": ss.A,
        "B": ss.B,
        "C": ss.C,
        "D": ss.D,
        "file": str(path),
        "status": status,
    }
    if as_json:
        emit_json(summary)
    else:
        click.echo(f"scene      {spec.name}")
        click.echo(f"state      {how} (max |N^T Q| = {lin.force_residual:.3g})")
        click.echo(f"states     {len(ss.states)} (x: {lin.dof} independent coordinates and their rates)")
        click.echo(f"inputs     {', '.join(ss.inputs) or 'none'}")
        click.echo(f"outputs    {', '.join(ss.outputs) or 'none'}")
        click.echo(f"result     {path} (/linearize/A, B, C, D)")
    if status != "completed":
        raise UsageError(f"{path}: {message}")
