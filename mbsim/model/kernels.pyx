"""Compiled kernels of the per-step hot path: body frames and primitive constraints.

Why compiled: a step of a small mechanism (the four-box chain) evaluates these a few dozen
times, on arrays of a handful of rows, where numpy's per-call overhead is most of the cost
(benchmarks/: 2.7 s against a 2 s target for the four-box chain with numpy kernels). Each
kernel loops over the items of one primitive kind, so the cost stays O(n) for long chains.

Conventions (mbsim.model.spatial): quaternions (w, x, y, z); R maps body to world;
angular velocities ``omega`` in world axes; Jacobian blocks (n, k, w) with the translational
columns first and the rotational columns in *body* axes (a world row c becomes R^T c).
The math of each primitive is documented in mbsim.model.constraints. The C kernels are declared
in kernels.pxd; the functions Python calls (frames3, point3, ...) allocate their outputs.
"""

import numpy as np

from libc.math cimport M_PI, atan2, cos, sin, sqrt

from mbsim.model.expr_kernel cimport _mod

# the code of each primitive kind (kernels.pxd) by (dimension, kind), for the flat tables
# (mbsim.model.flat) and the Python evaluation (mbsim.model.constraints)
KINDS = {
    (3, "point"): POINT3,
    (3, "dot1"): DOT1_3,
    (3, "dot2"): DOT2_3,
    (3, "angle"): ANGLE3,
    (2, "point"): POINT2,
    (2, "angle"): ANGLE2,
    (2, "dot2"): DOT2_2,
    (3, "coupling"): COUPLING,
    (2, "coupling"): COUPLING,
}


# ------------------------------------------------------------------- small 3-vector helpers

# R[b] @ v
cdef inline vec3 _mv(const double[:, :, ::1] R, Py_ssize_t b, vec3 v) noexcept nogil:
    return (
        R[b, 0, 0] * v[0] + R[b, 0, 1] * v[1] + R[b, 0, 2] * v[2],
        R[b, 1, 0] * v[0] + R[b, 1, 1] * v[1] + R[b, 1, 2] * v[2],
        R[b, 2, 0] * v[0] + R[b, 2, 1] * v[1] + R[b, 2, 2] * v[2],
    )


# R[b]^T @ v (a world-axes row turned into body axes)
cdef inline vec3 _mtv(const double[:, :, ::1] R, Py_ssize_t b, vec3 v) noexcept nogil:
    return (
        R[b, 0, 0] * v[0] + R[b, 1, 0] * v[1] + R[b, 2, 0] * v[2],
        R[b, 0, 1] * v[0] + R[b, 1, 1] * v[1] + R[b, 2, 1] * v[2],
        R[b, 0, 2] * v[0] + R[b, 1, 2] * v[1] + R[b, 2, 2] * v[2],
    )


cdef inline vec3 _cross(vec3 a, vec3 b) noexcept nogil:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


cdef inline double _dot(vec3 a, vec3 b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


cdef inline vec3 _add(vec3 a, vec3 b) noexcept nogil:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


cdef inline vec3 _sub(vec3 a, vec3 b) noexcept nogil:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


cdef inline vec3 _row(const double[:, ::1] a, Py_ssize_t k) noexcept nogil:
    return (a[k, 0], a[k, 1], a[k, 2])


# column m of R[b]
cdef inline vec3 _col(const double[:, :, ::1] R, Py_ssize_t b, Py_ssize_t m) noexcept nogil:
    return (R[b, 0, m], R[b, 1, m], R[b, 2, m])


# item p of a Python-side parameter table (n, 3) or (n, 2) as a vec3 (2D: third component 0)
cdef inline vec3 _item(const double[:, :] a, Py_ssize_t p) noexcept nogil:
    return (a[p, 0], a[p, 1], a[p, 2] if a.shape[1] > 2 else 0.0)


# ------------------------------------------------------------------- frames

# Body frames from q (7 per body) and v (6 per body) into pos (nb+1, 3), rot (nb+1, 3, 3),
# vel (nb+1, 3), omega_body (nb+1, 3) and omega (world), the ground at index nbody.
# Quaternions need not be unit: R is built from q / |q|.
cdef void frames3_into(const double[::1] q, const double[::1] v, Py_ssize_t nbody, double[:, ::1] pos,
                       double[:, :, ::1] rot, double[:, ::1] vel, double[:, ::1] omega_body,
                       double[:, ::1] omega) noexcept nogil:
    cdef Py_ssize_t b, a, m, o, ov
    cdef double w, x, y, z, s
    cdef vec3 ww
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
        ww = _mv(rot, b, _row(omega_body, b))
        omega[b, 0], omega[b, 1], omega[b, 2] = ww[0], ww[1], ww[2]
    for a in range(3):
        pos[nbody, a] = vel[nbody, a] = omega_body[nbody, a] = omega[nbody, a] = 0.0
        for m in range(3):
            rot[nbody, a, m] = 1.0 if a == m else 0.0


def frames3(q, v, Py_ssize_t nbody):
    """Body frames from q (7 per body) and v (6 per body), the ground at index nbody (quaternions
    need not be unit): returns pos, rot, vel, omega_body, omega (world)."""
    cdef const double[::1] q_ = np.ascontiguousarray(q, dtype=np.float64)
    cdef const double[::1] v_ = np.ascontiguousarray(v, dtype=np.float64)
    pos, vel = np.empty((nbody + 1, 3)), np.empty((nbody + 1, 3))
    omega_body, omega = np.empty((nbody + 1, 3)), np.empty((nbody + 1, 3))
    rot = np.empty((nbody + 1, 3, 3))
    cdef double[:, ::1] pos_ = pos, vel_ = vel, omega_body_ = omega_body, omega_ = omega
    cdef double[:, :, ::1] rot_ = rot
    with nogil:
        frames3_into(q_, v_, nbody, pos_, rot_, vel_, omega_body_, omega_)
    return pos, rot, vel, omega_body, omega


# Planar body frames from q, v (3 per body) into pos (nb+1, 2), rot (nb+1, 2, 2),
# vel (nb+1, 2), omega (nb+1,) and angle (nb+1,), the ground at index nbody.
cdef void frames2_into(const double[::1] q, const double[::1] v, Py_ssize_t nbody, double[:, ::1] pos,
                       double[:, :, ::1] rot, double[:, ::1] vel, double[::1] omega,
                       double[::1] angle) noexcept nogil:
    cdef Py_ssize_t b, o
    cdef double c, s
    for b in range(nbody):
        o = 3 * b
        pos[b, 0], pos[b, 1], angle[b] = q[o], q[o + 1], q[o + 2]
        vel[b, 0], vel[b, 1], omega[b] = v[o], v[o + 1], v[o + 2]
        c, s = cos(angle[b]), sin(angle[b])
        rot[b, 0, 0], rot[b, 0, 1], rot[b, 1, 0], rot[b, 1, 1] = c, -s, s, c
    pos[nbody, 0] = pos[nbody, 1] = vel[nbody, 0] = vel[nbody, 1] = 0.0
    omega[nbody] = angle[nbody] = 0.0
    rot[nbody, 0, 0], rot[nbody, 0, 1], rot[nbody, 1, 0], rot[nbody, 1, 1] = 1.0, 0.0, 0.0, 1.0


def frames2(q, v, Py_ssize_t nbody):
    """Planar body frames from q, v (3 per body), the ground at index nbody: returns pos, rot,
    vel, omega, angle."""
    cdef const double[::1] q_ = np.ascontiguousarray(q, dtype=np.float64)
    cdef const double[::1] v_ = np.ascontiguousarray(v, dtype=np.float64)
    pos, vel = np.empty((nbody + 1, 2)), np.empty((nbody + 1, 2))
    rot = np.empty((nbody + 1, 2, 2))
    omega, angle = np.empty(nbody + 1), np.empty(nbody + 1)
    cdef double[:, ::1] pos_ = pos, vel_ = vel
    cdef double[:, :, ::1] rot_ = rot
    cdef double[::1] omega_ = omega, angle_ = angle
    with nogil:
        frames2_into(q_, v_, nbody, pos_, rot_, vel_, omega_, angle_)
    return pos, rot, vel, omega, angle


# ------------------------------------------------------------------- 3D primitives
# Each primitive has an item kernel ``*_at`` that evaluates one item (bodies i, j, its local
# vectors by value) into row k of the outputs value (., k), Ji, Jj (., k, w), bias (., k) -- every
# entry of that row written, so the compiled step can reuse one scratch row -- and a batched
# function over all items that allocates its outputs (the Python path: mbsim.model.constraints).

cdef inline void _zero_row(double[:, :, ::1] Ji, double[:, :, ::1] Jj, Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t a, m
    for a in range(Ji.shape[1]):
        for m in range(Ji.shape[2]):
            Ji[k, a, m] = 0.0
            Jj[k, a, m] = 0.0


# p_j - p_i (3 rows)
cdef void point3_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] omega,
                    Py_ssize_t i, Py_ssize_t j, vec3 si, vec3 sj, double[:, ::1] value, double[:, :, ::1] Ji,
                    double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t a, m
    cdef vec3 ri, rj, wi, wj, acc, ci, cj
    _zero_row(Ji, Jj, k)
    ri = _mv(rot, i, si)
    rj = _mv(rot, j, sj)
    wi, wj = _row(omega, i), _row(omega, j)
    acc = _sub(_cross(wj, _cross(wj, rj)), _cross(wi, _cross(wi, ri)))
    value[k, 0] = pos[j, 0] + rj[0] - pos[i, 0] - ri[0]
    value[k, 1] = pos[j, 1] + rj[1] - pos[i, 1] - ri[1]
    value[k, 2] = pos[j, 2] + rj[2] - pos[i, 2] - ri[2]
    bias[k, 0], bias[k, 1], bias[k, 2] = acc[0], acc[1], acc[2]
    for a in range(3):
        Ji[k, a, a] = -1.0
        Jj[k, a, a] = 1.0
    # d(R s)/d omega_body = -skew(r) R: column m is -(r x R[:, m])
    for m in range(3):
        ci = _cross(ri, _col(rot, i, m))
        cj = _cross(rj, _col(rot, j, m))
        Ji[k, 0, 3 + m], Ji[k, 1, 3 + m], Ji[k, 2, 3 + m] = ci[0], ci[1], ci[2]
        Jj[k, 0, 3 + m], Jj[k, 1, 3 + m], Jj[k, 2, 3 + m] = -cj[0], -cj[1], -cj[2]


# (R_i a_i) . (R_j b_j)
cdef void dot1_3_at(const double[:, :, ::1] rot, const double[:, ::1] omega, Py_ssize_t i, Py_ssize_t j,
                    vec3 ai, vec3 bj_vec, double[:, ::1] value, double[:, :, ::1] Ji, double[:, :, ::1] Jj,
                    double[:, ::1] bias, Py_ssize_t k) noexcept nogil:
    cdef vec3 A, B, wi, wj, axb, gi, gj, Ad, Bd
    _zero_row(Ji, Jj, k)
    A = _mv(rot, i, ai)
    B = _mv(rot, j, bj_vec)
    wi, wj = _row(omega, i), _row(omega, j)
    axb = _cross(A, B)
    gi = _mtv(rot, i, axb)
    gj = _mtv(rot, j, axb)
    Ji[k, 0, 3], Ji[k, 0, 4], Ji[k, 0, 5] = gi[0], gi[1], gi[2]
    Jj[k, 0, 3], Jj[k, 0, 4], Jj[k, 0, 5] = -gj[0], -gj[1], -gj[2]
    Ad, Bd = _cross(wi, A), _cross(wj, B)
    value[k, 0] = _dot(A, B)
    bias[k, 0] = _dot(_cross(wi, Ad), B) + 2.0 * _dot(Ad, Bd) + _dot(A, _cross(wj, Bd))


# (R_i a_i) . (p_j - p_i)
cdef void dot2_3_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] vel,
                    const double[:, ::1] omega, Py_ssize_t i, Py_ssize_t j, vec3 ai, vec3 si, vec3 sj,
                    double[:, ::1] value, double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias,
                    Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t a
    cdef vec3 A, ri, rj, wi, wj, d, gi, gj, Ad, dd, d_acc
    _zero_row(Ji, Jj, k)
    A = _mv(rot, i, ai)
    ri = _mv(rot, i, si)
    rj = _mv(rot, j, sj)
    wi, wj = _row(omega, i), _row(omega, j)
    d = _sub(_add(_row(pos, j), rj), _add(_row(pos, i), ri))
    gi = _mtv(rot, i, _cross(A, _add(d, ri)))
    gj = _mtv(rot, j, _cross(rj, A))
    Ji[k, 0, 0], Ji[k, 0, 1], Ji[k, 0, 2] = -A[0], -A[1], -A[2]
    Jj[k, 0, 0], Jj[k, 0, 1], Jj[k, 0, 2] = A[0], A[1], A[2]
    Ji[k, 0, 3], Ji[k, 0, 4], Ji[k, 0, 5] = gi[0], gi[1], gi[2]
    Jj[k, 0, 3], Jj[k, 0, 4], Jj[k, 0, 5] = gj[0], gj[1], gj[2]
    Ad = _cross(wi, A)
    dd = _sub(_add(_row(vel, j), _cross(wj, rj)), _add(_row(vel, i), _cross(wi, ri)))
    d_acc = _sub(_cross(wj, _cross(wj, rj)), _cross(wi, _cross(wi, ri)))
    value[k, 0] = _dot(A, d)
    bias[k, 0] = _dot(_cross(wi, Ad), d) + 2.0 * _dot(Ad, dd) + _dot(A, d_acc)


# atan2((R_i e) . (R_j c), (R_i b) . (R_j c)): rotation of j relative to i about a x b
cdef void angle3_at(const double[:, :, ::1] rot, const double[:, ::1] omega, Py_ssize_t i, Py_ssize_t j,
                    vec3 b_i, vec3 e_i, vec3 c_j, double[:, ::1] value, double[:, :, ::1] Ji,
                    double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil:
    cdef vec3 B, E, C, wi, wj, bxc, exc, g, gi, gj, Bd, Ed, Cd, Cdd
    cdef double x, y, r2, xd, yd, xdd, ydd
    _zero_row(Ji, Jj, k)
    B = _mv(rot, i, b_i)
    E = _mv(rot, i, e_i)
    C = _mv(rot, j, c_j)
    wi, wj = _row(omega, i), _row(omega, j)
    x, y = _dot(B, C), _dot(E, C)
    r2 = x * x + y * y
    bxc, exc = _cross(B, C), _cross(E, C)
    g = ((x * exc[0] - y * bxc[0]) / r2, (x * exc[1] - y * bxc[1]) / r2, (x * exc[2] - y * bxc[2]) / r2)
    gi = _mtv(rot, i, g)
    gj = _mtv(rot, j, g)
    Ji[k, 0, 3], Ji[k, 0, 4], Ji[k, 0, 5] = gi[0], gi[1], gi[2]
    Jj[k, 0, 3], Jj[k, 0, 4], Jj[k, 0, 5] = -gj[0], -gj[1], -gj[2]
    Bd, Ed, Cd = _cross(wi, B), _cross(wi, E), _cross(wj, C)
    xd = _dot(Bd, C) + _dot(B, Cd)
    yd = _dot(Ed, C) + _dot(E, Cd)
    Cdd = _cross(wj, Cd)
    xdd = _dot(_cross(wi, Bd), C) + 2.0 * _dot(Bd, Cd) + _dot(B, Cdd)
    ydd = _dot(_cross(wi, Ed), C) + 2.0 * _dot(Ed, Cd) + _dot(E, Cdd)
    value[k, 0] = atan2(y, x)
    bias[k, 0] = (x * ydd - y * xdd) / r2 - 2.0 * (x * yd - y * xd) * (x * xd + y * yd) / (r2 * r2)


# the batched functions' inputs: frames and parameter tables as C-ordered float64, bodies as int64
cdef inline _f64(a):
    return np.ascontiguousarray(a, dtype=np.float64)


cdef inline _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


cdef inline tuple _outputs(Py_ssize_t n, Py_ssize_t rows, Py_ssize_t w):
    return np.empty((n, rows)), np.empty((n, rows, w)), np.empty((n, rows, w)), np.empty((n, rows))


def point3(pos, rot, omega, bi, bj, si, sj):
    """p_j - p_i: value, Ji, Jj (n, 3, 6), bias (n, 3)."""
    cdef const double[:, ::1] pos_ = _f64(pos), omega_ = _f64(omega)
    cdef const double[:, :, ::1] rot_ = _f64(rot)
    cdef const long long[::1] bi_ = _i64(bi), bj_ = _i64(bj)
    cdef const double[:, :] si_ = _f64(si), sj_ = _f64(sj)
    cdef Py_ssize_t k, n = bi_.shape[0]
    out = _outputs(n, 3, 6)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        for k in range(n):
            point3_at(pos_, rot_, omega_, bi_[k], bj_[k], _item(si_, k), _item(sj_, k), value, Ji, Jj, bias, k)
    return out


def dot1_3(rot, omega, bi, bj, ai, bj_vec):
    """(R_i a_i) . (R_j b_j) of every item."""
    cdef const double[:, ::1] omega_ = _f64(omega)
    cdef const double[:, :, ::1] rot_ = _f64(rot)
    cdef const long long[::1] bi_ = _i64(bi), bj_ = _i64(bj)
    cdef const double[:, :] ai_ = _f64(ai), bv_ = _f64(bj_vec)
    cdef Py_ssize_t k, n = bi_.shape[0]
    out = _outputs(n, 1, 6)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        for k in range(n):
            dot1_3_at(rot_, omega_, bi_[k], bj_[k], _item(ai_, k), _item(bv_, k), value, Ji, Jj, bias, k)
    return out


def dot2_3(pos, rot, vel, omega, bi, bj, ai, si, sj):
    """(R_i a_i) . (p_j - p_i) of every item."""
    cdef const double[:, ::1] pos_ = _f64(pos), vel_ = _f64(vel), omega_ = _f64(omega)
    cdef const double[:, :, ::1] rot_ = _f64(rot)
    cdef const long long[::1] bi_ = _i64(bi), bj_ = _i64(bj)
    cdef const double[:, :] ai_ = _f64(ai), si_ = _f64(si), sj_ = _f64(sj)
    cdef Py_ssize_t k, n = bi_.shape[0]
    out = _outputs(n, 1, 6)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        for k in range(n):
            dot2_3_at(pos_, rot_, vel_, omega_, bi_[k], bj_[k], _item(ai_, k), _item(si_, k), _item(sj_, k),
                      value, Ji, Jj, bias, k)
    return out


def angle3(rot, omega, bi, bj, b_i, e_i, c_j):
    """The relative angle of every item (see angle3_at)."""
    cdef const double[:, ::1] omega_ = _f64(omega)
    cdef const double[:, :, ::1] rot_ = _f64(rot)
    cdef const long long[::1] bi_ = _i64(bi), bj_ = _i64(bj)
    cdef const double[:, :] b_ = _f64(b_i), e_ = _f64(e_i), c_ = _f64(c_j)
    cdef Py_ssize_t k, n = bi_.shape[0]
    out = _outputs(n, 1, 6)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        for k in range(n):
            angle3_at(rot_, omega_, bi_[k], bj_[k], _item(b_, k), _item(e_, k), _item(c_, k), value, Ji, Jj, bias, k)
    return out


# ------------------------------------------------------------------- 2D primitives
# Jacobian blocks (n, k, 3) = (d/dvx, d/dvy, d/dw); perp(x, y) = (-y, x).

cdef inline (double, double) _mv2(const double[:, :, ::1] R, Py_ssize_t b, double v0, double v1) noexcept nogil:
    return (R[b, 0, 0] * v0 + R[b, 0, 1] * v1, R[b, 1, 0] * v0 + R[b, 1, 1] * v1)


cdef void point2_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[::1] omega,
                    Py_ssize_t i, Py_ssize_t j, vec3 si, vec3 sj, double[:, ::1] value, double[:, :, ::1] Ji,
                    double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil:
    cdef (double, double) ri, rj
    cdef double wi2, wj2
    _zero_row(Ji, Jj, k)
    ri = _mv2(rot, i, si[0], si[1])
    rj = _mv2(rot, j, sj[0], sj[1])
    wi2, wj2 = omega[i] * omega[i], omega[j] * omega[j]
    value[k, 0] = pos[j, 0] + rj[0] - pos[i, 0] - ri[0]
    value[k, 1] = pos[j, 1] + rj[1] - pos[i, 1] - ri[1]
    bias[k, 0] = -wj2 * rj[0] + wi2 * ri[0]
    bias[k, 1] = -wj2 * rj[1] + wi2 * ri[1]
    Ji[k, 0, 0] = Ji[k, 1, 1] = -1.0
    Jj[k, 0, 0] = Jj[k, 1, 1] = 1.0
    Ji[k, 0, 2] = ri[1]
    Ji[k, 1, 2] = -ri[0]
    Jj[k, 0, 2] = -rj[1]
    Jj[k, 1, 2] = rj[0]


cdef void angle2_at(const double[::1] angle, Py_ssize_t i, Py_ssize_t j, double[:, ::1] value,
                    double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil:
    _zero_row(Ji, Jj, k)
    value[k, 0] = angle[j] - angle[i]
    Ji[k, 0, 2] = -1.0
    Jj[k, 0, 2] = 1.0
    bias[k, 0] = 0.0


cdef void dot2_2_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] vel,
                    const double[::1] omega, Py_ssize_t i, Py_ssize_t j, vec3 ai, vec3 si, vec3 sj,
                    double[:, ::1] value, double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias,
                    Py_ssize_t k) noexcept nogil:
    cdef (double, double) A, ri, rj, d, pA, pri, prj, Ad, dd, d_acc
    cdef double wi, wj, ad
    _zero_row(Ji, Jj, k)
    A = _mv2(rot, i, ai[0], ai[1])
    ri = _mv2(rot, i, si[0], si[1])
    rj = _mv2(rot, j, sj[0], sj[1])
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


def point2(pos, rot, omega, bi, bj, si, sj):
    """p_j - p_i in the plane: value, Ji, Jj (n, 2, 3), bias (n, 2)."""
    cdef const double[:, ::1] pos_ = _f64(pos)
    cdef const double[:, :, ::1] rot_ = _f64(rot)
    cdef const double[::1] omega_ = _f64(omega)
    cdef const long long[::1] bi_ = _i64(bi), bj_ = _i64(bj)
    cdef const double[:, :] si_ = _f64(si), sj_ = _f64(sj)
    cdef Py_ssize_t k, n = bi_.shape[0]
    out = _outputs(n, 2, 3)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        for k in range(n):
            point2_at(pos_, rot_, omega_, bi_[k], bj_[k], _item(si_, k), _item(sj_, k), value, Ji, Jj, bias, k)
    return out


def angle2(angle, bi, bj):
    """angle_j - angle_i of every item."""
    cdef const double[::1] angle_ = _f64(angle)
    cdef const long long[::1] bi_ = _i64(bi), bj_ = _i64(bj)
    cdef Py_ssize_t k, n = bi_.shape[0]
    out = _outputs(n, 1, 3)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        for k in range(n):
            angle2_at(angle_, bi_[k], bj_[k], value, Ji, Jj, bias, k)
    return out


def dot2_2(pos, rot, vel, omega, bi, bj, ai, si, sj):
    """(R_i a_i) . (p_j - p_i) in the plane of every item."""
    cdef const double[:, ::1] pos_ = _f64(pos), vel_ = _f64(vel)
    cdef const double[:, :, ::1] rot_ = _f64(rot)
    cdef const double[::1] omega_ = _f64(omega)
    cdef const long long[::1] bi_ = _i64(bi), bj_ = _i64(bj)
    cdef const double[:, :] ai_ = _f64(ai), si_ = _f64(si), sj_ = _f64(sj)
    cdef Py_ssize_t k, n = bi_.shape[0]
    out = _outputs(n, 1, 3)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        for k in range(n):
            dot2_2_at(pos_, rot_, vel_, omega_, bi_[k], bj_[k], _item(ai_, k), _item(si_, k), _item(sj_, k),
                      value, Ji, Jj, bias, k)
    return out


# ------------------------------------------------------------------- couplings

# local vector c of item p of a table (n, 3, 3)
cdef inline vec3 _tv(const double[:, :, ::1] vec, Py_ssize_t p, Py_ssize_t c) noexcept nogil:
    return (vec[p, c, 0], vec[p, c, 1], vec[p, c, 2])


# item p of a table of one-row kinds (a joint coordinate: ANGLE3, DOT2_3, ANGLE2, DOT2_2) into row k
cdef inline void _coordinate_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] vel,
                                const double[:, ::1] omega, const double[::1] omega2, const double[::1] angle,
                                long long kind, Py_ssize_t i, Py_ssize_t j, const double[:, :, ::1] vec,
                                Py_ssize_t p, double[:, ::1] value, double[:, :, ::1] Ji, double[:, :, ::1] Jj,
                                double[:, ::1] bias, Py_ssize_t k) noexcept nogil:
    if kind == ANGLE3:
        angle3_at(rot, omega, i, j, _tv(vec, p, 0), _tv(vec, p, 1), _tv(vec, p, 2), value, Ji, Jj, bias, k)
    elif kind == DOT2_3:
        dot2_3_at(pos, rot, vel, omega, i, j, _tv(vec, p, 0), _tv(vec, p, 1), _tv(vec, p, 2), value, Ji, Jj, bias, k)
    elif kind == ANGLE2:
        angle2_at(angle, i, j, value, Ji, Jj, bias, k)
    else:  # DOT2_2
        dot2_2_at(pos, rot, vel, omega2, i, j, _tv(vec, p, 0), _tv(vec, p, 1), _tv(vec, p, 2), value, Ji, Jj, bias, k)


# (value_a - off_a) - ratio (value_b - off_b) - offset: joint a follows joint b (URDF mimic),
# each residual wrapped to (-pi, pi] where its part wraps (a 3D angle); J and the bias are the
# parts' combined the same way (both linear in the parts' own). Parts: items p, p + 1 of a table.
cdef void coupling_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] vel,
                      const double[:, ::1] omega, const double[::1] omega2, const double[::1] angle,
                      const long long[::1] kind, const long long[::1] bi, const long long[::1] bj,
                      const double[:, :, ::1] vec, const double[:, ::1] offset, const long long[::1] wrap,
                      Py_ssize_t p, double ratio, double coupling_offset, double[:, ::1] value,
                      double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t m
    cdef double res_a, res_b, scale = -ratio
    _coordinate_at(pos, rot, vel, omega, omega2, angle, kind[p], bi[p], bj[p], vec, p, value, Ji, Jj, bias, k)
    _coordinate_at(pos, rot, vel, omega, omega2, angle, kind[p + 1], bi[p + 1], bj[p + 1], vec, p + 1,
                   value, Ji, Jj, bias, k + 1)
    # each part's residual from its own offset (Python's float %: the sign of 2 pi)
    res_a = value[k, 0] - offset[p, 0]
    if wrap[p]:
        res_a = _mod(res_a + M_PI, 2.0 * M_PI) - M_PI
    res_b = value[k + 1, 0] - offset[p + 1, 0]
    if wrap[p + 1]:
        res_b = _mod(res_b + M_PI, 2.0 * M_PI) - M_PI
    value[k, 0] = res_a + scale * res_b - coupling_offset
    bias[k, 0] = bias[k, 0] + scale * bias[k + 1, 0]
    value[k + 1, 0] = bias[k + 1, 0] = 0.0
    for m in range(Ji.shape[2]):
        Ji[k + 1, 0, m] = scale * Ji[k + 1, 0, m]
        Jj[k + 1, 0, m] = scale * Jj[k + 1, 0, m]


def coupling(pos, rot, vel, omega, omega2, angle, kind, bi, bj, vec, offset, wrap, double ratio,
             double coupling_offset, Py_ssize_t width):
    """One coupling (coupling_at) over the two-item table of its parts (kind, bi, bj (2,), vec
    (2, 3, 3), offset (2,), wrap (2,)): value, Ji, Jj (2, 1, width), bias (2, 1), row 0 the
    coupling's value and bias and part a's body blocks, row 1 part b's blocks (times -ratio)."""
    cdef const double[:, ::1] pos_ = _f64(pos), vel_ = _f64(vel), omega_ = _f64(omega)
    cdef const double[:, :, ::1] rot_ = _f64(rot)
    cdef const double[::1] omega2_ = _f64(omega2), angle_ = _f64(angle)
    cdef const long long[::1] kind_ = _i64(kind), bi_ = _i64(bi), bj_ = _i64(bj), wrap_ = _i64(wrap)
    cdef const double[:, :, ::1] vec_ = _f64(vec)
    cdef const double[:, ::1] offset_ = _f64(np.reshape(offset, (2, 1)))
    out = _outputs(2, 1, width)
    cdef double[:, ::1] value = out[0], bias = out[3]
    cdef double[:, :, ::1] Ji = out[1], Jj = out[2]
    with nogil:
        coupling_at(pos_, rot_, vel_, omega_, omega2_, angle_, kind_, bi_, bj_, vec_, offset_, wrap_, 0, ratio,
                    coupling_offset, value, Ji, Jj, bias, 0)
    return out


# q moved by a velocity-space increment: translation plus body-frame rotation vector, through
# the exponential map (q ⊗ exp(dtheta / 2)), then normalised; into out (may be q)
cdef void retract3_into(const double[::1] q, const double[::1] dx, Py_ssize_t nbody,
                        double[::1] out) noexcept nogil:
    cdef Py_ssize_t b, a, o, od
    cdef double rx, ry, rz, angle, f, ew, ex, ey, ez, w, x, y, z, nw, nx, ny, nz, s
    for b in range(nbody):
        o, od = 7 * b, 6 * b
        for a in range(3):
            out[o + a] = q[o + a] + dx[od + a]
        rx, ry, rz = dx[od + 3], dx[od + 4], dx[od + 5]
        angle = sqrt(rx * rx + ry * ry + rz * rz)
        if angle < 1e-4:  # sin(angle/2)/angle by its series, exact to round-off here
            f = 0.5 - angle * angle / 48.0
        else:
            f = sin(0.5 * angle) / angle
        ew, ex, ey, ez = cos(0.5 * angle), f * rx, f * ry, f * rz
        w, x, y, z = q[o + 3], q[o + 4], q[o + 5], q[o + 6]
        nw = w * ew - x * ex - y * ey - z * ez
        nx = w * ex + x * ew + y * ez - z * ey
        ny = w * ey - x * ez + y * ew + z * ex
        nz = w * ez + x * ey - y * ex + z * ew
        s = 1.0 / sqrt(nw * nw + nx * nx + ny * ny + nz * nz)
        out[o + 3], out[o + 4], out[o + 5], out[o + 6] = nw * s, nx * s, ny * s, nz * s


def retract3(q, dx, Py_ssize_t nbody):
    """q moved by a velocity-space increment dx (translation plus body-frame rotation vector,
    through the exponential map), quaternions normalised; a new array."""
    cdef const double[::1] q_ = np.ascontiguousarray(q, dtype=np.float64)
    cdef const double[::1] dx_ = np.ascontiguousarray(dx, dtype=np.float64)
    out = np.empty(q_.shape[0])
    cdef double[::1] out_ = out
    with nogil:
        retract3_into(q_, dx_, nbody, out_)
    return out
