"""Solver-agnostic diagnostics of a recorded state: world-frame body data, energies,
constraint violations, quaternion norm error, joint reactions and drive forces.

Energy bookkeeping: ``total = kinetic + potential`` (gravity, springs) and ``work`` is the
work done so far by non-conservative forces, drives and contacts, so that ``total - work``
is conserved by the exact solution. The relative energy drift of a run is
``max |(total - work)(t) - (total - work)(0)| / scale`` with a scale fixed by the initial state
and the scene (:func:`energy_scale`): ``max(|T0|, |V0|, |T0 + V0|, sum_i m_i |g| l)``, l the
extent of the mechanism at t = 0. A blow-up therefore reads as the large number it is (a scale
that grew with the run's own kinetic energy would cap it near 1). A scene without any of these
(everything at rest, no gravity: a motor spins it up) is measured against the largest work (what the inputs delivered).

Divergence (CONTRACT §4): a run whose energy error or kinetic energy passes ``solver.divergence``
times the energy that its initial state and inputs can supply by then (the scale above, the
largest positive work so far (dissipation supplies nothing), and what gravity can give a free
fall in the elapsed time) has diverged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbsim.model.data import Data
from mbsim.model.model import Evaluation, Frames, Model, State, StepInfo
from mbsim.model.sparse import is_sparse
from mbsim.names import hdf5_name


@dataclass
class RunStats:
    """Running maxima over every recorded step."""

    max_position_violation: float = 0.0
    max_velocity_violation: float = 0.0
    max_quaternion_norm_error: float = 0.0
    energy0: float | None = None
    total0: float = 0.0
    scale: float = 0.0  # energy_scale of the initial state, J
    fall: tuple[float, float] = (0.0, 0.0)  # free-fall supply a t + b t^2 (free_fall_supply)
    max_kinetic: float = 0.0
    max_work: float = 0.0
    max_energy_error: float = 0.0
    last_ratio: float = 0.0  # divergence_ratio at the last recorded state
    max_ratio: float = 0.0  # and its largest value so far
    steps: int = 0
    extra: dict = field(default_factory=dict)
    # the scene's outputs over the recorded rows: name -> [max, min, final] (CONTRACT §8)
    outputs: dict = field(default_factory=dict)

    def add_outputs(self, names: list[str], values: np.ndarray) -> None:
        """Recorded outputs' values (rows, len(names)) into their max, min and final value."""
        if not len(values):
            return
        for k, name in enumerate(names):
            column = values[:, k]
            high, low = float(np.fmax.reduce(column)), float(np.fmin.reduce(column))
            if name in self.outputs:
                old = self.outputs[name]
                high, low = max(old[0], high), min(old[1], low)
            self.outputs[name] = [high, low, float(column[-1])]

    def output_summary(self) -> dict[str, float]:
        """max_NAME, min_NAME, final_NAME of every output (CONTRACT §8)."""
        out = {}
        for name, (high, low, final) in self.outputs.items():
            out.update({f"max_{name}": high, f"min_{name}": low, f"final_{name}": final})
        return out

    @property
    def drift_scale(self) -> float:
        """The energy the drift is relative to (J); 0 when the run has no energy scale at all."""
        return self.scale if self.scale > 0 else self.max_work

    @property
    def energy_drift(self) -> float:
        scale = self.drift_scale
        return self.max_energy_error / scale if scale > 0 else self.max_energy_error

    def add(
        self,
        t: np.ndarray,
        kinetic: np.ndarray,
        potential: np.ndarray,
        work: np.ndarray,
        position_violation: np.ndarray,
        velocity_violation: np.ndarray,
        quaternion_norm_error: np.ndarray,
        divergence: float = np.inf,
    ) -> int:
        """Take in recorded rows (arrays over the rows, in time order; ``energy0`` set) up to and
        including the first whose divergence ratio passes ``divergence``; returns how many.

        The divergence ratio of a row is how many times the energy the scene can supply by its
        time its energy error or kinetic energy is: the supply is the largest of the energy
        scale, the largest work so far (positive: what the inputs delivered) and what gravity can
        give a free fall by then."""
        # what the inputs supplied: the largest positive work so far (dissipation supplies none: a
        # run whose explicit contact blew up books its dampers' garbage as |work| of the blow-up's size)
        max_work = np.fmax.accumulate(np.fmax(work, self.max_work))
        error = np.abs(kinetic + potential - work - self.energy0)
        # an energy that overflowed (inf - inf) has an unbounded error, never none (fmax skips NaN)
        error[np.isnan(error)] = np.inf
        a, b = self.fall
        supply = np.fmax(np.fmax(self.scale, max_work), a * t + b * t * t)
        worst = np.fmax(kinetic, error)
        with np.errstate(all="ignore"):
            ratio = np.where(supply > 0, worst / np.where(supply > 0, supply, 1.0), np.where(worst == 0, 0.0, np.inf))
        over = np.flatnonzero(ratio > divergence)
        n = int(over[0]) + 1 if len(over) else len(t)
        self.max_work = float(max_work[n - 1])
        self.max_position_violation = max(self.max_position_violation, float(np.fmax.reduce(position_violation[:n])))
        self.max_velocity_violation = max(self.max_velocity_violation, float(np.fmax.reduce(velocity_violation[:n])))
        self.max_quaternion_norm_error = max(
            self.max_quaternion_norm_error, float(np.fmax.reduce(quaternion_norm_error[:n]))
        )
        self.max_kinetic = max(self.max_kinetic, float(np.fmax.reduce(kinetic[:n])))
        self.max_energy_error = max(self.max_energy_error, float(np.fmax.reduce(error[:n])))
        self.last_ratio = float(ratio[n - 1])
        self.max_ratio = max(self.max_ratio, float(np.fmax.reduce(ratio[:n])))
        return n


def energy_scale(model: Model, frames: Frames, kinetic: float, potential: float) -> float:
    """The energy scale of the initial state: max(|T0|, |V0|, |T0 + V0|, sum m |g| l), l the extent
    of the mechanism (the diagonal of the box around the bodies' centres and the joint points).

    Gravity's term stands for the energy a pendulum or a linkage trades between kinetic and
    potential as it moves over its own size, whatever the potential's zero.
    """
    nb = model.nbody
    g = float(np.linalg.norm(model.gravity))
    gravity_term = 0.0
    if g > 0 and nb:
        points = [frames.pos[:nb]]
        if model.joints:
            rot = frames.rot[model.joint_body]
            points.append(frames.pos[model.joint_body] + (rot @ model.joint_point[:, :, None])[:, :, 0])
        cloud = np.concatenate(points)
        extent = float(np.linalg.norm(cloud.max(axis=0) - cloud.min(axis=0)))
        gravity_term = float(np.sum(model.body_mass)) * g * extent
    return float(max(abs(kinetic), abs(potential), abs(kinetic + potential), gravity_term))


def free_fall_supply(model: Model, frames: Frames) -> tuple[float, float]:
    """(a, b) with a t + b t^2 the most gravity can give the bodies in a time t: each falls from its
    initial speed, sum m_i |g| (|v_i| t + |g| t^2 / 2)."""
    g = float(np.linalg.norm(model.gravity))
    nb = model.nbody
    if g == 0 or nb == 0:
        return 0.0, 0.0
    speed = np.linalg.norm(frames.vel[:nb], axis=1)
    return float(np.sum(model.body_mass * g * speed)), float(np.sum(model.body_mass) * g * g / 2)


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
    if is_sparse(ev.jacobian):
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
    model: Model, data: Data, state: State, ev: Evaluation, info: StepInfo, stats: RunStats
) -> dict[str, np.ndarray | float]:
    """One row of the result file (see mbsim.output.hdf5.ResultWriter) and update ``stats``
    (``data``: the run's state, its compliant contacts' counters)."""
    nb, d = model.nbody, model.dimension
    compliant = model.compliant
    contacts = ev.contacts
    if contacts is None:  # compliant contacts are forces: the evaluation just ran them at this state
        contacts = (data.contacts.count, data.contacts.penetration) if compliant is not None else (0, 0.0)
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
        stats.scale = energy_scale(model, frames, ev.kinetic, ev.potential)
        stats.fall = free_fall_supply(model, frames)
    stats.add(
        *(np.array([x], dtype=float) for x in (state.t, ev.kinetic, ev.potential, state.work)),
        *(np.array([x], dtype=float) for x in (pos_violation, vel_violation, quat_error)),
    )
    reaction, drive = reactions(model, frames, ev)
    row: dict[str, np.ndarray | float] = {
        "time": state.t,
        "q": state.q if ev.q_recorded is None else ev.q_recorded,
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
        row.update(compliant.pair_diagnostics(data))
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
    if (model.joint_coordinates or model.outputs) and not (ev.datasets and DRIVEN_KEYS & set(ev.datasets)):
        # unless the method gave them (recursive); the LCP methods' own limit and friction forces
        row.update(driven_values(model, data, frames, state.t, ev.coordinate_forces))
    return row


def driven_values(
    model: Model, data: Data, frames: Frames, t: float, coordinate_forces: tuple[np.ndarray, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """CONTRACT §8's values of a recorded state (the keys of :func:`driven_columns`) by the
    compiled force kernels at its frames (mbsim.model.dynamics.applied_forces). The LCP methods
    give ``coordinate_forces`` (Evaluation.coordinate_forces): the limit forces are theirs, the
    friction forces theirs plus the viscous friction of the kernels (nonsmooth)."""
    from mbsim.model.dynamics import applied_forces
    from mbsim.model.flat import rows_form

    nb = model.nbody
    if model.dimension == 3:
        v = np.concatenate((frames.vel[:nb], frames.omega_body[:nb]), axis=1).reshape(-1)
    else:
        v = np.concatenate((frames.vel[:nb], frames.omega[:nb, None]), axis=1).reshape(-1)
    nonsmooth = coordinate_forces is not None
    applied_forces(model, data, frames, v, t, with_potential=False, nonsmooth=nonsmooth)
    form = rows_form(model)
    out = driven_values_in(model, form.flat, form.data, t)
    if nonsmooth and form.flat.njc:  # the LCP rows' forces (per coordinate row) in place of the smooth ones
        coordinate = coordinate_joints(model)
        limited = np.array([j.coordinate_row for j in coordinate if j.limits is not None], dtype=int)
        frictional = np.array([j.coordinate_row for j in coordinate if has_friction(j.friction)], dtype=int)
        if len(limited):
            out["joints/{limited}/limit_force"] = coordinate_forces[0][limited]
        if len(frictional):
            key = "joints/{frictional}/friction_force"
            out[key] = out[key] + coordinate_forces[1][frictional]
    return out


def driven_values_in(model: Model, flat, D, t: float) -> dict[str, np.ndarray]:
    """CONTRACT §8's values from the FlatData ``D`` of ``flat`` just after a force evaluation at a
    state of time t (coordinates, rates, stop and friction forces, actuator forces in D)."""
    from mbsim.model import step_kernels

    out: dict[str, np.ndarray] = {}
    if flat.njc:
        coordinate = coordinate_joints(model)
        rows = np.array([j.coordinate_row for j in coordinate], dtype=int)
        limited = np.array([j.coordinate_row for j in coordinate if j.limits is not None], dtype=int)
        frictional = np.array([j.coordinate_row for j in coordinate if has_friction(j.friction)], dtype=int)
        value, rate = np.array(D.jc_value), np.array(D.jc_qd)
        if len(rows):
            out["joints/{coordinate}/position"] = value[rows]
            out["joints/{coordinate}/velocity"] = rate[rows]
        if len(limited):
            out["joints/{limited}/limit_force"] = np.array(D.jc_limit_force)[limited]
        if len(frictional):
            out["joints/{frictional}/friction_force"] = np.array(D.jc_friction_force)[frictional]
        if model.actuators:
            force = np.array(D.act_force)
            out["actuators/{actuator}/force"] = force
            out["actuators/{actuator}/power"] = np.asarray(flat.act_gear) * force * rate[np.asarray(flat.act_row)]
    if model.outputs:
        out["outputs/{output}"] = step_kernels.output_values(flat, D, t)
    return out


# the keys of CONTRACT §8's values that a method may give in its Evaluation's datasets
DRIVEN_KEYS = {"joints/{coordinate}/position", "outputs/{output}"}

# the scalar columns of a row, in order (after the body columns; mbsim.model.record_kernels)
SCALAR_COLUMNS = (
    "diagnostics/energy/kinetic",
    "diagnostics/energy/potential",
    "diagnostics/energy/total",
    "diagnostics/energy/work",
    "diagnostics/constraints/position_violation",
    "diagnostics/constraints/velocity_violation",
    "diagnostics/contacts/count",
    "diagnostics/contacts/max_penetration",
    "diagnostics/solver/iterations",
    "diagnostics/solver/step_size",
)


def row_columns(
    model: Model, nq: int | None = None, nv: int | None = None, driven: bool = True
) -> list[tuple[str, tuple[int, ...]]]:
    """The datasets of a row of :func:`record_row` (no method datasets) in the order of a compiled
    row's flat columns (mbsim.model.record_kernels.row_into): (key, shape of one row). ``nq``,
    ``nv``: the sizes of /q and /v when the method has coordinates of its own; ``driven``: with the
    columns of CONTRACT §8 and the compliant contacts' per pair at the end (:func:`driven_columns`,
    :func:`contact_columns`; a method with columns of its own after the reactions puts them after
    those)."""
    nb, d, nj = model.nbody, model.dimension, len(model.joints)
    columns = [
        ("time", ()),
        ("q", (model.nq if nq is None else nq,)),
        ("v", (model.nv if nv is None else nv,)),
        ("bodies/{body}/position", (nb, d)),
        ("bodies/{body}/velocity", (nb, d)),
    ]
    if d == 3:
        columns += [("bodies/{body}/orientation", (nb, 4)), ("bodies/{body}/angular_velocity", (nb, 3))]
    else:
        columns += [("bodies/{body}/angle", (nb,)), ("bodies/{body}/angular_velocity", (nb,))]
    columns += [(key, ()) for key in SCALAR_COLUMNS]
    if d == 3:
        columns.append(("diagnostics/constraints/quaternion_norm_error", ()))
    if nj:
        columns.append(("joints/{joint}/reaction", (nj, 6 if d == 3 else 3)))
        if len(model.driven_rows):
            columns.append(("joints/{driven}/drive_force", (len(model.driven_rows),)))
    return columns + driven_columns(model) + contact_columns(model) if driven else columns


def contact_columns(model: Model) -> list[tuple[str, tuple[int, ...]]]:
    """The compliant contacts' per-pair columns (CompliantContacts.pair_diagnostics, in the order of
    mbsim.model.record_kernels.contact_columns_into), last in a row: per pair its count and deepest
    penetration, and its class counts when it has penetration classes."""
    compliant = model.compliant
    columns: list[tuple[str, tuple[int, ...]]] = []
    for pair in compliant.pairs if compliant is not None else ():
        group = f"diagnostics/contacts/{hdf5_name(pair.name)}"
        columns += [(f"{group}/count", ()), (f"{group}/max_penetration", ())]
        if pair.classes is not None:
            columns.append((f"{group}/class_counts", (len(pair.classes) + 1,)))
    return columns


def driven_columns(model: Model) -> list[tuple[str, tuple[int, ...]]]:
    """The columns of CONTRACT §8 (after the joint reactions and drive forces, in the order of
    mbsim.model.record_kernels.driven_columns_into): the joint coordinates and rates, the compliant
    stops' and frictions' forces, the actuators' forces and powers, the outputs."""
    names = placeholder_names(model)
    columns = []
    for group, placeholder, datasets in (
        ("joints", "{coordinate}", ("position", "velocity")),
        ("joints", "{limited}", ("limit_force",)),
        ("joints", "{frictional}", ("friction_force",)),
        ("actuators", "{actuator}", ("force", "power")),
    ):
        count = len(names[(group, placeholder)])
        if count:
            columns += [(f"{group}/{placeholder}/{dataset}", (count,)) for dataset in datasets]
    if model.outputs:
        columns.append(("outputs/{output}", (len(model.outputs),)))
    return columns


def placeholder_names(model: Model) -> dict[tuple[str, str], list[str]]:
    """What each placeholder of a row's keys stands for, by (group, placeholder): the names, in
    the order of the row's values (``bodies/{body}/position`` has one per body)."""
    coordinate = coordinate_joints(model)
    return {
        ("bodies", "{body}"): list(model.body_names),
        ("joints", "{joint}"): [j.name for j in model.joints],
        ("joints", "{driven}"): [j.name for j in model.joints if j.drive_row is not None],
        ("joints", "{coordinate}"): [j.name for j in coordinate],
        ("joints", "{limited}"): [j.name for j in coordinate if j.limits is not None],
        ("joints", "{frictional}"): [j.name for j in coordinate if has_friction(j.friction)],
        ("actuators", "{actuator}"): [a.name for a in model.actuators],
        ("outputs", "{output}"): [name for name, _ in model.outputs],
    }


def coordinate_joints(model: Model) -> list:
    """The joints with a coordinate in the order of their rows of the joint-coordinate table (the
    compiled rows' order: its rows are batched by primitive kind, not in the scene's order)."""
    return sorted((j for j in model.joints if j.coordinate_row is not None), key=lambda j: j.coordinate_row)


def has_friction(friction) -> bool:
    """Whether a joint's friction (mbsim.model.joint_forces.Friction) exerts a force (the compiled
    rows' test: mbsim.model.record_kernels.driven_columns_into)."""
    return friction is not None and (friction.coulomb > 0 or friction.static > 0 or friction.viscous > 0)


def row_width(columns: list[tuple[str, tuple[int, ...]]]) -> int:
    """The number of flat columns of a compiled row of these columns."""
    return sum(int(np.prod(shape)) for _, shape in columns)


def split_rows(columns: list[tuple[str, tuple[int, ...]]], rows: np.ndarray) -> dict[str, np.ndarray]:
    """Compiled rows (n, row_width or more) as the writer's blocks: key -> (n, *shape) views."""
    out, start = {}, 0
    for key, shape in columns:
        width = int(np.prod(shape))
        out[key] = rows[:, start : start + width].reshape(len(rows), *shape)
        start += width
    return out
