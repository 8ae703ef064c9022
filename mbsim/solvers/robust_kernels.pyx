"""Compiled acceleration solves of the rank-robust methods and their pseudo-inverse correction.

What mbsim.solvers.null_space, gauss (optimizer kkt) and augmented_lagrangian compute at one
state, and what mbsim.solvers.linalg.MinNorm's correction does for their projections, over a
FlatModel into a FlatData made with ``robust=True`` (mbsim.model.flat). The same formulas in
the same order, the SVD and the least-squares solve by the LAPACK routines the Python path
calls (mbsim.solvers.lapack_kernels), so that both agree to round-off; see the methods'
modules for the mathematics. Each solve returns its iterations (0 for the direct ones) or -1
when it cannot finish (LAPACK did not converge, the multiplier iteration did not): the caller
then takes the step through the Python path, which raises the error with its message.

Inputs in D: Q (nv,) generalized forces; phi, phi_t, gamma (nc,) and J (nc, nv) of the state.
Outputs: v_dot into ``vdot``, the multipliers into D.lam; ``stats`` gets the rank (null_space)
and the residual max |J v_dot - gamma| (null_space, gauss).

The buffers are views of D.robust_work at fixed offsets (robust_kernels.pxd: RobustBuffers), so
the matrices below are C-order arrays indexed by hand: M[i, k] of an (r, c) matrix is M[i * c + k].
"""

from libc.math cimport INFINITY, fabs

from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.model.step_kernels cimport inverse_mass_times, row_body, row_nbody
from mbsim.solvers.lapack_kernels cimport (
    cholesky_in_place_raw,
    cholesky_solve_raw,
    lstsq_symmetric_raw,
    svd_raw,
)

# the augmented Lagrangian's stall test (mbsim.solvers.augmented_lagrangian: STALL, STALL_RANK)
cdef double _STALL = 0.99
cdef double _STALL_RANK = 1e-3
STALL = _STALL
STALL_RANK = _STALL_RANK


cdef inline void _scaled_times(FlatModel F, const double* x, double* out) noexcept nogil:
    """out = M^-1/2 x (nv,), block by block (step_kernels.block_diagonal_times over buffers)."""
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t b, a, m
    cdef double s
    for b in range(F.nbody):
        for a in range(w):
            s = 0.0
            for m in range(w):
                s += F.body_inv_sqrt_mass[b, a, m] * x[w * b + m]
            out[w * b + a] = s


cdef Py_ssize_t min_norm_factor(FlatModel F, FlatData D, double rank_tol) noexcept nogil:
    """J_hat = J M^-1/2 and its SVD into the buffers jhat, svd_ut, svd_s, svd_v (MinNorm). Returns
    the numerical rank (singular values above rank_tol times the largest), -1 if LAPACK failed."""
    cdef Py_ssize_t nc = F.nc, nv = F.nv, nb = F.nbody
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef RobustBuffers B = buffers(F, D)
    cdef double* Jh = B.jhat
    cdef double* At = B.jh_t
    cdef double* sv = B.svd_s
    cdef Py_ssize_t k, r, side, b, a, m, rank
    cdef double s
    for k in range(nv):
        for r in range(nc):
            At[k * nc + r] = 0.0
    for r in range(nc):
        for side in range(row_nbody(F, r)):
            b = row_body(F, r, side)
            if b < nb:
                for a in range(w):
                    s = 0.0
                    for m in range(w):
                        s += D.J[r, w * b + m] * F.body_inv_sqrt_mass[b, m, a]
                    Jh[r * nv + w * b + a] = s
                    At[(w * b + a) * nc + r] = s
    if svd_raw(nc, nv, At, B.svd_ut, sv, B.svd_v) != 0:
        return -1
    if B.nsv == 0 or not sv[0] > 0.0:
        return 0
    rank = 0
    for k in range(B.nsv):
        if sv[k] > rank_tol * sv[0]:
            rank += 1
    return rank


cdef void _through_svd(const double* P, Py_ssize_t p0, Py_ssize_t p1, const double* sv, const double* R,
                       Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t rank, const double* x, Py_ssize_t nx,
                       double* out, Py_ssize_t nout, double* c) noexcept nogil:
    """out = R[:, :rank] diag(1/s) P[:rank] x, with c (rank,) scratch: the inverse of J_hat
    (P = U^T, R = V) or of J_hat^T (P = V^T, R = U) on the numerical range. P[k, i] is
    P[k * p0 + i * p1], R[i, k] is R[i * r0 + k * r1] (so a transpose is a swap of strides)."""
    cdef Py_ssize_t k, i
    cdef double s
    for k in range(rank):
        s = 0.0
        for i in range(nx):
            s += P[k * p0 + i * p1] * x[i]
        c[k] = s / sv[k]
    for i in range(nout):
        s = 0.0
        for k in range(rank):
            s += R[i * r0 + k * r1] * c[k]
        out[i] = s


cdef inline void _pinv_times(FlatModel F, RobustBuffers* B, Py_ssize_t rank, const double* r, double* y) noexcept nogil:
    """y = J_hat^+ r (nv,): V_r diag(1/s) U_r^T r (MinNorm.pinv_times); uses vec_m."""
    _through_svd(B.svd_ut, F.nc, 1, B.svd_s, B.svd_v, F.nv, 1, rank, r, F.nc, y, F.nv, B.vec_m)


cdef inline void _multipliers_into(FlatModel F, RobustBuffers* B, Py_ssize_t rank, const double* z,
                                   double* lam) noexcept nogil:
    """lam = U_r diag(1/s) V_r^T z: the minimum-norm lambda with J_hat^T lambda = z (MinNorm)."""
    _through_svd(B.svd_v, 1, F.nv, B.svd_s, B.svd_ut, 1, F.nc, rank, z, F.nv, lam, F.nc, B.vec_m)


cdef bint min_norm_correction(FlatModel F, FlatData D, double rank_tol, const double[::1] r,
                              double[::1] dx) noexcept nogil:
    """dx = M^-1/2 J_hat^+ r, the M-smallest dx with J dx = r in the least-squares sense
    (MinNorm.correction; a rank loss is allowed). False if the SVD failed."""
    cdef Py_ssize_t rank = min_norm_factor(F, D, rank_tol)
    if rank < 0:
        return False
    cdef RobustBuffers B = buffers(F, D)
    _pinv_times(F, &B, rank, &r[0], B.vec_a)
    _scaled_times(F, B.vec_a, &dx[0])
    return True


cdef Py_ssize_t null_space_accelerations(FlatModel F, FlatData D, double rank_tol, double[::1] vdot,
                                         double[::1] stats) noexcept nogil:
    """y = J_hat^+ gamma + V_n V_n^T y_free, v_dot = M^-1/2 y (mbsim.solvers.null_space)."""
    cdef Py_ssize_t nv = F.nv, nc = F.nc
    cdef Py_ssize_t rank = min_norm_factor(F, D, rank_tol)
    if rank < 0:
        return -1
    cdef RobustBuffers B = buffers(F, D)
    cdef double* Jh = B.jhat
    cdef double* V = B.svd_v
    cdef double* y_free = B.vec_a
    cdef double* y = B.vec_b
    cdef double* z = B.vec_c
    cdef Py_ssize_t i, k, r
    cdef double s, residual
    _scaled_times(F, &D.Q[0], y_free)
    _pinv_times(F, &B, rank, &D.gamma[0], y)
    # + null (null^T y_free)
    for k in range(rank, nv):
        s = 0.0
        for i in range(nv):
            s += V[i * nv + k] * y_free[i]
        z[k] = s
    for i in range(nv):
        s = 0.0
        for k in range(rank, nv):
            s += V[i * nv + k] * z[k]
        y[i] = y[i] + s
    _scaled_times(F, y, &vdot[0])
    residual = 0.0
    for r in range(nc):
        s = 0.0
        for k in range(nv):
            s += Jh[r * nv + k] * y[k]
        residual = py_max(residual, fabs(s - D.gamma[r]))
    for k in range(nv):
        z[k] = y_free[k] - y[k]
    _multipliers_into(F, &B, rank, z, &D.lam[0])
    stats[1] = py_min(stats[1], <double>rank)
    stats[2] = py_max(stats[2], residual)
    return 0


cdef void _mass_into(FlatModel F, double* A, Py_ssize_t lda) noexcept nogil:
    """A[:nv, :nv] = M dense (A's rows lda apart), from the block diagonal."""
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t i, k, b, a, m
    for i in range(F.nv):
        for k in range(F.nv):
            A[i * lda + k] = 0.0
    for b in range(F.nbody):
        for a in range(w):
            for m in range(w):
                A[(w * b + a) * lda + w * b + m] = F.body_mass_block[b, a, m]


cdef Py_ssize_t gauss_kkt_accelerations(FlatModel F, FlatData D, double rank_tol, double[::1] vdot,
                                        double[::1] stats) noexcept nogil:
    """[M J^T; J 0] [v_dot; lambda] = [Q; gamma] in the least-squares sense, minimum norm
    (LAPACK gelsd, rcond = rank_tol: mbsim.solvers.optimize.kkt_least_squares)."""
    cdef Py_ssize_t nv = F.nv, nc = F.nc
    cdef Py_ssize_t n = nv + nc
    cdef RobustBuffers B = buffers(F, D)
    cdef double* K = B.kkt
    cdef double* b = B.kkt_b
    cdef Py_ssize_t r, k, c
    cdef double s, residual
    _mass_into(F, K, n)
    for r in range(nc):
        for k in range(nv):
            K[(nv + r) * n + k] = D.J[r, k]
            K[k * n + nv + r] = D.J[r, k]
        for c in range(nc):
            K[(nv + r) * n + nv + c] = 0.0
    for k in range(nv):
        b[k] = D.Q[k]
    for r in range(nc):
        b[nv + r] = D.gamma[r]
    if lstsq_symmetric_raw(n, K, b, B.kkt_s, rank_tol, &D.kkt_rank[0]) != 0:
        return -1
    for k in range(nv):
        vdot[k] = b[k]
    for r in range(nc):
        D.lam[r] = b[nv + r]
    residual = 0.0
    for r in range(nc):
        s = 0.0
        for k in range(nv):
            s += D.J[r, k] * vdot[k]
        residual = py_max(residual, fabs(s - D.gamma[r]))
    stats[2] = py_max(stats[2], residual)
    return 0


cdef Py_ssize_t augmented_lagrangian_accelerations(FlatModel F, FlatData D, const double[::1] v, double alpha,
                                                   double omega, double mu, double tol, Py_ssize_t max_iter,
                                                   double[::1] vdot) noexcept nogil:
    """Bayo's multiplier iteration on (M + alpha J^T J) v_dot = Q - J^T lambda* - alpha J^T c
    (mbsim.solvers.augmented_lagrangian); returns its iterations, -1 if it did not converge."""
    cdef Py_ssize_t nv = F.nv, nc = F.nc
    cdef RobustBuffers B = buffers(F, D)
    cdef double* A = B.al_a
    cdef double* c = B.vec_m
    cdef double* b0 = B.vec_a
    cdef double* rhs = B.vec_b
    cdef double[:, ::1] J = D.J
    cdef double[::1] lam = D.lam
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t r, k, i, side, b, a, m, iteration, slow
    cdef double s, t, scale2, last_change, change, size, ratio, s2
    for r in range(nc):
        s = 0.0
        for k in range(nv):
            s += J[r, k] * v[k]
        c[r] = 2.0 * mu * omega * (s + D.phi_t[r]) + omega * omega * D.phi[r] - D.gamma[r]
    _mass_into(F, A, nv)
    for i in range(nv):
        for k in range(i + 1):
            s = 0.0
            for r in range(nc):
                s += J[r, i] * J[r, k]
            A[i * nv + k] += alpha * s
    if not cholesky_in_place_raw(nv, A):
        return -1
    for k in range(nv):
        s = 0.0
        for r in range(nc):
            s += J[r, k] * c[r]
        b0[k] = D.Q[k] - alpha * s
    for r in range(nc):
        lam[r] = 0.0
    inverse_mass_times(F, D.Q, vdot)  # the paper's first iterate, M v_dot_0 = Q
    # the largest diagonal of J M^-1 J^T (the stall test)
    scale2 = 0.0
    for r in range(nc):
        s = 0.0
        for side in range(row_nbody(F, r)):
            b = row_body(F, r, side)
            if b < F.nbody:
                for a in range(w):
                    t = 0.0
                    for m in range(w):
                        t += F.body_inv_mass[b, a, m] * J[r, w * b + m]
                    s += J[r, w * b + a] * t
        scale2 = py_max(scale2, s)
    last_change, slow = INFINITY, 0
    for iteration in range(1, max_iter + 1):
        for k in range(nv):
            s = 0.0
            for r in range(nc):
                s += J[r, k] * lam[r]
            rhs[k] = b0[k] - s
        cholesky_solve_raw(nv, A, rhs)
        for r in range(nc):
            s = 0.0
            for k in range(nv):
                s += J[r, k] * rhs[k]
            lam[r] = lam[r] + alpha * (s + c[r])
        change, size = 0.0, 0.0
        for k in range(nv):
            change = py_max(change, fabs(rhs[k] - vdot[k]))
            size = py_max(size, fabs(rhs[k]))
            vdot[k] = rhs[k]
        if change <= tol * py_max(1.0, size):
            return iteration
        slow = slow + 1 if change >= _STALL * last_change else 0
        # a direction lost to the penalty (augmented_lagrangian.lost_direction)?
        if slow >= 2:
            ratio = change / last_change
            s2 = (1.0 / ratio - 1.0) / alpha if ratio > 0.0 else INFINITY
            if s2 <= _STALL_RANK * _STALL_RANK * scale2:
                return iteration
        last_change = change
    return -1
