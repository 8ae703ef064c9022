"""Compiled (numba) recursions of spatial operator algebra for trees in joint coordinates:
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

from __future__ import annotations

import numpy as np
from numba import njit

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

_JIT = {"cache": True, "nogil": True, "fastmath": False}
# the *_into kernels allocate nothing: no reference counting needed (mbsim.model.kernels)
_JIT_NO_NRT = _JIT | {"_nrt": False}


# ------------------------------------------------------------------- small helpers


@njit(inline="always")
def _qmul(a0, a1, a2, a3, b0, b1, b2, b3):
    """Hamilton product (w, x, y, z) of two quaternions given by components."""
    return (
        a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
        a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
        a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1,
        a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0,
    )


@njit(inline="always")
def _axis_angle(ax, k, angle):
    """Quaternion of a rotation by ``angle`` about the unit axis ax[k]."""
    s = np.sin(0.5 * angle)
    return np.cos(0.5 * angle), s * ax[k, 0], s * ax[k, 1], s * ax[k, 2]


@njit(inline="always")
def _cross_into(out, i0, a0, a1, a2, b0, b1, b2):
    out[i0] = a1 * b2 - a2 * b1
    out[i0 + 1] = a2 * b0 - a0 * b2
    out[i0 + 2] = a0 * b1 - a1 * b0


@njit(inline="always")
def _rotate(R, k, x0, x1, x2):
    """R[k] @ x."""
    return (
        R[k, 0, 0] * x0 + R[k, 0, 1] * x1 + R[k, 0, 2] * x2,
        R[k, 1, 0] * x0 + R[k, 1, 1] * x1 + R[k, 1, 2] * x2,
        R[k, 2, 0] * x0 + R[k, 2, 1] * x1 + R[k, 2, 2] * x2,
    )


@njit(inline="always")
def _set_column(Hs, d, ang0, ang1, ang2, lin0, lin1, lin2):
    Hs[d, 0] = ang0
    Hs[d, 1] = ang1
    Hs[d, 2] = ang2
    Hs[d, 3] = lin0
    Hs[d, 4] = lin1
    Hs[d, 5] = lin2


@njit(inline="always")
def _spatial_inertia(Mk, m, J, R, k, c0, c1, c2):
    """Mk (6, 6) = spatial inertia about O_k in world axes: J(O_k) = R J_c R^T + m (|c|^2 I - c c^T),
    coupling m c~ (top right) and -m c~ (bottom left), m I (eq. (10))."""
    for i in range(3):
        for j in range(3):
            s = 0.0
            for a in range(3):
                t = R[k, i, a]
                if t != 0.0:
                    for b in range(3):
                        s += t * J[k, a, b] * R[k, j, b]
            Mk[i, j] = s
    cc = c0 * c0 + c1 * c1 + c2 * c2
    c = (c0, c1, c2)
    for i in range(3):
        for j in range(3):
            Mk[i, j] += m * ((cc if i == j else 0.0) - c[i] * c[j])
            Mk[i + 3, j + 3] = m if i == j else 0.0
    # m c~ and its transpose
    Mk[0, 3], Mk[0, 4], Mk[0, 5] = 0.0, -m * c2, m * c1
    Mk[1, 3], Mk[1, 4], Mk[1, 5] = m * c2, 0.0, -m * c0
    Mk[2, 3], Mk[2, 4], Mk[2, 5] = -m * c1, m * c0, 0.0
    for i in range(3):
        for j in range(3):
            Mk[j + 3, i] = Mk[i, j + 3]


@njit(inline="always")
def _body_bias(out, m, J, R, k, w0, w1, w2, c0, c1, c2, ext, gravity):
    """out (6,) = b_k - f_ext at O_k (eq. (12)): gyroscopic and centripetal terms minus the
    external wrench (``ext[k]`` = (torque, force) at the centre of mass, world) and gravity."""
    # omega x (J_world omega), J_world = R J_c R^T
    wb0, wb1, wb2 = (
        R[k, 0, 0] * w0 + R[k, 1, 0] * w1 + R[k, 2, 0] * w2,
        R[k, 0, 1] * w0 + R[k, 1, 1] * w1 + R[k, 2, 1] * w2,
        R[k, 0, 2] * w0 + R[k, 1, 2] * w1 + R[k, 2, 2] * w2,
    )
    h0 = J[k, 0, 0] * wb0 + J[k, 0, 1] * wb1 + J[k, 0, 2] * wb2
    h1 = J[k, 1, 0] * wb0 + J[k, 1, 1] * wb1 + J[k, 1, 2] * wb2
    h2 = J[k, 2, 0] * wb0 + J[k, 2, 1] * wb1 + J[k, 2, 2] * wb2
    hw0, hw1, hw2 = _rotate(R, k, h0, h1, h2)
    # centripetal acceleration of the centre of mass relative to O: omega x (omega x c)
    u0, u1, u2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0
    e0, e1, e2 = w1 * u2 - w2 * u1, w2 * u0 - w0 * u2, w0 * u1 - w1 * u0
    # external force at the centre of mass (applied loads plus weight) and its moment about O
    F0 = ext[k, 3] + m * gravity[0]
    F1 = ext[k, 4] + m * gravity[1]
    F2 = ext[k, 5] + m * gravity[2]
    L0 = m * e0 - F0
    L1 = m * e1 - F1
    L2 = m * e2 - F2
    # angular: omega x J omega + c x (m omega x (omega x c) - F) - T
    out[0] = w1 * hw2 - w2 * hw1 + c1 * L2 - c2 * L1 - ext[k, 0]
    out[1] = w2 * hw0 - w0 * hw2 + c2 * L0 - c0 * L2 - ext[k, 1]
    out[2] = w0 * hw1 - w1 * hw0 + c0 * L1 - c1 * L0 - ext[k, 2]
    out[3] = L0
    out[4] = L1
    out[5] = L2


@njit(inline="always")
def _shift_inertia_add(Pp, Pk, l0, l1, l2, X):
    """Pp += phi Pk phi^T with phi = [[I, l~], [0, I]] (an articulated inertia moved from O_k to
    O_p). With Pk = [[A, B], [B^T, D]]: X = B + l~ D; result [[A + l~ B^T + X l~^T, X], [X^T, D]].
    X: (3, 3) scratch."""
    for j in range(3):
        d0, d1, d2 = Pk[3, 3 + j], Pk[4, 3 + j], Pk[5, 3 + j]
        X[0, j] = Pk[0, 3 + j] + l1 * d2 - l2 * d1
        X[1, j] = Pk[1, 3 + j] + l2 * d0 - l0 * d2
        X[2, j] = Pk[2, 3 + j] + l0 * d1 - l1 * d0
    for j in range(3):
        # column j of l~ B^T: l x (row j of B)
        b0, b1, b2 = Pk[j, 3], Pk[j, 4], Pk[j, 5]
        y0 = l1 * b2 - l2 * b1
        y1 = l2 * b0 - l0 * b2
        y2 = l0 * b1 - l1 * b0
        # row i of X l~^T is l x (row i of X); element (i, j) below
        Pp[0, j] += Pk[0, j] + y0
        Pp[1, j] += Pk[1, j] + y1
        Pp[2, j] += Pk[2, j] + y2
    for i in range(3):
        x0, x1, x2 = X[i, 0], X[i, 1], X[i, 2]
        Pp[i, 0] += l1 * x2 - l2 * x1
        Pp[i, 1] += l2 * x0 - l0 * x2
        Pp[i, 2] += l0 * x1 - l1 * x0
    for i in range(3):
        for j in range(3):
            Pp[i, 3 + j] += X[i, j]
            Pp[3 + j, i] += X[i, j]
            Pp[3 + i, 3 + j] += Pk[3 + i, 3 + j]


# ------------------------------------------------------------------- kinematics


@njit(**_JIT)
def kinematics(order, parent, jtype, qadr, vadr, rp, rc, qrel0, ax1, ax2, ang0, q, qd):
    """Body poses, velocities, joint maps and Coriolis terms from the joint coordinates
    (base to tip; the paper's recursion (14) for V).

    Returns (each with the ground row at index nb):
        quat (nb+1, 4) body quaternions, rot (nb+1, 3, 3) body -> world, o (nb+1, 3) reference
        points O_k, com (nb+1, 3) centres of mass, V (nb+1, 6) spatial velocities at O_k,
        vcom (nb+1, 3) centre-of-mass velocities, angle (nb+1,) planar angle (2D scenes),
        Hs (nv, 6) joint map columns H*, acor (nb+1, 6) Coriolis terms a_k, all world axes.
    """
    nb = order.shape[0]
    nv = qd.shape[0]
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
    )  # fmt: skip
    return quat, rot, o, com, V, vcom, angle, Hs, acor


@njit(**_JIT_NO_NRT)
def kinematics_into(
    order, parent, jtype, qadr, vadr, rp, rc, qrel0, ax1, ax2, ang0, q, qd, quat, rot, o, com, V, vcom, angle, Hs, acor,
    rel,
):  # fmt: skip
    """:func:`kinematics` into given arrays (their shapes as returned there; rel (6,) scratch);
    allocates nothing."""
    nb = order.shape[0]
    quat[:] = 0.0
    rot[:] = 0.0
    o[:] = 0.0
    com[:] = 0.0
    V[:] = 0.0
    vcom[:] = 0.0
    angle[:] = 0.0
    Hs[:] = 0.0
    acor[:] = 0.0
    quat[nb, 0] = 1.0
    for a in range(3):
        rot[nb, a, a] = 1.0
    for i in range(nb):
        k = order[i]
        p = parent[k]
        t = jtype[k]
        qa = qadr[k]
        va = vadr[k]
        # ---- orientation: q_k = q_p (x) E (x) R0 (x) F
        e0, e1, e2, e3 = 1.0, 0.0, 0.0, 0.0
        f0, f1, f2, f3 = 1.0, 0.0, 0.0, 0.0
        if t == REVOLUTE:
            e0, e1, e2, e3 = _axis_angle(ax1, k, q[qa])
        elif t == CYLINDRICAL:
            e0, e1, e2, e3 = _axis_angle(ax1, k, q[qa + 1])
        elif t == UNIVERSAL:
            e0, e1, e2, e3 = _axis_angle(ax1, k, q[qa])
            f0, f1, f2, f3 = _axis_angle(ax2, k, q[qa + 1])
        elif t in (SPHERICAL, FREE):
            off = qa if t == SPHERICAL else qa + 3
            n = np.sqrt(q[off] ** 2 + q[off + 1] ** 2 + q[off + 2] ** 2 + q[off + 3] ** 2)
            f0, f1, f2, f3 = q[off] / n, q[off + 1] / n, q[off + 2] / n, q[off + 3] / n
        elif t == PLANAR_FREE:
            h = 0.5 * q[qa + 2]
            f0, f3 = np.cos(h), np.sin(h)
        g0, g1, g2, g3 = _qmul(quat[p, 0], quat[p, 1], quat[p, 2], quat[p, 3], e0, e1, e2, e3)
        g0, g1, g2, g3 = _qmul(g0, g1, g2, g3, qrel0[k, 0], qrel0[k, 1], qrel0[k, 2], qrel0[k, 3])
        g0, g1, g2, g3 = _qmul(g0, g1, g2, g3, f0, f1, f2, f3)
        n = np.sqrt(g0 * g0 + g1 * g1 + g2 * g2 + g3 * g3)
        w, x, y, z = g0 / n, g1 / n, g2 / n, g3 / n
        quat[k, 0], quat[k, 1], quat[k, 2], quat[k, 3] = w, x, y, z
        rot[k, 0, 0] = w * w + x * x - y * y - z * z
        rot[k, 0, 1] = 2.0 * (x * y - w * z)
        rot[k, 0, 2] = 2.0 * (x * z + w * y)
        rot[k, 1, 0] = 2.0 * (x * y + w * z)
        rot[k, 1, 1] = w * w - x * x + y * y - z * z
        rot[k, 1, 2] = 2.0 * (y * z - w * x)
        rot[k, 2, 0] = 2.0 * (x * z - w * y)
        rot[k, 2, 1] = 2.0 * (y * z + w * x)
        rot[k, 2, 2] = w * w - x * x - y * y + z * z
        # ---- position of O_k: the parent's joint point, slid along the axis by prismatic motion
        if t == FREE:
            o[k, 0], o[k, 1], o[k, 2] = q[qa], q[qa + 1], q[qa + 2]
        elif t == PLANAR_FREE:
            o[k, 0], o[k, 1], o[k, 2] = q[qa], q[qa + 1], 0.0
        else:
            s = q[qa] if (t in (PRISMATIC, CYLINDRICAL)) else 0.0
            x0 = rp[k, 0] + s * ax1[k, 0]
            x1 = rp[k, 1] + s * ax1[k, 1]
            x2 = rp[k, 2] + s * ax1[k, 2]
            y0, y1, y2 = _rotate(rot, p, x0, x1, x2)
            o[k, 0], o[k, 1], o[k, 2] = com[p, 0] + y0, com[p, 1] + y1, com[p, 2] + y2
        c0, c1, c2 = _rotate(rot, k, rc[k, 0], rc[k, 1], rc[k, 2])
        com[k, 0], com[k, 1], com[k, 2] = o[k, 0] - c0, o[k, 1] - c1, o[k, 2] - c2
        # ---- planar angle (2D scenes): continuous sum of joint angles
        if t == PLANAR_FREE:
            angle[k] = q[qa + 2]
        else:
            angle[k] = angle[p] + ang0[k] + (q[qa] if t == REVOLUTE else 0.0)
        # ---- joint map H* (world axes) and the relative spatial velocity H* qdot
        wp0, wp1, wp2 = V[p, 0], V[p, 1], V[p, 2]
        if t in (REVOLUTE, PRISMATIC, CYLINDRICAL, UNIVERSAL):
            a0, a1, a2 = _rotate(rot, p, ax1[k, 0], ax1[k, 1], ax1[k, 2])
            if t == REVOLUTE:
                _set_column(Hs, va, a0, a1, a2, 0.0, 0.0, 0.0)
            elif t == PRISMATIC:
                _set_column(Hs, va, 0.0, 0.0, 0.0, a0, a1, a2)
            elif t == CYLINDRICAL:
                _set_column(Hs, va, 0.0, 0.0, 0.0, a0, a1, a2)
                _set_column(Hs, va + 1, a0, a1, a2, 0.0, 0.0, 0.0)
            else:
                _set_column(Hs, va, a0, a1, a2, 0.0, 0.0, 0.0)
                b0, b1, b2 = _rotate(rot, k, ax2[k, 0], ax2[k, 1], ax2[k, 2])
                _set_column(Hs, va + 1, b0, b1, b2, 0.0, 0.0, 0.0)
        elif t == SPHERICAL:
            for d in range(3):
                _set_column(Hs, va + d, rot[k, 0, d], rot[k, 1, d], rot[k, 2, d], 0.0, 0.0, 0.0)
        elif t == FREE:
            for d in range(3):
                _set_column(Hs, va + d, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
                Hs[va + d, 3 + d] = 1.0
                _set_column(Hs, va + 3 + d, rot[k, 0, d], rot[k, 1, d], rot[k, 2, d], 0.0, 0.0, 0.0)
        elif t == PLANAR_FREE:
            _set_column(Hs, va, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
            _set_column(Hs, va + 1, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0)
            _set_column(Hs, va + 2, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
        nj = 0
        if t in (REVOLUTE, PRISMATIC):
            nj = 1
        elif t in (CYLINDRICAL, UNIVERSAL):
            nj = 2
        elif t in (SPHERICAL, PLANAR_FREE):
            nj = 3
        elif t == FREE:
            nj = 6
        for r in range(6):
            rel[r] = 0.0
        for d in range(nj):
            for r in range(6):
                rel[r] += Hs[va + d, r] * qd[va + d]
        # ---- V_k = phi*(p, k) V_p + H* qdot (eq. (8))
        l0, l1, l2 = o[k, 0] - o[p, 0], o[k, 1] - o[p, 1], o[k, 2] - o[p, 2]
        V[k, 0] = wp0 + rel[0]
        V[k, 1] = wp1 + rel[1]
        V[k, 2] = wp2 + rel[2]
        V[k, 3] = V[p, 3] + wp1 * l2 - wp2 * l1 + rel[3]
        V[k, 4] = V[p, 4] + wp2 * l0 - wp0 * l2 + rel[4]
        V[k, 5] = V[p, 5] + wp0 * l1 - wp1 * l0 + rel[5]
        w0, w1, w2 = V[k, 0], V[k, 1], V[k, 2]
        vcom[k, 0] = V[k, 3] + w1 * (com[k, 2] - o[k, 2]) - w2 * (com[k, 1] - o[k, 1])
        vcom[k, 1] = V[k, 4] + w2 * (com[k, 0] - o[k, 0]) - w0 * (com[k, 2] - o[k, 2])
        vcom[k, 2] = V[k, 5] + w0 * (com[k, 1] - o[k, 1]) - w1 * (com[k, 0] - o[k, 0])
        # ---- a_k = (0, omega_p x (v_k - v_p)) + d/dt(H*) qdot (eq. (9)); parent-fixed axes turn
        # with omega_p, child-fixed ones with omega_k
        dv0, dv1, dv2 = V[k, 3] - V[p, 3], V[k, 4] - V[p, 4], V[k, 5] - V[p, 5]
        _cross_into(acor[k], 3, wp0, wp1, wp2, dv0, dv1, dv2)
        if t in (REVOLUTE, CYLINDRICAL, UNIVERSAL, SPHERICAL):
            # rotational part of H* qdot: parent-fixed axis (revolute, cylindrical, universal's
            # first) plus child-fixed axes (universal's second, spherical)
            pr0, pr1, pr2 = 0.0, 0.0, 0.0  # parent-fixed rotation rate
            if t in (REVOLUTE, UNIVERSAL):
                pr0, pr1, pr2 = Hs[va, 0] * qd[va], Hs[va, 1] * qd[va], Hs[va, 2] * qd[va]
            elif t == CYLINDRICAL:
                pr0, pr1, pr2 = Hs[va + 1, 0] * qd[va + 1], Hs[va + 1, 1] * qd[va + 1], Hs[va + 1, 2] * qd[va + 1]
            cr0, cr1, cr2 = rel[0] - pr0, rel[1] - pr1, rel[2] - pr2  # child-fixed rotation rate
            acor[k, 0] = wp1 * pr2 - wp2 * pr1 + w1 * cr2 - w2 * cr1
            acor[k, 1] = wp2 * pr0 - wp0 * pr2 + w2 * cr0 - w0 * cr2
            acor[k, 2] = wp0 * pr1 - wp1 * pr0 + w0 * cr1 - w1 * cr0
        if t in (PRISMATIC, CYLINDRICAL):
            s0, s1, s2 = Hs[va, 3] * qd[va], Hs[va, 4] * qd[va], Hs[va, 5] * qd[va]
            acor[k, 3] += wp1 * s2 - wp2 * s1
            acor[k, 4] += wp2 * s0 - wp0 * s2
            acor[k, 5] += wp0 * s1 - wp1 * s0


# ------------------------------------------------------------------- dynamics


@njit(inline="always")
def _spd_inverse(D, n, out, L, Li):
    """out[:n, :n] = D[:n, :n]^-1 for a symmetric positive definite D (Cholesky); L, Li: (6, 6) scratch."""
    if n == 1:
        out[0, 0] = 1.0 / D[0, 0]
        return
    for j in range(n):
        s = D[j, j]
        for m in range(j):
            s -= L[j, m] * L[j, m]
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            s = D[i, j]
            for m in range(j):
                s -= L[i, m] * L[j, m]
            L[i, j] = s / L[j, j]
    # inverse of L (lower triangular), then out = L^-T L^-1
    for i in range(n):
        Li[i, i] = 1.0 / L[i, i]
        for j in range(i):
            s = 0.0
            for m in range(j, i):
                s -= L[i, m] * Li[m, j]
            Li[i, j] = s / L[i, i]
    for i in range(n):
        for j in range(n):
            s = 0.0
            for m in range(max(i, j), n):
                s += Li[m, i] * Li[m, j]
            out[i, j] = s


@njit(**_JIT)
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
    nb = order.shape[0]
    nv = tau.shape[0]
    work = aba_work(nb, nv)
    qdd = np.empty(nv)
    f = np.empty((nb, 6))
    alpha = np.empty((nb + 1, 6))
    articulated_body_into(
        order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, tau, presc, qdd_presc,
        armature, work, qdd, f, alpha,
    )  # fmt: skip
    return qdd, f, alpha


@njit(**_JIT)
def aba_work(nb, nv):
    """The scratch arrays of :func:`articulated_body_into`, in its order."""
    return (
        np.zeros((nb + 1, 6, 6)),  # P
        np.zeros((nb + 1, 6)),  # z
        np.zeros((nb, 6)),  # aprime
        np.zeros((nv, 6)),  # G
        np.zeros(nv),  # nu
        np.zeros((6, 6)),  # Mk
        np.zeros(6),  # bk
        np.zeros((6, 6)),  # PH
        np.zeros((6, 6)),  # D
        np.zeros((6, 6)),  # Dinv
        np.zeros(6),  # Pa
        np.zeros(6),  # u
        np.zeros((6, 6)),  # Pplus
        np.zeros(6),  # zplus
        np.zeros(6, dtype=np.int64),  # free
        np.zeros((3, 3)),  # X
        np.zeros((6, 6)),  # Lc
        np.zeros((6, 6)),  # Li
    )


@njit(**_JIT_NO_NRT)
def articulated_body_into(
    order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, tau, presc, qdd_presc, armature,
    work, qdd, f, alpha,
):  # fmt: skip
    """:func:`articulated_body` into qdd (nv,), f (nb, 6), alpha (nb+1, 6) with the scratch
    ``work`` (the tuple of :func:`aba_work`, or any tuple of arrays of those shapes); allocates nothing."""
    nb = order.shape[0]
    P, z, aprime, G, nu, Mk, bk, PH, D, Dinv, Pa, u, Pplus, zplus, free, X, Lc, Li = work
    P[:] = 0.0
    z[:] = 0.0
    G[:] = 0.0
    nu[:] = 0.0
    Lc[:] = 0.0
    Li[:] = 0.0
    for i in range(nb - 1, -1, -1):
        k = order[i]
        p = parent[k]
        c0, c1, c2 = com[k, 0] - o[k, 0], com[k, 1] - o[k, 1], com[k, 2] - o[k, 2]
        _spatial_inertia(Mk, mass[k], inertia, rot, k, c0, c1, c2)
        _body_bias(bk, mass[k], inertia, rot, k, V[k, 0], V[k, 1], V[k, 2], c0, c1, c2, ext, gravity)
        for r in range(6):
            z[k, r] += bk[r]
            for s in range(6):
                P[k, r, s] += Mk[r, s]
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
        for r in range(6):
            s = 0.0
            for c in range(6):
                s += P[k, r, c] * aprime[k, c]
            Pa[r] = s
            zplus[r] = z[k, r] + s
        for r in range(6):
            for c in range(6):
                Pplus[r, c] = P[k, r, c]
        if nf > 0:
            for j in range(nf):
                d = free[j]
                for r in range(6):
                    s = 0.0
                    for c in range(6):
                        s += P[k, r, c] * Hs[d, c]
                    PH[r, j] = s
            for a in range(nf):
                for b in range(nf):
                    s = 0.0
                    for r in range(6):
                        s += Hs[free[a], r] * PH[r, b]
                    D[a, b] = s
                D[a, a] += armature[free[a]]  # the joint coordinate's own inertia
                s = tau[free[a]]
                for r in range(6):
                    s -= Hs[free[a], r] * zplus[r]
                u[a] = s
            _spd_inverse(D, nf, Dinv, Lc, Li)
            for a in range(nf):
                d = free[a]
                s = 0.0
                for b in range(nf):
                    s += Dinv[a, b] * u[b]
                nu[d] = s
                for r in range(6):
                    s = 0.0
                    for b in range(nf):
                        s += PH[r, b] * Dinv[b, a]
                    G[d, r] = s
            # P+ = P - G (P H*)^T, z+ = z + P a' + G eps
            for r in range(6):
                for c in range(6):
                    s = 0.0
                    for a in range(nf):
                        s += G[free[a], r] * PH[c, a]
                    Pplus[r, c] -= s
                s = 0.0
                for a in range(nf):
                    s += G[free[a], r] * u[a]
                zplus[r] += s
        if p < nb:
            l0, l1, l2 = o[k, 0] - o[p, 0], o[k, 1] - o[p, 1], o[k, 2] - o[p, 2]
            _shift_inertia_add(P[p], Pplus, l0, l1, l2, X)
            z[p, 0] += zplus[0] + l1 * zplus[5] - l2 * zplus[4]
            z[p, 1] += zplus[1] + l2 * zplus[3] - l0 * zplus[5]
            z[p, 2] += zplus[2] + l0 * zplus[4] - l1 * zplus[3]
            z[p, 3] += zplus[3]
            z[p, 4] += zplus[4]
            z[p, 5] += zplus[5]
    qdd[:] = 0.0
    f[:] = 0.0
    alpha[:] = 0.0
    al = bk  # (bk is free again: scratch for alpha')
    for i in range(nb):
        k = order[i]
        p = parent[k]
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
                s += P[k, r, c] * alpha[k, c]
            f[k, r] = s


@njit(**_JIT)
def inverse_dynamics(order, parent, vadr, nvj, mass, inertia, gravity, rot, o, com, V, Hs, acor, ext, qdd, armature):
    """Newton-Euler inverse dynamics (the paper's recursions (14)-(15)): accelerations base to
    tip, alpha_k = phi*(p, k) alpha_p + H* qdd + a_k; spatial forces tip to base,
    f_k = M_k alpha_k + b_k - f_ext + sum_c phi(k, c) f_c; joint forces T_k = H_k f_k.

    Returns:
        T (nv,) joint forces, f (nb, 6) spatial force of every joint on its child at O_k (world),
        alpha (nb+1, 6).
    """
    nb = order.shape[0]
    nv = qdd.shape[0]
    alpha = np.zeros((nb + 1, 6))
    f = np.zeros((nb + 1, 6))
    Mk = np.empty((6, 6))
    bk = np.empty(6)
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
        _spatial_inertia(Mk, mass[k], inertia, rot, k, c0, c1, c2)
        _body_bias(bk, mass[k], inertia, rot, k, V[k, 0], V[k, 1], V[k, 2], c0, c1, c2, ext, gravity)
        for r in range(6):
            s = bk[r]
            for c in range(6):
                s += Mk[r, c] * alpha[k, c]
            f[k, r] += s
    T = np.zeros(nv)
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
    return T, f[:nb].copy(), alpha
