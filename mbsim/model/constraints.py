"""Constraint equations Phi(q, t), their Jacobian Phi_q and the acceleration right side gamma.

Every joint is made of a few *primitive* equations (Haug's basic constraints), and each
primitive kind is evaluated in one batched call over all joints that use it:

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

from mbsim.model import kernels
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
    dense_index: tuple | None = None  # cached scatter indices of the dense Jacobian
    parts: list[PrimitiveGroup] | None = None  # coupling: the groups of its two primitives
    ratio: float = 0.0  # coupling: value_a - ratio value_b
    accumulate: bool = False  # a coupling part: its Jacobian block adds to its row (shared bodies)


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
            g.accumulate = True
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


# ------------------------------------------------------------------- kernels
# Each returns value (n, k), Ji (n, k, w), Jj (n, k, w) -- rotational columns in body axes --
# and bias (n, k); the loops are compiled (mbsim.model.kernels).


def _point3(f: Frames, g: PrimitiveGroup):
    p = g.params
    return kernels.point3(f.pos, f.rot, f.omega, g.body_i, g.body_j, p["s_i"], p["s_j"])


def _dot1_3(f: Frames, g: PrimitiveGroup):
    p = g.params
    return kernels.dot1_3(f.rot, f.omega, g.body_i, g.body_j, p["a_i"], p["b_j"])


def _dot2_3(f: Frames, g: PrimitiveGroup):
    p = g.params
    return kernels.dot2_3(f.pos, f.rot, f.vel, f.omega, g.body_i, g.body_j, p["a_i"], p["s_i"], p["s_j"])


def _angle3(f: Frames, g: PrimitiveGroup):
    p = g.params
    return kernels.angle3(f.rot, f.omega, g.body_i, g.body_j, p["b_i"], p["e_i"], p["c_j"])


def _point2(f: Frames, g: PrimitiveGroup):
    p = g.params
    return kernels.point2(f.pos, f.rot, f.omega, g.body_i, g.body_j, p["s_i"], p["s_j"])


def _angle2(f: Frames, g: PrimitiveGroup):
    return kernels.angle2(f.angle, g.body_i, g.body_j)


def _dot2_2(f: Frames, g: PrimitiveGroup):
    p = g.params
    return kernels.dot2_2(f.pos, f.rot, f.vel, f.omega, g.body_i, g.body_j, p["a_i"], p["s_i"], p["s_j"])


KERNELS = {
    3: {"point": _point3, "dot1": _dot1_3, "dot2": _dot2_3, "angle": _angle3},
    2: {"point": _point2, "angle": _angle2, "dot2": _dot2_2},
}
# each kind's local vectors in the order its kernel takes them (2D angle: none)
_VECTORS = {
    "point": ("s_i", "s_j"),
    "dot1": ("a_i", "b_j"),
    "dot2": ("a_i", "s_i", "s_j"),
    "angle": ("b_i", "e_i", "c_j"),
}


def vectors(kind: str, dimension: int) -> tuple[str, ...]:
    """The params keys of a primitive kind in the order its kernel takes them (the rows of a flat
    table's vec, mbsim.model.flat); a coupling's are its parts'."""
    return () if (kind, dimension) in (("angle", 2), ("coupling", 3), ("coupling", 2)) else _VECTORS[kind]


def coupling_table(g: PrimitiveGroup, dimension: int) -> dict[str, np.ndarray]:
    """The two-item table of a coupling's parts (kind, bi, bj, vec, offset, wrap) that
    mbsim.model.kernels.coupling_at reads."""
    vec = np.zeros((2, 3, 3))
    for k, part in enumerate(g.parts):
        for m, key in enumerate(vectors(part.kind, dimension)):
            vec[k, m, :dimension] = part.params[key][0]
    return {
        "kind": np.array([kernels.KINDS[(dimension, part.kind)] for part in g.parts], dtype=np.int64),
        "bi": np.array([part.body_i[0] for part in g.parts], dtype=np.int64),
        "bj": np.array([part.body_j[0] for part in g.parts], dtype=np.int64),
        "vec": vec,
        "offset": np.array([part.offset[0, 0] for part in g.parts], dtype=float),
        "wrap": np.array([int(part.wrap) for part in g.parts], dtype=np.int64),
    }


def _coupling(f: Frames, g: PrimitiveGroup, dimension: int):
    table = coupling_table(g, dimension)
    if dimension == 3:
        planar = (np.zeros(0), np.zeros(0))
        return kernels.coupling(f.pos, f.rot, f.vel, f.omega, *planar, **table, ratio=g.ratio,
                                coupling_offset=float(g.offset[0, 0]), width=6)  # fmt: skip
    return kernels.coupling(f.pos, f.rot, f.vel, np.zeros((0, 3)), f.omega, f.angle, **table, ratio=g.ratio,
                            coupling_offset=float(g.offset[0, 0]), width=3)  # fmt: skip


@dataclass
class ConstraintValues:
    """Phi, Phi_t, gamma (nc,) and the Jacobian J (nc, nv), dense or scipy.sparse CSR."""

    phi: np.ndarray
    phi_t: np.ndarray
    gamma: np.ndarray
    jacobian: np.ndarray | csr_matrix


def evaluate_groups(
    groups: list[PrimitiveGroup], frames: Frames, t: float, nrows: int, dimension: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[PrimitiveGroup, np.ndarray, np.ndarray]]]:
    """Evaluate all groups: returns phi, phi_t, gamma (nrows,) and per group (group, Ji, Jj).

    Jacobian blocks come back with their rotational columns in body axes (3D).
    """
    phi = np.zeros(nrows)
    phi_t = np.zeros(nrows)
    gamma = np.zeros(nrows)
    blocks = []
    kernels = KERNELS[dimension]
    for g in groups:
        if g.kind == "coupling":  # row 0: the value, bias and part a's blocks; row 1: part b's blocks
            value, Ji, Jj, bias = _coupling(frames, g, dimension)
            phi[g.rows] = value[0, 0]
            gamma[g.rows] = -bias[0, 0]
            blocks.append((g.parts[0], Ji[:1], Jj[:1]))
            blocks.append((g.parts[1], Ji[1:], Jj[1:]))
            continue
        value, Ji, Jj, bias = kernels[g.kind](frames, g)
        if g.drives:
            target = g.offset.copy()
            accel = np.zeros_like(value)
            rate = np.zeros_like(value)
            env = {"t": t}
            for idx, c, c1, c2 in g.drives:
                target[idx, 0] += float(c(env))
                rate[idx, 0] = float(c1(env))
                accel[idx, 0] = float(c2(env))
            phi_t[g.rows] = -rate
            bias -= accel
        else:
            target = g.offset
        residual = value - target
        if g.wrap:
            residual = (residual + np.pi) % (2.0 * np.pi) - np.pi
        phi[g.rows] = residual
        gamma[g.rows] = -bias
        blocks.append((g, Ji, Jj))
    return phi, phi_t, gamma, blocks


def assemble_jacobian(
    blocks: list[tuple[PrimitiveGroup, np.ndarray, np.ndarray]], nrows: int, nbody: int, width: int, sparse: bool
) -> np.ndarray | csr_matrix:
    """Scatter the per-group body blocks into J (nrows, nbody*width); ground columns dropped."""
    nv = nbody * width
    if not sparse:
        J = np.zeros((nrows, nv + width))  # one spare block column receives the ground's entries
        for g, Ji, Jj in blocks:
            if g.dense_index is None:
                cols = np.arange(width)
                rows = np.broadcast_to(g.rows[:, :, None], Ji.shape)
                g.dense_index = (
                    (rows, np.broadcast_to(g.body_i[:, None, None] * width + cols, Ji.shape)),
                    (rows, np.broadcast_to(g.body_j[:, None, None] * width + cols, Jj.shape)),
                )
            if g.accumulate:  # a coupling's two parts share its row (and maybe a body)
                np.add.at(J, g.dense_index[0], Ji)
                np.add.at(J, g.dense_index[1], Jj)
            else:
                J[g.dense_index[0]] = Ji
                J[g.dense_index[1]] = Jj
        return J[:, :nv]
    import scipy.sparse as sp  # here, not at the top: mbsim.model.sparse

    data, rows, cols = [], [], []
    cols_w = np.arange(width)
    for g, Ji, Jj in blocks:
        for body, block in ((g.body_i, Ji), (g.body_j, Jj)):
            keep = body < nbody
            if not np.any(keep):
                continue
            r = np.broadcast_to(g.rows[keep][:, :, None], block[keep].shape)
            c = np.broadcast_to(body[keep][:, None, None] * width + cols_w, block[keep].shape)
            data.append(block[keep].ravel())
            rows.append(r.ravel())
            cols.append(c.ravel())
    if not data:
        return sp.csr_matrix((nrows, nv))
    return sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(nrows, nv))


def constraint_values(model: Model, frames: Frames, t: float) -> ConstraintValues:
    """Phi, Phi_t, gamma and the Jacobian of all joint equations at one state."""
    phi, phi_t, gamma, blocks = evaluate_groups(model.groups, frames, t, model.nc, model.dimension)
    J = assemble_jacobian(blocks, model.nc, model.nbody, model.body_width, model.sparse)
    return ConstraintValues(phi, phi_t, gamma, J)


def constraint_residual(model: Model, q: np.ndarray, t: float) -> np.ndarray:
    """Phi(q, t) alone (positions only)."""
    frames = model.frames(q, np.zeros(model.nv))
    return evaluate_groups(model.groups, frames, t, model.nc, model.dimension)[0]
