"""Constraint equations Phi(q, t), their Jacobian Phi_q and the acceleration right side gamma.

Every joint is made of a few *primitive* equations (Haug's basic constraints), and each
primitive kind is evaluated in one batched call over all joints that use it:

- ``point``: p_j - p_i = 0, the joint points of both bodies coincide (3 rows; 2 in 2D);
- ``dot1``: (R_i a_i) . (R_j b_j) = 0, a body-i vector stays normal to a body-j vector;
- ``dot2``: (R_i a_i) . (p_j - p_i) = c(t), distance along a body-i direction;
- ``angle``: rotation of body j relative to body i about a body-i axis = c(t)
  (3D: atan2 of reference vectors; 2D: angle_j - angle_i).

Symbols (for each row): Phi = value - offset - c(t); the Jacobian J is taken with respect to
the generalized *velocities* (v = (v_com world, omega body) in 3D), so Phi_dot = J v + Phi_t;
gamma is the right side of J v_dot = gamma: gamma = -(dJ/dt) v + c''(t), where
(dJ/dt) v ("bias") is the second time derivative of the value at constant v.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from mbsim.model.model import Frames, Model
from mbsim.model.spatial import cross, perp, skew
from mbsim.scene.expr import Expression

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
        params = {key: np.array([p.params[key] for p in items]) for key in items[0].params}
        if kind == "point" and dimension == 3:
            params["skew_s_i"] = skew(params["s_i"])
            params["skew_s_j"] = skew(params["s_j"])
            params["s_i_col"] = params["s_i"][:, :, None]
            params["s_j_col"] = params["s_j"][:, :, None]
        drives = []
        for idx, p in enumerate(items):
            if p.drive is not None:
                d1 = p.drive.derivative("t")
                drives.append((idx, p.drive, d1, d1.derivative("t")))
        groups.append(
            PrimitiveGroup(
                kind=kind,
                body_i=np.array([p.body_i for p in items]),
                body_j=np.array([p.body_j for p in items]),
                params=params,
                rows=rows,
                offset=np.array([[p.offset] * k for p in items], dtype=float),
                drives=drives,
                wrap=(kind == "angle" and dimension == 3),
            )
        )
    return groups, row


# ------------------------------------------------------------------- 3D kernels
# Each returns value (n, k), Ji (n, k, 6), Jj (n, k, 6) with rotational columns in body
# axes (omega = R omega_body, so a world row c becomes c^T R), and bias (n, k).


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


def _rotate(rot: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (rot @ v[..., None])[..., 0]


def _to_body(row_world: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """Rotational Jacobian row in world axes (n, 3) -> body axes: c^T R."""
    return (row_world[:, None, :] @ rot)[:, 0, :]


def _point3(f: Frames, g: PrimitiveGroup):
    i, j = g.body_i, g.body_j
    Ri, Rj = f.rot[i], f.rot[j]
    ri = Ri @ g.params["s_i_col"]  # (n, 3, 1)
    rj = Rj @ g.params["s_j_col"]
    n = len(i)
    J = np.empty((n, 3, 12))
    J[:, :, :3] = _MINUS_EYE3
    J[:, :, 6:9] = _EYE3
    # d/dt (R s) = R (omega_body x s) = -R skew(s) omega_body
    J[:, :, 3:6] = Ri @ g.params["skew_s_i"]
    J[:, :, 9:] = -(Rj @ g.params["skew_s_j"])
    w2 = f.omega_cross2  # omega x (omega x .) per body
    bias = (w2[j] @ rj - w2[i] @ ri)[:, :, 0]
    return f.pos[j] - f.pos[i] + (rj - ri)[:, :, 0], J[:, :, :6], J[:, :, 6:], bias


_EYE3 = np.eye(3)
_MINUS_EYE3 = -np.eye(3)


def _dot1_3(f: Frames, g: PrimitiveGroup):
    i, j = g.body_i, g.body_j
    A = _rotate(f.rot[i], g.params["a_i"])
    B = _rotate(f.rot[j], g.params["b_j"])
    wi, wj = f.omega[i], f.omega[j]
    axb = cross(A, B)
    n = len(i)
    Ji = np.zeros((n, 1, 6))
    Jj = np.zeros((n, 1, 6))
    Ji[:, 0, 3:] = _to_body(axb, f.rot[i])
    Jj[:, 0, 3:] = -_to_body(axb, f.rot[j])
    Ad, Bd = cross(wi, A), cross(wj, B)
    bias = _dot(cross(wi, Ad), B) + 2.0 * _dot(Ad, Bd) + _dot(A, cross(wj, Bd))
    return _dot(A, B)[:, None], Ji, Jj, bias[:, None]


def _dot2_3(f: Frames, g: PrimitiveGroup):
    i, j = g.body_i, g.body_j
    A = _rotate(f.rot[i], g.params["a_i"])
    ri = _rotate(f.rot[i], g.params["s_i"])
    rj = _rotate(f.rot[j], g.params["s_j"])
    wi, wj = f.omega[i], f.omega[j]
    d = f.pos[j] + rj - f.pos[i] - ri
    n = len(i)
    Ji = np.empty((n, 1, 6))
    Jj = np.empty((n, 1, 6))
    Ji[:, 0, :3] = -A
    Ji[:, 0, 3:] = _to_body(cross(A, d + ri), f.rot[i])
    Jj[:, 0, :3] = A
    Jj[:, 0, 3:] = _to_body(cross(rj, A), f.rot[j])
    Ad = cross(wi, A)
    dd = f.vel[j] + cross(wj, rj) - f.vel[i] - cross(wi, ri)
    d_bias = cross(wj, cross(wj, rj)) - cross(wi, cross(wi, ri))
    bias = _dot(cross(wi, Ad), d) + 2.0 * _dot(Ad, dd) + _dot(A, d_bias)
    return _dot(A, d)[:, None], Ji, Jj, bias[:, None]


def _angle3(f: Frames, g: PrimitiveGroup):
    i, j = g.body_i, g.body_j
    B = _rotate(f.rot[i], g.params["b_i"])
    E = _rotate(f.rot[i], g.params["e_i"])
    C = _rotate(f.rot[j], g.params["c_j"])
    wi, wj = f.omega[i], f.omega[j]
    x, y = _dot(B, C), _dot(E, C)
    r2 = x * x + y * y
    bxc, exc = cross(B, C), cross(E, C)
    gi = (x[:, None] * exc - y[:, None] * bxc) / r2[:, None]
    n = len(i)
    Ji = np.zeros((n, 1, 6))
    Jj = np.zeros((n, 1, 6))
    Ji[:, 0, 3:] = _to_body(gi, f.rot[i])
    Jj[:, 0, 3:] = -_to_body(gi, f.rot[j])
    Bd, Ed, Cd = cross(wi, B), cross(wi, E), cross(wj, C)
    xd = _dot(Bd, C) + _dot(B, Cd)
    yd = _dot(Ed, C) + _dot(E, Cd)
    Cdd = cross(wj, Cd)
    xdd = _dot(cross(wi, Bd), C) + 2.0 * _dot(Bd, Cd) + _dot(B, Cdd)
    ydd = _dot(cross(wi, Ed), C) + 2.0 * _dot(Ed, Cd) + _dot(E, Cdd)
    bias = (x * ydd - y * xdd) / r2 - 2.0 * (x * yd - y * xd) * (x * xd + y * yd) / r2**2
    return np.arctan2(y, x)[:, None], Ji, Jj, bias[:, None]


# ------------------------------------------------------------------- 2D kernels
# Jacobian blocks (n, k, 3) = (d/dvx, d/dvy, d/dw).


def _rotate2(rot: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.einsum("nij,nj->ni", rot, v)


def _point2(f: Frames, g: PrimitiveGroup):
    i, j = g.body_i, g.body_j
    ri = _rotate2(f.rot[i], g.params["s_i"])
    rj = _rotate2(f.rot[j], g.params["s_j"])
    n = len(i)
    Ji = np.zeros((n, 2, 3))
    Jj = np.zeros((n, 2, 3))
    Ji[:, 0, 0] = Ji[:, 1, 1] = -1.0
    Jj[:, 0, 0] = Jj[:, 1, 1] = 1.0
    Ji[:, :, 2] = -perp(ri)
    Jj[:, :, 2] = perp(rj)
    wi, wj = f.omega[i], f.omega[j]
    bias = -(wj**2)[:, None] * rj + (wi**2)[:, None] * ri
    return f.pos[j] + rj - f.pos[i] - ri, Ji, Jj, bias


def _angle2(f: Frames, g: PrimitiveGroup):
    i, j = g.body_i, g.body_j
    n = len(i)
    Ji = np.zeros((n, 1, 3))
    Jj = np.zeros((n, 1, 3))
    Ji[:, 0, 2] = -1.0
    Jj[:, 0, 2] = 1.0
    return (f.angle[j] - f.angle[i])[:, None], Ji, Jj, np.zeros((n, 1))


def _dot2_2(f: Frames, g: PrimitiveGroup):
    i, j = g.body_i, g.body_j
    A = _rotate2(f.rot[i], g.params["a_i"])
    ri = _rotate2(f.rot[i], g.params["s_i"])
    rj = _rotate2(f.rot[j], g.params["s_j"])
    wi, wj = f.omega[i], f.omega[j]
    d = f.pos[j] + rj - f.pos[i] - ri
    n = len(i)
    Ji = np.empty((n, 1, 3))
    Jj = np.empty((n, 1, 3))
    Ji[:, 0, :2] = -A
    Ji[:, 0, 2] = _dot(perp(A), d) - _dot(A, perp(ri))
    Jj[:, 0, :2] = A
    Jj[:, 0, 2] = _dot(A, perp(rj))
    Ad = wi[:, None] * perp(A)
    dd = f.vel[j] + wj[:, None] * perp(rj) - f.vel[i] - wi[:, None] * perp(ri)
    d_bias = -(wj**2)[:, None] * rj + (wi**2)[:, None] * ri
    bias = -(wi**2) * _dot(A, d) + 2.0 * _dot(Ad, dd) + _dot(A, d_bias)
    return _dot(A, d)[:, None], Ji, Jj, bias[:, None]


KERNELS = {
    3: {"point": _point3, "dot1": _dot1_3, "dot2": _dot2_3, "angle": _angle3},
    2: {"point": _point2, "angle": _angle2, "dot2": _dot2_2},
}


@dataclass
class ConstraintValues:
    """Phi, Phi_t, gamma (nc,) and the Jacobian J (nc, nv), dense or scipy.sparse CSR."""

    phi: np.ndarray
    phi_t: np.ndarray
    gamma: np.ndarray
    jacobian: np.ndarray | sp.csr_matrix


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
        value, Ji, Jj, bias = kernels[g.kind](frames, g)
        target = g.offset
        accel = np.zeros_like(value)
        if g.drives:
            target = target.copy()
            rate = np.zeros_like(value)
            env = {"t": t}
            for idx, c, c1, c2 in g.drives:
                target[idx, 0] += float(c(env))
                rate[idx, 0] = float(c1(env))
                accel[idx, 0] = float(c2(env))
            phi_t[g.rows] = -rate
        residual = value - target
        if g.wrap:
            residual = (residual + np.pi) % (2.0 * np.pi) - np.pi
        phi[g.rows] = residual
        gamma[g.rows] = accel - bias
        blocks.append((g, Ji, Jj))
    return phi, phi_t, gamma, blocks


def assemble_jacobian(
    blocks: list[tuple[PrimitiveGroup, np.ndarray, np.ndarray]], nrows: int, nbody: int, width: int, sparse: bool
) -> np.ndarray | sp.csr_matrix:
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
            J[g.dense_index[0]] = Ji
            J[g.dense_index[1]] = Jj
        return J[:, :nv]
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
