"""The method ``variational``'s step, once: the Newton solve of the discrete Euler-Lagrange
equations, the constrained inverse Legendre transform and the recorded rows
(papers/quaternion-symplectic-multibody.txt eqs. (33)-(39); mathematics in the module docstring of
mbsim.solvers.variational, which orchestrates).

The step reads the model's joints and forces through an Evaluator: FlatEvaluator runs the compiled
kernels over a FlatModel and a FlatData (mbsim.model.layout, with the rank-robust buffers for the
reactions of a row) without the GIL, and ``advance`` steps and records whole blocks with it;
PyEvaluator calls Python functions (for models flatten does not take: compliant contacts, issue
31) while the rest of the step -- kinetic terms, Newton matrix, LAPACK solves, the Legendre
transform -- is this same code. The Newton and Legendre systems are solved by blocks: per body the
kinetic block, made regular by adding the unit-quaternion row, then the Schur complement over the
constraints (_kkt_factor, _kkt_solve, small LU in plain loops); when that finds a system (near)
singular, or the force Jacobian fills the Newton matrix, by LAPACK on the whole system
(mbsim.solvers.numerics.lapack_kernels: gesv, and gelsd for the singular Legendre system).

Coordinates u = mbsim's q (3D per body: centre of mass r, quaternion p; 2D: x, y, angle); the
constraint vector is the unit quaternions first (3D), then the joints. A step that fails (Newton
did not converge, a singular Newton matrix, a non-finite state) is not taken: the node stays as it
was and the caller raises the error (``step_once`` says why).
"""

import numpy as np

from libc.math cimport INFINITY, NAN, fabs, isfinite

from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.model.record_kernels cimport kinetic_energy, potential_energy, row_into
from mbsim.model.step_kernels cimport applied_forces_into, constraints_into, forces_into, frames_into
from mbsim.solvers.numerics.lapack_kernels cimport lstsq_symmetric_into, solve_into
from mbsim.solvers.ode.ode_kernels cimport certified_full_rank, schur_accelerations, update_coordinate_references
from mbsim.solvers.numerics.robust_kernels cimport null_space_accelerations


OK, FAILED, VIOLATION, RECORD_FAILED = VAR_OK, VAR_FAILED, VAR_VIOLATION, VAR_RECORD_FAILED  # as ode_kernels'
TAKEN, NOT_CONVERGED, SINGULAR, LEGENDRE_FAILED, ERROR = (
    STEP_TAKEN, STEP_NOT_CONVERGED, STEP_SINGULAR, STEP_LEGENDRE_FAILED, STEP_ERROR
)


cdef class VarModel(Record):
    """The method's constants: sizes n = nq, nquat (3D: nbody), m = nquat + nc, nv; GT (4, 3, 4)
    with G(p) = sum_i p_i GT[i]; mass (nbody,), inertia (nbody, 3, 3) (2D: [0, 0]); mass_scale (n,);
    gravity_u (n,) the weights over u; forces_vary (1: forces besides gravity, evaluated at every
    iterate and their Jacobian by differences); tol, max_iter, rank_tol (the reactions of a row)."""

    def __init__(self, **fields):
        self.n = self.value(fields, 'n')
        self.nquat = self.value(fields, 'nquat')
        self.m = self.value(fields, 'm')
        self.nv = self.value(fields, 'nv')
        self.GT = self.constant(fields, 'GT', 'float64')
        self.mass = self.constant(fields, 'mass', 'float64')
        self.inertia = self.constant(fields, 'inertia', 'float64')
        self.mass_scale = self.constant(fields, 'mass_scale', 'float64')
        self.gravity_u = self.constant(fields, 'gravity_u', 'float64')
        self.forces_vary = self.value(fields, 'forces_vary')
        self.tol = self.value(fields, 'tol')
        self.max_iter = self.value(fields, 'max_iter')
        self.rank_tol = self.value(fields, 'rank_tol')


cdef class VarData(Record):
    """The node carried between steps -- p (n,) the momentum p_k^-, rate (n,) the last step's
    (b - a)/h, lam (m,), h (1,) the last step (0: none) -- and the step's buffers: lam_start (m,)
    lam before the step (restored if it fails); um, ud (n,) and v_mid (nv,) the midpoint state;
    f_total, f_nc (n,) the forces at a perturbed b; a, b, D1, D2, F_total, F_nc, R1, work_u,
    force0, bk (n,); Ca, Cu (m, n) and C, Ct, Ca_t (m,) the
    constraints at the step's two ends; Kt (n + m, n + m) the transposed Newton matrix, rhs
    (n + m,), pivots (n + m,) LAPACK's integers (np.intc); K2, rhs2, s2 (n + m) the Legendre
    system, rank (1,) its rank; G1, G2, JG1, JG2 (3, 4), blk (4, 4) scratch of one body; vdot (nv,);
    v_new (nv,) the velocity at the node a step reached; the block solve of both systems
    (_kkt_factor, _kkt_solve): dg (n,) the diagonal of the translational (2D: all) coordinates, Ab
    (nb, 16) the quaternion blocks' inverses, Z (m + 1, n), S (m, m) (its LU) and y (m,) the Schur
    complement, touch (2, nb, m + 1) per body the rows of P and of Q that reach it."""

    def __init__(self, **fields):
        self.p = self.buffer(fields, 'p', 'float64')
        self.rate = self.buffer(fields, 'rate', 'float64')
        self.lam = self.buffer(fields, 'lam', 'float64')
        self.h = self.buffer(fields, 'h', 'float64')
        self.lam_start = self.buffer(fields, 'lam_start', 'float64')
        self.um = self.buffer(fields, 'um', 'float64')
        self.ud = self.buffer(fields, 'ud', 'float64')
        self.v_mid = self.buffer(fields, 'v_mid', 'float64')
        self.f_total = self.buffer(fields, 'f_total', 'float64')
        self.f_nc = self.buffer(fields, 'f_nc', 'float64')
        self.a = self.buffer(fields, 'a', 'float64')
        self.b = self.buffer(fields, 'b', 'float64')
        self.D1 = self.buffer(fields, 'D1', 'float64')
        self.D2 = self.buffer(fields, 'D2', 'float64')
        self.F_total = self.buffer(fields, 'F_total', 'float64')
        self.F_nc = self.buffer(fields, 'F_nc', 'float64')
        self.R1 = self.buffer(fields, 'R1', 'float64')
        self.work_u = self.buffer(fields, 'work_u', 'float64')
        self.force0 = self.buffer(fields, 'force0', 'float64')
        self.bk = self.buffer(fields, 'bk', 'float64')
        self.Ca = self.buffer(fields, 'Ca', 'float64')
        self.Cu = self.buffer(fields, 'Cu', 'float64')
        self.C = self.buffer(fields, 'C', 'float64')
        self.Ct = self.buffer(fields, 'Ct', 'float64')
        self.Ca_t = self.buffer(fields, 'Ca_t', 'float64')
        self.Kt = self.buffer(fields, 'Kt', 'float64')
        self.rhs = self.buffer(fields, 'rhs', 'float64')
        self.pivots = self.buffer(fields, 'pivots', 'intc')
        self.K2 = self.buffer(fields, 'K2', 'float64')
        self.rhs2 = self.buffer(fields, 'rhs2', 'float64')
        self.s2 = self.buffer(fields, 's2', 'float64')
        self.rank = self.buffer(fields, 'rank', 'intc')
        self.G1 = self.buffer(fields, 'G1', 'float64')
        self.G2 = self.buffer(fields, 'G2', 'float64')
        self.JG1 = self.buffer(fields, 'JG1', 'float64')
        self.JG2 = self.buffer(fields, 'JG2', 'float64')
        self.blk = self.buffer(fields, 'blk', 'float64')
        self.vdot = self.buffer(fields, 'vdot', 'float64')
        self.v_new = self.buffer(fields, 'v_new', 'float64')
        self.dg = self.buffer(fields, 'dg', 'float64')
        self.Ab = self.buffer(fields, 'Ab', 'float64')
        self.Z = self.buffer(fields, 'Z', 'float64')
        self.S = self.buffer(fields, 'S', 'float64')
        self.y = self.buffer(fields, 'y', 'float64')
        self.touch = self.buffer(fields, 'touch', 'intc')


def make_var_data(Py_ssize_t n, Py_ssize_t m, Py_ssize_t nv, Py_ssize_t nb, int_dtype=np.intc):
    """Fresh buffers for n coordinates, m constraints, nv velocities and nb bodies (``int_dtype``:
    LAPACK's integer, np.intc as scipy.linalg.cython_lapack's)."""
    k = n + m
    return VarData(
        p=np.zeros(n), rate=np.zeros(n), lam=np.zeros(m), h=np.zeros(1), lam_start=np.zeros(m), um=np.zeros(n),
        ud=np.zeros(n), v_mid=np.zeros(nv), f_total=np.zeros(n), f_nc=np.zeros(n), a=np.zeros(n), b=np.zeros(n),
        D1=np.zeros(n), D2=np.zeros(n), F_total=np.zeros(n), F_nc=np.zeros(n), R1=np.zeros(n),
        work_u=np.zeros(n), force0=np.zeros(n), bk=np.zeros(n), Ca=np.zeros((m, n)), Cu=np.zeros((m, n)),
        C=np.zeros(m), Ct=np.zeros(m), Ca_t=np.zeros(m), Kt=np.zeros((k, k)), rhs=np.zeros(k),
        pivots=np.zeros(k, dtype=int_dtype), K2=np.zeros((k, k)), rhs2=np.zeros(k), s2=np.zeros(k),
        rank=np.zeros(1, dtype=int_dtype), G1=np.zeros((3, 4)), G2=np.zeros((3, 4)), JG1=np.zeros((3, 4)),
        JG2=np.zeros((3, 4)), blk=np.zeros((4, 4)), vdot=np.zeros(nv), v_new=np.zeros(nv), dg=np.zeros(n),
        Ab=np.zeros((nb, 16)), Z=np.zeros((m + 1, n)), S=np.zeros((m, m)),
        y=np.zeros(m), touch=np.zeros((2, nb, m + 1), dtype=int_dtype),
    )




cdef class Evaluator:
    """The model's joints and applied forces as the step reads them (variational_kernels.pxd)."""

    cdef int joints(self, const double[::1] u, double t) noexcept nogil:
        return -1

    cdef int forces(self, const double[::1] u, const double[::1] v, double t) noexcept nogil:
        return -1


cdef class FlatEvaluator(Evaluator):
    """The compiled kernels over a FlatModel and its FlatData; the views are D's own arrays."""

    def __init__(self, FlatModel F, FlatData D):
        self.F, self.D = F, D
        self.phi, self.phi_t, self.J, self.Q, self.Qn = D.phi, D.phi_t, D.J, D.Q, D.Qn

    cdef int joints(self, const double[::1] u, double t) noexcept nogil:
        cdef Py_ssize_t k
        if self.F.nc == 0:
            return 0
        # the joints at rest: D.dx as a zero velocity
        for k in range(self.F.nv):
            self.D.dx[k] = 0.0
        frames_into(self.F, self.D, u, self.D.dx)
        constraints_into(self.F, self.D, t)
        return 0

    cdef int forces(self, const double[::1] u, const double[::1] v, double t) noexcept nogil:
        frames_into(self.F, self.D, u, v)
        applied_forces_into(self.F, self.D, t, v)
        return 0


cdef class PyEvaluator(Evaluator):
    """Python functions ``joints(u, t) -> (phi, J, phi_t)`` (J dense (nc, nv)) and ``forces(u, v, t)
    -> (all, non-conservative)`` (nv,) each, for the models flatten does not take; the step calls
    them with the GIL, on copies of its vectors."""

    def __init__(self, Py_ssize_t nc, Py_ssize_t nv, joints, forces):
        self.joints_fn, self.forces_fn = joints, forces
        self.arrays = (np.zeros(nc), np.zeros(nc), np.zeros((nc, nv)), np.zeros(nv), np.zeros(nv))
        self.phi, self.phi_t, self.J, self.Q, self.Qn = self.arrays

    cdef int joints(self, const double[::1] u, double t) noexcept nogil:
        with gil:
            try:
                phi, J, phi_t = self.joints_fn(np.array(u), t)
                self.arrays[0][:], self.arrays[2][:], self.arrays[1][:] = phi, J, phi_t
            except BaseException as exc:
                self.error = exc
                return -1
        return 0

    cdef int forces(self, const double[::1] u, const double[::1] v, double t) noexcept nogil:
        with gil:
            try:
                self.arrays[3][:], self.arrays[4][:] = self.forces_fn(np.array(u), np.array(v), t)
            except BaseException as exc:
                self.error = exc
                return -1
        return 0


# Python's max(a, b): a unless b is larger (a NaN second argument is skipped, as before the port)
cdef inline double _max(double a, double b) noexcept nogil:
    return b if b > a else a


# G(p)[j, k] = sum_i p_i GT[i, j, k]
cdef inline double _g_entry(VarModel V, double p0, double p1, double p2, double p3, Py_ssize_t j,
                            Py_ssize_t k) noexcept nogil:
    return p0 * V.GT[0, j, k] + p1 * V.GT[1, j, k] + p2 * V.GT[2, j, k] + p3 * V.GT[3, j, k]


# G = G(p) (3, 4) = sum_i p_i GT[i]
cdef void _g_into(VarModel V, double p0, double p1, double p2, double p3, double[:, ::1] G) noexcept nogil:
    cdef Py_ssize_t j, k
    for j in range(3):
        for k in range(4):
            G[j, k] = _g_entry(V, p0, p1, p2, p3, j, k)


# The kinetic parts of D1 L_d and D2 L_d into W.D1, W.D2 and, when ``Kt`` has rows, dD1/db (block
# diagonal) into its upper-left (n, n) part, transposed (eqs. (19)-(20), (33)-(35)).
cdef void kinetic_into(VarModel V, VarData W, const double[::1] a, const double[::1] b, double h,
                       double[:, ::1] Kt) noexcept nogil:
    cdef Py_ssize_t nb = V.mass.shape[0]
    cdef bint jac = Kt.shape[0] > 0
    cdef Py_ssize_t body, c, i, j, k, r, o
    cdef double M, m, t_ud, t_u, w0, w1, w2, s1, s2, s3, s4, bjw
    cdef double pm[4]
    cdef double pd[4]
    cdef double Jw[3]
    if V.nquat == 0:  # 2D: T = 1/2 (m x'^2 + m y'^2 + I angle'^2)
        for body in range(nb):
            for c in range(3):
                i = 3 * body + c
                M = V.inertia[body, 0, 0] if c == 2 else V.mass[body]
                t_ud = M * (b[i] - a[i]) / h
                W.D1[i] = -t_ud
                W.D2[i] = t_ud
                if jac:
                    Kt[i, i] = -M / h
        return
    cdef double[:, ::1] G1 = W.G1
    cdef double[:, ::1] G2 = W.G2
    cdef double[:, ::1] JG1 = W.JG1
    cdef double[:, ::1] JG2 = W.JG2
    cdef double[:, ::1] blk = W.blk
    cdef const double[:, :, ::1] I = V.inertia
    for body in range(nb):
        o = 7 * body
        m = V.mass[body]
        for c in range(3):
            t_ud = m * ((b[o + c] - a[o + c]) / h)
            W.D1[o + c] = 0.5 * h * 0.0 - t_ud
            W.D2[o + c] = 0.5 * h * 0.0 + t_ud
        for k in range(4):
            pm[k] = 0.5 * (a[o + 3 + k] + b[o + 3 + k])
            pd[k] = (b[o + 3 + k] - a[o + 3 + k]) / h
        _g_into(V, pm[0], pm[1], pm[2], pm[3], G1)  # Gm
        _g_into(V, pd[0], pd[1], pd[2], pd[3], G2)  # Gd
        w0 = G1[0, 0] * pd[0] + G1[0, 1] * pd[1] + G1[0, 2] * pd[2] + G1[0, 3] * pd[3]
        w1 = G1[1, 0] * pd[0] + G1[1, 1] * pd[1] + G1[1, 2] * pd[2] + G1[1, 3] * pd[3]
        w2 = G1[2, 0] * pd[0] + G1[2, 1] * pd[1] + G1[2, 2] * pd[2] + G1[2, 3] * pd[3]
        for j in range(3):
            Jw[j] = I[body, j, 0] * w0 + I[body, j, 1] * w1 + I[body, j, 2] * w2
        for k in range(4):
            t_ud = 4.0 * (G1[0, k] * Jw[0] + G1[1, k] * Jw[1] + G1[2, k] * Jw[2])
            t_u = -4.0 * (G2[0, k] * Jw[0] + G2[1, k] * Jw[1] + G2[2, k] * Jw[2])
            W.D1[o + 3 + k] = 0.5 * h * t_u - t_ud
            W.D2[o + 3 + k] = 0.5 * h * t_u + t_ud
        if not jac:
            continue
        for c in range(3):
            Kt[o + c, o + c] = -(m / h)
        # JG = I G
        for j in range(3):
            for k in range(4):
                JG1[j, k] = I[body, j, 0] * G1[0, k] + I[body, j, 1] * G1[1, k] + I[body, j, 2] * G1[2, k]
                JG2[j, k] = I[body, j, 0] * G2[0, k] + I[body, j, 1] * G2[1, k] + I[body, j, 2] * G2[2, k]
        for r in range(4):
            for c in range(4):
                s1 = s2 = s3 = s4 = 0.0
                for j in range(3):
                    s1 += G2[j, r] * JG2[j, c]
                    s2 += G2[j, r] * JG1[j, c]
                    s3 += G1[j, r] * JG2[j, c]
                    s4 += G1[j, r] * JG1[j, c]
                bjw = V.GT[c, 0, r] * Jw[0] + V.GT[c, 1, r] * Jw[1] + V.GT[c, 2, r] * Jw[2]  # B(Jw)[r, c]
                blk[r, c] = h * s1 - 4.0 * bjw - 2.0 * s2 + 2.0 * s3 - (4.0 / h) * s4
        for r in range(4):
            for c in range(4):
                Kt[o + 3 + c, o + 3 + r] = blk[r, c]

# (r', p') -> (v, omega_body = 2 G(p) p' / |p|^2)
cdef void u_rate_to_v(VarModel V, const double[::1] u, const double[::1] ud, double[::1] v) noexcept nogil:
    cdef Py_ssize_t body, o, ov, c, j, k
    cdef double p0, p1, p2, p3, norm, s
    if V.nquat == 0:
        for k in range(V.nv):
            v[k] = ud[k]
        return
    for body in range(V.nquat):
        o = 7 * body
        ov = 6 * body
        p0, p1, p2, p3 = u[o + 3], u[o + 4], u[o + 5], u[o + 6]
        norm = p0 * p0 + p1 * p1 + p2 * p2 + p3 * p3
        for c in range(3):
            v[ov + c] = ud[o + c]
        for j in range(3):
            s = 0.0
            for k in range(4):
                s += _g_entry(V, p0, p1, p2, p3, j, k) * ud[o + 3 + k]
            v[ov + 3 + j] = 2.0 * s / norm


# out (n,) = x (nv,), a row over velocity coordinates, as a row over u: [x_r, 2 x_omega G(p) / |p|^2]
# per body
cdef void _v_vector_to_u(VarModel V, const double[::1] x, const double[::1] u, double[::1] out) noexcept nogil:
    cdef Py_ssize_t body, o, ov, c, k
    cdef double p0, p1, p2, p3, scale, x0, x1, x2, g0, g1, g2
    if V.nquat == 0:
        for k in range(V.nv):
            out[k] = x[k]
        return
    for body in range(V.nquat):
        o = 7 * body
        ov = 6 * body
        p0, p1, p2, p3 = u[o + 3], u[o + 4], u[o + 5], u[o + 6]
        scale = 2.0 / (p0 * p0 + p1 * p1 + p2 * p2 + p3 * p3)
        for c in range(3):
            out[o + c] = x[ov + c]
        x0, x1, x2 = x[ov + 3], x[ov + 4], x[ov + 5]
        for k in range(4):
            g0 = _g_entry(V, p0, p1, p2, p3, 0, k)
            g1 = _g_entry(V, p0, p1, p2, p3, 1, k)
            g2 = _g_entry(V, p0, p1, p2, p3, 2, k)
            out[o + 3 + k] = (x0 * g0 + x1 * g1 + x2 * g2) * scale


# Applied forces at the midpoint in u coordinates into total (all) and nonc (the non-conservative
# part); the midpoint state goes through W.um, W.ud, W.v_mid. 0, or -1 (E.error).
cdef int forces_u(Evaluator E, VarModel V, VarData W, const double[::1] a, const double[::1] b, double h,
                  double t_mid, double[::1] total, double[::1] nonc) noexcept nogil:
    cdef Py_ssize_t n = V.n
    cdef Py_ssize_t k
    if V.forces_vary == 0:  # gravity alone: constant, no rotational part
        for k in range(n):
            total[k] = V.gravity_u[k]
            nonc[k] = 0.0
        return 0
    for k in range(n):
        W.um[k] = 0.5 * (a[k] + b[k])
        W.ud[k] = (b[k] - a[k]) / h
    u_rate_to_v(V, W.um, W.ud, W.v_mid)
    if E.forces(W.um, W.v_mid, t_mid) != 0:
        return -1
    # rows over v -> over u (Q = Qc + Qn)
    _v_vector_to_u(V, E.Q, W.um, total)
    _v_vector_to_u(V, E.Qn, W.um, nonc)
    return 0


# C (m,), C_u (m, n) and C_t (m,) at (u, t): unit quaternions first, then the joints. 0, or -1.
cdef int constraints_u(Evaluator E, VarModel V, const double[::1] u, double t, double[::1] C, double[:, ::1] Cu,
                       double[::1] Ct) noexcept nogil:
    cdef Py_ssize_t n = V.n
    cdef Py_ssize_t nq4 = V.nquat
    cdef Py_ssize_t r, k, body, o
    for r in range(V.m):
        C[r] = 0.0
        Ct[r] = 0.0
        for k in range(n):
            Cu[r, k] = 0.0
    for body in range(nq4):
        o = 7 * body + 3
        C[body] = u[o] * u[o] + u[o + 1] * u[o + 1] + u[o + 2] * u[o + 2] + u[o + 3] * u[o + 3] - 1.0
        for k in range(4):
            Cu[body, o + k] = 2.0 * u[o + k]
    if V.m > nq4:
        if E.joints(u, t) != 0:
            return -1
        for r in range(V.m - nq4):
            C[nq4 + r] = E.phi[r]
            Ct[nq4 + r] = E.phi_t[r]
        _rows_v_to_u(V, E.J, V.m - nq4, u, Cu, nq4)  # the rows over v -> over u
    return 0


# out[first + r] = J[r] (r < nr; rows over velocity coordinates) as rows over u, as _v_vector_to_u:
# per body G(p) once for all rows
cdef void _rows_v_to_u(VarModel V, const double[:, ::1] J, Py_ssize_t nr, const double[::1] u, double[:, ::1] out,
                       Py_ssize_t first) noexcept nogil:
    cdef Py_ssize_t body, o, ov, c, j, k, r
    cdef double p0, p1, p2, p3, scale, x0, x1, x2
    cdef double G[12]
    if V.nquat == 0:
        for r in range(nr):
            for k in range(V.nv):
                out[first + r, k] = J[r, k]
        return
    for body in range(V.nquat):
        o = 7 * body
        ov = 6 * body
        p0, p1, p2, p3 = u[o + 3], u[o + 4], u[o + 5], u[o + 6]
        scale = 2.0 / (p0 * p0 + p1 * p1 + p2 * p2 + p3 * p3)
        for j in range(3):
            for k in range(4):
                G[4 * j + k] = _g_entry(V, p0, p1, p2, p3, j, k)
        for r in range(nr):
            for c in range(3):
                out[first + r, o + c] = J[r, ov + c]
            x0, x1, x2 = J[r, ov + 3], J[r, ov + 4], J[r, ov + 5]
            for k in range(4):
                out[first + r, o + 3 + k] = (x0 * G[k] + x1 * G[4 + k] + x2 * G[8 + k]) * scale


# LU with partial pivoting of the (k, k) row-major A in place, in plain loops (LAPACK getf2's
# unblocked algorithm: for a 4 x 4 block or the m x m Schur complement a LAPACK call costs more than
# the work). False when a pivot is not above ``small`` times A's largest entry (or is NaN): the
# caller then solves the whole system densely, as before.
cdef bint _lu(double* A, Py_ssize_t k, int* piv, double small) noexcept nogil:
    cdef Py_ssize_t c, i, j, p
    cdef double big = 0.0
    cdef double t, f
    for i in range(k * k):
        big = _max(big, fabs(A[i]))
    small = small * big
    for c in range(k):
        p = c
        for i in range(c + 1, k):
            if fabs(A[i * k + c]) > fabs(A[p * k + c]):
                p = i
        if not fabs(A[p * k + c]) > small:
            return False
        piv[c] = <int>p
        if p != c:
            for j in range(k):
                t = A[c * k + j]
                A[c * k + j] = A[p * k + j]
                A[p * k + j] = t
        f = A[c * k + c]
        for i in range(c + 1, k):
            t = A[i * k + c] / f
            A[i * k + c] = t
            if t != 0.0:
                for j in range(c + 1, k):
                    A[i * k + j] -= t * A[c * k + j]
    return True


# x := A^{-1} x with A's factors from _lu
cdef void _lu_solve(const double* A, Py_ssize_t k, const int* piv, double* x) noexcept nogil:
    cdef Py_ssize_t c, i
    cdef double t
    for c in range(k):
        if piv[c] != c:
            t = x[c]
            x[c] = x[piv[c]]
            x[piv[c]] = t
    for i in range(k):
        t = x[i]
        for c in range(i):
            t -= A[i * k + c] * x[c]
        x[i] = t
    for i in range(k - 1, -1, -1):
        t = x[i]
        for c in range(i + 1, k):
            t -= A[i * k + c] * x[c]
        x[i] = t / A[i * k + i]


# The quaternion blocks W.Ab (nb, 16) replaced by their inverses (by _lu). False when one is (near)
# singular.
cdef bint _invert_blocks(VarModel V, VarData W) noexcept nogil:
    cdef double A[16]
    cdef int piv[4]
    cdef Py_ssize_t body, r, c
    for body in range(V.nquat):
        for r in range(16):
            A[r] = W.Ab[body, r]
        if not _lu(A, 4, piv, 1e-13):
            return False
        for c in range(4):
            for r in range(4):
                W.blk[0, r] = 1.0 if r == c else 0.0
            _lu_solve(A, 4, piv, &W.blk[0, 0])
            for r in range(4):
                W.Ab[body, 4 * r + c] = W.blk[0, r]
    return True


# out = A'^{-1} x on one body's coordinates (x and out may be the same): A' block diagonal, W.dg
# the diagonal of the translational coordinates (2D: of all), W.Ab the quaternion blocks' inverses
cdef inline void _apply_block(VarModel V, VarData W, Py_ssize_t body, const double* x, double* out) noexcept nogil:
    cdef Py_ssize_t o = (7 if V.nquat else 3) * body
    cdef double x0, x1, x2, x3
    cdef const double* B
    out[0] = x[0] / W.dg[o]
    out[1] = x[1] / W.dg[o + 1]
    out[2] = x[2] / W.dg[o + 2]
    if V.nquat:
        B = &W.Ab[body, 0]
        x0, x1, x2, x3 = x[3], x[4], x[5], x[6]
        out[3] = B[0] * x0 + B[1] * x1 + B[2] * x2 + B[3] * x3
        out[4] = B[4] * x0 + B[5] * x1 + B[6] * x2 + B[7] * x3
        out[5] = B[8] * x0 + B[9] * x1 + B[10] * x2 + B[11] * x3
        out[6] = B[12] * x0 + B[13] * x1 + B[14] * x2 + B[15] * x3


# The factor of [A', sigma P^T; Q, 0] (P, Q (m, n)) for A' block diagonal in W (_apply_block):
# which rows of P and Q reach each body (W.touch[0] and [1], per body the count then the rows),
# Z[s] = A'^{-1} P[s]^T on those bodies (zero elsewhere, never read), the Schur complement
# S = Q A'^{-1} P^T (m, m) by blocks of bodies, and S's LU (W.pivots). False when S is (near)
# singular (the caller's dense solve decides).
cdef bint _kkt_factor(VarModel V, VarData W, const double[:, ::1] P, const double[:, ::1] Q) noexcept nogil:
    cdef Py_ssize_t m = V.m
    cdef Py_ssize_t nb = V.mass.shape[0]
    cdef Py_ssize_t w = 7 if V.nquat else 3
    cdef double[:, ::1] Z = W.Z
    cdef double[:, ::1] S = W.S
    cdef Py_ssize_t r, s, body, o, j, ir, js, cp, cq
    cdef bint hit_p, hit_q
    cdef double t
    cdef int* tp
    cdef int* tq
    if m == 0:
        return True
    for body in range(nb):
        o = w * body
        tp = &W.touch[0, body, 0]
        tq = &W.touch[1, body, 0]
        cp = cq = 0
        for r in range(m):
            hit_p = hit_q = False
            for j in range(w):
                hit_p = hit_p or P[r, o + j] != 0.0
                hit_q = hit_q or Q[r, o + j] != 0.0
            if hit_p:
                cp += 1
                tp[cp] = <int>r
                _apply_block(V, W, body, &P[r, o], &Z[r, o])
            if hit_q:
                cq += 1
                tq[cq] = <int>r
        tp[0], tq[0] = <int>cp, <int>cq
    for r in range(m):
        for s in range(m):
            S[r, s] = 0.0
    for body in range(nb):
        o = w * body
        tp = &W.touch[0, body, 0]
        tq = &W.touch[1, body, 0]
        for ir in range(1, tq[0] + 1):
            r = tq[ir]
            for js in range(1, tp[0] + 1):
                s = tp[js]
                t = 0.0
                for j in range(w):
                    t += Q[r, o + j] * Z[s, o + j]
                S[r, s] += t
    return _lu(&S[0, 0], m, &W.pivots[0], 1e-13)


# [A', sigma P^T; Q, 0] [x; y] = [r1; -c] with _kkt_factor's factor and r1 in W.Z[m] on entry:
# S y = sigma (c + Q A'^{-1} r1), x = A'^{-1} r1 - sigma Z^T y; x into out[:n], y into out[n:].
cdef void _kkt_solve(VarModel V, VarData W, const double[:, ::1] Q, double sigma, const double[::1] c,
                     double[::1] out) noexcept nogil:
    cdef Py_ssize_t n = V.n
    cdef Py_ssize_t m = V.m
    cdef Py_ssize_t nb = V.mass.shape[0]
    cdef Py_ssize_t w = 7 if V.nquat else 3
    cdef double[:, ::1] Z = W.Z
    cdef Py_ssize_t r, s, k, body, o, j, ir, js
    cdef double t
    cdef int* tp
    cdef int* tq
    for body in range(nb):
        _apply_block(V, W, body, &Z[m, w * body], &Z[m, w * body])
    for k in range(n):
        out[k] = Z[m, k]
    if m == 0:
        return
    for r in range(m):
        W.y[r] = c[r]
    for body in range(nb):
        o = w * body
        tq = &W.touch[1, body, 0]
        for ir in range(1, tq[0] + 1):
            r = tq[ir]
            t = 0.0
            for j in range(w):
                t += Q[r, o + j] * Z[m, o + j]
            W.y[r] += t
    for r in range(m):
        W.y[r] = sigma * W.y[r]
    _lu_solve(&W.S[0, 0], m, &W.pivots[0], &W.y[0])
    for body in range(nb):
        o = w * body
        tp = &W.touch[0, body, 0]
        for js in range(1, tp[0] + 1):
            s = tp[js]
            t = sigma * W.y[s]
            for j in range(w):
                out[o + j] -= t * Z[s, o + j]
    for s in range(m):
        out[n + s] = W.y[s]


# alpha of _newton_blocks for one body
cdef inline double _newton_alpha(VarModel V, Py_ssize_t body, double h) noexcept nogil:
    return -(V.inertia[body, 0, 0] + V.inertia[body, 1, 1] + V.inertia[body, 2, 2]) / (3.0 * h)


# The Newton matrix's block-diagonal part A = dD1/db (kinetic_into's blocks, transposed in Kt) as
# A' = A + alpha Ca_q^T Cu_q per body into W (dg, Ab inverted): alpha times the unit-quaternion row
# (Cu_q db = -C_q) added to the momentum rows (_newton_rhs) leaves the solution as it is, and fills
# the direction p in which A ~ -(4/h) G^T J G is singular (alpha = -trace(J) / (3 h)). False when a
# block is (near) singular.
cdef bint _newton_blocks(VarModel V, VarData W, double h) noexcept nogil:
    cdef double[:, ::1] Kt = W.Kt
    cdef double[:, ::1] Ca = W.Ca
    cdef double[:, ::1] Cu = W.Cu
    cdef Py_ssize_t body, o, r, c, k
    cdef double alpha
    for k in range(V.n):
        W.dg[k] = Kt[k, k]
        if not fabs(W.dg[k]) > 0.0:  # a massless coordinate (or NaN): the dense solve decides
            return False
    for body in range(V.nquat):
        o = 7 * body + 3
        alpha = _newton_alpha(V, body, h)
        for r in range(4):
            for c in range(4):
                W.Ab[body, 4 * r + c] = Kt[o + c, o + r] + alpha * Ca[body, o + r] * Cu[body, o + c]
    return _invert_blocks(V, W)


# r1 = -R1 - alpha Ca_q^T C_q (_newton_blocks) into W.Z[m]
cdef void _newton_rhs(VarModel V, VarData W, double h) noexcept nogil:
    cdef Py_ssize_t m = V.m
    cdef Py_ssize_t body, o, r, k
    cdef double alpha
    for k in range(V.n):
        W.Z[m, k] = -W.R1[k]
    for body in range(V.nquat):
        o = 7 * body + 3
        alpha = _newton_alpha(V, body, h)
        for r in range(4):
            W.Z[m, o + r] -= alpha * W.Ca[body, o + r] * W.C[body]


# The Legendre system's block-diagonal part M(u) (per body diag(m, m, m) and 4 G(p)^T J G(p), eqs.
# (19)-(20); 2D diag(m, m, I)) as M' = M + beta Cu_q^T Cu_q per body into W (dg, Ab inverted), and
# r1 = p - beta Cu_q^T Ct_q into W.Z[m] (as _newton_blocks: beta = trace(J) / 3 fills the direction p
# in which 4 G^T J G is singular). False when a block is (near) singular.
cdef bint _legendre_blocks(VarModel V, VarData W, const double[::1] u, const double[::1] p,
                           const double[:, ::1] Cu, const double[::1] Ct) noexcept nogil:
    cdef Py_ssize_t n = V.n
    cdef Py_ssize_t m = V.m
    cdef Py_ssize_t nb = V.mass.shape[0]
    cdef double[:, ::1] G = W.G1
    cdef double[:, ::1] JG = W.JG1
    cdef const double[:, :, ::1] I = V.inertia
    cdef Py_ssize_t body, o, r, c, j
    cdef double beta, s
    for j in range(n):
        W.Z[m, j] = p[j]
    if V.nquat == 0:
        for body in range(nb):
            for c in range(3):
                W.dg[3 * body + c] = V.inertia[body, 0, 0] if c == 2 else V.mass[body]
                if not W.dg[3 * body + c] > 0.0:  # massless: the dense solve decides
                    return False
        return True
    for body in range(nb):
        o = 7 * body
        if not V.mass[body] > 0.0:
            return False
        for c in range(3):
            W.dg[o + c] = V.mass[body]
        o += 3
        beta = (I[body, 0, 0] + I[body, 1, 1] + I[body, 2, 2]) / 3.0
        _g_into(V, u[o], u[o + 1], u[o + 2], u[o + 3], G)
        for j in range(3):
            for c in range(4):
                JG[j, c] = I[body, j, 0] * G[0, c] + I[body, j, 1] * G[1, c] + I[body, j, 2] * G[2, c]
        for r in range(4):
            for c in range(4):
                s = G[0, r] * JG[0, c] + G[1, r] * JG[1, c] + G[2, r] * JG[2, c]
                W.Ab[body, 4 * r + c] = 4.0 * s + beta * Cu[body, o + r] * Cu[body, o + c]
            W.Z[m, o + r] -= beta * Cu[body, o + r] * Ct[body]
    return _invert_blocks(V, W)


# u' with M(u) u' + C_u^T nu = p, C_u u' = -C_t (the constrained inverse Legendre transform): by
# blocks (_legendre_blocks, _kkt_factor, _kkt_solve); if that finds it (near) singular, LU of the whole
# system (gesv), and the least-squares solution (gelsd, rcond 1e-13) if that is singular too
# (redundant constraints). False if all fail.
cdef bint momentum_to_rate(VarModel V, VarData W, const double[::1] u, const double[::1] p,
                           const double[:, ::1] Cu, const double[::1] Ct, double[::1] rate) noexcept nogil:
    cdef Py_ssize_t n = V.n
    cdef Py_ssize_t m = V.m
    cdef Py_ssize_t nb = V.mass.shape[0]
    cdef Py_ssize_t attempt, i, k, body, c, o, j, r
    cdef double s
    cdef double[:, ::1] K = W.K2
    cdef double[::1] rhs = W.rhs2
    cdef double[:, ::1] G = W.G1
    cdef const double[:, :, ::1] I = V.inertia
    if _legendre_blocks(V, W, u, p, Cu, Ct) and _kkt_factor(V, W, Cu, Cu):
        _kkt_solve(V, W, Cu, 1.0, Ct, rhs)
        for k in range(n):
            rate[k] = rhs[k]
        return True
    for attempt in range(2):
        for i in range(n + m):
            for k in range(n + m):
                K[i, k] = 0.0
        if V.nquat == 0:
            for body in range(nb):
                for c in range(3):
                    K[3 * body + c, 3 * body + c] = V.inertia[body, 0, 0] if c == 2 else V.mass[body]
        else:
            # per body diag(m, m, m) and 4 G(p)^T J G(p) (eqs. (19)-(20))
            for body in range(nb):
                o = 7 * body
                for c in range(3):
                    K[o + c, o + c] = V.mass[body]
                _g_into(V, u[o + 3], u[o + 4], u[o + 5], u[o + 6], G)
                for j in range(3):
                    for k in range(4):
                        W.JG1[j, k] = I[body, j, 0] * G[0, k] + I[body, j, 1] * G[1, k] + I[body, j, 2] * G[2, k]
                for r in range(4):
                    for c in range(4):
                        s = 0.0
                        for j in range(3):
                            s += G[j, r] * W.JG1[j, c]
                        K[o + 3 + r, o + 3 + c] = 4.0 * s
        for r in range(m):
            for k in range(n):
                K[k, n + r] = Cu[r, k]
                K[n + r, k] = Cu[r, k]
        for k in range(n):
            rhs[k] = p[k]
        for r in range(m):
            rhs[n + r] = -Ct[r]
        if attempt == 0:
            if solve_into(K, rhs, W.pivots) == 0:  # K is symmetric: its transpose is itself
                break
        elif lstsq_symmetric_into(K, rhs, W.s2, 1e-13, W.rank) != 0:
            return False
    for k in range(n):
        rate[k] = rhs[k]
    return True


# What one step reports: how it ended (STEP_*), the work after it, Newton iterations, residual,
# joint violation
ctypedef (int, double, Py_ssize_t, double, double) StepResult


# One step from the node in W (W.a = u_k, W.p, W.lam, W.rate, W.h, W.Ca, W.Ca_t at u_k): Newton on
# eqs. (38)-(39) for u_{k+1} and Lambda_k, then the new node in W (u_{k+1} in W.a, p_{k+1}^- in W.p,
# its constraints in W.Ca, W.Ca_t) and its velocity in W.v_new. A step not taken leaves the node.
cdef StepResult step(Evaluator E, VarModel V, VarData W, double t0, double h, double work) noexcept nogil:
    cdef Py_ssize_t n = V.n
    cdef Py_ssize_t m = V.m
    cdef Py_ssize_t nq4 = V.nquat
    cdef double[::1] a = W.a
    cdef double[::1] b = W.b
    cdef double[::1] lam = W.lam
    cdef double[:, ::1] Kt = W.Kt
    cdef double[::1] rhs = W.rhs
    cdef double t1 = t0 + h
    cdef double t_mid = 0.5 * (t0 + t1)
    cdef double scale, residual, size, momentum, violation, s, R, eps, new_work, drive, joints
    cdef int outcome = STEP_NOT_CONVERGED
    cdef bint blocks
    cdef Py_ssize_t iteration = 0
    cdef Py_ssize_t i, k, r, c
    for k in range(n):
        b[k] = a[k] + h * W.rate[k]  # predictor
    scale = h / W.h[0] if W.h[0] != 0.0 else 1.0
    for r in range(m):
        W.lam_start[r] = lam[r]
        lam[r] = lam[r] * scale
    residual = INFINITY
    for iteration in range(1, V.max_iter + 1):
        if V.forces_vary:  # the dense Newton matrix (the force Jacobian fills its (n, n) part)
            for i in range(n + m):
                for k in range(n + m):
                    Kt[i, k] = 0.0
        kinetic_into(V, W, a, b, h, Kt)
        if forces_u(E, V, W, a, b, h, t_mid, W.F_total, W.F_nc) != 0:
            outcome = STEP_ERROR
            break
        if constraints_u(E, V, b, t1, W.C, W.Cu, W.Ct) != 0:
            outcome = STEP_ERROR
            break
        # the momentum residual as the position error it would make, relative to max(1, |u|); the
        # constraints to a hundredth of that, so that the nodes meet them to round-off
        size = 1.0
        for k in range(n):
            size = _max(size, fabs(b[k]))
        momentum = 0.0
        for k in range(n):
            s = 0.0
            for r in range(m):
                s += W.Ca[r, k] * lam[r]
            R = W.D1[k] + 0.5 * h * W.F_total[k] + W.p[k] - s
            W.R1[k] = R
            momentum = _max(momentum, fabs(h * R / V.mass_scale[k]))
        momentum = momentum / size
        violation = 0.0
        for r in range(m):
            violation = _max(violation, fabs(W.C[r]))
        violation = violation / size
        residual = _max(momentum, 100.0 * violation)
        if residual <= V.tol:
            outcome = STEP_TAKEN
            break
        if V.forces_vary:  # + h/2 dF/db by forward differences, transposed
            eps = 1e-7 * size
            for k in range(n):
                W.force0[k] = W.F_total[k]
            for c in range(n):
                for k in range(n):
                    W.bk[k] = b[k]
                W.bk[c] += eps
                if forces_u(E, V, W, a, W.bk, h, t_mid, W.f_total, W.f_nc) != 0:
                    outcome = STEP_ERROR
                    break
                for k in range(n):
                    Kt[c, k] += 0.5 * h * ((W.f_total[k] - W.force0[k]) / eps)
            if outcome == STEP_ERROR:
                break
            for k in range(n):
                W.F_total[k] = W.force0[k]
        # by blocks while dD1/db is block diagonal (no force Jacobian); else, or when the blocks find
        # the system (near) singular, LU of the whole Newton matrix (gesv)
        blocks = not V.forces_vary and _newton_blocks(V, W, h) and _kkt_factor(V, W, W.Ca, W.Cu)
        if blocks:
            _newton_rhs(V, W, h)
            _kkt_solve(V, W, W.Cu, -1.0, W.C, rhs)
        else:
            if not V.forces_vary:  # Kt holds the blocks alone (and perhaps an old factorisation)
                for i in range(n + m):
                    for k in range(n + m):
                        Kt[i, k] = 0.0
                kinetic_into(V, W, a, b, h, Kt)
            for r in range(m):  # K[:n, n:] = -Ca^T, K[n:, :n] = Cu_b (transposed)
                for k in range(n):
                    Kt[n + r, k] = -W.Ca[r, k]
                    Kt[k, n + r] = W.Cu[r, k]
            for k in range(n):
                rhs[k] = -W.R1[k]
            for r in range(m):
                rhs[n + r] = -W.C[r]
            if solve_into(Kt, rhs, W.pivots) != 0:
                outcome = STEP_SINGULAR
                break
        for k in range(n):
            b[k] = b[k] + rhs[k]
        for r in range(m):
            lam[r] = lam[r] + rhs[n + r]
    # p_{k+1}^- (into force0 until the step is sure), the work, the node velocity u' (into R1)
    cdef double[::1] p_plus = W.force0
    cdef double[::1] rate = W.R1
    if outcome == STEP_TAKEN:
        new_work = 0.0
        # the work of the non-conservative forces (midpoint rule)
        for k in range(n):
            p_plus[k] = W.D2[k] + 0.5 * h * W.F_total[k]
            new_work += W.F_nc[k] * (b[k] - a[k])
        if not momentum_to_rate(V, W, b, p_plus, W.Cu, W.Ct, rate):
            outcome = STEP_LEGENDRE_FAILED
    if outcome != STEP_TAKEN:
        for r in range(m):  # not taken: the node stays as it was
            lam[r] = W.lam_start[r]
        return outcome, work, iteration, residual, 0.0
    # the drives' work: the constraint impulse times the node velocity
    drive = 0.0
    for r in range(nq4, m):
        drive += lam[r] * W.Ca_t[r]
    work = work + new_work + drive
    u_rate_to_v(V, b, rate, W.v_new)
    joints = 0.0
    for r in range(nq4, m):
        joints = _max(joints, fabs(W.C[r]))
    for k in range(n):
        W.p[k] = p_plus[k]
        W.rate[k] = (b[k] - a[k]) / h
        a[k] = b[k]
    for r in range(m):
        W.Ca_t[r] = W.Ct[r]
        for k in range(n):
            W.Ca[r, k] = W.Cu[r, k]
    W.h[0] = h
    return STEP_TAKEN, work, iteration, residual, joints


# The multipliers of a recorded row, minimum-norm from the continuous equations at the frames,
# forces and constraints in D: where ode_kernels.certified_full_rank certifies that J has full row
# rank away from the cut, they are the unique ones, through S's factor (as null_space's compiled
# step takes them: lagrange's cost, not the SVD's); else the SVD's (null_space_accelerations).
# Returns the rank, -1 if the SVD failed.
cdef Py_ssize_t _row_multipliers(FlatModel F, FlatData D, double rank_tol, double[::1] vdot) noexcept nogil:
    if certified_full_rank(F, D, rank_tol, False):
        schur_accelerations(F, D, 0.0, 0.0, vdot, vdot)  # v is read only with Baumgarte's terms
        return F.nc
    return null_space_accelerations(F, D, rank_tol, vdot, D.solve_stats)


# A recorded row at (t, q, v): reactions minimum-norm from the continuous equations at the node,
# then row_into, the Newton residual and the step number's column.
cdef bint _record(FlatModel F, FlatData D, VarModel V, VarData W, double t, const double[::1] q,
                  const double[::1] v, double work, double iterations, double h, double residual,
                  double[::1] row) noexcept nogil:
    frames_into(F, D, q, v)
    forces_into(F, D, t, v)
    if F.nc:
        constraints_into(F, D, t)
        if _row_multipliers(F, D, V.rank_tol, W.vdot) < 0:
            return False
    row_into(F, D, t, q, v, work, iterations, h, row)
    row[row.shape[0] - 2] = residual
    return True


# Steps and recorded rows (ode_kernels.advance's rules) from the node in W, q and v updated in place;
# ``out`` (9,) as advance's; F and D are E's. Returns the status.
cdef int _advance(FlatEvaluator E, FlatModel F, FlatData D, VarModel V, VarData W, double t, double[::1] q, double[::1] v,
                  double work, double h, double t_end, Py_ssize_t every, Py_ssize_t done, double max_steps,
                  Py_ssize_t max_rows, Py_ssize_t max_block, double max_violation, double[:, ::1] rows,
                  double[::1] out) noexcept nogil:
    cdef Py_ssize_t n = V.n
    cdef Py_ssize_t taken = 0
    cdef Py_ssize_t nrec = 0
    cdef int status = VAR_OK
    cdef double worst = 0.0
    cdef double iterations = 0.0
    cdef double violation = -1.0
    cdef double h_last = 0.0
    cdef double residual = NAN
    cdef double scale = _max(1.0, t_end)
    cdef double h_try, t_new, new_work, res, joints
    cdef int outcome
    cdef bint finite, last, due
    cdef Py_ssize_t k, it, number
    while nrec < max_rows and taken < max_block and t_end - t > 1e-12 * scale:
        if done + taken > max_steps:
            break
        h_try = t_end - t if t_end - t < h else h  # Python's min(h, t_end - t)
        if t_end - (t + h_try) < 1e-9 * h_try:  # land exactly on t_end
            h_try = t_end - t
            # a whole step short of t_end by round-off of the time only: the step itself (the loop ends
            # within 1e-12 scale of t_end), the steps of a run that goes on (mbsim run --from: bit for bit)
            if (h_try - h if h_try > h else h - h_try) <= 1e-12 * scale:
                h_try = h
        outcome, new_work, it, res, joints = step(E, V, W, t, h_try, work)
        finite = outcome == STEP_TAKEN
        for k in range(n):
            finite = finite and isfinite(W.a[k])
        for k in range(V.nv):
            finite = finite and isfinite(W.v_new[k])
        if not finite:  # the caller takes this step again (step_once) and raises its error
            status = VAR_FAILED
            break
        for k in range(n):
            q[k] = W.a[k]
        for k in range(V.nv):
            v[k] = W.v_new[k]
        t_new = t + h_try
        h_last = t_new - t
        t = t_new
        work = new_work
        taken += 1
        iterations, violation, residual = <double>it, joints, res
        update_coordinate_references(F, D, t, q)
        worst = _max(worst, joints)
        number = done + taken
        last = not (t_end - t > 1e-12 * scale)
        due = number % every == 0 or last or joints > max_violation
        if due and number <= max_steps:
            if not _record(F, D, V, W, t, q, v, work, iterations, h_last, residual, rows[nrec]):
                status = VAR_RECORD_FAILED
                break
            rows[nrec, rows.shape[1] - 1] = number
            nrec += 1
        if joints > max_violation:
            status = VAR_VIOLATION
            break
        if number > max_steps:
            break
    out[0], out[1], out[2], out[3], out[4] = t, work, taken, nrec, worst
    out[5], out[6], out[7], out[8] = iterations, violation, h_last, residual
    return status


def advance(FlatEvaluator E, VarModel V, VarData W, double t, double[::1] q, double[::1] v, double work,
            double h, double t_end, Py_ssize_t every, Py_ssize_t done, double max_steps, Py_ssize_t max_rows,
            Py_ssize_t max_block, double max_violation, double[:, ::1] rows, double[::1] out):
    """Steps and recorded rows (ode_kernels.advance's rules) from the node in W (start_node), q and
    v updated in place. ``out`` (9,): t, work, steps, rows, the largest joint violation, and of the
    last step: Newton iterations, joint violation, step size, Newton residual. Returns the status
    (FAILED: the next step was not taken; step_once takes it again and says why)."""
    cdef int status
    with nogil:
        status = _advance(E, E.F, E.D, V, W, t, q, v, work, h, t_end, every, done, max_steps, max_rows, max_block,
                          max_violation, rows, out)
    return status


def evaluation(FlatEvaluator E, VarModel V, double t, const double[::1] q, const double[::1] v):
    """What a recorded row reads at (t, q, v), as the compiled rows compute it: (lam, phi, phi_dot =
    J v + phi_t, J, kinetic energy, potential energy), the multipliers minimum-norm from the
    continuous equations (_row_multipliers); new arrays. LinAlgError if the SVD failed."""
    cdef FlatModel F = E.F
    cdef FlatData D = E.D
    cdef double[::1] vdot = np.zeros(F.nv)
    cdef Py_ssize_t rank = 0
    cdef double kinetic, potential
    with nogil:
        frames_into(F, D, q, v)
        forces_into(F, D, t, v)
        if F.nc:
            constraints_into(F, D, t)
            rank = _row_multipliers(F, D, V.rank_tol, vdot)
        kinetic = kinetic_energy(F, v)
        potential = potential_energy(F, D)
    if rank < 0:
        raise np.linalg.LinAlgError("SVD did not converge (the reactions of a recorded row)")
    J = np.array(D.J)
    phi_dot = J @ np.asarray(v) + np.asarray(D.phi_t)
    return np.array(D.lam), np.array(D.phi), phi_dot, J, kinetic, potential


def step_once(Evaluator E, VarModel V, VarData W, double t, double h, double work):
    """One step of length h from the node in W at time t (step): (outcome, work, Newton iterations,
    residual, joint violation); when taken (outcome TAKEN) the new node is in W and its velocity in
    W.v_new. A Python evaluation that raised is raised again here."""
    cdef StepResult result
    with nogil:
        result = step(E, V, W, t, h, work)
    if result[0] == STEP_ERROR:
        error, E.error = E.error, None
        raise error
    return result


def start_node(Evaluator E, VarModel V, VarData W, double t, const double[::1] u, const double[::1] rate):
    """The node at (t, u) with u' = ``rate`` into W: u_k, the momentum p = dT/du' (the Legendre
    transform, eq. (37)), the rate, no multipliers and no last step, and the constraints at u_k."""
    cdef Py_ssize_t k
    cdef int code
    with nogil:
        legendre_into(V, W, u, rate, W.p)
        for k in range(V.n):
            W.a[k] = u[k]
            W.rate[k] = rate[k]
        for k in range(V.m):
            W.lam[k] = 0.0
        W.h[0] = 0.0
        code = constraints_u(E, V, u, t, W.C, W.Ca, W.Ca_t)
    if code != 0:
        error, E.error = E.error, None
        raise error


# p = dT/du' at (u, u') (eq. (37)): the kinetic parts of D2 L_d and D1 L_d over a unit step centred
# on u, whose T_u terms cancel in their half difference (W.b, W.bk, W.D1, W.D2 as scratch)
cdef void legendre_into(VarModel V, VarData W, const double[::1] u, const double[::1] rate,
                        double[::1] p) noexcept nogil:
    cdef double[:, ::1] none = W.Kt[:0]
    cdef Py_ssize_t k
    for k in range(V.n):
        W.bk[k] = u[k] - 0.5 * rate[k]
        W.b[k] = u[k] + 0.5 * rate[k]
    kinetic_into(V, W, W.bk, W.b, 1.0, none)
    for k in range(V.n):
        p[k] = 0.5 * (W.D2[k] - W.D1[k])


def legendre(VarModel V, VarData W, const double[::1] u, const double[::1] rate):
    """p = dT/du' at (u, u') (eq. (37)), a new array."""
    p = np.zeros(V.n)
    cdef double[::1] out = p
    legendre_into(V, W, u, rate, out)
    return p


def kinetic(VarModel V, VarData W, const double[::1] a, const double[::1] b, double h, bint jacobian):
    """The kinetic parts of D1 L_d(a, b) and D2 L_d(a, b) (n,) and, with ``jacobian``, dD1/db (n, n)
    (else None): new arrays."""
    cdef Py_ssize_t k = V.n if jacobian else 0
    Kt = np.zeros((k, k))
    cdef double[:, ::1] view = Kt
    kinetic_into(V, W, a, b, h, view)
    return np.array(W.D1[: V.n]), np.array(W.D2[: V.n]), (Kt.T.copy() if jacobian else None)
