"""Compiled acceleration solves of the rank-robust methods and their pseudo-inverse correction.

What mbsim.solvers.null_space, gauss (optimizer kkt) and augmented_lagrangian compute at one
state, and what mbsim.solvers.numerics.linalg.MinNorm's correction does for their projections, over a
FlatModel into a FlatData made with ``robust=True`` (mbsim.model.flat). The same formulas in
the same order, the SVD and the least-squares solve by the LAPACK routines the Python path
calls (mbsim.solvers.numerics.lapack_kernels), so that both agree to round-off; see the methods'
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
from libc.stdlib cimport free, malloc

from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.model.step_kernels cimport inverse_mass_times, row_body, row_nbody
from mbsim.solvers.numerics.lapack_kernels cimport (
    cholesky_envelope_raw,
    cholesky_envelope_solve_ptr,
    bidiagonal_lstsq_raw,
    bidiagonal_raw,
    lstsq_symmetric_raw,
    svd_values_raw,
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


cdef void _scaled_jacobian(FlatModel F, FlatData D, RobustBuffers* B) noexcept nogil:
    """J_hat = J M^-1/2 into jhat (C order) and jh_t (its transpose: LAPACK's column-major J_hat)."""
    cdef Py_ssize_t nc = F.nc, nv = F.nv, nb = F.nbody
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef double* Jh = B.jhat
    cdef double* At = B.jh_t
    cdef Py_ssize_t k, r, side, b, a, m
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


cdef Py_ssize_t min_norm_factor(FlatModel F, FlatData D, double rank_tol) noexcept nogil:
    """J_hat = J M^-1/2 into jhat and its singular values into svd_s, descending (LAPACK gesdd
    without vectors). Returns the numerical rank (singular values above rank_tol times the
    largest), -1 if LAPACK failed."""
    cdef RobustBuffers B = buffers(F, D)
    cdef double* sv = B.svd_s
    cdef Py_ssize_t k, rank
    _scaled_jacobian(F, D, &B)
    if svd_values_raw(F.nc, F.nv, B.jh_t, sv) != 0:
        return -1
    if B.nsv == 0 or not sv[0] > 0.0:
        return 0
    rank = 0
    for k in range(B.nsv):
        if sv[k] > rank_tol * sv[0]:
            rank += 1
    return rank


# the bidiagonal factor J_hat = Q B P^T of _bidiagonal_factor: d, e, tauq, taup (min(nc, nv) each)
# from svd_ut on (svd_ut, svd_s and svd_v are contiguous and hold them: no SVD vectors are formed)
cdef inline double* _bidiagonal_d(RobustBuffers* B) noexcept nogil:
    return B.svd_ut


cdef bint _bidiagonal_factor(FlatModel F, FlatData D, RobustBuffers* B) noexcept nogil:
    """J_hat into jhat and its bidiagonal factor (LAPACK gebrd, reflectors in jh_t); False if
    LAPACK failed. The solves below cut and solve on it as LAPACK's gelsd does (lalsd): the
    truncated pseudo-inverse applied to a vector without U and V (the SVD's vectors cost twice its
    values)."""
    cdef Py_ssize_t k = B.nsv
    cdef double* d = _bidiagonal_d(B)
    _scaled_jacobian(F, D, B)
    return bidiagonal_raw(F.nc, F.nv, B.jh_t, d, d + k, d + 2 * k, d + 3 * k) == 0


cdef inline Py_ssize_t _truncated_solve(FlatModel F, RobustBuffers* B, double rank_tol, bint transpose,
                                        double* x) noexcept nogil:
    """x <- J_hat_r^+ x (transpose: (J_hat_r^T)^+ x), J_hat_r: J_hat with its singular values at
    or below rank_tol times the largest cut; x (max(nc, nv)) holds the right side's rows on entry,
    the solution on exit. Returns the rank, -1 if LAPACK failed."""
    cdef Py_ssize_t k = B.nsv
    cdef double* d = _bidiagonal_d(B)
    cdef int rank = 0
    if bidiagonal_lstsq_raw(F.nc, F.nv, B.jh_t, d, d + k, d + 2 * k, d + 3 * k, transpose, x, rank_tol, &rank) != 0:
        return -1
    return rank


cdef bint min_norm_correction(FlatModel F, FlatData D, double rank_tol, const double[::1] r,
                              double[::1] dx, double* lam) noexcept nogil:
    """dx = M^-1/2 J_hat^+ r, the M-smallest dx with J dx = r in the least-squares sense
    (MinNorm.correction; a rank loss is allowed); unless lam is NULL, the minimum-norm lambda with
    M dx = J^T lambda into lam (nc): (J_hat^T)^+ J_hat^+ r (MinNorm.multipliers). False if LAPACK failed."""
    cdef RobustBuffers B = buffers(F, D)
    cdef double* x = B.kkt_b  # (nv + nc): free here
    cdef Py_ssize_t k
    if not _bidiagonal_factor(F, D, &B):
        return False
    for k in range(F.nc):
        x[k] = r[k]
    if _truncated_solve(F, &B, rank_tol, False, x) < 0:
        return False
    _scaled_times(F, x, &dx[0])
    if lam != NULL:
        # M^1/2 dx = J_hat^+ r = J_hat^T lambda, solved on the same factor
        if _truncated_solve(F, &B, rank_tol, True, x) < 0:
            return False
        for k in range(F.nc):
            lam[k] = x[k]
    return True


cdef Py_ssize_t null_space_accelerations(FlatModel F, FlatData D, double rank_tol, double[::1] vdot,
                                         double[::1] stats) noexcept nogil:
    """y = J_hat^+ gamma + V_n V_n^T y_free, v_dot = M^-1/2 y (mbsim.solvers.null_space), as
    y = y_free + J_hat_r^+ (gamma - J_hat y_free) (V_r V_r^T = J_hat_r^+ J_hat); the multipliers
    lambda = (J_hat_r^T)^+ (y_free - y)."""
    cdef Py_ssize_t nv = F.nv, nc = F.nc
    cdef RobustBuffers B = buffers(F, D)
    cdef double* Jh = B.jhat
    cdef double* y_free = B.vec_a
    cdef double* y = B.vec_b
    cdef double* x = B.kkt_b  # (nv + nc) scratch of the solves: free here
    cdef Py_ssize_t i, k, r, rank
    cdef double s, residual
    if not _bidiagonal_factor(F, D, &B):
        return -1
    _scaled_times(F, &D.Q[0], y_free)
    for r in range(nc):
        s = 0.0
        for k in range(nv):
            s += Jh[r * nv + k] * y_free[k]
        x[r] = D.gamma[r] - s
    rank = _truncated_solve(F, &B, rank_tol, False, x)
    if rank < 0:
        return -1
    for i in range(nv):
        y[i] = y_free[i] + x[i]
    _scaled_times(F, y, &vdot[0])
    residual = 0.0
    for r in range(nc):
        s = 0.0
        for k in range(nv):
            s += Jh[r * nv + k] * y[k]
        residual = py_max(residual, fabs(s - D.gamma[r]))
    for k in range(nv):
        x[k] = y_free[k] - y[k]
    if _truncated_solve(F, &B, rank_tol, True, x) < 0:
        return -1
    for r in range(nc):
        D.lam[r] = x[r]
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
    (LAPACK gelsd, rcond = rank_tol)."""
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


cdef inline Py_ssize_t py_min_int(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return b if b < a else a


cdef inline Py_ssize_t _row_bodies(FlatModel F, Py_ssize_t r, Py_ssize_t* out) noexcept nogil:
    """Row r's bodies, each once, ascending, into out (4); how many. Visiting their column blocks in
    this order visits the row's nonzero columns in ascending order: a sum over them adds the terms
    of the dense sum over every column, less the products with J's zeros, in the same order."""
    cdef Py_ssize_t n = 0
    cdef Py_ssize_t side, b, k, x
    for side in range(row_nbody(F, r)):
        b = row_body(F, r, side)
        if b >= F.nbody:
            continue
        for k in range(n):
            if out[k] == b:
                b = -1
                break
        if b < 0:
            continue
        # insertion into the sorted list
        k = n
        while k > 0 and out[k - 1] > b:
            out[k] = out[k - 1]
            k -= 1
        out[k] = b
        n += 1
    return n


cdef inline double _row_times(const double[:, ::1] J, Py_ssize_t w, Py_ssize_t r, const long long* bodies,
                              Py_ssize_t n, const double* x) noexcept nogil:
    """J[r] . x summed over the row's nonzero columns in ascending order (the dense loop's sum);
    bodies: the row's n bodies from _row_bodies."""
    cdef Py_ssize_t e, m, k
    cdef double s = 0.0
    for e in range(n):
        k = w * bodies[e]
        for m in range(w):
            s += J[r, k + m] * x[k + m]
    return s


cdef inline void _transpose_times(const double[:, ::1] J, Py_ssize_t w, Py_ssize_t nv, Py_ssize_t nc,
                                  const long long* row_bodies, const double* x, double* out) noexcept nogil:
    """out = J^T x (nv,): each out[k] summed over the rows in ascending order, from 0 (the dense
    loop's sum less the products with J's zeros); row_bodies: 5 per row, the count and the bodies."""
    cdef Py_ssize_t r, e, m, k
    cdef const long long* rb
    for k in range(nv):
        out[k] = 0.0
    for r in range(nc):
        rb = row_bodies + 5 * r
        for e in range(rb[0]):
            k = w * rb[1 + e]
            for m in range(w):
                out[k + m] += J[r, k + m] * x[r]


def augmented_lagrangian_order(FlatModel F, FlatData D, const long long[::1] position) -> None:
    """Set up the order in which augmented_lagrangian_accelerations factors M + alpha J^T J: body b's
    block at position[b] (a permutation of range(nbody); mbsim.solvers.augmented_lagrangian.body_order).
    Without this call the model's own order."""
    cdef RobustBuffers B = buffers(F, D)
    cdef Py_ssize_t b
    for b in range(F.nbody):
        B.al_order[b] = <double>(position[b] + 1)


cdef Py_ssize_t augmented_lagrangian_accelerations(FlatModel F, FlatData D, const double[::1] v, double alpha,
                                                   double omega, double mu, double tol, Py_ssize_t max_iter,
                                                   double[::1] vdot) noexcept nogil:
    """Bayo's multiplier iteration on (M + alpha J^T J) v_dot = Q - J^T lambda* - alpha J^T c
    (mbsim.solvers.augmented_lagrangian); returns its iterations, -1 if it did not converge (or
    the index buffers could not be allocated).

    Every product with J visits only the row's body blocks, each sum in the order of the dense loop.
    M + alpha J^T J is factored with its body blocks in the order set up by augmented_lagrangian_order
    (a reverse Cuthill-McKee order of the bodies when the model's own order spreads the envelope,
    as the IFToMM N four-bar's cranks-then-couplers does: N = 40, 15,003 entries below the diagonal
    in the model's order, 963 in that one), within its envelope (M's blocks and the blocks of two
    bodies that share a row): its entries are the dense sums, the factor those of a dense Cholesky
    factor of the permuted matrix (near a singular position the iteration runs thousands of times
    per right-hand side, each one a solve with the factor)."""
    cdef Py_ssize_t nv = F.nv, nc = F.nc, nb = F.nbody
    cdef RobustBuffers B = buffers(F, D)
    cdef double* A = B.al_a  # the permuted matrix, then its factor
    cdef double* T = B.svd_v  # (nv, nv): J^T J permuted, free here (no SVD in this method's solve)
    cdef double* c = B.vec_m
    cdef double* b0 = B.vec_a
    cdef double* rhs = B.vec_b
    cdef double* jt = B.vec_c
    cdef double[:, ::1] J = D.J
    cdef double[::1] lam = D.lam
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t bodies[4]
    cdef Py_ssize_t r, k, i, side, b, a, m, iteration, slow, n, e, f, ci, ck, hi, pe, pf, be, bf
    cdef double s, t, scale2, last_change, change, size, ratio, s2
    cdef long long* first = <long long*>malloc(sizeof(long long) * (2 * nv + 2 * nb + 5 * nc + 1))
    cdef double* x = <double*>malloc(sizeof(double) * (nv + 1))
    if first == NULL or x == NULL:
        free(first)
        free(x)
        return -1
    cdef long long* last = first + nv
    cdef long long* body_first = last + nv
    cdef long long* pos = body_first + nb
    cdef long long* row_bodies = pos + nb  # per row: how many bodies, then the bodies ascending
    # body b's block at position pos[b] of the factored matrix
    if nb > 0 and B.al_order[0] > 0.0:
        for b in range(nb):
            pos[b] = <long long>B.al_order[b] - 1
    else:
        for b in range(nb):
            pos[b] = b
    for r in range(nc):
        n = _row_bodies(F, r, bodies)
        row_bodies[5 * r] = n
        for e in range(n):
            row_bodies[5 * r + 1 + e] = bodies[e]
    for r in range(nc):
        c[r] = (2.0 * mu * omega * (_row_times(J, w, r, row_bodies + 5 * r + 1, row_bodies[5 * r], &v[0]) + D.phi_t[r])
                + omega * omega * D.phi[r] - D.gamma[r])
    # the envelope: the block at position p starts at the first position whose body shares a row with it
    for b in range(nb):
        body_first[b] = b
    for r in range(nc):
        n = row_bodies[5 * r]
        if n < 2:
            continue
        pf = nb  # the row's first position
        for e in range(n):
            pf = py_min_int(pf, pos[row_bodies[5 * r + 1 + e]])
        for e in range(n):
            pe = pos[row_bodies[5 * r + 1 + e]]
            if body_first[pe] > pf:
                body_first[pe] = pf
    for i in range(nv):
        first[i] = w * body_first[i // w]
        last[i] = i
    for i in range(nv):
        for k in range(first[i], i):
            last[k] = i
    # T = J^T J (lower triangle within the envelope), each entry summed over the rows in order
    for i in range(nv):
        for k in range(first[i], i + 1):
            T[i * nv + k] = 0.0
    for r in range(nc):
        n = row_bodies[5 * r]
        for e in range(n):
            be = row_bodies[5 * r + 1 + e]
            pe = pos[be]
            for f in range(n):
                bf = row_bodies[5 * r + 1 + f]
                pf = pos[bf]
                if pf > pe:
                    continue
                for a in range(w):
                    ci = w * pe + a
                    hi = a + 1 if pf == pe else w
                    for m in range(hi):
                        ck = w * pf + m
                        T[ci * nv + ck] += J[r, w * be + a] * J[r, w * bf + m]
    # A = M + alpha T within the envelope (M's blocks on the diagonal)
    for i in range(nv):
        for k in range(first[i], i + 1):
            A[i * nv + k] = 0.0
    for b in range(nb):
        for a in range(w):
            for m in range(a + 1):
                A[(w * pos[b] + a) * nv + w * pos[b] + m] = F.body_mass_block[b, a, m]
    for i in range(nv):
        for k in range(first[i], i + 1):
            A[i * nv + k] += alpha * T[i * nv + k]
    if not cholesky_envelope_raw(nv, A, first):
        free(first)
        free(x)
        return -1
    _transpose_times(J, w, nv, nc, row_bodies, c, jt)
    for k in range(nv):
        b0[k] = D.Q[k] - alpha * jt[k]
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
        _transpose_times(J, w, nv, nc, row_bodies, &lam[0], jt)
        for b in range(nb):
            for a in range(w):
                x[w * pos[b] + a] = b0[w * b + a] - jt[w * b + a]
        cholesky_envelope_solve_ptr(nv, A, first, last, x)
        for b in range(nb):
            for a in range(w):
                rhs[w * b + a] = x[w * pos[b] + a]
        for r in range(nc):
            lam[r] = lam[r] + alpha * (_row_times(J, w, r, row_bodies + 5 * r + 1, row_bodies[5 * r], rhs) + c[r])
        change, size = 0.0, 0.0
        for k in range(nv):
            change = py_max(change, fabs(rhs[k] - vdot[k]))
            size = py_max(size, fabs(rhs[k]))
            vdot[k] = rhs[k]
        if change <= tol * py_max(1.0, size):
            free(first)
            free(x)
            return iteration
        slow = slow + 1 if change >= _STALL * last_change else 0
        # a direction lost to the penalty: the change shrinks by a constant ratio, 1 / (1 + alpha s^2)?
        if slow >= 2:
            ratio = change / last_change
            s2 = (1.0 / ratio - 1.0) / alpha if ratio > 0.0 else INFINITY
            if s2 <= _STALL_RANK * _STALL_RANK * scale2:
                free(first)
                free(x)
                return iteration
        last_change = change
    free(first)
    free(x)
    return -1
