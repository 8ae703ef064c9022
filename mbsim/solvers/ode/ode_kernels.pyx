"""Compiled steps of the ODE-based methods: right-hand side, fixed-step integrators,
quaternion normalisation and both projections, and a block of steps between two records.

What mbsim.solvers.ode.OdeSolver.step does in Python, over a FlatModel and into a FlatData
(mbsim.model.flat), so that Python is entered once per block of steps: the same operations
in the same order where that is cheap to keep; sums of products (J M^-1 J^T, J v) are
plain loops, so results agree with the Python path to round-off.

A step that the compiled code cannot finish cleanly -- a rank-deficient Schur complement,
a non-finite state -- is *not* taken: ``advance`` returns its status with the state before
that step, and the caller takes the step again through the Python loop (the same solve), which
raises the error with its full message (the equations involved, the time).

Symbols (mbsim.solvers.lagrange): M block-diagonal mass matrix, Q generalized forces, J the
constraint Jacobian, gamma the acceleration right side, S = J M^-1 J^T, lambda multipliers.
Parameters ``P`` (float64 array, the indices below): method, integrator, alpha, beta, rank_tol,
projection position/velocity/iterations/tol, robust (pseudo-inverse projections), and the
augmented Lagrangian's penalty, omega, mu, tol, max_iter. The methods: lagrange (here), and
null_space, gauss with optimizer kkt and augmented_lagrangian (mbsim.solvers.numerics.robust_kernels).

Full-rank fast path of the rank-robust solves (:func:`certified_full_rank`): away from singular
positions the pseudo-inverse of J M^-1/2 has nothing to cut, and null_space's and gauss's
accelerations, their multipliers and the pseudo-inverse projections are exactly lagrange's. When
the envelope Cholesky factor of S exists and its smallest eigenvalue (estimated by inverse
iteration) lies a margin above the method's rank cut, the solve goes through that factor (the
cost of lagrange's) instead of the SVD or KKT least-squares solve (dense, O((nv + nc)^3)); at and
near a singular position, or with redundant equations, the SVD or KKT solve decides as before.
On the IFToMM N four-bar with N = 40 (243 coordinates) that is the difference between a
millisecond-scale SVD per stage and lagrange's cost.

The acceleration solve exists only here (and in robust_kernels): Python calls derivative, step_cut,
certified_full_rank and reset_stats (cpdef: the same functions the kernels call), accelerations_at
and evaluation (def wrappers of accelerations for a single evaluation: the recorded initial row, a
run that is not block-stepped, with the forces of the force groups that have no compiled form
added to Q) and advance (a def wrapper that releases the GIL around advance_c).
"""

from libc.math cimport INFINITY, NAN, fabs, isfinite, sin, sqrt

import numpy as np

from mbsim.model.contact.compliant_kernels cimport contacts_near
from mbsim.model.kernels cimport retract3_into
from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.model.record_kernels cimport kinetic_energy, potential_energy, row_into
from mbsim.model.step_kernels cimport (
    constraints_into,
    forces_into,
    frames_into,
    inverse_mass_times,
    row_body,
    row_has_body,
    row_nbody,
    row_dot,
    coordinate_values_into,
)
from mbsim.solvers.ode.integrate cimport (
    A_EVAL_FAILED,
    A_OK,
    I_DOP853,
    I_EULER,
    I_RK4,
    I_RK45,
    I_SEMI_IMPLICIT_EULER,
    System,
    Work,
    adaptive_continue,
    adaptive_start,
    adaptive_step,
    fixed_step,
    implicit_step,
)
from mbsim.solvers.numerics.lapack_kernels cimport cholesky_envelope, cholesky_envelope_solve, cholesky_envelope_solve_raw
from mbsim.solvers.numerics.robust_kernels cimport (
    RobustBuffers,
    augmented_lagrangian_accelerations,
    buffers,
    gauss_kkt_accelerations,
    min_norm_correction,
    min_norm_factor,
    null_space_accelerations,
    py_max,
    py_min,
)

# the parameter vector P (ode_kernels.pxd: P_METHOD ...)
METHOD, INTEGRATOR, ALPHA, BETA, RANK_TOL = P_METHOD, P_INTEGRATOR, P_ALPHA, P_BETA, P_RANK_TOL
PROJ_POSITION, PROJ_VELOCITY, PROJ_ITERATIONS, PROJ_TOL = P_PROJ_POSITION, P_PROJ_VELOCITY, P_PROJ_ITERATIONS, P_PROJ_TOL
ROBUST, PENALTY, OMEGA, MU, AL_TOL, AL_MAX_ITER = P_ROBUST, P_PENALTY, P_OMEGA, P_MU, P_AL_TOL, P_AL_MAX_ITER
CUT = P_CUT  # null_space, gauss: the rank cut of the current adaptive step (step_cut); rank_tol otherwise
CONTACT_STEP = P_CONTACT_STEP  # fixed steps: time.contact_step while compliant boxes are near (0: none)
CONTACT_IMPLICIT = P_CONTACT_IMPLICIT  # fixed steps: Rosenbrock-W while compliant boxes are near (0: no)
NPARAMS = P_NPARAMS
LAGRANGE, NULL_SPACE, GAUSS_KKT, AUGMENTED_LAGRANGIAN = M_LAGRANGE, M_NULL_SPACE, M_GAUSS_KKT, M_AUGMENTED_LAGRANGIAN
METHODS = {
    "lagrange": LAGRANGE,
    "null_space": NULL_SPACE,
    "gauss_kkt": GAUSS_KKT,
    "augmented_lagrangian": AUGMENTED_LAGRANGIAN,
}
# the per-step values each method records in compiled rows, in their column order (the
# methods' EXTRA_DIAGNOSTICS): written by extras_into before a row's step number
EXTRAS = {NULL_SPACE: ("rank", "acceleration_residual"), GAUSS_KKT: ("acceleration_residual", "optimizer_result")}
INTEGRATORS = {
    "euler": I_EULER,
    "semi_implicit_euler": I_SEMI_IMPLICIT_EULER,
    "rk4": I_RK4,
    "scipy:RK45": I_RK45,
    "scipy:DOP853": I_DOP853,
}

# status of a step or block
OK, RANK_DEFICIENT, NOT_FINITE, VIOLATION, RECORD_FAILED = S_OK, S_RANK_DEFICIENT, S_NOT_FINITE, S_VIOLATION, S_RECORD_FAILED
STEP_FAILED = S_STEP_FAILED

# the rank-robust solves take the full-rank (Schur) path when J M^-1/2's smallest singular value is
# estimated at least this many times above the method's cut (singular values below rank_tol times
# the largest count as zero): then the cut removes nothing and the two solves are the same
cdef double _FULL_RANK_MARGIN = 100.0
cdef Py_ssize_t _INVERSE_ITERATIONS = 3  # of inverse iteration for S's smallest eigenvalue
FULL_RANK_MARGIN = _FULL_RANK_MARGIN
INVERSE_ITERATIONS = _INVERSE_ITERATIONS


cdef inline void _copy(const double[::1] src, double[::1] dst, Py_ssize_t start) noexcept nogil:
    """dst[start : start + len(src)] = src."""
    cdef Py_ssize_t k
    for k in range(src.shape[0]):
        dst[start + k] = src[k]


cdef void minv_jt_times(FlatModel F, FlatData D, const double[::1] x, double[::1] out) noexcept nogil:
    """out = M^-1 J^T x (nv,), column block by column block of M^-1 J^T."""
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t k, c, side, b, a
    for k in range(F.nv):
        out[k] = 0.0
    for c in range(F.nc):
        for side in range(row_nbody(F, c)):
            b = row_body(F, c, side)
            if b < F.nbody:
                for a in range(w):
                    out[w * b + a] += D.minv_jt[w * b + a, c] * x[c]


cdef bint schur_factor(FlatModel F, FlatData D, double rank_tol) noexcept nogil:
    """M^-1 J^T into D.minv_jt and the lower Cholesky factor of S = J M^-1 J^T into D.S, in the
    factored order F.s_rows (position i holds constraint row s_rows[i]). Returns False on a rank
    loss: a pivot <= 0, or a pivot^2 <= rank_tol times its row's diagonal S_ii, i.e. a row within
    an angle sqrt(rank_tol) of the span of the rows before it (mbsim.solvers.numerics.linalg.Schur). The
    test is per row, so it does not tighten with the number of rows as a ratio across rows does.
    Only the blocks of each row's two bodies are visited: the others are zero in J and stay zero
    in D.minv_jt."""
    cdef Py_ssize_t nc = F.nc, nb = F.nbody
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef double[:, ::1] J = D.J
    cdef double[:, ::1] MJ = D.minv_jt
    cdef double[:, ::1] S = D.S
    cdef Py_ssize_t i, r, side, b, a, m, j, e, c
    cdef double s
    for i in range(nc):
        r = F.s_rows[i]
        for side in range(row_nbody(F, r)):
            b = row_body(F, r, side)
            if b < nb:
                for a in range(w):
                    s = 0.0
                    for m in range(w):
                        s += F.body_inv_mass[b, a, m] * J[r, w * b + m]
                    MJ[w * b + a, r] = s
        # the envelope (the last factor's values) to zero
        for j in range(F.row_first[i], i + 1):
            S[i, j] = 0.0
        # the positions j <= i whose rows share a body
        for e in range(F.s_ptr[i], F.s_ptr[i + 1]):
            j = F.s_col[e]
            c = F.s_rows[j]
            s = 0.0
            for side in range(row_nbody(F, r)):
                b = row_body(F, r, side)
                if b < nb and row_has_body(F, c, b):
                    for m in range(w):
                        s += J[r, w * b + m] * MJ[w * b + m, c]
            S[i, j] = s
        # the row's own weight, before the factor overwrites it (the relative pivot test below)
        D.s_work[i] = S[i, i]
    # S = L L^T (lower triangle, within the envelope)
    if not cholesky_envelope(S, F.row_first):
        return False
    # L_ii^2 = S_ii less the part of row i the rows before it explain
    for i in range(nc):
        if not (S[i, i] * S[i, i] > rank_tol * D.s_work[i]):
            return False
    return True


cdef void schur_solve(FlatModel F, FlatData D, double[::1] x) noexcept nogil:
    """x <- S^-1 x with the factor in D.S (forward, then back substitution in the factored order)."""
    cdef double[::1] y = D.s_work
    cdef Py_ssize_t i
    for i in range(F.nc):
        y[i] = x[F.s_rows[i]]
    cholesky_envelope_solve(D.S, F.row_first, F.row_last, y)
    for i in range(F.nc):
        x[F.s_rows[i]] = y[i]


cdef bint correction(FlatModel F, FlatData D, const double[::1] P, double[::1] r, double[::1] dx,
                     double* lam) noexcept nogil:
    """dx = M^-1 J^T S^-1 r (the M-smallest dx with J dx = r); r is overwritten. Unless lam is NULL,
    lambda = S^-1 r (dx = M^-1 J^T lambda; the minimum-norm one with the pseudo-inverse) into lam (nc).
    False on rank loss; with P[ROBUST] the pseudo-inverse instead (a rank loss allowed)."""
    cdef double rank_tol = P[P_RANK_TOL]
    cdef Py_ssize_t c
    if P[P_ROBUST] != 0.0:
        if not certified_full_rank(F, D, rank_tol, False):
            return min_norm_correction(F, D, rank_tol, r, dx, lam)
    elif not schur_factor(F, D, rank_tol):
        return False
    schur_solve(F, D, r)
    minv_jt_times(F, D, r, dx)
    if lam != NULL:
        for c in range(F.nc):
            lam[c] = r[c]
    return True


cpdef bint certified_full_rank(FlatModel F, FlatData D, double rank_tol, bint kkt) noexcept nogil:
    """Factor S = J M^-1 J^T into D.S (schur_factor) and decide whether the rank-robust solve at
    this state is the full-rank one: J has full row rank and no singular value is near the cut.

    lambda_min(S) = s_min^2 of J M^-1/2 is estimated by inverse iteration with the factor (from a
    fixed generic start; near a singular position the smallest eigenvalue is far below the next and
    the iteration has converged after one solve), lambda_max(S) bounded above by trace(S) = |L|_F^2.
    null_space and the projections (kkt False) cut at s <= rank_tol s_max: the condition is
    lambda_min > (FULL_RANK_MARGIN rank_tol)^2 trace(S). gauss (kkt True) cuts the KKT matrix's
    singular values at rank_tol times its largest: its smallest is bounded below through its
    inverse's blocks, 1 / (1/m + 2/sqrt(m lambda_min) + 1/lambda_min) with m M's smallest
    eigenvalue (bounded below by 1 / max |M_b^-1|_F), its largest above by its Frobenius norm."""
    cdef Py_ssize_t nc = F.nc, nv = F.nv
    if nc == 0 or nc > nv or not schur_factor(F, D, 0.0):
        return False
    cdef double[:, ::1] L = D.S
    cdef Py_ssize_t r, c, it, b, a, m, k
    cdef double trace = 0.0
    cdef double norm, lam_min, margin, block, inv_norm, mass_sq, jac_sq, m_min, smallest
    for r in range(nc):
        for c in range(F.row_first[r], r + 1):
            trace += L[r, c] * L[r, c]
    # vec_m and kkt_b: free in these solves
    cdef RobustBuffers work = buffers(F, D)
    cdef double* x = work.vec_m
    cdef double* y = work.kkt_b
    norm = 0.0
    for r in range(nc):
        x[r] = sin(0.7 + 1.3 * r) + 1.5  # generic: no eigenvector of S is orthogonal to it
        norm += x[r] * x[r]
    for r in range(nc):
        x[r] /= sqrt(norm)
    for it in range(_INVERSE_ITERATIONS):
        for r in range(nc):
            y[r] = x[r]
        cholesky_envelope_solve_raw(L, F.row_first, F.row_last, y)
        norm = 0.0
        for r in range(nc):
            norm += y[r] * y[r]
        norm = sqrt(norm)
        if not (norm > 0.0 and isfinite(norm)):
            return False
        for r in range(nc):
            x[r] = y[r] / norm
    lam_min = 1.0 / norm  # >= the smallest eigenvalue; equal once converged
    if not kkt:
        margin = _FULL_RANK_MARGIN * rank_tol
        return lam_min > margin * margin * trace
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    inv_norm, mass_sq, jac_sq = 0.0, 0.0, 0.0
    for b in range(F.nbody):
        block = 0.0
        for a in range(w):
            for m in range(w):
                block += F.body_inv_mass[b, a, m] * F.body_inv_mass[b, a, m]
                mass_sq += F.body_mass_block[b, a, m] * F.body_mass_block[b, a, m]
        inv_norm = py_max(inv_norm, sqrt(block))
    for r in range(nc):
        for k in range(nv):
            jac_sq += D.J[r, k] * D.J[r, k]
    m_min = 1.0 / inv_norm
    smallest = 1.0 / (1.0 / m_min + 2.0 / sqrt(m_min * lam_min) + 1.0 / lam_min)
    return smallest > _FULL_RANK_MARGIN * rank_tol * sqrt(mass_sq + 2.0 * jac_sq)


cdef void schur_accelerations(FlatModel F, FlatData D, double alpha, double beta, const double[::1] v,
                              double[::1] vdot) noexcept nogil:
    """v_dot and lambda (D.lam) with S's factor in D.S: lambda = S^-1 (J M^-1 Q - gamma*),
    v_dot = M^-1 (Q - J^T lambda); gamma* = gamma with Baumgarte's terms if alpha, beta."""
    cdef Py_ssize_t nc = F.nc, nv = F.nv
    cdef double[::1] rhs = D.lam
    cdef Py_ssize_t r, k
    cdef double g, jv
    inverse_mass_times(F, D.Q, D.minv_q)
    for r in range(nc):
        g = D.gamma[r]
        # Baumgarte: gamma - 2 alpha (J v + Phi_t) - beta^2 Phi
        if alpha != 0.0 or beta != 0.0:
            jv = row_dot(F, D.J, r, v)
            g = g - 2.0 * alpha * (jv + D.phi_t[r]) - beta * beta * D.phi[r]
        rhs[r] = row_dot(F, D.J, r, D.minv_q) - g
    schur_solve(F, D, rhs)
    minv_jt_times(F, D, rhs, vdot)
    for k in range(nv):
        vdot[k] = D.minv_q[k] - vdot[k]


cdef bint lagrange_accelerations(FlatModel F, FlatData D, const double[::1] P, const double[::1] v,
                                 double[::1] vdot) noexcept nogil:
    """v_dot and lambda (D.lam) of [M J^T; J 0] [v_dot; lambda] = [Q; gamma*] through the Schur
    complement (mbsim.solvers.lagrange); False on rank loss."""
    if not schur_factor(F, D, P[P_RANK_TOL]):
        return False
    schur_accelerations(F, D, P[P_ALPHA], P[P_BETA], v, vdot)
    return True


cdef void q_rate_into(FlatModel F, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
    """dq/dt (quaternion rate 1/2 q ⊗ (0, omega_body) in 3D)."""
    cdef Py_ssize_t k, b, o, ov, a
    cdef double w, x, y, z, wx, wy, wz
    if F.dim == 2:
        for k in range(F.nq):
            out[k] = v[k]
        return
    for b in range(F.nbody):
        o, ov = 7 * b, 6 * b
        for a in range(3):
            out[o + a] = v[ov + a]
        w, x, y, z = q[o + 3], q[o + 4], q[o + 5], q[o + 6]
        wx, wy, wz = v[ov + 3], v[ov + 4], v[ov + 5]
        out[o + 3] = 0.5 * (-x * wx - y * wy - z * wz)
        out[o + 4] = 0.5 * (w * wx + y * wz - z * wy)
        out[o + 5] = 0.5 * (w * wy - x * wz + z * wx)
        out[o + 6] = 0.5 * (w * wz + x * wy - y * wx)


cdef void increment_velocities(FlatModel F, const double[::1] q, const double[::1] dq, double[::1] out) noexcept nogil:
    """N(q)^+ dq: the velocities whose q_rate_into at q is dq along the unit quaternions (2D: dq;
    3D per body the translation and the rotation vector in body axes, 2 (p* (x) dp)_vec)."""
    cdef Py_ssize_t k, b, o, ov
    cdef double w, x, y, z, dw, dx, dy, dz
    if F.dim == 2:
        for k in range(F.nv):
            out[k] = dq[k]
        return
    for b in range(F.nbody):
        o, ov = 7 * b, 6 * b
        out[ov], out[ov + 1], out[ov + 2] = dq[o], dq[o + 1], dq[o + 2]
        w, x, y, z = q[o + 3], q[o + 4], q[o + 5], q[o + 6]
        dw, dx, dy, dz = dq[o + 3], dq[o + 4], dq[o + 5], dq[o + 6]
        out[ov + 3] = 2.0 * (w * dx - dw * x - (y * dz - z * dy))
        out[ov + 4] = 2.0 * (w * dy - dw * y - (z * dx - x * dz))
        out[ov + 5] = 2.0 * (w * dz - dw * z - (x * dy - y * dx))


cpdef void reset_stats(double[::1] stats, Py_ssize_t start) noexcept nogil:
    """stats[start : start + 3] = (iterations 0, rank +inf, residual -inf): nothing solved yet."""
    stats[start], stats[start + 1], stats[start + 2] = 0.0, INFINITY, -INFINITY


cdef inline void _copy_stats(double[::1] stats, Py_ssize_t src, Py_ssize_t dst) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(3):
        stats[dst + k] = stats[src + k]


cdef bint accelerations(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] q,
                        const double[::1] v, double[::1] vdot, double* power) noexcept nogil:
    """v_dot at (t, q, v) into vdot; returns ok, the power of non-conservative forces and drives
    into power[0]. The solve's iterations, rank and residual are added to D.solve_stats[0:3]."""
    return accelerations_with(F, D, P, t, q, v, NULL, vdot, power)


cdef bint accelerations_with(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] q,
                             const double[::1] v, const double* extra_Q, double[::1] vdot,
                             double* power) noexcept nogil:
    """accelerations, with ``extra_Q`` (nv, or NULL) added to the generalized forces: what force
    groups without a compiled form (compliant contacts, issue 31) give, computed by the caller
    (whose power the caller adds too)."""
    cdef Py_ssize_t method, n, r, k
    cdef double[::1] stats
    cdef double residual
    frames_into(F, D, q, v)
    power[0] = forces_into(F, D, t, v)
    if extra_Q != NULL:
        for k in range(F.nv):
            D.Q[k] += extra_Q[k]
    if F.nc == 0:
        inverse_mass_times(F, D.Q, vdot)
        return True
    constraints_into(F, D, t)
    method = <Py_ssize_t>P[P_METHOD]
    stats = D.solve_stats
    if method == M_LAGRANGE:
        if not lagrange_accelerations(F, D, P, v, vdot):
            return False
    elif method != M_AUGMENTED_LAGRANGIAN and certified_full_rank(F, D, P[P_CUT], method == M_GAUSS_KKT):
        schur_accelerations(F, D, 0.0, 0.0, v, vdot)  # the full-rank solve (see the module docstring)
        residual = 0.0
        for r in range(F.nc):
            residual = py_max(residual, fabs(row_dot(F, D.J, r, vdot) - D.gamma[r]))
        if method == M_NULL_SPACE:
            stats[1] = py_min(stats[1], <double>F.nc)
        stats[2] = py_max(stats[2], residual)
    else:
        if method == M_NULL_SPACE:
            n = null_space_accelerations(F, D, P[P_CUT], vdot, stats)
        elif method == M_GAUSS_KKT:
            n = gauss_kkt_accelerations(F, D, P[P_CUT], vdot, stats)
        else:
            n = augmented_lagrangian_accelerations(
                F, D, v, P[P_PENALTY], P[P_OMEGA], P[P_MU], P[P_AL_TOL], <Py_ssize_t>P[P_AL_MAX_ITER], vdot
            )
        if n < 0:
            return False
        stats[0] += n
    # drives do work: lambda^T Phi_t
    for r in range(F.nc):
        power[0] += D.lam[r] * D.phi_t[r]
    return True


cpdef double step_cut(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] y) noexcept nogil:
    """null_space and gauss (kkt) under an adaptive integrator: the rank cut for the coming step
    (the singular values of J M^-1/2, of the KKT matrix for gauss, at its start; the methods'
    before_adaptive_step). The rank r is
    decided as always (singular values above rank_tol times the largest); the cut is then put in
    the middle of the gap around it, sqrt(s_r s_r+1) / s_1 (s_r+1 = 0 at full rank), kept within
    [rank_tol / 10, 10 rank_tol]. So no singular value crosses the cut within the step unless it
    moves by a large factor: the right-hand side stays smooth over the integrator's stages, and
    a direction is dropped or taken back between steps. A full rank certified by
    certified_full_rank needs no SVD: its cut is rank_tol / 10."""
    cdef Py_ssize_t nq = F.nq, nv = F.nv
    cdef double tau = P[P_RANK_TOL]
    if F.nc == 0:
        return tau
    cdef bint kkt = <Py_ssize_t>P[P_METHOD] == M_GAUSS_KKT
    cdef const double[::1] q = y[:nq]
    cdef const double[::1] v = y[nq : nq + nv]
    cdef RobustBuffers B
    cdef double* s
    cdef Py_ssize_t ns, rank, k
    cdef double below, cut
    frames_into(F, D, q, v)
    constraints_into(F, D, t)
    if certified_full_rank(F, D, tau, kkt):
        return 0.1 * tau
    B = buffers(F, D)
    # the KKT matrix's singular values, as gelsd leaves them (Q does not change them)
    if kkt:
        forces_into(F, D, t, v)
        if gauss_kkt_accelerations(F, D, tau, D.dx, D.solve_stats) < 0:
            return tau
        s, ns = B.kkt_s, nv + F.nc
        rank = 0
        for k in range(ns):
            if s[k] > tau * s[0]:
                rank += 1
    else:
        rank = min_norm_factor(F, D, tau)
        s, ns = B.svd_s, B.nsv
    if rank <= 0:
        return tau
    below = s[rank] if rank < ns else 0.0
    cut = sqrt(s[rank - 1] * below) / s[0]
    return py_min(py_max(cut, 0.1 * tau), 10.0 * tau)


cpdef bint derivative(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] y,
                      double[::1] out) noexcept nogil:
    """out = (q_dot, v_dot, power) at y = (q, v, work); False on rank loss."""
    cdef Py_ssize_t nq = F.nq, nv = F.nv
    cdef double power = 0.0
    cdef bint ok
    ok = accelerations(F, D, P, t, y[:nq], y[nq : nq + nv], out[nq : nq + nv], &power)
    q_rate_into(F, y[:nq], y[nq : nq + nv], out[:nq])
    out[nq + nv] = power
    return ok


def accelerations_at(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] q,
                     const double[::1] v, extra_Q=None):
    """The one acceleration solve (accelerations) for Python: (ok, v_dot, power) at (t, q, v), new
    arrays; the multipliers (lambda of M v_dot = Q - J^T lambda), J, phi, phi_t and gamma are left
    in D.lam, D.J, ... and the solve's statistics added to D.solve_stats[0:3]. ``extra_Q`` (nv):
    generalized forces of force groups without a compiled form, added to Q (their power is the
    caller's). ok False: rank loss (lagrange), an SVD / least-squares solve that failed, or an
    augmented Lagrangian iteration that did not converge."""
    cdef double[::1] vdot = np.zeros(F.nv)
    cdef const double[::1] extra
    cdef const double* extra_ptr = NULL
    cdef double power = 0.0
    cdef bint ok
    if extra_Q is not None:
        extra = np.ascontiguousarray(extra_Q, dtype=np.float64)
        if extra.shape[0] != F.nv:
            raise ValueError(f"extra_Q has {extra.shape[0]} entries, the model {F.nv} velocity coordinates")
        if F.nv:
            extra_ptr = &extra[0]
    with nogil:
        ok = accelerations_with(F, D, P, t, q, v, extra_ptr, vdot, &power)
    return ok, np.asarray(vdot), power


def evaluation(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] q,
               const double[::1] v, extra_Q=None):
    """What a recorded state reads, by the compiled step's own functions (accelerations_at, then
    record_kernels' energies): (ok, v_dot, power, lambda, phi, phi_dot = J v + phi_t, J (nc, nv),
    kinetic energy, potential energy of gravity, spring-dampers and joint springs), new arrays."""
    ok, vdot, power = accelerations_at(F, D, P, t, q, v, extra_Q)
    cdef double kinetic, potential
    with nogil:
        kinetic = kinetic_energy(F, v)
        potential = potential_energy(F, D)
    J = np.array(D.J)
    phi_dot = J @ np.asarray(v) + np.asarray(D.phi_t)
    lam = np.array(D.lam) if F.nc else np.zeros(0)
    return ok, vdot, power, lam, np.array(D.phi), phi_dot, J, kinetic, potential


cdef bint _first_stage(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] y,
                       double[::1] k1) noexcept nogil:
    """derivative(t, y) into k1, unless k1 holds it already (D.k1_valid: y is a state just
    recorded, whose evaluation advance kept: its solve counts as the step's first, as in
    OdeSolver.step). Starts the step's solve statistics."""
    if D.k1_valid[0]:
        D.k1_valid[0] = 0
        _copy_stats(D.solve_stats, 3, 0)
        return True
    reset_stats(D.solve_stats, 0)
    return derivative(F, D, P, t, y, k1)


cdef class OdeSystem(ContactSystem):
    """The right-hand side (derivative) of a FlatModel into its FlatData with the parameters P, as
    the integrators' System (mbsim.solvers.ode.integrate): y = (q, v, work)."""

    def __init__(self, FlatModel F, FlatData D, double[::1] P):
        self.F, self.D, self.P = F, D, P
        self.nq, self.nv, self.n = F.nq, F.nv, F.nq + F.nv + 1
        self.has_jac = F.ncc > 0 and F.dim == 3
        self.jac = ContactJacobian(F, BodyCoordinates(F), F.nq, F.nv) if self.has_jac else None
        self.rows, self.minv, self.column = np.zeros(max(F.nc, 1)), np.zeros(F.nv), np.zeros(F.nv)

    cdef bint stiff_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        """f(t, y) with the compliant contacts' slopes taken on the way (D.cc_linear), then their
        Jacobian (stiff_kernels.ContactJacobian); with constraints U = A E^T with the constrained
        inverse mass A = M^-1 - M^-1 J^T S^-1 J M^-1 (S's factor at y: lagrange's solve leaves it,
        the other methods' full-rank factor is taken here; where S has no factor, M^-1 alone)."""
        cdef Py_ssize_t j, c, k
        cdef bint ok
        self.D.k1_valid[0] = 0
        reset_stats(self.D.solve_stats, 0)
        if not self.has_jac:
            return derivative(self.F, self.D, self.P, t, y, out)
        self.jac.slopes(self.D, True)
        ok = derivative(self.F, self.D, self.P, t, y, out)
        self.jac.slopes(self.D, False)
        if not ok:
            return False
        for k in range(self.nq):
            self.jac.q0[k] = y[k]
        self.jac.prepare(self.D)
        if not self.jac.active or self.F.nc == 0:
            return True
        if <int>self.P[P_METHOD] != M_LAGRANGE and not schur_factor(self.F, self.D, 0.0):
            return True
        for j in range(self.jac.nd):
            for k in range(self.nv):
                self.column[k] = self.jac.U[k, j]
            for c in range(self.F.nc):
                self.rows[c] = row_dot(self.F, self.D.J, c, self.column)
            schur_solve(self.F, self.D, self.rows)
            minv_jt_times(self.F, self.D, self.rows, self.minv)
            for k in range(self.nv):
                self.jac.U[k, j] -= self.minv[k]
        return True

    cdef bint derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        return derivative(self.F, self.D, self.P, t, y, out)

    cdef bint first_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        """The first stage of a fixed step: the recorded state's derivative when advance kept it
        (_first_stage)."""
        cdef Py_ssize_t k
        if not _first_stage(self.F, self.D, self.P, t, y, self.D.k1):
            return False
        for k in range(self.n):
            out[k] = self.D.k1[k]
        return True

    cdef void q_rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
        q_rate_into(self.F, q, v, out)


cdef class BodyCoordinates(CoordinateMap):
    """The body coordinates' q' = N(q) v (q_rate_into) and N(q)^+ dq (increment_velocities)."""

    cdef FlatModel F

    def __init__(self, FlatModel F):
        self.F = F

    cdef void rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
        q_rate_into(self.F, q, v, out)

    cdef void increment(self, const double[::1] q, const double[::1] dq, double[::1] out) noexcept nogil:
        increment_velocities(self.F, q, dq, out)


def system(FlatModel F, FlatData D, double[::1] P):
    """The right-hand side as an integrate.System (mbsim.solvers.ode.integrate.solve / fixed)."""
    return OdeSystem(F, D, P)


cdef bint _same(const double[::1] a, const double[::1] b) noexcept nogil:
    """a == b elementwise (np.array_equal)."""
    cdef Py_ssize_t k
    for k in range(a.shape[0]):
        if not (a[k] == b[k]):
            return False
    return True


cdef int _adaptive(FlatModel F, FlatData D, double[::1] P, OdeSystem S, Work W, double t, double h, double t_end,
                   const double[::1] y) noexcept nogil:
    """One accepted step of the adaptive pair from (t, y) (integrators.AdaptiveStepper.step):
    null_space and gauss first set the step's rank cut (step_cut; OdeSolver.before_adaptive_step);
    the pair starts afresh with the first step h when it is not at t, and continues from y with f
    recomputed (h kept) when y is not the state it left or the cut changed. The step's solve
    statistics are counted from here. Returns an integrate status (A_OK ...). S: the system of F, D, P."""
    cdef Py_ssize_t method = <Py_ssize_t>P[P_METHOD]
    cdef bint changed = False
    cdef double cut
    cdef int status = A_OK
    if F.nc and (method == M_NULL_SPACE or method == M_GAUSS_KKT):
        cut = step_cut(F, D, P, t, y)
        changed = cut != P[P_CUT]
        P[P_CUT] = cut
    reset_stats(D.solve_stats, 0)
    if not W.started or W.t != t:
        status = adaptive_start(S, W, t, y, py_min(h, t_end - t))
    elif changed or not _same(W.y, y):
        status = adaptive_continue(S, W, y)
    if status != A_OK:
        return status
    return adaptive_step(S, W)


cdef void normalize(FlatModel F, double[::1] q) noexcept nogil:
    """Quaternions rescaled to unit norm (3D)."""
    cdef Py_ssize_t b, o, a
    cdef double n
    if F.dim == 3:
        for b in range(F.nbody):
            o = 7 * b + 3
            n = sqrt(q[o] * q[o] + q[o + 1] * q[o + 1] + q[o + 2] * q[o + 2] + q[o + 3] * q[o + 3])
            for a in range(4):
                q[o + a] = q[o + a] / n


cdef void _frames_at_rest(FlatModel F, FlatData D, const double[::1] q) noexcept nogil:
    """Body frames of q with zero velocities (what positions alone determine)."""
    D.dx[:] = 0.0
    frames_into(F, D, q, D.dx)


cdef void _constraints_at_rest(FlatModel F, FlatData D, double t, const double[::1] q) noexcept nogil:
    """Constraint values at (q, t) with zero velocities (the projections' Jacobian)."""
    _frames_at_rest(F, D, q)
    constraints_into(F, D, t)


cdef double _max_abs(const double[::1] x) noexcept nogil:
    cdef double m = 0.0
    cdef double a
    cdef Py_ssize_t k
    for k in range(x.shape[0]):
        a = fabs(x[k])
        if a > m or a != a:
            m = a
    return m


cdef bint project(FlatModel F, FlatData D, const double[::1] P, double t, double[::1] q, double[::1] v,
                  Py_ssize_t* used, double* violation, double* lam_v) noexcept nogil:
    """Mass-weighted projection of q (Newton steps), then of v, in place
    (mbsim.solvers.numerics.projection). Returns ok; the Newton steps into used[0], max |Phi| at the
    returned q into violation[0] (-1: q not projected); unless lam_v is NULL, the velocity
    projection's multipliers into lam_v (nc: v changed by -M^-1 J^T lam_v; zeros when v is not
    projected)."""
    cdef Py_ssize_t nv = F.nv, nc = F.nc
    cdef Py_ssize_t iterations, k, c
    cdef double tol
    cdef bint have_values = False
    cdef double[::1] r
    cdef double[::1] dx
    used[0], violation[0] = 0, -1.0
    if lam_v != NULL:
        for c in range(nc):
            lam_v[c] = 0.0
    if P[P_PROJ_POSITION] != 0.0:
        iterations, tol = <Py_ssize_t>P[P_PROJ_ITERATIONS], P[P_PROJ_TOL]
        while True:
            _constraints_at_rest(F, D, t, q)
            violation[0] = _max_abs(D.phi)
            if violation[0] <= tol or used[0] >= iterations:
                break
            r = D.rhs
            _copy(D.phi, r, 0)
            dx = D.dx
            if not correction(F, D, P, r, dx, NULL):
                return False
            for k in range(nv):
                dx[k] = -dx[k]
            if F.dim == 3:
                retract3_into(q, dx, F.nbody, q)
            else:
                for k in range(nv):
                    q[k] = q[k] + dx[k]
            used[0] += 1
        have_values = True
    if P[P_PROJ_VELOCITY] != 0.0:
        if not have_values:
            frames_into(F, D, q, v)
            constraints_into(F, D, t)
        r = D.rhs
        for c in range(nc):
            r[c] = row_dot(F, D.J, c, v) + D.phi_t[c]
        if not correction(F, D, P, r, D.dx, lam_v):
            return False
        for k in range(nv):
            v[k] = v[k] - D.dx[k]
    return True


cdef bint _all_finite(const double[::1] x) noexcept nogil:
    cdef bint ok = True
    cdef Py_ssize_t k
    for k in range(x.shape[0]):
        ok = ok and isfinite(x[k])
    return ok


cdef void update_coordinate_references(FlatModel F, FlatData D, double t, const double[::1] q) noexcept nogil:
    """The unwrapped deflections of an accepted step become the next references (when any
    spring coordinate wraps: mbsim.model.dynamics.JointCoordinates.update)."""
    cdef bint wrapped = False
    cdef Py_ssize_t p, r
    for p in range(F.jc_wrap.shape[0]):
        wrapped = wrapped or F.jc_wrap[p] != 0
    if wrapped:
        _frames_at_rest(F, D, q)
        coordinate_values_into(F, D, t)
        for r in range(F.njc):
            D.jc_ref[r] = D.jc_value[r]


cdef int _steps(FlatModel F, FlatData D, double[::1] P, OdeSystem S, Work W, double t, double[::1] q, double[::1] v,
                double work, double h, double t_end, Py_ssize_t nmax, double max_violation,
                double[::1] out) noexcept nogil:
    """Up to ``nmax`` steps of size h (the last one shortened to land on t_end, as
    mbsim.simulate.run does; a fixed step time.contact_step, P[CONTACT_STEP], instead while the
    compliant contacts' boxes are near, as there), q and v updated in place; under an adaptive integrator (W.method
    RK45, DOP853) each step is one accepted step of the pair (_adaptive; h its first step when it
    starts afresh, scipy's step control after that, the last one landing on W.t_bound).

    Stops early, before taking it, at a step that fails (rank loss: RANK_DEFICIENT) or would
    leave a non-finite state (NOT_FINITE), and after a step whose position violation passes
    ``max_violation`` (VIOLATION). ``out`` (float64, 7) receives: t, work, steps taken,
    Newton steps of the last step, its position violation (-1: not projected), the largest
    violation over the steps, and the size of the last step. Returns the status (OK when
    nmax steps or t_end were reached; STEP_FAILED: the adaptive step fell below its smallest).
    """
    cdef int method = W.method
    cdef bint adaptive = method == I_RK45 or method == I_DOP853
    cdef int a
    cdef Py_ssize_t nq = F.nq, nv = F.nv
    cdef Py_ssize_t ny = nq + nv + 1
    cdef double[::1] y = D.y
    cdef double[::1] ynew = D.ynew
    cdef double[::1] qn = ynew[:nq]
    cdef double[::1] vn = ynew[nq : nq + nv]
    cdef Py_ssize_t steps = 0, newton = 0
    cdef int status = S_OK
    cdef double violation = -1.0, worst = 0.0, h_last = 0.0
    cdef double scale = py_max(1.0, t_end)
    cdef double h_try, t_new, step_violation
    cdef bint ok, near
    while steps < nmax and t_end - t > 1e-12 * scale:
        h_try = py_min(h, t_end - t)
        # land exactly on t_end
        if t_end - (t + h_try) < 1e-9 * h_try:
            h_try = t_end - t
            # a whole step short of t_end by round-off of the time only: the step itself (the loop ends
            # within 1e-12 scale of t_end), the steps of a run that goes on (mbsim run --from: bit for bit)
            if (h_try - h if h_try > h else h - h_try) <= 1e-12 * scale:
                h_try = h
        # the paper's step control (mbsim.simulate's): the small step while compliant boxes are near;
        # solver.contact_integration implicit: a Rosenbrock-W step there instead of the integrator's
        near = (not adaptive and (0.0 < P[P_CONTACT_STEP] < h_try or P[P_CONTACT_IMPLICIT] != 0.0)
                and contacts_near(F, D, q, v, h_try))
        if near and 0.0 < P[P_CONTACT_STEP] < h_try:
            h_try = P[P_CONTACT_STEP]
        _copy(q, y, 0)
        _copy(v, y, nq)
        y[ny - 1] = work
        if adaptive:
            a = _adaptive(F, D, P, S, W, t, h_try, t_end, y)
            if a != A_OK:
                status = S_RANK_DEFICIENT if a == A_EVAL_FAILED else S_STEP_FAILED
                break
            _copy(W.y, ynew, 0)
            t_new = W.t
        else:
            if near and P[P_CONTACT_IMPLICIT] != 0.0:
                ok = implicit_step(S, W, t, h_try, y, ynew)
            else:
                ok = fixed_step(S, W, method, t, h_try, y, ynew)
            if not ok:
                status = S_RANK_DEFICIENT
                break
            t_new = t + h_try
        normalize(F, qn)
        ok = True
        if F.nc:
            ok = project(F, D, P, t_new, qn, vn, &newton, &violation, NULL)
        if not ok:
            status = S_RANK_DEFICIENT
            break
        if not _all_finite(ynew):
            status = S_NOT_FINITE
            break
        _copy_stats(D.solve_stats, 0, 6)
        # a method that iterates reports its own iterations (OdeSolver.step)
        if D.solve_stats[6] > 0.0:
            newton = <Py_ssize_t>D.solve_stats[6]
        _copy(qn, q, 0)
        _copy(vn, v, 0)
        work = ynew[ny - 1]
        h_last = t_new - t  # as the Python step reports it
        t = t_new
        steps += 1
        update_coordinate_references(F, D, t, q)
        if violation < 0.0:
            if F.nc:
                _constraints_at_rest(F, D, t, q)
                step_violation = _max_abs(D.phi)
            else:
                step_violation = 0.0
        else:
            step_violation = violation
        worst = py_max(worst, step_violation)
        if step_violation > max_violation:
            status = S_VIOLATION
            break
    out[0], out[1], out[2], out[3], out[4], out[5], out[6] = t, work, steps, newton, violation, worst, h_last
    return status


cdef void extras_into(const double[::1] P, const double[::1] stats, double[::1] row) noexcept nogil:
    """The last step's per-step values (EXTRAS) into the columns before the row's step number;
    NaN where no solve took place (no constraints), as the Python path records them."""
    cdef Py_ssize_t method = <Py_ssize_t>P[P_METHOD]
    cdef Py_ssize_t end = row.shape[0] - 1
    cdef bint solved = stats[8] > -INFINITY
    if method == M_NULL_SPACE:
        row[end - 2] = stats[7] if solved else NAN
        row[end - 1] = stats[8] if solved else NAN
    elif method == M_GAUSS_KKT:
        row[end - 2] = stats[8] if solved else NAN
        row[end - 1] = 0.0 if solved else NAN  # RESULT_CODES["kkt"]


cdef int advance_c(FlatModel F, FlatData D, double[::1] P, OdeSystem S, Work W, double t, double[::1] q, double[::1] v,
                   double work, double h, double t_end, Py_ssize_t every, Py_ssize_t done, Py_ssize_t max_steps,
                   Py_ssize_t max_rows, Py_ssize_t max_block, double max_violation, double[:, ::1] rows,
                   double[::1] out) noexcept nogil:
    """advance's loop (see there), without the GIL; S the system of F, D, P."""
    # a fixed step's first stage is the recorded state's derivative; an adaptive pair keeps its own
    cdef bint fixed = not (W.method == I_RK45 or W.method == I_DOP853)
    cdef Py_ssize_t nq = F.nq, nv = F.nv
    cdef Py_ssize_t ny = nq + nv + 1
    cdef double[::1] seg = D.seg
    cdef double[::1] y
    cdef Py_ssize_t taken = 0, nrec = 0, n, k, number
    cdef int status = S_OK
    cdef double worst = 0.0, newton = 0.0, violation = -1.0, h_last = 0.0
    cdef double scale = py_max(1.0, t_end)
    cdef bint last, due
    D.k1_valid[0] = 0  # the state may have changed since the last call
    while nrec < max_rows and taken < max_block and t_end - t > 1e-12 * scale:
        # every >= 1 and done + taken >= 0: C's % is Python's here
        n = min(every - (done + taken) % every, max_steps + 1 - (done + taken), max_block - taken)
        status = _steps(F, D, P, S, W, t, q, v, work, h, t_end, n, max_violation, seg)
        k = <Py_ssize_t>seg[2]
        if k > 0:
            t, work = seg[0], seg[1]
            newton, violation, h_last = seg[3], seg[4], seg[6]
            worst = py_max(worst, seg[5])
            taken += k
        number = done + taken
        last = not (t_end - t > 1e-12 * scale)
        due = number % every == 0 or last or status == S_VIOLATION
        if k > 0 and due and number <= max_steps:
            y = D.y
            _copy(q, y, 0)
            _copy(v, y, nq)
            y[ny - 1] = work
            reset_stats(D.solve_stats, 0)
            if not derivative(F, D, P, t, y, D.k1):
                status = S_RECORD_FAILED
                break
            _copy_stats(D.solve_stats, 0, 3)
            D.k1_valid[0] = fixed  # the next step's first stage
            row_into(F, D, t, q, v, work, newton, h_last, rows[nrec])
            extras_into(P, D.solve_stats, rows[nrec])
            rows[nrec, rows.shape[1] - 1] = number
            nrec += 1
        if status != S_OK or number > max_steps:
            break
    D.k1_valid[0] = 0
    out[0], out[1], out[2], out[3], out[4] = t, work, taken, nrec, worst
    out[5], out[6], out[7] = newton, violation, h_last
    return status


def advance(FlatModel F, FlatData D, double[::1] P, double t, double[::1] q, double[::1] v, double work,
            double h, double t_end, Py_ssize_t every, Py_ssize_t done, Py_ssize_t max_steps, Py_ssize_t max_rows,
            Py_ssize_t max_block, double max_violation, double[:, ::1] rows, double[::1] out, Work work_=None):
    """Steps and recorded rows, q and v updated in place: steps of size h (mbsim.simulate.run's
    rules: the last one lands on t_end) from step number ``done``, and a row (record_kernels
    .row_into) into rows[k] after every step whose number is a multiple of ``every``, after the
    last one, and after a step whose position violation passes ``max_violation`` (the offending
    state is kept), with the step number in its last column. Takes at most ``max_block`` steps
    and ``max_rows`` rows, and no step past ``max_steps`` + 1 (the caller reports that one).

    Stops at a step the compiled code cannot take (see _steps: RANK_DEFICIENT, NOT_FINITE,
    VIOLATION) and at a recorded state whose evaluation fails (RECORD_FAILED: not recorded; the
    caller records it through the Python path, which raises the error). ``out`` (float64, 8):
    t, work, steps taken, rows, the largest position violation over the steps, and of the last
    step: Newton steps, position violation (-1: not projected), step size. Returns the status.
    The loop runs without the GIL.

    ``work_`` (integrate.Work): the integrator's buffers and, for an adaptive one (RK45, DOP853),
    its state across calls (the next step size, the derivative at the last state; P[CUT] the rank
    cut of the last step). None: a fixed step of P[INTEGRATOR] with buffers of this call.
    """
    cdef int status
    cdef OdeSystem S = OdeSystem(F, D, P)
    cdef Work W = work_ if work_ is not None else Work(S.n, <int>P[P_INTEGRATOR])
    with nogil:
        status = advance_c(F, D, P, S, W, t, q, v, work, h, t_end, every, done, max_steps, max_rows, max_block,
                           max_violation, rows, out)
    return status


def stiff_jacobian(OdeSystem S not None, double t, const double[::1] y):
    """(f, J): f(t, y) and the implicit contact step's Jacobian there (OdeSystem.stiff_derivative,
    stiff_times on the unit vectors), new arrays: for the tests, against differences of f."""
    cdef Py_ssize_t n = S.n, i
    f = np.empty(n)
    J = np.empty((n, n))
    e = np.zeros(n)
    col = np.empty(n)
    cdef double[::1] f_v = f, e_v = e, col_v = col
    if not S.stiff_derivative(t, y, f_v):
        raise FloatingPointError("stiff_jacobian: the right-hand side failed")
    for i in range(n):
        e_v[i] = 1.0
        S.stiff_times(e_v, col_v)
        J[:, i] = col
        e_v[i] = 0.0
    return f, J
