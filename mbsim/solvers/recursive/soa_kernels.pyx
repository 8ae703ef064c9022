"""Compiled (Cython) recursions of spatial operator algebra for trees in joint coordinates:
kinematics, articulated-body forward dynamics (hybrid: some joints prescribed) and
Newton-Euler inverse dynamics (papers/creeping-robot-spatial-operator-algebra.txt §3,
after Rodriguez-Jain-Kreutz-Delgado; the articulated-body form is Featherstone's ``aba``, the
inverse dynamics his ``rnea``).

This module imports nothing from mbsim; mbsim.solvers.recursive prepares the arrays.

Conventions. Bodies are indexed as in the scene (0..nb-1); index ``nb`` is the ground (at
rest, identity rotation), so a root's parent needs no special case. ``order`` lists every
parent before its children. Spatial vectors are (angular, linear) in *world* axes, referred
to the body's reference point O_k: the child-side point of its inboard joint (the paper's
eq. (6); a free root's O_k is its centre of mass). Symbols of the paper, per body k with
parent p:

- V_k = (omega_k, v(O_k)): spatial velocity; alpha_k its time derivative (eq. (9));
- l = O_k - O_p; phi(p, k) = [[I, l~], [0, I]] moves a spatial force from O_k to O_p and
  phi*(p, k) = phi(p, k)^T a spatial velocity from O_p to O_k (eq. (7));
- H*_k: (6, n_k) joint map, its columns ``Hs[vadr[k]:vadr[k]+n_k]`` (eq. (20) shows the
  robot's); V_k = phi* V_p + H* qdot (eq. (8));
- a_k = d/dt(phi*) V_p + d/dt(H*) qdot = (0, omega_p x (v_k - v_p)) + d/dt(H*) qdot, the
  Coriolis and centripetal accelerations (eq. (9));
- M_k: spatial inertia about O_k, [[J(O_k), m c~], [-m c~, m I]] with c = centre of mass - O_k
  (eq. (10); the OCR'd sign of the lower-left block is garbled: it is -m c~ = (m c~)^T);
- b_k = (omega x J_c omega + m c x (omega x (omega x c)), m omega x (omega x c)): the
  gyroscopic and centripetal forces (eq. (12)), so that M_k alpha_k + b_k is the rate of
  change of the momentum (eq. (11)); external forces enter separately (``ext``);
- f_k: spatial force at O_k that the parent exerts on body k through joint k (eq. (13));
  T_k = H_k f_k its joint force (H_k = H*_k^T).

Joint codes (``jtype``) and what they take from ``ax1`` (unit axis in the parent's frame)
and ``ax2`` (unit axis in the child's frame); the relative rotation is
R_p^T R_k = E(q) R0 F(q) with R0 the rotation at the joint's zero, ``qrel0`` its quaternion:

FIXED 0: no coordinates. REVOLUTE 1: angle about ax1 (E). PRISMATIC 2: position along ax1.
CYLINDRICAL 3: (position along ax1, angle about ax1). UNIVERSAL 4: angle about ax1 (E), then
about ax2 (F). SPHERICAL 5: quaternion (F); velocities: relative angular velocity in the child's
axes. FREE 6: centre of mass (world) and quaternion of the body; velocities: centre-of-mass
velocity (world) and angular velocity in body axes (mbsim's body coordinates). PLANAR_FREE 7:
x, y, angle about z (planar scenes embedded in 3D).
"""

import numpy as np

from libc.math cimport cos, sin, sqrt

FIXED, REVOLUTE, PRISMATIC, CYLINDRICAL, UNIVERSAL, SPHERICAL, FREE, PLANAR_FREE = range(8)
# the motions a joint type can name (mbsim.model.joints.base.TreeMotion) -> joint code
MOTIONS = {
    "fixed": FIXED,
    "revolute": REVOLUTE,
    "prismatic": PRISMATIC,
    "cylindrical": CYLINDRICAL,
    "universal": UNIVERSAL,
    "spherical": SPHERICAL,
}
# coordinates and velocities per joint code
NQ = (0, 1, 1, 2, 2, 4, 7, 3)
NV = (0, 1, 1, 2, 2, 3, 6, 3)


# ------------------------------------------------------------------- small helpers
# (3x3 and 6x6 blocks are read through pointers to their first element: fixed strides the C
# compiler unrolls; row3/row6 are declared in soa_kernels.pxd)


cdef inline (double, double, double, double) _qmul(
    double a0, double a1, double a2, double a3, double b0, double b1, double b2, double b3
) noexcept nogil:
    """Hamilton product (w, x, y, z) of two quaternions given by components."""
    return (
        a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
        a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
        a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1,
        a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0,
    )


cdef inline (double, double, double, double) _axis_angle(const double* ax, double angle) noexcept nogil:
    """Quaternion of a rotation by ``angle`` about the unit axis ax (3,)."""
    cdef double s = sin(0.5 * angle)
    return cos(0.5 * angle), s * ax[0], s * ax[1], s * ax[2]


cdef inline (double, double, double) _rotate(const double* R, double x0, double x1, double x2) noexcept nogil:
    """R @ x, R (3, 3)."""
    return (
        R[0] * x0 + R[1] * x1 + R[2] * x2,
        R[3] * x0 + R[4] * x1 + R[5] * x2,
        R[6] * x0 + R[7] * x1 + R[8] * x2,
    )


cdef inline void _set_column(
    double* col, double ang0, double ang1, double ang2, double lin0, double lin1, double lin2
) noexcept nogil:
    """A joint map column (Hs row, 6)."""
    col[0] = ang0
    col[1] = ang1
    col[2] = ang2
    col[3] = lin0
    col[4] = lin1
    col[5] = lin2


cdef inline void _spatial_inertia(
    row6* Mk, double m, const double* J, const double* R, double c0, double c1, double c2
) noexcept nogil:
    """Mk (6, 6) = spatial inertia about O_k in world axes: J(O_k) = R J_c R^T + m (|c|^2 I - c c^T),
    coupling m c~ (top right) and -m c~ (bottom left), m I (eq. (10)); J, R: the body's (3, 3)."""
    cdef int i, j, a, b
    cdef double s, t, cc
    cdef double c[3]
    for i in range(3):
        for j in range(3):
            s = 0.0
            for a in range(3):
                t = R[3 * i + a]
                if t != 0.0:
                    for b in range(3):
                        s += t * J[3 * a + b] * R[3 * j + b]
            Mk[i][j] = s
    cc = c0 * c0 + c1 * c1 + c2 * c2
    c[0] = c0
    c[1] = c1
    c[2] = c2
    for i in range(3):
        for j in range(3):
            Mk[i][j] += m * ((cc if i == j else 0.0) - c[i] * c[j])
            Mk[i + 3][j + 3] = m if i == j else 0.0
    # m c~ and its transpose
    Mk[0][3] = 0.0
    Mk[0][4] = -m * c2
    Mk[0][5] = m * c1
    Mk[1][3] = m * c2
    Mk[1][4] = 0.0
    Mk[1][5] = -m * c0
    Mk[2][3] = -m * c1
    Mk[2][4] = m * c0
    Mk[2][5] = 0.0
    for i in range(3):
        for j in range(3):
            Mk[j + 3][i] = Mk[i][j + 3]


cdef inline void _body_bias(
    double* out, double m, const double* J, const double* R, double w0, double w1, double w2, double c0,
    double c1, double c2, const double* ext, const double* gravity,
) noexcept nogil:
    """out (6,) = b_k - f_ext at O_k (eq. (12)): gyroscopic and centripetal terms minus the
    external wrench (``ext`` (6,) = (torque, force) at the centre of mass, world) and gravity."""
    cdef double wb0, wb1, wb2, h0, h1, h2, hw0, hw1, hw2, u0, u1, u2, e0, e1, e2, F0, F1, F2, L0, L1, L2
    # omega x (J_world omega), J_world = R J_c R^T
    wb0 = R[0] * w0 + R[3] * w1 + R[6] * w2
    wb1 = R[1] * w0 + R[4] * w1 + R[7] * w2
    wb2 = R[2] * w0 + R[5] * w1 + R[8] * w2
    h0 = J[0] * wb0 + J[1] * wb1 + J[2] * wb2
    h1 = J[3] * wb0 + J[4] * wb1 + J[5] * wb2
    h2 = J[6] * wb0 + J[7] * wb1 + J[8] * wb2
    hw0, hw1, hw2 = _rotate(R, h0, h1, h2)
    # centripetal acceleration of the centre of mass relative to O: omega x (omega x c)
    u0, u1, u2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0
    e0, e1, e2 = w1 * u2 - w2 * u1, w2 * u0 - w0 * u2, w0 * u1 - w1 * u0
    # external force at the centre of mass (applied loads plus weight) and its moment about O
    F0 = ext[3] + m * gravity[0]
    F1 = ext[4] + m * gravity[1]
    F2 = ext[5] + m * gravity[2]
    L0 = m * e0 - F0
    L1 = m * e1 - F1
    L2 = m * e2 - F2
    # angular: omega x J omega + c x (m omega x (omega x c) - F) - T
    out[0] = w1 * hw2 - w2 * hw1 + c1 * L2 - c2 * L1 - ext[0]
    out[1] = w2 * hw0 - w0 * hw2 + c2 * L0 - c0 * L2 - ext[1]
    out[2] = w0 * hw1 - w1 * hw0 + c0 * L1 - c1 * L0 - ext[2]
    out[3] = L0
    out[4] = L1
    out[5] = L2


cdef inline void _shift_inertia_add(row6* Pp, const row6* Pk, double l0, double l1, double l2) noexcept nogil:
    """Pp += phi Pk phi^T with phi = [[I, l~], [0, I]] (an articulated inertia moved from O_k to
    O_p). With Pk = [[A, B], [B^T, D]]: X = B + l~ D; result [[A + l~ B^T + X l~^T, X], [X^T, D]]."""
    cdef int i, j
    cdef double d0, d1, d2, b0, b1, b2, y0, y1, y2, x0, x1, x2
    cdef double X[3][3]
    for j in range(3):
        d0, d1, d2 = Pk[3][3 + j], Pk[4][3 + j], Pk[5][3 + j]
        X[0][j] = Pk[0][3 + j] + l1 * d2 - l2 * d1
        X[1][j] = Pk[1][3 + j] + l2 * d0 - l0 * d2
        X[2][j] = Pk[2][3 + j] + l0 * d1 - l1 * d0
    for j in range(3):
        # column j of l~ B^T: l x (row j of B)
        b0, b1, b2 = Pk[j][3], Pk[j][4], Pk[j][5]
        y0 = l1 * b2 - l2 * b1
        y1 = l2 * b0 - l0 * b2
        y2 = l0 * b1 - l1 * b0
        # row i of X l~^T is l x (row i of X); element (i, j) below
        Pp[0][j] += Pk[0][j] + y0
        Pp[1][j] += Pk[1][j] + y1
        Pp[2][j] += Pk[2][j] + y2
    for i in range(3):
        x0, x1, x2 = X[i][0], X[i][1], X[i][2]
        Pp[i][0] += l1 * x2 - l2 * x1
        Pp[i][1] += l2 * x0 - l0 * x2
        Pp[i][2] += l0 * x1 - l1 * x0
    for i in range(3):
        for j in range(3):
            Pp[i][3 + j] += X[i][j]
            Pp[3 + j][i] += X[i][j]
            Pp[3 + i][3 + j] += Pk[3 + i][3 + j]


# The def wrappers take any arrays: arrays of the kernels' dtypes and C order are
# viewed as they are (the fast path), others converted to C-ordered copies (_f, _i, _b) and the
# call repeated. Output arrays must be of the right type already (the kernels write into them).
cdef inline object _f(x):
    return np.ascontiguousarray(x, dtype=np.float64)


cdef inline object _i(x):
    return np.ascontiguousarray(x, dtype=np.int64)


cdef inline object _b(x):
    return np.ascontiguousarray(x, dtype=np.int8)


# ------------------------------------------------------------------- kinematics


def kinematics(order, parent, jtype, qadr, vadr, rp, rc, qrel0, ax1, ax2, ang0, q, qd):
    """Body poses, velocities, joint maps and Coriolis terms from the joint coordinates
    (base to tip; the paper's recursion (14) for V).

    Returns (each with the ground row at index nb):
        quat (nb+1, 4) body quaternions, rot (nb+1, 3, 3) body -> world, o (nb+1, 3) reference
        points O_k, com (nb+1, 3) centres of mass, V (nb+1, 6) spatial velocities at O_k,
        vcom (nb+1, 3) centre-of-mass velocities, angle (nb+1,) planar angle (2D scenes),
        Hs (nv, 6) joint map columns H*, acor (nb+1, 6) Coriolis terms a_k, all world axes.
    """
    cdef Py_ssize_t nb = len(order)
    cdef Py_ssize_t nv = len(qd)
    quat = np.zeros((nb + 1, 4))
    rot = np.zeros((nb + 1, 3, 3))
    o = np.zeros((nb + 1, 3))
    com = np.zeros((nb + 1, 3))
    V = np.zeros((nb + 1, 6))
    vcom = np.zeros((nb + 1, 3))
    angle = np.zeros(nb + 1)
    Hs = np.zeros((nv, 6))
    acor = np.zeros((nb + 1, 6))
    rel = np.empty(6)
    kinematics_into(
        order, parent, jtype, qadr, vadr, rp, rc, qrel0, ax1, ax2, ang0, q, qd, quat, rot, o, com, V, vcom, angle,
        Hs, acor, rel,
    )
    return quat, rot, o, com, V, vcom, angle, Hs, acor


def kinematics_into(
    order, parent, jtype, qadr, vadr, rp, rc, qrel0, ax1, ax2, ang0, q, qd, quat, rot, o, com, V, vcom, angle, Hs,
    acor, rel,
):
    """:func:`kinematics` into given arrays (their shapes as returned there; rel (6,) scratch);
    allocates nothing."""
    try:
        _kinematics(order, parent, jtype, qadr, vadr, rp, rc, qrel0, ax1, ax2, ang0, q, qd, quat, rot, o, com, V,
                    vcom, angle, Hs, acor, rel)
    except (ValueError, TypeError):
        _kinematics(
            _i(order), _i(parent), _i(jtype), _i(qadr), _i(vadr), _f(rp), _f(rc), _f(qrel0), _f(ax1), _f(ax2),
            _f(ang0), _f(q), _f(qd), quat, rot, o, com, V, vcom, angle, Hs, acor, rel,
        )


cdef object _kinematics(
    const long long[::1] order, const long long[::1] parent, const long long[::1] jtype,
    const long long[::1] qadr, const long long[::1] vadr, const double[:, ::1] rp, const double[:, ::1] rc,
    const double[:, ::1] qrel0, const double[:, ::1] ax1, const double[:, ::1] ax2, const double[::1] ang0,
    const double[::1] q, const double[::1] qd, double[:, ::1] quat, double[:, :, ::1] rot, double[:, ::1] o,
    double[:, ::1] com, double[:, ::1] V, double[:, ::1] vcom, double[::1] angle, double[:, ::1] Hs,
    double[:, ::1] acor, double[::1] rel,
):
    with nogil:
        kinematics_into_c(
            order, parent, jtype, qadr, vadr, rp, rc, qrel0, ax1, ax2, ang0, q, qd, quat, rot, o, com, V, vcom, angle,
            Hs, acor, rel,
        )


cdef void kinematics_into_c(
    const long long[::1] order, const long long[::1] parent, const long long[::1] jtype,
    const long long[::1] qadr, const long long[::1] vadr, const double[:, ::1] rp, const double[:, ::1] rc,
    const double[:, ::1] qrel0, const double[:, ::1] ax1, const double[:, ::1] ax2, const double[::1] ang0,
    const double[::1] q, const double[::1] qd, double[:, ::1] quat, double[:, :, ::1] rot, double[:, ::1] o,
    double[:, ::1] com, double[:, ::1] V, double[:, ::1] vcom, double[::1] angle, double[:, ::1] Hs,
    double[:, ::1] acor, double[::1] rel,
) noexcept nogil:
    cdef Py_ssize_t nb = order.shape[0]
    cdef Py_ssize_t i, k, p, qa, va, off, a, d, r, nj
    cdef long long t
    cdef double e0, e1, e2, e3, f0, f1, f2, f3, g0, g1, g2, g3, n, h, w, x, y, z, s
    cdef double x0, x1, x2, y0, y1, y2, c0, c1, c2, wp0, wp1, wp2, a0, a1, a2, b0, b1, b2
    cdef double l0, l1, l2, w0, w1, w2, dv0, dv1, dv2, pr0, pr1, pr2, cr0, cr1, cr2, s0, s1, s2
    cdef double* Rk
    cdef double* Rp
    cdef double* Vk
    cdef double* Vp
    cdef double* ok
    cdef double* op
    cdef double* ck
    cdef double* cp
    cdef double* vk
    cdef double* ak
    cdef double* qk
    cdef double* qp
    quat[...] = 0.0
    rot[...] = 0.0
    o[...] = 0.0
    com[...] = 0.0
    V[...] = 0.0
    vcom[...] = 0.0
    angle[...] = 0.0
    Hs[...] = 0.0
    acor[...] = 0.0
    quat[nb, 0] = 1.0
    for a in range(3):
        rot[nb, a, a] = 1.0
    for i in range(nb):
        k = order[i]
        p = parent[k]
        t = jtype[k]
        qa = qadr[k]
        va = vadr[k]
        # this body's and its parent's rows
        Rk, Rp = &rot[k, 0, 0], &rot[p, 0, 0]
        Vk, Vp, ok, op = &V[k, 0], &V[p, 0], &o[k, 0], &o[p, 0]
        ck, cp, vk, ak, qk, qp = &com[k, 0], &com[p, 0], &vcom[k, 0], &acor[k, 0], &quat[k, 0], &quat[p, 0]
        # ---- orientation: q_k = q_p (x) E (x) R0 (x) F
        e0, e1, e2, e3 = 1.0, 0.0, 0.0, 0.0
        f0, f1, f2, f3 = 1.0, 0.0, 0.0, 0.0
        if t == J_REVOLUTE:
            e0, e1, e2, e3 = _axis_angle(&ax1[k, 0], q[qa])
        elif t == J_CYLINDRICAL:
            e0, e1, e2, e3 = _axis_angle(&ax1[k, 0], q[qa + 1])
        elif t == J_UNIVERSAL:
            e0, e1, e2, e3 = _axis_angle(&ax1[k, 0], q[qa])
            f0, f1, f2, f3 = _axis_angle(&ax2[k, 0], q[qa + 1])
        elif t == J_SPHERICAL or t == J_FREE:
            off = qa if t == J_SPHERICAL else qa + 3
            n = sqrt(q[off] * q[off] + q[off + 1] * q[off + 1] + q[off + 2] * q[off + 2] + q[off + 3] * q[off + 3])
            f0, f1, f2, f3 = q[off] / n, q[off + 1] / n, q[off + 2] / n, q[off + 3] / n
        elif t == J_PLANAR_FREE:
            h = 0.5 * q[qa + 2]
            f0, f3 = cos(h), sin(h)
        g0, g1, g2, g3 = _qmul(qp[0], qp[1], qp[2], qp[3], e0, e1, e2, e3)
        g0, g1, g2, g3 = _qmul(g0, g1, g2, g3, qrel0[k, 0], qrel0[k, 1], qrel0[k, 2], qrel0[k, 3])
        g0, g1, g2, g3 = _qmul(g0, g1, g2, g3, f0, f1, f2, f3)
        n = sqrt(g0 * g0 + g1 * g1 + g2 * g2 + g3 * g3)
        w, x, y, z = g0 / n, g1 / n, g2 / n, g3 / n
        qk[0], qk[1], qk[2], qk[3] = w, x, y, z
        Rk[0] = w * w + x * x - y * y - z * z
        Rk[1] = 2.0 * (x * y - w * z)
        Rk[2] = 2.0 * (x * z + w * y)
        Rk[3] = 2.0 * (x * y + w * z)
        Rk[4] = w * w - x * x + y * y - z * z
        Rk[5] = 2.0 * (y * z - w * x)
        Rk[6] = 2.0 * (x * z - w * y)
        Rk[7] = 2.0 * (y * z + w * x)
        Rk[8] = w * w - x * x - y * y + z * z
        # ---- position of O_k: the parent's joint point, slid along the axis by prismatic motion
        if t == J_FREE:
            ok[0], ok[1], ok[2] = q[qa], q[qa + 1], q[qa + 2]
        elif t == J_PLANAR_FREE:
            ok[0], ok[1], ok[2] = q[qa], q[qa + 1], 0.0
        else:
            s = q[qa] if (t == J_PRISMATIC or t == J_CYLINDRICAL) else 0.0
            x0 = rp[k, 0] + s * ax1[k, 0]
            x1 = rp[k, 1] + s * ax1[k, 1]
            x2 = rp[k, 2] + s * ax1[k, 2]
            y0, y1, y2 = _rotate(Rp, x0, x1, x2)
            ok[0], ok[1], ok[2] = cp[0] + y0, cp[1] + y1, cp[2] + y2
        c0, c1, c2 = _rotate(Rk, rc[k, 0], rc[k, 1], rc[k, 2])
        ck[0], ck[1], ck[2] = ok[0] - c0, ok[1] - c1, ok[2] - c2
        # ---- planar angle (2D scenes): continuous sum of joint angles
        if t == J_PLANAR_FREE:
            angle[k] = q[qa + 2]
        else:
            angle[k] = angle[p] + ang0[k] + (q[qa] if t == J_REVOLUTE else 0.0)
        # ---- joint map H* (world axes) and the relative spatial velocity H* qdot
        wp0, wp1, wp2 = Vp[0], Vp[1], Vp[2]
        if t == J_REVOLUTE or t == J_PRISMATIC or t == J_CYLINDRICAL or t == J_UNIVERSAL:
            a0, a1, a2 = _rotate(Rp, ax1[k, 0], ax1[k, 1], ax1[k, 2])
            if t == J_REVOLUTE:
                _set_column(&Hs[va, 0], a0, a1, a2, 0.0, 0.0, 0.0)
            elif t == J_PRISMATIC:
                _set_column(&Hs[va, 0], 0.0, 0.0, 0.0, a0, a1, a2)
            elif t == J_CYLINDRICAL:
                _set_column(&Hs[va, 0], 0.0, 0.0, 0.0, a0, a1, a2)
                _set_column(&Hs[va + 1, 0], a0, a1, a2, 0.0, 0.0, 0.0)
            else:
                _set_column(&Hs[va, 0], a0, a1, a2, 0.0, 0.0, 0.0)
                b0, b1, b2 = _rotate(Rk, ax2[k, 0], ax2[k, 1], ax2[k, 2])
                _set_column(&Hs[va + 1, 0], b0, b1, b2, 0.0, 0.0, 0.0)
        elif t == J_SPHERICAL:
            for d in range(3):
                _set_column(&Hs[va + d, 0], Rk[d], Rk[3 + d], Rk[6 + d], 0.0, 0.0, 0.0)
        elif t == J_FREE:
            for d in range(3):
                _set_column(&Hs[va + d, 0], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
                Hs[va + d, 3 + d] = 1.0
                _set_column(&Hs[va + 3 + d, 0], Rk[d], Rk[3 + d], Rk[6 + d], 0.0, 0.0, 0.0)
        elif t == J_PLANAR_FREE:
            _set_column(&Hs[va, 0], 0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
            _set_column(&Hs[va + 1, 0], 0.0, 0.0, 0.0, 0.0, 1.0, 0.0)
            _set_column(&Hs[va + 2, 0], 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
        nj = 0
        if t == J_REVOLUTE or t == J_PRISMATIC:
            nj = 1
        elif t == J_CYLINDRICAL or t == J_UNIVERSAL:
            nj = 2
        elif t == J_SPHERICAL or t == J_PLANAR_FREE:
            nj = 3
        elif t == J_FREE:
            nj = 6
        for r in range(6):
            rel[r] = 0.0
        for d in range(nj):
            for r in range(6):
                rel[r] += Hs[va + d, r] * qd[va + d]
        # ---- V_k = phi*(p, k) V_p + H* qdot (eq. (8))
        l0, l1, l2 = ok[0] - op[0], ok[1] - op[1], ok[2] - op[2]
        Vk[0] = wp0 + rel[0]
        Vk[1] = wp1 + rel[1]
        Vk[2] = wp2 + rel[2]
        Vk[3] = Vp[3] + wp1 * l2 - wp2 * l1 + rel[3]
        Vk[4] = Vp[4] + wp2 * l0 - wp0 * l2 + rel[4]
        Vk[5] = Vp[5] + wp0 * l1 - wp1 * l0 + rel[5]
        w0, w1, w2 = Vk[0], Vk[1], Vk[2]
        vk[0] = Vk[3] + w1 * (ck[2] - ok[2]) - w2 * (ck[1] - ok[1])
        vk[1] = Vk[4] + w2 * (ck[0] - ok[0]) - w0 * (ck[2] - ok[2])
        vk[2] = Vk[5] + w0 * (ck[1] - ok[1]) - w1 * (ck[0] - ok[0])
        # ---- a_k = (0, omega_p x (v_k - v_p)) + d/dt(H*) qdot (eq. (9)); parent-fixed axes turn
        # with omega_p, child-fixed ones with omega_k
        dv0, dv1, dv2 = Vk[3] - Vp[3], Vk[4] - Vp[4], Vk[5] - Vp[5]
        ak[3] = wp1 * dv2 - wp2 * dv1
        ak[4] = wp2 * dv0 - wp0 * dv2
        ak[5] = wp0 * dv1 - wp1 * dv0
        if t == J_REVOLUTE or t == J_CYLINDRICAL or t == J_UNIVERSAL or t == J_SPHERICAL:
            # rotational part of H* qdot: parent-fixed axis (revolute, cylindrical, universal's
            # first) plus child-fixed axes (universal's second, spherical)
            pr0, pr1, pr2 = 0.0, 0.0, 0.0  # parent-fixed rotation rate
            if t == J_REVOLUTE or t == J_UNIVERSAL:
                pr0, pr1, pr2 = Hs[va, 0] * qd[va], Hs[va, 1] * qd[va], Hs[va, 2] * qd[va]
            elif t == J_CYLINDRICAL:
                pr0, pr1, pr2 = Hs[va + 1, 0] * qd[va + 1], Hs[va + 1, 1] * qd[va + 1], Hs[va + 1, 2] * qd[va + 1]
            cr0, cr1, cr2 = rel[0] - pr0, rel[1] - pr1, rel[2] - pr2  # child-fixed rotation rate
            ak[0] = wp1 * pr2 - wp2 * pr1 + w1 * cr2 - w2 * cr1
            ak[1] = wp2 * pr0 - wp0 * pr2 + w2 * cr0 - w0 * cr2
            ak[2] = wp0 * pr1 - wp1 * pr0 + w0 * cr1 - w1 * cr0
        if t == J_PRISMATIC or t == J_CYLINDRICAL:
            s0, s1, s2 = Hs[va, 3] * qd[va], Hs[va, 4] * qd[va], Hs[va, 5] * qd[va]
            ak[3] += wp1 * s2 - wp2 * s1
            ak[4] += wp2 * s0 - wp0 * s2
            ak[5] += wp0 * s1 - wp1 * s0


# ------------------------------------------------------------------- dynamics


cdef inline void _spd_inverse(const row6* D, int n, row6* out) noexcept nogil:
    """out[:n, :n] = D[:n, :n]^-1 for a symmetric positive definite D (Cholesky)."""
    cdef int i, j, m
    cdef double s
    cdef double L[6][6]
    cdef double Li[6][6]
    if n == 1:
        out[0][0] = 1.0 / D[0][0]
        return
    for j in range(n):
        s = D[j][j]
        for m in range(j):
            s -= L[j][m] * L[j][m]
        L[j][j] = sqrt(s)
        for i in range(j + 1, n):
            s = D[i][j]
            for m in range(j):
                s -= L[i][m] * L[j][m]
            L[i][j] = s / L[j][j]
    # inverse of L (lower triangular), then out = L^-T L^-1
    for i in range(n):
        Li[i][i] = 1.0 / L[i][i]
        for j in range(i):
            s = 0.0
            for m in range(j, i):
                s -= L[i][m] * Li[m][j]
            Li[i][j] = s / L[i][i]
    for i in range(n):
        for j in range(n):
            s = 0.0
            for m in range(max(i, j), n):
                s += Li[m][i] * Li[m][j]
            out[i][j] = s


def articulated_body(
    order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, tau, presc, qdd_presc, armature
):
    """Forward dynamics of the tree (Featherstone's articulated-body algorithm, the innovations
    factorisation of spatial operator algebra), hybrid: degrees of freedom with ``presc`` set
    follow ``qdd_presc``, the others are free and driven by ``tau``.

    Tip to base, per body k: the articulated inertia P_k = M_k + sum_c phi P+_c phi* and bias
    z_k = b_k - f_ext + sum_c phi z+_c; over the free columns H of joint k: D = H P H*,
    G = P H* D^-1, eps = tau - H (z + P a'), P+ = (I - G H) P, z+ = z + P a' + G eps, with
    a' = a_k + H*_presc qdd_presc. Base to tip: alpha' = phi* alpha_p, qdd = D^-1 eps - G^T alpha',
    alpha_k = alpha' + H* qdd + a', and the joint's spatial force f_k = P_k alpha_k + z_k.

    Args:
        ext: (nb, 6) applied (torque, force) at each centre of mass, world; gravity (3,) is added.
        tau: (nv,) joint forces on the free degrees of freedom (springs, dampers, actuators).
        presc, qdd_presc: (nv,) which degrees of freedom are prescribed, and their accelerations.
        armature: (nv,) inertia on each joint coordinate (MuJoCo's armature), added to D.
    Returns:
        qdd (nv,), f (nb, 6) the spatial force of every joint on its child at O_k (world),
        alpha (nb+1, 6) spatial accelerations.
    """
    cdef Py_ssize_t nb = len(order)
    cdef Py_ssize_t nv = len(tau)
    work = AbaWork(nb, nv)
    qdd = np.empty(nv)
    f = np.empty((nb, 6))
    alpha = np.empty((nb + 1, 6))
    articulated_body_into(
        order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, tau, presc, qdd_presc,
        armature, work, qdd, f, alpha,
    )
    return qdd, f, alpha


def aba_work(Py_ssize_t nb, Py_ssize_t nv):
    """The scratch arrays of :func:`articulated_body_into` (an AbaWork)."""
    return AbaWork(nb, nv)


cdef class AbaWork(Record):
    """The scratch arrays of :func:`articulated_body_into` for nb bodies and nv velocities: the
    articulated inertias P (nb+1, 6, 6) and biases z (nb+1, 6), a' (nb, 6), G (nv, 6) and
    D^-1 eps (nv,) (the fixed-size scratch lives on the C stack). Python reads them as numpy arrays."""

    def __init__(self, Py_ssize_t nb, Py_ssize_t nv):
        cdef dict fields = {
            "P": np.zeros((nb + 1, 6, 6)),
            "z": np.zeros((nb + 1, 6)),
            "aprime": np.zeros((nb, 6)),
            "G": np.zeros((nv, 6)),
            "nu": np.zeros(nv),
        }
        self.nb, self.nv = nb, nv
        self.P = self.buffer(fields, "P", "float64")
        self.z = self.buffer(fields, "z", "float64")
        self.aprime = self.buffer(fields, "aprime", "float64")
        self.G = self.buffer(fields, "G", "float64")
        self.nu = self.buffer(fields, "nu", "float64")

    def __reduce__(self):
        # scratch: a fresh one of the same sizes
        return AbaWork, (self.nb, self.nv)


def articulated_body_into(
    order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, tau, presc, qdd_presc, armature,
    AbaWork work not None, qdd, f, alpha,
):
    """:func:`articulated_body` into qdd (nv,), f (nb, 6), alpha (nb+1, 6) with the scratch
    ``work`` (an AbaWork of :func:`aba_work`); allocates nothing."""
    try:
        _articulated_body(order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, tau,
                          presc, qdd_presc, armature, work, qdd, f, alpha)
    except (ValueError, TypeError):
        _articulated_body(
            _i(order), _i(parent), _i(vadr), _i(nvj), _f(mass), _f(inertia), _f(gravity), _f(rot), _f(o), _f(com),
            _f(V), _f(Hs), _f(acor), _f(ext), _f(tau), _b(presc), _f(qdd_presc), _f(armature), work, qdd, f, alpha,
        )


cdef object _articulated_body(
    const long long[::1] order, const long long[::1] parent, const long long[::1] vadr, const long long[::1] nvj,
    const double[::1] mass, const double[:, :, ::1] inertia, const double[::1] gravity,
    const double[:, :, ::1] rot, const double[:, ::1] o, const double[:, ::1] com, const double[:, ::1] V,
    const double[:, ::1] Hs, const double[:, ::1] acor, const double[:, ::1] ext, const double[::1] tau,
    const signed char[::1] presc, const double[::1] qdd_presc, const double[::1] armature,
    AbaWork work, double[::1] qdd, double[:, ::1] f, double[:, ::1] alpha,
):
    with nogil:
        articulated_body_into_c(
            order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, tau, presc, qdd_presc,
            armature, work, qdd, f, alpha,
        )


cdef void articulated_body_into_c(
    const long long[::1] order, const long long[::1] parent, const long long[::1] vadr, const long long[::1] nvj,
    const double[::1] mass, const double[:, :, ::1] inertia, const double[::1] gravity,
    const double[:, :, ::1] rot, const double[:, ::1] o, const double[:, ::1] com, const double[:, ::1] V,
    const double[:, ::1] Hs, const double[:, ::1] acor, const double[:, ::1] ext, const double[::1] tau,
    const signed char[::1] presc, const double[::1] qdd_presc, const double[::1] armature,
    AbaWork work, double[::1] qdd, double[:, ::1] f, double[:, ::1] alpha,
) noexcept nogil:
    cdef Py_ssize_t nb = order.shape[0]
    cdef double[:, :, ::1] P = work.P
    cdef double[:, ::1] z = work.z
    cdef double[:, ::1] aprime = work.aprime
    cdef double[:, ::1] G = work.G
    cdef double[::1] nu = work.nu
    cdef double Mk[6][6]
    cdef double PH[6][6]
    cdef double D[6][6]
    cdef double Dinv[6][6]
    cdef double Pplus[6][6]
    cdef double bk[6]
    cdef double u[6]
    cdef double zplus[6]
    cdef double al[6]
    cdef Py_ssize_t free[6]
    cdef Py_ssize_t i, k, p, va, d
    cdef int nf, r, c, j, a, b
    cdef double s, c0, c1, c2, l0, l1, l2
    cdef row6* Pk
    cdef const double* Hd
    P[...] = 0.0
    z[...] = 0.0
    G[...] = 0.0
    nu[...] = 0.0
    for i in range(nb - 1, -1, -1):
        k = order[i]
        p = parent[k]
        Pk = <row6*> &P[k, 0, 0]
        c0, c1, c2 = com[k, 0] - o[k, 0], com[k, 1] - o[k, 1], com[k, 2] - o[k, 2]
        _spatial_inertia(Mk, mass[k], &inertia[k, 0, 0], &rot[k, 0, 0], c0, c1, c2)
        _body_bias(bk, mass[k], &inertia[k, 0, 0], &rot[k, 0, 0], V[k, 0], V[k, 1], V[k, 2], c0, c1, c2,
                   &ext[k, 0], &gravity[0])
        for r in range(6):
            z[k, r] += bk[r]
            for c in range(6):
                Pk[r][c] += Mk[r][c]
        va = vadr[k]
        nf = 0
        for r in range(6):
            aprime[k, r] = acor[k, r]
        for d in range(va, va + nvj[k]):
            if presc[d]:
                for r in range(6):
                    aprime[k, r] += Hs[d, r] * qdd_presc[d]
            else:
                free[nf] = d
                nf += 1
        # z+ starts as z + P a'
        for r in range(6):
            s = 0.0
            for c in range(6):
                s += Pk[r][c] * aprime[k, c]
            zplus[r] = z[k, r] + s
        for r in range(6):
            for c in range(6):
                Pplus[r][c] = Pk[r][c]
        if nf > 0:
            for j in range(nf):
                Hd = &Hs[free[j], 0]
                for r in range(6):
                    s = 0.0
                    for c in range(6):
                        s += Pk[r][c] * Hd[c]
                    PH[r][j] = s
            for a in range(nf):
                Hd = &Hs[free[a], 0]
                for b in range(nf):
                    s = 0.0
                    for r in range(6):
                        s += Hd[r] * PH[r][b]
                    D[a][b] = s
                D[a][a] += armature[free[a]]  # the joint coordinate's own inertia
                s = tau[free[a]]
                for r in range(6):
                    s -= Hd[r] * zplus[r]
                u[a] = s
            _spd_inverse(D, nf, Dinv)
            for a in range(nf):
                d = free[a]
                s = 0.0
                for b in range(nf):
                    s += Dinv[a][b] * u[b]
                nu[d] = s
                for r in range(6):
                    s = 0.0
                    for b in range(nf):
                        s += PH[r][b] * Dinv[b][a]
                    G[d, r] = s
            # P+ = P - G (P H*)^T, z+ = z + P a' + G eps
            for r in range(6):
                for c in range(6):
                    s = 0.0
                    for a in range(nf):
                        s += G[free[a], r] * PH[c][a]
                    Pplus[r][c] -= s
                s = 0.0
                for a in range(nf):
                    s += G[free[a], r] * u[a]
                zplus[r] += s
        if p < nb:
            l0, l1, l2 = o[k, 0] - o[p, 0], o[k, 1] - o[p, 1], o[k, 2] - o[p, 2]
            _shift_inertia_add(<row6*> &P[p, 0, 0], Pplus, l0, l1, l2)
            z[p, 0] += zplus[0] + l1 * zplus[5] - l2 * zplus[4]
            z[p, 1] += zplus[1] + l2 * zplus[3] - l0 * zplus[5]
            z[p, 2] += zplus[2] + l0 * zplus[4] - l1 * zplus[3]
            z[p, 3] += zplus[3]
            z[p, 4] += zplus[4]
            z[p, 5] += zplus[5]
    qdd[...] = 0.0
    f[...] = 0.0
    alpha[...] = 0.0
    for i in range(nb):
        k = order[i]
        p = parent[k]
        Pk = <row6*> &P[k, 0, 0]
        l0, l1, l2 = o[k, 0] - o[p, 0], o[k, 1] - o[p, 1], o[k, 2] - o[p, 2]
        # alpha' = phi*(p, k) alpha_p
        al[0], al[1], al[2] = alpha[p, 0], alpha[p, 1], alpha[p, 2]
        al[3] = alpha[p, 3] + alpha[p, 1] * l2 - alpha[p, 2] * l1
        al[4] = alpha[p, 4] + alpha[p, 2] * l0 - alpha[p, 0] * l2
        al[5] = alpha[p, 5] + alpha[p, 0] * l1 - alpha[p, 1] * l0
        for r in range(6):
            alpha[k, r] = al[r] + aprime[k, r]
        va = vadr[k]
        for d in range(va, va + nvj[k]):
            if presc[d]:
                qdd[d] = qdd_presc[d]
            else:
                s = nu[d]
                for r in range(6):
                    s -= G[d, r] * al[r]
                qdd[d] = s
                for r in range(6):
                    alpha[k, r] += Hs[d, r] * s
        for r in range(6):
            s = z[k, r]
            for c in range(6):
                s += Pk[r][c] * alpha[k, c]
            f[k, r] = s


def inverse_dynamics(order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, qdd, armature):
    """Newton-Euler inverse dynamics (the paper's recursions (14)-(15)): accelerations base to
    tip, alpha_k = phi*(p, k) alpha_p + H* qdd + a_k; spatial forces tip to base,
    f_k = M_k alpha_k + b_k - f_ext + sum_c phi(k, c) f_c; joint forces T_k = H_k f_k.

    Returns:
        T (nv,) joint forces, f (nb, 6) spatial force of every joint on its child at O_k (world),
        alpha (nb+1, 6).
    """
    cdef Py_ssize_t nb = len(order)
    cdef Py_ssize_t nv = len(qdd)
    alpha = np.zeros((nb + 1, 6))
    f = np.zeros((nb + 1, 6))
    T = np.zeros(nv)
    try:
        _inverse_dynamics(order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, qdd,
                          armature, T, f, alpha)
    except (ValueError, TypeError):
        _inverse_dynamics(
            _i(order), _i(parent), _i(vadr), _i(nvj), _f(mass), _f(inertia), _f(gravity), _f(rot), _f(o), _f(com),
            _f(V), _f(Hs), _f(acor), _f(ext), _f(qdd), _f(armature), T, f, alpha,
        )
    return T, f[:nb].copy(), alpha


cdef object _inverse_dynamics(
    const long long[::1] order, const long long[::1] parent, const long long[::1] vadr, const long long[::1] nvj,
    const double[::1] mass, const double[:, :, ::1] inertia, const double[::1] gravity,
    const double[:, :, ::1] rot, const double[:, ::1] o, const double[:, ::1] com, const double[:, ::1] V,
    const double[:, ::1] Hs, const double[:, ::1] acor, const double[:, ::1] ext, const double[::1] qdd,
    const double[::1] armature, double[::1] T, double[:, ::1] f, double[:, ::1] alpha,
):
    with nogil:
        _inverse_dynamics_into(
            order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, qdd, armature, T, f, alpha
        )


cdef void _inverse_dynamics_into(
    const long long[::1] order, const long long[::1] parent, const long long[::1] vadr, const long long[::1] nvj,
    const double[::1] mass, const double[:, :, ::1] inertia, const double[::1] gravity,
    const double[:, :, ::1] rot, const double[:, ::1] o, const double[:, ::1] com, const double[:, ::1] V,
    const double[:, ::1] Hs, const double[:, ::1] acor, const double[:, ::1] ext, const double[::1] qdd,
    const double[::1] armature, double[::1] T, double[:, ::1] f, double[:, ::1] alpha,
) noexcept nogil:
    """:func:`inverse_dynamics` into zeroed T (nv,), f (nb+1, 6), alpha (nb+1, 6)."""
    cdef Py_ssize_t nb = order.shape[0]
    cdef Py_ssize_t i, k, p, va, d
    cdef int r, c
    cdef double Mk[6][6]
    cdef double bk[6]
    cdef double s, l0, l1, l2, c0, c1, c2
    for i in range(nb):
        k = order[i]
        p = parent[k]
        l0, l1, l2 = o[k, 0] - o[p, 0], o[k, 1] - o[p, 1], o[k, 2] - o[p, 2]
        alpha[k, 0] = alpha[p, 0] + acor[k, 0]
        alpha[k, 1] = alpha[p, 1] + acor[k, 1]
        alpha[k, 2] = alpha[p, 2] + acor[k, 2]
        alpha[k, 3] = alpha[p, 3] + alpha[p, 1] * l2 - alpha[p, 2] * l1 + acor[k, 3]
        alpha[k, 4] = alpha[p, 4] + alpha[p, 2] * l0 - alpha[p, 0] * l2 + acor[k, 4]
        alpha[k, 5] = alpha[p, 5] + alpha[p, 0] * l1 - alpha[p, 1] * l0 + acor[k, 5]
        va = vadr[k]
        for d in range(va, va + nvj[k]):
            for r in range(6):
                alpha[k, r] += Hs[d, r] * qdd[d]
        c0, c1, c2 = com[k, 0] - o[k, 0], com[k, 1] - o[k, 1], com[k, 2] - o[k, 2]
        _spatial_inertia(Mk, mass[k], &inertia[k, 0, 0], &rot[k, 0, 0], c0, c1, c2)
        _body_bias(bk, mass[k], &inertia[k, 0, 0], &rot[k, 0, 0], V[k, 0], V[k, 1], V[k, 2], c0, c1, c2,
                   &ext[k, 0], &gravity[0])
        for r in range(6):
            s = bk[r]
            for c in range(6):
                s += Mk[r][c] * alpha[k, c]
            f[k, r] += s
    for i in range(nb - 1, -1, -1):
        k = order[i]
        p = parent[k]
        va = vadr[k]
        for d in range(va, va + nvj[k]):
            s = 0.0
            for r in range(6):
                s += Hs[d, r] * f[k, r]
            T[d] = s + armature[d] * qdd[d]
        if p < nb:  # f_p += phi(p, k) f_k
            l0, l1, l2 = o[k, 0] - o[p, 0], o[k, 1] - o[p, 1], o[k, 2] - o[p, 2]
            f[p, 0] += f[k, 0] + l1 * f[k, 5] - l2 * f[k, 4]
            f[p, 1] += f[k, 1] + l2 * f[k, 3] - l0 * f[k, 5]
            f[p, 2] += f[k, 2] + l0 * f[k, 4] - l1 * f[k, 3]
            f[p, 3] += f[k, 3]
            f[p, 4] += f[k, 4]
            f[p, 5] += f[k, 5]
