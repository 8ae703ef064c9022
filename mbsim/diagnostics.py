"""Solver-agnostic diagnostics of a recorded state: world-frame body data, energies,
constraint violations, quaternion norm error, joint reactions and drive forces.

Energy bookkeeping: ``total = kinetic + potential`` (gravity, springs) and ``work`` is the
work done so far by non-conservative forces, drives and contacts, so that ``total - work``
is conserved by the exact solution. The relative energy drift of a run is
``max |(total - work)(t) - (total - work)(0)| / scale`` with
``scale = max(|total(0)|, max_t kinetic(t))`` (a scale that does not vanish with the choice
of the potential's zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from mbsim.model.model import Evaluation, Frames, Model, State, StepInfo


@dataclass
class RunStats:
    """Running maxima over every recorded step."""

    max_position_violation: float = 0.0
    max_velocity_violation: float = 0.0
    max_quaternion_norm_error: float = 0.0
    energy0: float | None = None
    total0: float = 0.0
    max_kinetic: float = 0.0
    max_energy_error: float = 0.0
    steps: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def energy_drift(self) -> float:
        scale = max(abs(self.total0), self.max_kinetic)
        return self.max_energy_error / scale if scale > 0 else self.max_energy_error


def reactions(model: Model, frames: Frames, ev: Evaluation) -> tuple[np.ndarray, np.ndarray]:
    """Joint reactions and drive forces at a recorded state.

    Returns:
        (njoint, 6) in 3D: force and torque about the joint point, world axes, acting on body2
        (on body1 if body2 is the ground); (njoint, 3) in 2D: fx, fy, torque. And the drive
        forces (ndriven,) of the driven joints: force or torque the drive applies to body2
        along its coordinate.
    """
    nj = len(model.joints)
    d = model.dimension
    k = 6 if d == 3 else 3
    if ev.reactions is not None:  # the method computed them (joint coordinates)
        return ev.reactions
    out = np.zeros((nj, k))
    lam = ev.multipliers
    driven = model.driven_rows
    drive = -lam[driven] if len(driven) else np.zeros(0)
    if nj == 0 or ev.jacobian is None:
        return out, drive
    w, nb = model.body_width, model.nbody
    row_joint, row_body = model.row_joint, model.row_body  # per constraint row: its joint, the reported body
    gen = np.zeros((nj, w))  # generalized constraint force -J^T lambda on each joint's reported body
    if sp.issparse(ev.jacobian):
        coo = ev.jacobian.tocoo()
        keep = coo.col // w == row_body[coo.row]
        rows, cols = coo.row[keep], coo.col[keep]
        np.add.at(gen, (row_joint[rows], cols % w), -coo.data[keep] * lam[rows])
    else:
        ok = row_body < nb
        rows = np.nonzero(ok)[0]
        blocks = ev.jacobian.reshape(model.nc, nb, w)[rows, row_body[rows]]  # (nrows, w)
        np.add.at(gen, row_joint[rows], -blocks * lam[rows, None])
    body = model.joint_body
    rot = frames.rot[body]
    offset = (rot @ model.joint_point[:, :, None])[:, :, 0]
    force = gen[:, :d]
    if d == 3:
        out[:, :3] = force
        out[:, 3:] = (rot @ gen[:, 3:, None])[:, :, 0] - np.cross(offset, force)
    else:
        out[:, :2] = force
        out[:, 2] = gen[:, 2] - (offset[:, 0] * force[:, 1] - offset[:, 1] * force[:, 0])
    return out, drive


def record_row(
    model: Model, state: State, ev: Evaluation, info: StepInfo, stats: RunStats
) -> dict[str, np.ndarray | float]:
    """One row of the result file (see mbsim.output.hdf5.ResultWriter) and update ``stats``."""
    nb, d = model.nbody, model.dimension
    compliant = model.compliant
    contacts = ev.contacts
    if contacts is None:  # compliant contacts are forces: the evaluation just ran them at this state
        contacts = (compliant.last_count, compliant.last_penetration) if compliant is not None else (0, 0.0)
    frames = ev.frames if ev.frames is not None else model.frames(state.q, state.v)
    pos_violation = float(np.max(np.abs(ev.phi))) if len(ev.phi) else 0.0
    vel_violation = float(np.max(np.abs(ev.phi_dot))) if len(ev.phi_dot) else 0.0
    body_q = state.q if ev.body_q is None else ev.body_q  # the model's body coordinates
    quat_error = ev.quaternion_norm_error
    if quat_error is None:
        quat_error = model.quaternion_norm_error(state.q)
    total = ev.kinetic + ev.potential
    if stats.energy0 is None:
        stats.energy0 = total - state.work
        stats.total0 = total
    stats.max_position_violation = max(stats.max_position_violation, pos_violation)
    stats.max_velocity_violation = max(stats.max_velocity_violation, vel_violation)
    stats.max_quaternion_norm_error = max(stats.max_quaternion_norm_error, quat_error)
    stats.max_kinetic = max(stats.max_kinetic, ev.kinetic)
    stats.max_energy_error = max(stats.max_energy_error, abs(total - state.work - stats.energy0))
    reaction, drive = reactions(model, frames, ev)
    row: dict[str, np.ndarray | float] = {
        "time": state.t,
        "q": state.q,
        "v": state.v,
        "bodies/{body}/position": frames.pos[:nb],
        "bodies/{body}/velocity": frames.vel[:nb],
        "diagnostics/energy/kinetic": ev.kinetic,
        "diagnostics/energy/potential": ev.potential,
        "diagnostics/energy/total": total,
        "diagnostics/energy/work": state.work,
        "diagnostics/constraints/position_violation": pos_violation,
        "diagnostics/constraints/velocity_violation": vel_violation,
        "diagnostics/contacts/count": float(contacts[0]),
        "diagnostics/contacts/max_penetration": contacts[1],
        "diagnostics/solver/iterations": float(info.iterations),
        "diagnostics/solver/step_size": info.h,
    }
    if compliant is not None:
        row.update(compliant.pair_diagnostics())
    if d == 3:
        row["bodies/{body}/orientation"] = body_q.reshape(nb, 7)[:, 3:]
        row["bodies/{body}/angular_velocity"] = frames.omega[:nb]
        row["diagnostics/constraints/quaternion_norm_error"] = quat_error
    else:
        row["bodies/{body}/angle"] = frames.angle[:nb]
        row["bodies/{body}/angular_velocity"] = frames.omega[:nb]
    if ev.datasets:
        row.update(ev.datasets)
    if model.joints:
        row["joints/{joint}/reaction"] = reaction
        if len(drive):
            row["joints/{driven}/drive_force"] = drive
    return row
