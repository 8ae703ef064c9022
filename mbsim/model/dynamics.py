"""Generalized forces and energies of a Model at a state.

Equations of motion in mbsim's coordinates (see mbsim.model.model):
``M v_dot = Q(q, v, t) - J^T lambda`` with the constant block-diagonal mass matrix
M = diag(m I, I_body) per body, and Q holding gravity, force elements, joint springs and,
in 3D, the gyroscopic term ``-omega x (I omega)`` (body axes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.model import step_kernels
from mbsim.model.constraints import coordinate_rows
from mbsim.model.data import Data
from mbsim.model.flat import compiled_form, rows_form
from mbsim.model.model import Frames, Model
from mbsim.model.spatial import cross


class JointCoordinates:
    """The joint-coordinate table: every joint coordinate (a primitive measuring it from the
    joint's ``initial`` origin) and the forces on it (mbsim.model.joint_forces: spring and damper,
    limits, friction, effort; the actuators' forces come per run), by the compiled kernels
    (mbsim.model.joint_force_kernels, which the compiled step runs too).

    3D revolute angles come out of atan2 in (-pi, pi]; a coordinate past half a turn must not
    snap back, so those coordinates are unwrapped against a reference, the coordinate at the
    last accepted step (kept per run in one array, Data.coordinate_reference, which the compiled
    step's FlatData.jc_ref views; updated by :func:`update_coordinate_references`), valid while the
    angle moves by less than pi per step.
    """

    def __init__(self, groups, ncoord: int, rows: list[tuple[np.ndarray, dict]]) -> None:
        """``rows``: per joint, its rows and the forces on them (compile's forces_on: spring
        mapping, Limits, Friction, initial, effort; None where absent)."""
        self.groups = groups
        self.ncoord = ncoord
        inf = np.inf
        self.stiffness, self.damping, self.rest, self.initial = (np.zeros(ncoord) for _ in range(4))
        self.lower, self.upper = np.full(ncoord, -inf), np.full(ncoord, inf)
        self.restitution = np.zeros(ncoord)
        self.limits: list = [None] * ncoord  # Limits per row (stop parameters resolved by flatten)
        self.coulomb, self.static, self.stribeck, self.viscous = (np.zeros(ncoord) for _ in range(4))
        self.smoothing = np.ones(ncoord)
        self.effort = np.full(ncoord, inf)
        # the smooth methods' compliant stops (mbsim.model.joint_forces.resolve_stops sets them)
        self.stop_k, self.stop_c = np.zeros(ncoord), np.zeros(ncoord)
        for r, forces_on in rows:
            self.initial[r] = forces_on["initial"]
            self.rest[r] = forces_on["initial"]  # no spring: its (zero) stiffness is relaxed at the start
            spring = forces_on["spring"]
            if spring is not None:
                self.stiffness[r], self.damping[r], self.rest[r] = (
                    spring["stiffness"],
                    spring["damping"],
                    spring["rest"],
                )
            limits = forces_on["limits"]
            if limits is not None:
                self.lower[r], self.upper[r], self.restitution[r] = limits.lower, limits.upper, limits.restitution
                for k in np.atleast_1d(r):
                    self.limits[k] = limits
            friction = forces_on["friction"]
            if friction is not None:
                self.coulomb[r], self.static[r], self.stribeck[r] = (
                    friction.coulomb,
                    friction.static,
                    friction.stribeck_velocity,
                )
                self.viscous[r], self.smoothing[r] = friction.viscous, friction.smoothing
            if forces_on["effort"] is not None:
                self.effort[r] = forces_on["effort"]
        # the items' table as joint_force_kernels.pxd reads it: bodies, first row and rows, wrap
        items = []
        for g in groups:
            nrow = g.rows.shape[1]
            if not np.array_equal(g.rows, g.rows[:, :1] + np.arange(nrow)):
                raise ValueError("a joint coordinate's rows must be consecutive")
            items += [(g.body_i[k], g.body_j[k], g.rows[k, 0], nrow, int(g.wrap)) for k in range(len(g.body_i))]
        table = np.array(items, dtype=np.int64).reshape(len(items), 5)
        self.item_bi, self.item_bj, self.item_row, self.item_nrow, self.item_wrap = (
            np.ascontiguousarray(table[:, m]) for m in range(5)
        )
        self.wrapped = bool(self.item_wrap.any())

    def values(self, model: Model, frames: Frames, t: float, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the coordinates (ncoord,), their Jacobian in body blocks (ncoord, 2 width): row r's block
        of its item's body i in columns [0, width), body j's in [width, 2 width)) at a state,
        unwrapped against ``reference``: the compiled rows over this table
        (mbsim.model.constraints.coordinate_rows)."""
        return coordinate_rows(model, frames, t, reference)


def update_coordinate_references(model: Model, data: Data, q: np.ndarray, t: float) -> None:
    """Call after every accepted step: the unwrapped coordinates become the next references
    (written in place: the run's compiled step reads the same array)."""
    if any(s.wrapped for s in model.joint_coordinates):
        frames = model.frames(q, np.zeros(model.nv))
        for table, reference in zip(model.joint_coordinates, data.coordinate_reference, strict=True):
            if table.wrapped:
                reference[:] = table.values(model, frames, t, reference)[0]


@dataclass
class ForceValues:
    """Q (nv,), the power of the non-conservative forces (W) and the potential energy (J)."""

    q_force: np.ndarray
    power_nc: float
    potential: float


@dataclass
class AppliedForces:
    """Applied generalized forces split by kind, (nv,) each, without inertial terms.

    Attributes:
        conservative: gravity and the elastic part of springs (minus the gradient of ``potential``).
        nonconservative: dampers and applied forces and torques.
        potential: potential energy, J (gravity only when asked for).
        power_nc: power of the non-conservative part, W.
    """

    conservative: np.ndarray
    nonconservative: np.ndarray
    potential: float
    power_nc: float


def applied_forces(
    model: Model,
    data: Data,
    frames: Frames,
    v: np.ndarray,
    t: float,
    with_potential: bool = True,
    nonsmooth: bool = False,
) -> AppliedForces:
    """Gravity, force elements and the forces on the joint coordinates (springs, dampers,
    actuators, stops, friction) at one state (rotational parts in body axes) of a run (``data``:
    its coordinates' unwrapping references; the compliant contacts' counters are written there).
    The coordinates, actuator, stop and friction forces are left in rows_form(model).data
    (mbsim.diagnostics.driven_values_in reads them). ``nonsmooth``: the LCP methods' forces,
    without the compliant stops and the Coulomb/Stribeck joint friction, which their own rows
    apply (mbsim.solvers.numerics.joint_rows)."""
    nb, d, w = model.nbody, model.dimension, model.body_width
    cons = np.zeros((nb + 1, w))
    nonc = np.zeros((nb + 1, w))
    cons[:nb, :d] = model.weight
    potential = -float(model.body_mass @ (frames.pos[:nb] @ model.gravity)) if with_potential else 0.0
    for group in model.forces:
        if compiled_form(group):  # below, with the joint coordinates
            continue
        q_cons, q_nc, pot = group.evaluate(frames, t, data)
        potential += pot
        if q_cons is not None:
            cons += q_cons
        if q_nc is not None:
            nonc += q_nc
    Qc, Qn = cons[:nb].reshape(-1), nonc[:nb].reshape(-1)
    # the compiled force elements and the forces on the joint coordinates: the compiled step's kernels
    form = rows_form(model)
    reference = data.coordinate_reference[0] if data.coordinate_reference else None
    v = np.ascontiguousarray(v, dtype=float)
    potential += step_kernels.element_forces(form.flat, form.data, t, frames, v, reference, Qc, Qn, nonsmooth)
    if form.flat.ncc:  # the compiled compliant contacts' counters, for the run's diagnostics
        model.compliant.read_counters(data, form.data)
    return AppliedForces(Qc, Qn, potential, float(Qn @ v))


def generalized_forces(
    model: Model,
    data: Data,
    frames: Frames,
    v: np.ndarray,
    t: float,
    with_potential: bool = True,
    applied: AppliedForces | None = None,
    nonsmooth: bool = False,
) -> ForceValues:
    """All applied and inertial generalized forces at one state.

    ``with_potential=False`` skips the gravity potential (the right-hand side does not need it);
    ``applied`` reuses applied forces already computed at this state; ``nonsmooth``: as
    :func:`applied_forces`'s.
    """
    if applied is None:
        applied = applied_forces(model, data, frames, v, t, with_potential, nonsmooth)
    Q = applied.conservative + applied.nonconservative
    if model.dimension == 3:  # gyroscopic term -omega x (I omega), body axes
        nb = model.nbody
        omega = frames.omega_body[:nb]
        gyro = -cross(omega, np.einsum("nij,nj->ni", model.body_inertia, omega))
        Q = Q.reshape(nb, 6).copy()
        Q[:, 3:] += gyro
        Q = Q.reshape(-1)
    return ForceValues(Q, applied.power_nc, applied.potential)


def kinetic_energy(model: Model, v: np.ndarray) -> float:
    """1/2 v^T M v."""
    vb = v.reshape(model.nbody, model.body_width)
    return 0.5 * float(np.einsum("ni,nij,nj->", vb, model.mass_diag_blocks, vb))
