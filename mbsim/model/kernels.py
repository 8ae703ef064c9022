"""Compiled (numba) kernels of the per-step hot path: body frames and primitive constraints.

Why compiled: a step of a small mechanism (the four-box chain) evaluates these a few dozen
times, on arrays of a handful of rows, where numpy's per-call overhead is most of the cost
(benchmarks/: 2.7 s against a 2 s target for the four-box chain with numpy kernels). Each
kernel loops over the items of one primitive kind, so the cost stays O(n) for long chains.

Conventions (mbsim.model.spatial): quaternions (w, x, y, z); R maps body to world;
angular velocities ``omega`` in world axes; Jacobian blocks (n, k, w) with the translational
columns first and the rotational columns in *body* axes (a world row c becomes R^T c).
The math of each primitive is documented in mbsim.model.constraints. This module imports
nothing from mbsim but mbsim.model.kernel_cache (the guard that makes a bad cache file a miss).
"""

from __future__ import annotations

import numpy as np
from numba import njit

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)

_JIT = {"cache": True, "nogil": True}
# kernels that allocate nothing and return no array run without reference counting (numba's
# NRT): it costs more than their arithmetic when they are called per primitive per stage
_NO_NRT = _JIT | {"_nrt": False}


# ------------------------------------------------------------------- small 3-vector helpers


@njit(inline="always")
def _mv(R, b, v):
    """R[b] @ v."""
    return (
        R[b, 0, 0] * v[0] + R[b, 0, 1] * v[1] + R[b, 0, 2] * v[2],
        R[b, 1, 0] * v[0] + R[b, 1, 1] * v[1] + R[b, 1, 2] * v[2],
        R[b, 2, 0] * v[0] + R[b, 2, 1] * v[1] + R[b, 2, 2] * v[2],
    )


@njit(inline="always")
def _mtv(R, b, v):
    """R[b]^T @ v (a world-axes row turned into body axes)."""
    return (
        R[b, 0, 0] * v[0] + R[b, 1, 0] * v[1] + R[b, 2, 0] * v[2],
        R[b, 0, 1] * v[0] + R[b, 1, 1] * v[1] + R[b, 2, 1] * v[2],
        R[b, 0, 2] * v[0] + R[b, 1, 2] * v[1] + R[b, 2, 2] * v[2],
    )


@njit(inline="always")
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@njit(inline="always")
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(inline="always")
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@njit(inline="always")
def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(inline="always")
def _row(a, k):
    return (a[k, 0], a[k, 1], a[k, 2])


# ------------------------------------------------------------------- frames


@njit(**_NO_NRT)
def frames3_into(q, v, nbody, pos, rot, vel, omega_body, omega):
    """Body frames from q (7 per body) and v (6 per body) into pos (nb+1, 3), rot (nb+1, 3, 3),
    vel (nb+1, 3), omega_body (nb+1, 3) and omega (world), the ground at index nbody.
    Quaternions need not be unit: R is built from q / |q|."""
    for b in range(nbody):
        o = 7 * b
        w, x, y, z = q[o + 3], q[o + 4], q[o + 5], q[o + 6]
        s = 1.0 / (w * w + x * x + y * y + z * z)
        rot[b, 0, 0] = (w * w + x * x - y * y - z * z) * s
        rot[b, 0, 1] = 2.0 * (x * y - w * z) * s
        rot[b, 0, 2] = 2.0 * (x * z + w * y) * s
        rot[b, 1, 0] = 2.0 * (x * y + w * z) * s
        rot[b, 1, 1] = (w * w - x * x + y * y - z * z) * s
        rot[b, 1, 2] = 2.0 * (y * z - w * x) * s
        rot[b, 2, 0] = 2.0 * (x * z - w * y) * s
        rot[b, 2, 1] = 2.0 * (y * z + w * x) * s
        rot[b, 2, 2] = (w * w - x * x - y * y + z * z) * s
        ov = 6 * b
        for a in range(3):
            pos[b, a] = q[o + a]
            vel[b, a] = v[ov + a]
            omega_body[b, a] = v[ov + 3 + a]
        wb = (omega_body[b, 0], omega_body[b, 1], omega_body[b, 2])
        ww = _mv(rot, b, wb)
        for a in range(3):
            omega[b, a] = ww[a]
    for a in range(3):
        pos[nbody, a] = vel[nbody, a] = omega_body[nbody, a] = omega[nbody, a] = 0.0
        for m in range(3):
            rot[nbody, a, m] = 1.0 if a == m else 0.0


@njit(**_JIT)
def frames3(q, v, nbody):
    """frames3_into into new arrays: returns pos, rot, vel, omega_body, omega (world)."""
    pos, vel = np.empty((nbody + 1, 3)), np.empty((nbody + 1, 3))
    omega_body, omega = np.empty((nbody + 1, 3)), np.empty((nbody + 1, 3))
    rot = np.empty((nbody + 1, 3, 3))
    frames3_into(q, v, nbody, pos, rot, vel, omega_body, omega)
    return pos, rot, vel, omega_body, omega


@njit(**_NO_NRT)
def frames2_into(q, v, nbody, pos, rot, vel, omega, angle):
    """Planar body frames from q, v (3 per body) into pos (nb+1, 2), rot (nb+1, 2, 2),
    vel (nb+1, 2), omega (nb+1,) and angle (nb+1,), the ground at index nbody."""
    for b in range(nbody):
        o = 3 * b
        pos[b, 0], pos[b, 1], angle[b] = q[o], q[o + 1], q[o + 2]
        vel[b, 0], vel[b, 1], omega[b] = v[o], v[o + 1], v[o + 2]
        c, s = np.cos(angle[b]), np.sin(angle[b])
        rot[b, 0, 0], rot[b, 0, 1], rot[b, 1, 0], rot[b, 1, 1] = c, -s, s, c
    pos[nbody, 0] = pos[nbody, 1] = vel[nbody, 0] = vel[nbody, 1] = 0.0
    omega[nbody] = angle[nbody] = 0.0
    rot[nbody, 0, 0], rot[nbody, 0, 1], rot[nbody, 1, 0], rot[nbody, 1, 1] = 1.0, 0.0, 0.0, 1.0


@njit(**_JIT)
def frames2(q, v, nbody):
    """frames2_into into new arrays: returns pos, rot, vel, omega, angle."""
    pos, vel = np.empty((nbody + 1, 2)), np.empty((nbody + 1, 2))
    rot = np.empty((nbody + 1, 2, 2))
    omega, angle = np.empty(nbody + 1), np.empty(nbody + 1)
    frames2_into(q, v, nbody, pos, rot, vel, omega, angle)
    return pos, rot, vel, omega, angle


# ------------------------------------------------------------------- 3D primitives
# Each primitive has an item kernel ``*_at`` that evaluates item p of its (n, ...) parameter
# arrays into row k of the outputs value (., k), Ji, Jj (., k, w), bias (., k) -- every entry
# of that row written, so the compiled step can reuse one scratch row -- and a batched kernel
# over all items that allocates its outputs (the Python path: mbsim.model.constraints).


@njit(**_NO_NRT)
def _zero_row(Ji, Jj, k):
    for a in range(Ji.shape[1]):
        for m in range(Ji.shape[2]):
            Ji[k, a, m] = 0.0
            Jj[k, a, m] = 0.0


@njit(**_NO_NRT)
def point3_at(pos, rot, omega, i, j, si, sj, p, value, Ji, Jj, bias, k):
    """p_j - p_i (3 rows)."""
    _zero_row(Ji, Jj, k)
    ri = _mv(rot, i, _row(si, p))
    rj = _mv(rot, j, _row(sj, p))
    wi, wj = _row(omega, i), _row(omega, j)
    acc = _sub(_cross(wj, _cross(wj, rj)), _cross(wi, _cross(wi, ri)))
    for a in range(3):
        value[k, a] = pos[j, a] + rj[a] - pos[i, a] - ri[a]
        bias[k, a] = acc[a]
        Ji[k, a, a] = -1.0
        Jj[k, a, a] = 1.0
    # d(R s)/d omega_body = -skew(r) R: column m is -(r x R[:, m])
    for m in range(3):
        ci = _cross(ri, (rot[i, 0, m], rot[i, 1, m], rot[i, 2, m]))
        cj = _cross(rj, (rot[j, 0, m], rot[j, 1, m], rot[j, 2, m]))
        for a in range(3):
            Ji[k, a, 3 + m] = ci[a]
            Jj[k, a, 3 + m] = -cj[a]


@njit(**_NO_NRT)
def dot1_3_at(rot, omega, i, j, ai, bj_vec, p, value, Ji, Jj, bias, k):
    """(R_i a_i) . (R_j b_j)."""
    _zero_row(Ji, Jj, k)
    A = _mv(rot, i, _row(ai, p))
    B = _mv(rot, j, _row(bj_vec, p))
    wi, wj = _row(omega, i), _row(omega, j)
    axb = _cross(A, B)
    gi = _mtv(rot, i, axb)
    gj = _mtv(rot, j, axb)
    for a in range(3):
        Ji[k, 0, 3 + a] = gi[a]
        Jj[k, 0, 3 + a] = -gj[a]
    Ad, Bd = _cross(wi, A), _cross(wj, B)
    value[k, 0] = _dot(A, B)
    bias[k, 0] = _dot(_cross(wi, Ad), B) + 2.0 * _dot(Ad, Bd) + _dot(A, _cross(wj, Bd))


@njit(**_NO_NRT)
def dot2_3_at(pos, rot, vel, omega, i, j, ai, si, sj, p, value, Ji, Jj, bias, k):
    """(R_i a_i) . (p_j - p_i)."""
    _zero_row(Ji, Jj, k)
    A = _mv(rot, i, _row(ai, p))
    ri = _mv(rot, i, _row(si, p))
    rj = _mv(rot, j, _row(sj, p))
    wi, wj = _row(omega, i), _row(omega, j)
    d = _sub(_add(_row(pos, j), rj), _add(_row(pos, i), ri))
    gi = _mtv(rot, i, _cross(A, _add(d, ri)))
    gj = _mtv(rot, j, _cross(rj, A))
    for a in range(3):
        Ji[k, 0, a] = -A[a]
        Jj[k, 0, a] = A[a]
        Ji[k, 0, 3 + a] = gi[a]
        Jj[k, 0, 3 + a] = gj[a]
    Ad = _cross(wi, A)
    dd = _sub(_add(_row(vel, j), _cross(wj, rj)), _add(_row(vel, i), _cross(wi, ri)))
    d_acc = _sub(_cross(wj, _cross(wj, rj)), _cross(wi, _cross(wi, ri)))
    value[k, 0] = _dot(A, d)
    bias[k, 0] = _dot(_cross(wi, Ad), d) + 2.0 * _dot(Ad, dd) + _dot(A, d_acc)


@njit(**_NO_NRT)
def angle3_at(rot, omega, i, j, b_i, e_i, c_j, p, value, Ji, Jj, bias, k):
    """atan2((R_i e) . (R_j c), (R_i b) . (R_j c)): rotation of j relative to i about a x b."""
    _zero_row(Ji, Jj, k)
    B = _mv(rot, i, _row(b_i, p))
    E = _mv(rot, i, _row(e_i, p))
    C = _mv(rot, j, _row(c_j, p))
    wi, wj = _row(omega, i), _row(omega, j)
    x, y = _dot(B, C), _dot(E, C)
    r2 = x * x + y * y
    bxc, exc = _cross(B, C), _cross(E, C)
    g = ((x * exc[0] - y * bxc[0]) / r2, (x * exc[1] - y * bxc[1]) / r2, (x * exc[2] - y * bxc[2]) / r2)
    gi = _mtv(rot, i, g)
    gj = _mtv(rot, j, g)
    for a in range(3):
        Ji[k, 0, 3 + a] = gi[a]
        Jj[k, 0, 3 + a] = -gj[a]
    Bd, Ed, Cd = _cross(wi, B), _cross(wi, E), _cross(wj, C)
    xd = _dot(Bd, C) + _dot(B, Cd)
    yd = _dot(Ed, C) + _dot(E, Cd)
    Cdd = _cross(wj, Cd)
    xdd = _dot(_cross(wi, Bd), C) + 2.0 * _dot(Bd, Cd) + _dot(B, Cdd)
    ydd = _dot(_cross(wi, Ed), C) + 2.0 * _dot(Ed, Cd) + _dot(E, Cdd)
    value[k, 0] = np.arctan2(y, x)
    bias[k, 0] = (x * ydd - y * xdd) / r2 - 2.0 * (x * yd - y * xd) * (x * xd + y * yd) / (r2 * r2)


@njit(**_JIT)
def point3(pos, rot, omega, bi, bj, si, sj):
    """p_j - p_i: value, Ji, Jj (n, 3, 6), bias (n, 3)."""
    n = bi.shape[0]
    value, Ji, Jj, bias = np.empty((n, 3)), np.empty((n, 3, 6)), np.empty((n, 3, 6)), np.empty((n, 3))
    for k in range(n):
        point3_at(pos, rot, omega, bi[k], bj[k], si, sj, k, value, Ji, Jj, bias, k)
    return value, Ji, Jj, bias


@njit(**_JIT)
def dot1_3(rot, omega, bi, bj, ai, bj_vec):
    """(R_i a_i) . (R_j b_j) of every item."""
    n = bi.shape[0]
    value, Ji, Jj, bias = np.empty((n, 1)), np.empty((n, 1, 6)), np.empty((n, 1, 6)), np.empty((n, 1))
    for k in range(n):
        dot1_3_at(rot, omega, bi[k], bj[k], ai, bj_vec, k, value, Ji, Jj, bias, k)
    return value, Ji, Jj, bias


@njit(**_JIT)
def dot2_3(pos, rot, vel, omega, bi, bj, ai, si, sj):
    """(R_i a_i) . (p_j - p_i) of every item."""
    n = bi.shape[0]
    value, Ji, Jj, bias = np.empty((n, 1)), np.empty((n, 1, 6)), np.empty((n, 1, 6)), np.empty((n, 1))
    for k in range(n):
        dot2_3_at(pos, rot, vel, omega, bi[k], bj[k], ai, si, sj, k, value, Ji, Jj, bias, k)
    return value, Ji, Jj, bias


@njit(**_JIT)
def angle3(rot, omega, bi, bj, b_i, e_i, c_j):
    """The relative angle of every item (see angle3_at)."""
    n = bi.shape[0]
    value, Ji, Jj, bias = np.empty((n, 1)), np.empty((n, 1, 6)), np.empty((n, 1, 6)), np.empty((n, 1))
    for k in range(n):
        angle3_at(rot, omega, bi[k], bj[k], b_i, e_i, c_j, k, value, Ji, Jj, bias, k)
    return value, Ji, Jj, bias


# ------------------------------------------------------------------- 2D primitives
# Jacobian blocks (n, k, 3) = (d/dvx, d/dvy, d/dw); perp(x, y) = (-y, x).


@njit(inline="always")
def _mv2(R, b, v0, v1):
    return (R[b, 0, 0] * v0 + R[b, 0, 1] * v1, R[b, 1, 0] * v0 + R[b, 1, 1] * v1)


@njit(**_NO_NRT)
def point2_at(pos, rot, omega, i, j, si, sj, p, value, Ji, Jj, bias, k):
    _zero_row(Ji, Jj, k)
    ri = _mv2(rot, i, si[p, 0], si[p, 1])
    rj = _mv2(rot, j, sj[p, 0], sj[p, 1])
    wi2, wj2 = omega[i] * omega[i], omega[j] * omega[j]
    for a in range(2):
        value[k, a] = pos[j, a] + rj[a] - pos[i, a] - ri[a]
        bias[k, a] = -wj2 * rj[a] + wi2 * ri[a]
        Ji[k, a, a] = -1.0
        Jj[k, a, a] = 1.0
    Ji[k, 0, 2] = ri[1]
    Ji[k, 1, 2] = -ri[0]
    Jj[k, 0, 2] = -rj[1]
    Jj[k, 1, 2] = rj[0]


@njit(**_NO_NRT)
def angle2_at(angle, i, j, value, Ji, Jj, bias, k):
    _zero_row(Ji, Jj, k)
    value[k, 0] = angle[j] - angle[i]
    Ji[k, 0, 2] = -1.0
    Jj[k, 0, 2] = 1.0
    bias[k, 0] = 0.0


@njit(**_NO_NRT)
def dot2_2_at(pos, rot, vel, omega, i, j, ai, si, sj, p, value, Ji, Jj, bias, k):
    _zero_row(Ji, Jj, k)
    A = _mv2(rot, i, ai[p, 0], ai[p, 1])
    ri = _mv2(rot, i, si[p, 0], si[p, 1])
    rj = _mv2(rot, j, sj[p, 0], sj[p, 1])
    wi, wj = omega[i], omega[j]
    d = (pos[j, 0] + rj[0] - pos[i, 0] - ri[0], pos[j, 1] + rj[1] - pos[i, 1] - ri[1])
    pA = (-A[1], A[0])
    pri = (-ri[1], ri[0])
    prj = (-rj[1], rj[0])
    Ji[k, 0, 0], Ji[k, 0, 1] = -A[0], -A[1]
    Jj[k, 0, 0], Jj[k, 0, 1] = A[0], A[1]
    Ji[k, 0, 2] = pA[0] * d[0] + pA[1] * d[1] - (A[0] * pri[0] + A[1] * pri[1])
    Jj[k, 0, 2] = A[0] * prj[0] + A[1] * prj[1]
    Ad = (wi * pA[0], wi * pA[1])
    dd = (
        vel[j, 0] + wj * prj[0] - vel[i, 0] - wi * pri[0],
        vel[j, 1] + wj * prj[1] - vel[i, 1] - wi * pri[1],
    )
    d_acc = (-wj * wj * rj[0] + wi * wi * ri[0], -wj * wj * rj[1] + wi * wi * ri[1])
    ad = A[0] * d[0] + A[1] * d[1]
    value[k, 0] = ad
    bias[k, 0] = -wi * wi * ad + 2.0 * (Ad[0] * dd[0] + Ad[1] * dd[1]) + A[0] * d_acc[0] + A[1] * d_acc[1]


@njit(**_JIT)
def point2(pos, rot, omega, bi, bj, si, sj):
    n = bi.shape[0]
    value, Ji, Jj, bias = np.empty((n, 2)), np.empty((n, 2, 3)), np.empty((n, 2, 3)), np.empty((n, 2))
    for k in range(n):
        point2_at(pos, rot, omega, bi[k], bj[k], si, sj, k, value, Ji, Jj, bias, k)
    return value, Ji, Jj, bias


@njit(**_JIT)
def angle2(angle, bi, bj):
    n = bi.shape[0]
    value, Ji, Jj, bias = np.empty((n, 1)), np.empty((n, 1, 3)), np.empty((n, 1, 3)), np.empty((n, 1))
    for k in range(n):
        angle2_at(angle, bi[k], bj[k], value, Ji, Jj, bias, k)
    return value, Ji, Jj, bias


@njit(**_JIT)
def dot2_2(pos, rot, vel, omega, bi, bj, ai, si, sj):
    n = bi.shape[0]
    value, Ji, Jj, bias = np.empty((n, 1)), np.empty((n, 1, 3)), np.empty((n, 1, 3)), np.empty((n, 1))
    for k in range(n):
        dot2_2_at(pos, rot, vel, omega, bi[k], bj[k], ai, si, sj, k, value, Ji, Jj, bias, k)
    return value, Ji, Jj, bias


@njit(**_NO_NRT)
def retract3_into(q, dx, nbody, out):
    """q moved by a velocity-space increment: translation plus body-frame rotation vector,
    through the exponential map (q ⊗ exp(dtheta / 2)), then normalised; into out (may be q)."""
    for b in range(nbody):
        o, od = 7 * b, 6 * b
        for a in range(3):
            out[o + a] = q[o + a] + dx[od + a]
        rx, ry, rz = dx[od + 3], dx[od + 4], dx[od + 5]
        angle = np.sqrt(rx * rx + ry * ry + rz * rz)
        if angle < 1e-4:  # sin(angle/2)/angle by its series, exact to round-off here
            f = 0.5 - angle * angle / 48.0
        else:
            f = np.sin(0.5 * angle) / angle
        ew, ex, ey, ez = np.cos(0.5 * angle), f * rx, f * ry, f * rz
        w, x, y, z = q[o + 3], q[o + 4], q[o + 5], q[o + 6]
        nw = w * ew - x * ex - y * ey - z * ez
        nx = w * ex + x * ew + y * ez - z * ey
        ny = w * ey - x * ez + y * ew + z * ex
        nz = w * ez + x * ey - y * ex + z * ew
        s = 1.0 / np.sqrt(nw * nw + nx * nx + ny * ny + nz * nz)
        out[o + 3], out[o + 4], out[o + 5], out[o + 6] = nw * s, nx * s, ny * s, nz * s


@njit(**_JIT)
def retract3(q, dx, nbody):
    """retract3_into a new array."""
    out = np.empty_like(q)
    retract3_into(q, dx, nbody, out)
    return out
