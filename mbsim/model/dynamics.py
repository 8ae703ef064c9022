"""Generalized forces and energies of a Model at a state.

Equations of motion in mbsim's coordinates (see mbsim.model.model):
``M v_dot = Q(q, v, t) - J^T lambda`` with the constant block-diagonal mass matrix
M = diag(m I, I_body) per body, and Q holding gravity, force elements, joint springs and,
in 3D, the gyroscopic term ``-omega x (I omega)`` (body axes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.model import spring_kernels
from mbsim.model.constraints import spring_rows
from mbsim.model.data import Data
from mbsim.model.model import Frames, Model
from mbsim.model.spatial import cross


class SpringGroups:
    """Joint springs: coordinate primitives (offset = rest) with stiffness and damping, their
    forces Qc -= J^T (k deflection), Qn -= J^T (c J v) by the compiled kernels
    (mbsim.model.spring_kernels, which the compiled step runs too).

    3D revolute angles come out of atan2 in (-pi, pi]; a torsion spring wound past half a turn
    must not snap back, so those deflections are unwrapped against a reference, the deflection
    at the last accepted step (kept per run in one array, Data.spring_reference, which the
    compiled step's FlatData.spr_ref views; updated by :func:`update_spring_references`), valid
    while the angle moves by less than pi per step.
    """

    def __init__(self, groups, ncoord: int, stiffness: np.ndarray, damping: np.ndarray, rest: np.ndarray) -> None:
        self.groups = groups
        self.ncoord = ncoord
        self.stiffness = np.ascontiguousarray(stiffness, dtype=float)
        self.damping = np.ascontiguousarray(damping, dtype=float)
        self.rest = np.ascontiguousarray(rest, dtype=float)
        # the items' table as spring_kernels.pxd reads it: bodies, first row and rows, wrap
        items = []
        for g in groups:
            nrow = g.rows.shape[1]
            if not np.array_equal(g.rows, g.rows[:, :1] + np.arange(nrow)):
                raise ValueError("a joint spring's coordinate rows must be consecutive")
            items += [(g.body_i[k], g.body_j[k], g.rows[k, 0], nrow, int(g.wrap)) for k in range(len(g.body_i))]
        table = np.array(items, dtype=np.int64).reshape(len(items), 5)
        self.item_bi, self.item_bj, self.item_row, self.item_nrow, self.item_wrap = (
            np.ascontiguousarray(table[:, m]) for m in range(5)
        )
        self.wrapped = bool(self.item_wrap.any())

    def deflection(
        self, model: Model, frames: Frames, t: float, reference: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(deflection (ncoord,), Jacobian in body blocks (ncoord, 2 width): row r's block of its
        item's body i in columns [0, width), body j's in [width, 2 width)) at a state, unwrapped
        against ``reference``: the compiled rows over model's spring table (these groups,
        model.springs[0]; mbsim.model.constraints.spring_rows)."""
        return spring_rows(model, frames, t, reference)

    def add_forces(
        self, model: Model, frames: Frames, v: np.ndarray, t: float, reference: np.ndarray,
        Qc: np.ndarray, Qn: np.ndarray,
    ) -> float:  # fmt: skip
        """Add the springs' elastic forces to Qc and the dampers' to Qn (nv,) at a state; returns
        their potential, sum 1/2 k deflection^2."""
        value, jac = self.deflection(model, frames, t, reference)
        v = np.ascontiguousarray(v, dtype=float)
        return spring_kernels.joint_springs(model.nbody, model.body_width, self.item_bi, self.item_bj,
                                            self.item_row, self.item_nrow, self.stiffness, self.damping, value,
                                            jac, v, Qc, Qn)  # fmt: skip


def update_spring_references(model: Model, data: Data, q: np.ndarray, t: float) -> None:
    """Call after every accepted step: the unwrapped deflections become the next references
    (written in place: the run's compiled step reads the same array)."""
    if any(s.wrapped for s in model.springs):
        frames = model.frames(q, np.zeros(model.nv))
        for springs, reference in zip(model.springs, data.spring_reference, strict=True):
            if springs.wrapped:
                reference[:] = springs.deflection(model, frames, t, reference)[0]


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
    model: Model, data: Data, frames: Frames, v: np.ndarray, t: float, with_potential: bool = True
) -> AppliedForces:
    """Gravity, force elements and joint springs at one state (rotational parts in body axes)
    of a run (``data``: its spring references; the compliant contacts' counters are written there)."""
    nb, d, w = model.nbody, model.dimension, model.body_width
    cons = np.zeros((nb + 1, w))
    nonc = np.zeros((nb + 1, w))
    cons[:nb, :d] = model.weight
    potential = -float(model.body_mass @ (frames.pos[:nb] @ model.gravity)) if with_potential else 0.0
    for group in model.forces:
        q_cons, q_nc, pot = group.evaluate(frames, t, data)
        potential += pot
        if q_cons is not None:
            cons += q_cons
        if q_nc is not None:
            nonc += q_nc
    Qc, Qn = cons[:nb].reshape(-1), nonc[:nb].reshape(-1)
    for springs, reference in zip(model.springs, data.spring_reference, strict=True):
        potential += springs.add_forces(model, frames, v, t, reference, Qc, Qn)
    return AppliedForces(Qc, Qn, potential, float(Qn @ v))


def generalized_forces(
    model: Model,
    data: Data,
    frames: Frames,
    v: np.ndarray,
    t: float,
    with_potential: bool = True,
    applied: AppliedForces | None = None,
) -> ForceValues:
    """All applied and inertial generalized forces at one state.

    ``with_potential=False`` skips the gravity potential (the right-hand side does not need it);
    ``applied`` reuses applied forces already computed at this state.
    """
    if applied is None:
        applied = applied_forces(model, data, frames, v, t, with_potential)
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
