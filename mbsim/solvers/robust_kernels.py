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
"""

from __future__ import annotations

import numpy as np
from numba import njit

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)
from mbsim.model.step_kernels import block_diagonal_times, inverse_mass_times, row_bodies
from mbsim.solvers.lapack_kernels import cholesky_in_place, cholesky_solve, lstsq_symmetric_into, svd_into

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "_nrt": False}

# the augmented Lagrangian's stall test (mbsim.solvers.augmented_lagrangian: STALL, STALL_RANK)
STALL = 0.99
STALL_RANK = 1e-3


@njit(inline="always")
def buffers(F, D):
    """Views of D.robust_work (laid out as mbsim.model.flat.robust_size counts): jhat (nc, nv)
    J M^-1/2; jh_t (nv, nc) its transpose (LAPACK's input, destroyed); svd_ut (nc, nc) U^T,
    svd_s (min(nc, nv),), svd_v (nv, nv) V of its SVD; vec_a, vec_b, vec_c (nv,), vec_m (nc,)
    scratch; kkt (n, n) the KKT matrix (n = nv + nc), kkt_b, kkt_s (n,); al_a (nv, nv)."""
    nv, nc = F.nv, F.nc
    n = nv + nc
    w = D.robust_work
    o = 0
    jhat = w[o : o + nc * nv].reshape((nc, nv))
    o += nc * nv
    jh_t = w[o : o + nc * nv].reshape((nv, nc))
    o += nc * nv
    svd_ut = w[o : o + nc * nc].reshape((nc, nc))
    o += nc * nc
    svd_s = w[o : o + min(nc, nv)]
    o += min(nc, nv)
    svd_v = w[o : o + nv * nv].reshape((nv, nv))
    o += nv * nv
    vec_a = w[o : o + nv]
    vec_b = w[o + nv : o + 2 * nv]
    vec_c = w[o + 2 * nv : o + 3 * nv]
    o += 3 * nv
    vec_m = w[o : o + nc]
    o += nc
    kkt = w[o : o + n * n].reshape((n, n))
    o += n * n
    kkt_b = w[o : o + n]
    kkt_s = w[o + n : o + 2 * n]
    o += 2 * n
    al_a = w[o : o + nv * nv].reshape((nv, nv))
    return jhat, jh_t, svd_ut, svd_s, svd_v, vec_a, vec_b, vec_c, vec_m, kkt, kkt_b, kkt_s, al_a


@njit(inline="always")
def scaled_times(F, x, out):
    """out = M^-1/2 x (nv,), block by block."""
    block_diagonal_times(F, F.body_inv_sqrt_mass, x, out)


@njit(**_JIT)
def min_norm_factor(F, D, rank_tol):
    """J_hat = J M^-1/2 and its SVD into the buffers jhat, svd_ut, svd_s, svd_v (MinNorm). Returns
    the numerical rank (singular values above rank_tol times the largest), -1 if LAPACK failed."""
    nc, nv, nb = F.nc, F.nv, F.nbody
    w = 6 if F.dim == 3 else 3
    Jh, At, Ut, sv, V = buffers(F, D)[:5]
    J = D.J
    for k in range(nv):
        for r in range(nc):
            At[k, r] = 0.0
    for r in range(nc):
        for b in row_bodies(F, r):
            if b < nb:
                for a in range(w):
                    s = 0.0
                    for m in range(w):
                        s += J[r, w * b + m] * F.body_inv_sqrt_mass[b, m, a]
                    Jh[r, w * b + a] = s
                    At[w * b + a, r] = s
    if svd_into(At, Ut, sv, V) != 0:
        return -1
    if sv.shape[0] == 0 or not sv[0] > 0.0:
        return 0
    rank = 0
    for k in range(sv.shape[0]):
        if sv[k] > rank_tol * sv[0]:
            rank += 1
    return rank


@njit(**_JIT)
def _through_svd(P, sv, R, rank, x, out, c):
    """out = R[:, :rank] diag(1/s) P[:rank] x, with c (rank,) scratch: the inverse of J_hat
    (P = U^T, R = V) or of J_hat^T (P = V^T, R = U) on the numerical range."""
    for k in range(rank):
        s = 0.0
        for i in range(x.shape[0]):
            s += P[k, i] * x[i]
        c[k] = s / sv[k]
    for i in range(out.shape[0]):
        s = 0.0
        for k in range(rank):
            s += R[i, k] * c[k]
        out[i] = s


@njit(**_JIT)
def pinv_times(F, D, rank, r, y):
    """y = J_hat^+ r (nv,): V_r diag(1/s) U_r^T r (MinNorm.pinv_times); uses vec_m."""
    _, _, Ut, sv, V, _, _, _, c = buffers(F, D)[:9]
    _through_svd(Ut, sv, V, rank, r, y, c)


@njit(**_JIT)
def min_norm_correction(F, D, rank_tol, r, dx):
    """dx = M^-1/2 J_hat^+ r, the M-smallest dx with J dx = r in the least-squares sense
    (MinNorm.correction; a rank loss is allowed). False if the SVD failed."""
    rank = min_norm_factor(F, D, rank_tol)
    if rank < 0:
        return False
    vec_a = buffers(F, D)[5]
    pinv_times(F, D, rank, r, vec_a)
    scaled_times(F, vec_a, dx)
    return True


@njit(**_JIT)
def multipliers_into(F, D, rank, z, lam):
    """lam = U_r diag(1/s) V_r^T z: the minimum-norm lambda with J_hat^T lambda = z (MinNorm)."""
    _, _, Ut, sv, V, _, _, _, c = buffers(F, D)[:9]
    _through_svd(V.T, sv, Ut.T, rank, z, lam, c)


@njit(**_JIT)
def null_space_accelerations(F, D, rank_tol, vdot, stats):
    """y = J_hat^+ gamma + V_n V_n^T y_free, v_dot = M^-1/2 y (mbsim.solvers.null_space)."""
    nv, nc = F.nv, F.nc
    rank = min_norm_factor(F, D, rank_tol)
    if rank < 0:
        return -1
    Jh, _, _, _, V, y_free, y, z = buffers(F, D)[:8]
    scaled_times(F, D.Q, y_free)
    pinv_times(F, D, rank, D.gamma, y)
    for k in range(rank, nv):  # + null (null^T y_free)
        s = 0.0
        for i in range(nv):
            s += V[i, k] * y_free[i]
        z[k] = s
    for i in range(nv):
        s = 0.0
        for k in range(rank, nv):
            s += V[i, k] * z[k]
        y[i] = y[i] + s
    scaled_times(F, y, vdot)
    residual = 0.0
    for r in range(nc):
        s = 0.0
        for k in range(nv):
            s += Jh[r, k] * y[k]
        residual = max(residual, abs(s - D.gamma[r]))
    for k in range(nv):
        z[k] = y_free[k] - y[k]
    multipliers_into(F, D, rank, z, D.lam)
    stats[1] = min(stats[1], rank)
    stats[2] = max(stats[2], residual)
    return 0


@njit(**_JIT)
def _mass_into(F, A):
    """A = M (nv, nv) dense, from the block diagonal."""
    w = 6 if F.dim == 3 else 3
    for i in range(A.shape[0]):
        for k in range(A.shape[1]):
            A[i, k] = 0.0
    for b in range(F.nbody):
        for a in range(w):
            for m in range(w):
                A[w * b + a, w * b + m] = F.body_mass_block[b, a, m]


@njit(**_JIT)
def gauss_kkt_accelerations(F, D, rank_tol, vdot, stats):
    """[M J^T; J 0] [v_dot; lambda] = [Q; gamma] in the least-squares sense, minimum norm
    (LAPACK gelsd, rcond = rank_tol: mbsim.solvers.optimize.kkt_least_squares)."""
    nv, nc = F.nv, F.nc
    K, b, sv = buffers(F, D)[9:12]
    _mass_into(F, K[:nv, :nv])
    for r in range(nc):
        for k in range(nv):
            K[nv + r, k] = D.J[r, k]
            K[k, nv + r] = D.J[r, k]
        for c in range(nc):
            K[nv + r, nv + c] = 0.0
    for k in range(nv):
        b[k] = D.Q[k]
    for r in range(nc):
        b[nv + r] = D.gamma[r]
    if lstsq_symmetric_into(K, b, sv, rank_tol, D.kkt_rank) != 0:
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
        residual = max(residual, abs(s - D.gamma[r]))
    stats[2] = max(stats[2], residual)
    return 0


@njit(**_JIT)
def augmented_lagrangian_accelerations(F, D, v, alpha, omega, mu, tol, max_iter, vdot):
    """Bayo's multiplier iteration on (M + alpha J^T J) v_dot = Q - J^T lambda* - alpha J^T c
    (mbsim.solvers.augmented_lagrangian); returns its iterations, -1 if it did not converge."""
    nv, nc = F.nv, F.nc
    buf = buffers(F, D)
    J, A = D.J, buf[12]
    c, b0, rhs = buf[8], buf[5], buf[6]
    for r in range(nc):
        s = 0.0
        for k in range(nv):
            s += J[r, k] * v[k]
        c[r] = 2.0 * mu * omega * (s + D.phi_t[r]) + omega**2 * D.phi[r] - D.gamma[r]
    _mass_into(F, A)
    for i in range(nv):
        for k in range(i + 1):
            s = 0.0
            for r in range(nc):
                s += J[r, i] * J[r, k]
            A[i, k] += alpha * s
    if not cholesky_in_place(A):
        return -1
    for k in range(nv):
        s = 0.0
        for r in range(nc):
            s += J[r, k] * c[r]
        b0[k] = D.Q[k] - alpha * s
    lam = D.lam
    for r in range(nc):
        lam[r] = 0.0
    inverse_mass_times(F, D.Q, vdot)  # the paper's first iterate, M v_dot_0 = Q
    w = 6 if F.dim == 3 else 3
    scale2 = 0.0  # the largest diagonal of J M^-1 J^T (the stall test)
    for r in range(nc):
        s = 0.0
        for b in row_bodies(F, r):
            if b < F.nbody:
                for a in range(w):
                    t = 0.0
                    for m in range(w):
                        t += F.body_inv_mass[b, a, m] * J[r, w * b + m]
                    s += J[r, w * b + a] * t
        scale2 = max(scale2, s)
    last_change, slow = np.inf, 0
    for iteration in range(1, max_iter + 1):
        for k in range(nv):
            s = 0.0
            for r in range(nc):
                s += J[r, k] * lam[r]
            rhs[k] = b0[k] - s
        cholesky_solve(A, rhs)
        for r in range(nc):
            s = 0.0
            for k in range(nv):
                s += J[r, k] * rhs[k]
            lam[r] = lam[r] + alpha * (s + c[r])
        change, size = 0.0, 0.0
        for k in range(nv):
            change = max(change, abs(rhs[k] - vdot[k]))
            size = max(size, abs(rhs[k]))
            vdot[k] = rhs[k]
        if change <= tol * max(1.0, size):
            return iteration
        slow = slow + 1 if change >= STALL * last_change else 0
        if slow >= 2:  # a direction lost to the penalty (augmented_lagrangian.lost_direction)?
            ratio = change / last_change
            s2 = (1.0 / ratio - 1.0) / alpha if ratio > 0.0 else np.inf
            if s2 <= STALL_RANK**2 * scale2:
                return iteration
        last_change = change
    return -1
