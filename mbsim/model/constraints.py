"""Constraint equations Phi(q, t), their Jacobian Phi_q and the acceleration right side gamma.

Every joint is made of a few *primitive* equations (Haug's basic constraints), batched here
by kind into the model's groups (``batch``), which mbsim.model.flat lays out as one table; the
rows are evaluated once, compiled (mbsim.model.step_kernels.primitives_into over the primitive
kernels of mbsim.model.kernels), for the compiled steps and, through
step_kernels.constraint_rows, for Python's single evaluations here:

- ``point``: p_j - p_i = 0, the joint points of both bodies coincide (3 rows; 2 in 2D);
- ``dot1``: (R_i a_i) . (R_j b_j) = 0, a body-i vector stays normal to a body-j vector;
- ``dot2``: (R_i a_i) . (p_j - p_i) = c(t), distance along a body-i direction;
- ``angle``: rotation of body j relative to body i about a body-i axis = c(t)
  (3D: atan2 of reference vectors; 2D: angle_j - angle_i);
- ``coupling``: two one-row primitives (joint coordinates, ``angle`` or ``dot2``) in one row,
  (value_a - offset_a) - ratio (value_b - offset_b) = offset, touching up to four bodies
  (URDF mimic); its Jacobian and bias are the parts' combined the same way
  (mbsim.model.kernels.coupling_at).

Symbols (for each row): Phi = value - offset - c(t); the Jacobian J is taken with respect to
the generalized *velocities* (v = (v_com world, omega body) in 3D), so Phi_dot = J v + Phi_t;
gamma is the right side of J v_dot = gamma: gamma = -(dJ/dt) v + c''(t), where
(dJ/dt) v ("bias") is the second time derivative of the value at constant v.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from mbsim.model import step_kernels
from mbsim.model.flat import rows_form
from mbsim.model.model import Frames, Model
from mbsim.scene.expr import Expression

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

ROWS = {"point": None, "dot1": 1, "dot2": 1, "angle": 1}  # point: dimension rows


@dataclass
class Primitive:
    """One primitive equation set of one joint, before batching.

    Attributes:
        kind: point, dot1, dot2 or angle.
        body_i, body_j: extended body indices.
        params: local vectors of this kind (see the kernels).
        labels: one label per row, e.g. "x", "axis _|_ b1".
        offset: value the primitive keeps (0 for most; initial angle for 2D angle rows).
        drive: prescribed c(t), or None.
    """

    kind: str
    body_i: int
    body_j: int
    params: dict[str, np.ndarray]
    labels: list[str]
    offset: float = 0.0
    drive: Expression | None = None
    rows: np.ndarray | None = None  # assigned by batch()
    parts: tuple[Primitive, Primitive, float] | None = None  # coupling: (a, b, ratio)


@dataclass
class PrimitiveGroup:
    """All primitives of one kind, batched: arrays over the n items of the group."""

    kind: str
    body_i: np.ndarray  # (n,)
    body_j: np.ndarray  # (n,)
    params: dict[str, np.ndarray]  # each (n, ...)
    rows: np.ndarray  # (n, k) row indices in the constraint (or coordinate) vector
    offset: np.ndarray  # (n, k)
    drives: list[tuple[int, Expression, Expression, Expression]] = field(default_factory=list)
    # (item index, c, c', c'')
    wrap: bool = False  # angle rows are wrapped to (-pi, pi]
    parts: list[PrimitiveGroup] | None = None  # coupling: the groups of its two primitives
    ratio: float = 0.0  # coupling: value_a - ratio value_b


def batch(primitives: list[Primitive], first_row: int, dimension: int) -> tuple[list[PrimitiveGroup], int]:
    """Group primitives by kind (in a fixed kind order) and assign their rows."""
    groups = []
    row = first_row
    for kind in ROWS:
        items = [p for p in primitives if p.kind == kind]
        if not items:
            continue
        k = ROWS[kind] or dimension
        n = len(items)
        rows = np.arange(row, row + n * k).reshape(n, k)
        row += n * k
        for p, r in zip(items, rows, strict=True):
            p.rows = r
        params = {key: np.array([p.params[key] for p in items], dtype=float) for key in items[0].params}
        drives = []
        for idx, p in enumerate(items):
            if p.drive is not None:
                d1 = p.drive.derivative("t")
                drives.append((idx, p.drive, d1, d1.derivative("t")))
        groups.append(
            PrimitiveGroup(
                kind=kind,
                body_i=np.array([p.body_i for p in items], dtype=np.int64),
                body_j=np.array([p.body_j for p in items], dtype=np.int64),
                params=params,
                rows=rows,
                offset=np.array([[p.offset] * k for p in items], dtype=float),
                drives=drives,
                wrap=(kind == "angle" and dimension == 3),
            )
        )
    for p in primitives:  # couplings: one row each, after the plain kinds
        if p.kind != "coupling":
            continue
        a, b, ratio = p.parts
        p.rows = np.array([row])
        parts = []
        for part in (a, b):
            (g,), _ = batch([part], row, dimension)
            parts.append(g)
        groups.append(
            PrimitiveGroup(
                kind="coupling",
                body_i=np.array([a.body_i]),
                body_j=np.array([a.body_j]),
                params={},
                rows=np.array([[row]]),
                offset=np.array([[p.offset]]),
                parts=parts,
                ratio=ratio,
            )  # fmt: skip
        )
        row += 1
    return groups, row


@dataclass
class ConstraintValues:
    """Phi, Phi_t, gamma (nc,) and the Jacobian J (nc, nv), dense or scipy.sparse CSR."""

    phi: np.ndarray
    phi_t: np.ndarray
    gamma: np.ndarray
    jacobian: np.ndarray | csr_matrix


def _rows(model: Model, frames: Frames | None, t: float, blocks: bool, coordinates: bool = False,
          reference: np.ndarray | None = None, q: np.ndarray | None = None):  # fmt: skip
    """phi, phi_t, gamma and J (dense, or the rows' body blocks) of the constraint (or joint-coordinate)
    table by the compiled rows, step_kernels.constraint_rows."""
    form = rows_form(model)
    n = model.joint_coordinates[0].ncoord if coordinates else model.nc
    phi, phi_t, gamma = np.zeros(n), np.zeros(n), np.zeros(n)
    width = 2 * model.body_width if coordinates else form.block_width
    J = np.zeros((n, width if blocks else model.nv))
    step_kernels.constraint_rows(
        form.flat, form.data, t, frames, phi, phi_t, gamma, J, blocks, coordinates, reference, q
    )
    return phi, phi_t, gamma, J


def constraint_values(model: Model, frames: Frames, t: float) -> ConstraintValues:
    """Phi, Phi_t, gamma and the Jacobian of all joint equations at one state (the compiled rows,
    step_kernels.constraint_rows; a sparse model's J in CSR from the rows' body blocks)."""
    if not model.sparse:
        return ConstraintValues(*_rows(model, frames, t, blocks=False))
    import scipy.sparse as sp  # here, not at the top: mbsim.model.sparse

    phi, phi_t, gamma, blocks = _rows(model, frames, t, blocks=True)
    form = rows_form(model)
    J = sp.csr_matrix((blocks.ravel()[form.take], form.indices, form.indptr), shape=(model.nc, model.nv))
    return ConstraintValues(phi, phi_t, gamma, J)


def constraint_residual(model: Model, q: np.ndarray, t: float) -> np.ndarray:
    """Phi(q, t) alone (positions only)."""
    return _rows(model, None, t, blocks=True, q=q)[0]


def coordinate_rows(model: Model, frames: Frames, t: float, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The joint coordinates (model.joint_coordinates[0], unwrapped against ``reference``) and their
    Jacobian in body blocks (ncoord, 2 w: each row's body i block, then body j's) at one state,
    by the same compiled rows over the joint-coordinate table."""
    value, _, _, jac = _rows(model, frames, t, blocks=True, coordinates=True, reference=reference)
    return value, jac
