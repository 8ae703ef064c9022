"""The implicit contact step's Jacobian in a method's coordinates (solver option
``contact_integration: implicit``; mbsim.solvers.ode.integrate.implicit_step takes the step).

A compliant contact as stiff as real materials (Hertz k g^n with k of 1e8-1e10) and a regularised
friction law (a damper of slope mu f_N / v_s below the smoothing speed) put eigenvalues of size
sqrt(k'/m) and mu f_N / (v_s m) into the equations of motion, far outside an explicit step's
stability region at the mechanism's own step. The Rosenbrock-W step is linearly implicit in a
Jacobian J of f(t, y), y = (q, v, work); any J keeps its order (a W-method), so J need only hold
the stiff part: the contact forces' slopes (compliant_kernels.pair_forces_c, per penetrating
point: the normal law's slope along n, its damping, friction across and along the sliding
direction), gathered over the bodies the compliant pairs touch ("slots", 6 coordinates each:
velocity world, rotation body axes):

    dQ = -stiffness G dq - damping E dv        (G = E N^+: slot displacements of dq, E: slot velocities)
    J = [[0, N(q)], [-U stiffness G, -U damping E]],   U = A E^T,

with N the map q' = N(q) v, N^+ its left inverse (quaternion increments to rotation vectors) and A
the inverse mass matrix (the constrained one with constraints: M^-1 - M^-1 J_c^T S^-1 J_c M^-1). In
body coordinates E picks the slots' own velocities and U is M^-1's columns (ode_kernels); in joint
coordinates (recursive_kernels) E is the slots' Jacobian B and U the articulated-body responses to
unit wrenches. The geometric terms (the normal turning, moment arms moving) are left out: the
non-stiff part of f stays explicit. Solving (I - tau J) x = r eliminates x_q
(G N = E), leaving an nd x nd system (nd = 6 per slot; Woodbury's identity):

    r' = r_v - tau U stiffness E N^+ r_q
    (I + tau E U Z) z = E r',   Z = damping + tau stiffness
    x_v = r' - tau U Z z,       x_q = r_q + tau N(q) x_v.
"""

from libc.math cimport NAN, fabs

import numpy as np

from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.solvers.numerics.lapack_kernels cimport lu_factor_raw, lu_solve_raw
from mbsim.solvers.ode.integrate cimport System


cdef class CoordinateMap:
    """q' = N(q) v and N(q)^+ dq of a method's coordinates (subclasses: ode_kernels.BodyCoordinates,
    recursive_kernels.TreeCoordinates); this base: q = v."""

    cdef void rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
        cdef Py_ssize_t k
        for k in range(out.shape[0]):
            out[k] = v[k]

    cdef void increment(self, const double[::1] q, const double[::1] dq, double[::1] out) noexcept nogil:
        cdef Py_ssize_t k
        for k in range(out.shape[0]):
            out[k] = dq[k]


cdef class ContactJacobian:
    """The buffers of the contact Jacobian of a FlatModel with compliant pairs (3D): ``coords`` the
    method's coordinate map, ``nq``, ``nv`` its sizes, ``tree`` whether they are joint coordinates
    (E = B)."""

    def __init__(self, FlatModel F, CoordinateMap coords, Py_ssize_t nq, Py_ssize_t nv, bint tree=False):
        bodies = sorted({int(b) for b in np.concatenate((np.asarray(F.cc_master), np.asarray(F.cc_slave))) if b < F.nbody})
        self.F, self.coords, self.nq, self.nv, self.tree = F, coords, nq, nv, tree
        self.q0, self.qrate, self.dq = np.zeros(nq), np.zeros(nq), np.zeros(nv)
        self.probing = False
        self.nslots = len(bodies)
        self.body = np.asarray(bodies, dtype=np.int64).reshape(-1)
        self.nd = 6 * self.nslots
        nd = max(self.nd, 1)
        self.active = False
        self.stiffness = np.zeros((nd, nd))
        self.damping = np.zeros((nd, nd))
        self.U = np.zeros((self.nv, nd))
        self.B = np.zeros((nd, self.nv) if tree else (1, 1))
        self.Z = np.zeros((nd, nd))
        self.lu = np.zeros(nd * nd)
        self.pivots = np.zeros(nd, dtype=np.intc)
        self.tau = np.nan
        self.a = np.zeros(nd)
        self.b = np.zeros(nd)
        self.x = np.zeros(nd)
        self.w = np.zeros(self.nv)

    cdef Py_ssize_t _slot(self, Py_ssize_t b) noexcept nogil:
        cdef Py_ssize_t s
        for s in range(self.nslots):
            if self.body[s] == b:
                return s
        return -1

    cdef void prepare(self, FlatData D) noexcept nogil:
        cdef Py_ssize_t nd = self.nd, k, side_i, side_j, si, sj, i, j, b, a
        cdef Py_ssize_t slots[2]
        self.active = False
        self.tau = NAN
        for i in range(nd):
            for j in range(nd):
                self.stiffness[i, j] = 0.0
                self.damping[i, j] = 0.0
        # each pair's 12 x 12 slopes (slave's 6, master's 6) into the slots of its two bodies
        for k in range(self.F.ncc):
            if D.cc_pair[k, 0] == 0.0:
                continue
            self.active = True
            slots[0] = self._slot(self.F.cc_slave[k]) if self.F.cc_slave[k] < self.F.nbody else -1
            slots[1] = self._slot(self.F.cc_master[k]) if self.F.cc_master[k] < self.F.nbody else -1
            for side_i in range(2):
                si = slots[side_i]
                if si < 0:
                    continue
                for side_j in range(2):
                    sj = slots[side_j]
                    if sj < 0:
                        continue
                    for i in range(6):
                        for j in range(6):
                            self.stiffness[6 * si + i, 6 * sj + j] += D.cc_stiffness[k, 6 * side_i + i, 6 * side_j + j]
                            self.damping[6 * si + i, 6 * sj + j] += D.cc_damping[k, 6 * side_i + i, 6 * side_j + j]
        if self.tree:
            return
        # body coordinates: U = M^-1 E^T, the block-diagonal inverse mass's columns of the slots
        for i in range(self.nv):
            for j in range(nd):
                self.U[i, j] = 0.0
        for si in range(self.nslots):
            b = self.body[si]
            for a in range(6):
                for i in range(6):
                    self.U[6 * b + i, 6 * si + a] = self.F.body_inv_mass[b, i, a]

    cdef double measure(self, FlatData D, double h) noexcept nogil:
        cdef Py_ssize_t k, side, b, a, i
        cdef double total = 0.0
        for k in range(self.F.ncc):
            if D.cc_pair[k, 0] == 0.0:
                continue
            for side in range(2):
                b = self.F.cc_slave[k] if side == 0 else self.F.cc_master[k]
                if b >= self.F.nbody:
                    continue
                for a in range(6):
                    i = 6 * side + a
                    total += self.F.body_inv_mass[b, a, a] * (h * h * fabs(D.cc_stiffness[k, i, i])
                                                              + h * fabs(D.cc_damping[k, i, i]))
        return total

    cdef void _rows(self, const double[::1] x_v, double* out) noexcept nogil:
        """E x_v: the slots' velocities of x_v (their own coordinates, or B x_v)."""
        cdef Py_ssize_t si, a, i, j
        cdef double s
        if self.tree:
            for i in range(self.nd):
                s = 0.0
                for j in range(self.nv):
                    s += self.B[i, j] * x_v[j]
                out[i] = s
            return
        for si in range(self.nslots):
            for a in range(6):
                out[6 * si + a] = x_v[6 * self.body[si] + a]

    cdef void velocity_times(self, const double[::1] dq, const double[::1] x_v, double[::1] out_v) noexcept nogil:
        cdef Py_ssize_t nd = self.nd, i, j
        cdef double s
        for i in range(self.nv):
            out_v[i] = 0.0
        if not self.active:
            return
        self._rows(dq, &self.a[0])
        self._rows(x_v, &self.b[0])
        # stiffness E dq + damping E x_v
        for i in range(nd):
            s = 0.0
            for j in range(nd):
                s += self.stiffness[i, j] * self.a[j] + self.damping[i, j] * self.b[j]
            self.x[i] = s
        for i in range(self.nv):
            s = 0.0
            for j in range(nd):
                s += self.U[i, j] * self.x[j]
            out_v[i] = -s

    cdef bint _factor(self, double tau) noexcept nogil:
        """I + tau E U Z into lu (column-major), Z = damping + tau stiffness."""
        cdef Py_ssize_t nd = self.nd, i, j, m
        cdef double s
        for i in range(nd):
            for j in range(nd):
                self.Z[i, j] = self.damping[i, j] + tau * self.stiffness[i, j]
        # column j: E (U Z e_j)
        for j in range(nd):
            for i in range(self.nv):
                s = 0.0
                for m in range(nd):
                    s += self.U[i, m] * self.Z[m, j]
                self.w[i] = s
            self._rows(self.w, &self.lu[j * nd])
            for i in range(nd):
                self.lu[j * nd + i] = tau * self.lu[j * nd + i] + (1.0 if i == j else 0.0)
        if lu_factor_raw(nd, &self.lu[0], &self.pivots[0]) != 0:
            return False
        self.tau = tau
        return True

    cdef void slopes(self, FlatData D, bint on) noexcept nogil:
        D.cc_linear[0] = 1.0 if on or self.probing else 0.0

    cdef void times(self, const double[::1] x, double[::1] out) noexcept nogil:
        cdef Py_ssize_t nq = self.nq, nv = self.nv, k
        self.coords.rate(self.q0, x[nq : nq + nv], out[:nq])
        self.coords.increment(self.q0, x[:nq], self.dq)
        self.velocity_times(self.dq, x[nq : nq + nv], out[nq : nq + nv])
        for k in range(nq + nv, out.shape[0]):
            out[k] = 0.0

    cdef bint solve(self, double tau, double[::1] x) noexcept nogil:
        cdef Py_ssize_t nq = self.nq, nv = self.nv, k
        self.coords.increment(self.q0, x[:nq], self.dq)
        if not self.velocity_solve(tau, self.dq, x[nq : nq + nv]):
            return False
        # x_q = r_q + tau N(q0) x_v
        self.coords.rate(self.q0, x[nq : nq + nv], self.qrate)
        for k in range(nq):
            x[k] += tau * self.qrate[k]
        return True

    cdef void _subtract(self, const double[:, ::1] Mat, double tau, double[::1] r_v) noexcept nogil:
        """r_v -= tau U Mat a (Mat: nd x nd, a: self.a)."""
        cdef Py_ssize_t nd = self.nd, i, j
        cdef double s
        for i in range(nd):
            s = 0.0
            for j in range(nd):
                s += Mat[i, j] * self.a[j]
            self.b[i] = s
        for i in range(self.nv):
            s = 0.0
            for j in range(nd):
                s += self.U[i, j] * self.b[j]
            r_v[i] -= tau * s

    cdef bint velocity_solve(self, double tau, const double[::1] dq, double[::1] r_v) noexcept nogil:
        if not self.active:
            return True
        if not (tau == self.tau) and not self._factor(tau):
            return False
        # r' = r_v - tau U stiffness E dq
        self._rows(dq, &self.a[0])
        self._subtract(self.stiffness, tau, r_v)
        # (I + tau E U Z) z = E r'
        self._rows(r_v, &self.a[0])
        if lu_solve_raw(self.nd, &self.lu[0], &self.pivots[0], &self.a[0]) != 0:
            return False
        # x_v = r' - tau U Z z
        self._subtract(self.Z, tau, r_v)
        return True


cdef class ContactSystem(System):
    """The stiff methods of a right-hand side with compliant contacts (the subclass sets D, has_jac,
    jac and takes J in its stiff_derivative)."""

    cdef void stiff_times(self, const double[::1] x, double[::1] out) noexcept nogil:
        if self.has_jac:
            self.jac.times(x, out)
        else:
            System.stiff_times(self, x, out)

    cdef double stiff_measure(self, double h) noexcept nogil:
        return self.jac.measure(self.D, h) if self.has_jac else 0.0

    cdef void stiff_probe(self, bint on) noexcept nogil:
        if self.has_jac:
            self.jac.probing = on
            self.jac.slopes(self.D, False)

    cdef bint stiff_solve(self, double tau, double[::1] x) noexcept nogil:
        return self.jac.solve(tau, x) if self.has_jac else True
