"""Compiled steps of the ODE-based methods: right-hand side, fixed-step integrators,
quaternion normalisation and both projections, and a block of steps between two records.

What mbsim.solvers.ode.OdeSolver.step does in Python, over a FlatModel and into a FlatData
(mbsim.model.flat), so that Python is entered once per block of steps: the same operations
in the same order where that is cheap to keep; sums of products (J M^-1 J^T, J v) are
plain loops, so results agree with the Python path to round-off.

A step that the compiled code cannot finish cleanly -- a rank-deficient Schur complement,
a non-finite state -- is *not* taken: ``advance`` returns its status with the state before
that step, and the caller takes the step again through the Python path, which raises the
error with its full message (the equations involved, the time).

Symbols (mbsim.solvers.lagrange): M block-diagonal mass matrix, Q generalized forces, J the
constraint Jacobian, gamma the acceleration right side, S = J M^-1 J^T, lambda multipliers.
Parameters ``P`` (float64 array, the indices below): method, integrator, alpha, beta, rank_tol,
projection position/velocity/iterations/tol, robust (pseudo-inverse projections), and the
augmented Lagrangian's penalty, omega, mu, tol, max_iter. The methods: lagrange (here), and
null_space, gauss with optimizer kkt and augmented_lagrangian (mbsim.solvers.robust_kernels).

Full-rank fast path of the rank-robust solves (:func:`certified_full_rank`): away from singular
positions the pseudo-inverse of J M^-1/2 has nothing to cut, and null_space's and gauss's
accelerations, their multipliers and the pseudo-inverse projections are exactly lagrange's. When
the envelope Cholesky factor of S exists and its smallest eigenvalue (estimated by inverse
iteration) lies a margin above the method's rank cut, the solve goes through that factor (the
cost of lagrange's) instead of the SVD or KKT least-squares solve (dense, O((nv + nc)^3)); at and
near a singular position, or with redundant equations, the SVD or KKT solve decides as before.
On the IFToMM N four-bar with N = 40 (243 coordinates) that is the difference between a
millisecond-scale SVD per stage and lagrange's cost. The Python path (a model without a compiled
form) keeps the SVD throughout; both agree to round-off where the fast path applies.
"""

from __future__ import annotations

import numpy as np
from numba import njit

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)
from mbsim.model.kernels import retract3_into
from mbsim.model.record_kernels import row_into
from mbsim.model.step_kernels import (
    constraints_into,
    forces_into,
    frames_into,
    inverse_mass_times,
    row_bodies,
    row_dot,
    spring_deflections_into,
)
from mbsim.solvers.lapack_kernels import cholesky_envelope, cholesky_envelope_solve
from mbsim.solvers.robust_kernels import (
    augmented_lagrangian_accelerations,
    buffers,
    gauss_kkt_accelerations,
    min_norm_correction,
    min_norm_factor,
    null_space_accelerations,
)

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "_nrt": False}

# the parameter vector P
METHOD, INTEGRATOR, ALPHA, BETA, RANK_TOL, PROJ_POSITION, PROJ_VELOCITY, PROJ_ITERATIONS, PROJ_TOL = range(9)
ROBUST, PENALTY, OMEGA, MU, AL_TOL, AL_MAX_ITER = range(9, 15)
CUT = 15  # null_space, gauss: the rank cut of the current adaptive step (step_cut); rank_tol otherwise
NPARAMS = 16
LAGRANGE, NULL_SPACE, GAUSS_KKT, AUGMENTED_LAGRANGIAN = range(4)
METHODS = {
    "lagrange": LAGRANGE,
    "null_space": NULL_SPACE,
    "gauss_kkt": GAUSS_KKT,
    "augmented_lagrangian": AUGMENTED_LAGRANGIAN,
}
# the per-step values each method records in compiled rows, in their column order (the
# methods' EXTRA_DIAGNOSTICS): written by extras_into before a row's step number
EXTRAS = {NULL_SPACE: ("rank", "acceleration_residual"), GAUSS_KKT: ("acceleration_residual", "optimizer_result")}
INTEGRATORS = {"euler": 0, "semi_implicit_euler": 1, "rk4": 2}

# status of a step or block
OK, RANK_DEFICIENT, NOT_FINITE, VIOLATION, RECORD_FAILED = 0, 1, 2, 3, 4


@njit(**_JIT)
def _copy(src, dst, start):
    """dst[start : start + len(src)] = src (a slice assignment would allocate an overlap copy)."""
    for k in range(src.shape[0]):
        dst[start + k] = src[k]


@njit(**_JIT)
def minv_jt_times(F, D, x, out):
    """out = M^-1 J^T x (nv,), column block by column block of M^-1 J^T."""
    w = 6 if F.dim == 3 else 3
    MJ = D.minv_jt
    for k in range(F.nv):
        out[k] = 0.0
    for c in range(F.nc):
        for b in row_bodies(F, c):
            if b < F.nbody:
                for a in range(w):
                    out[w * b + a] += MJ[w * b + a, c] * x[c]


@njit(**_JIT)
def schur_factor(F, D, rank_tol):
    """M^-1 J^T into D.minv_jt and the lower Cholesky factor of S = J M^-1 J^T into D.S, in the
    factored order F.s_rows (position i holds constraint row s_rows[i]). Returns False on a rank
    loss: a pivot <= 0, or smallest / largest pivot^2 <= rank_tol (mbsim.solvers.linalg.Schur).
    Only the blocks of each row's two bodies are visited: the others are zero in J and stay zero
    in D.minv_jt."""
    nc, nb = F.nc, F.nbody
    w = 6 if F.dim == 3 else 3
    J, MJ, S = D.J, D.minv_jt, D.S
    for i in range(nc):
        r = F.s_rows[i]
        bodies = row_bodies(F, r)
        for b in bodies:
            if b < nb:
                for a in range(w):
                    s = 0.0
                    for m in range(w):
                        s += F.body_inv_mass[b, a, m] * J[r, w * b + m]
                    MJ[w * b + a, r] = s
        for j in range(F.row_first[i], i + 1):  # the envelope (the last factor's values) to zero
            S[i, j] = 0.0
        for e in range(F.s_ptr[i], F.s_ptr[i + 1]):  # the positions j <= i whose rows share a body
            j = F.s_col[e]
            c = F.s_rows[j]
            s = 0.0
            for b in bodies:
                if b < nb and (b == F.row_bi[c] or b == F.row_bj[c]):
                    for m in range(w):
                        s += J[r, w * b + m] * MJ[w * b + m, c]
            S[i, j] = s
    if not cholesky_envelope(S, F.row_first):  # S = L L^T (lower triangle, within the envelope)
        return False
    if nc:
        lo, hi = np.inf, 0.0
        for c in range(nc):
            p = S[c, c] * S[c, c]
            lo = min(lo, p)
            hi = max(hi, p)
        if not (hi > 0.0 and lo / hi > rank_tol):
            return False
    return True


@njit(**_JIT)
def schur_solve(F, D, x):
    """x <- S^-1 x with the factor in D.S (forward, then back substitution in the factored order)."""
    y = D.s_work
    for i in range(F.nc):
        y[i] = x[F.s_rows[i]]
    cholesky_envelope_solve(D.S, F.row_first, F.row_last, y)
    for i in range(F.nc):
        x[F.s_rows[i]] = y[i]


@njit(**_JIT)
def correction(F, D, P, r, dx):
    """dx = M^-1 J^T S^-1 r (the M-smallest dx with J dx = r); r is overwritten. False on rank
    loss; with P[ROBUST] the pseudo-inverse instead (a rank loss allowed)."""
    rank_tol = P[RANK_TOL]
    if P[ROBUST] != 0.0:
        if not certified_full_rank(F, D, rank_tol, False):
            return min_norm_correction(F, D, rank_tol, r, dx)
        schur_solve(F, D, r)
        minv_jt_times(F, D, r, dx)
        return True
    if not schur_factor(F, D, rank_tol):
        return False
    schur_solve(F, D, r)
    minv_jt_times(F, D, r, dx)
    return True


# the rank-robust solves take the full-rank (Schur) path when J M^-1/2's smallest singular value is
# estimated at least this many times above the method's cut (singular values below rank_tol times
# the largest count as zero): then the cut removes nothing and the two solves are the same
FULL_RANK_MARGIN = 100.0
INVERSE_ITERATIONS = 3  # of inverse iteration for S's smallest eigenvalue


@njit(**_JIT)
def certified_full_rank(F, D, rank_tol, kkt):
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
    nc, nv = F.nc, F.nv
    if nc == 0 or nc > nv or not schur_factor(F, D, 0.0):
        return False
    L = D.S
    trace = 0.0
    for r in range(nc):
        for c in range(F.row_first[r], r + 1):
            trace += L[r, c] * L[r, c]
    work = buffers(F, D)
    x, y = work[8], work[10][:nc]  # vec_m and kkt_b: free in these solves
    norm = 0.0
    for r in range(nc):
        x[r] = np.sin(0.7 + 1.3 * r) + 1.5  # generic: no eigenvector of S is orthogonal to it
        norm += x[r] * x[r]
    for r in range(nc):
        x[r] /= np.sqrt(norm)
    for _ in range(INVERSE_ITERATIONS):
        for r in range(nc):
            y[r] = x[r]
        cholesky_envelope_solve(L, F.row_first, F.row_last, y)
        norm = 0.0
        for r in range(nc):
            norm += y[r] * y[r]
        norm = np.sqrt(norm)
        if not (norm > 0.0 and np.isfinite(norm)):
            return False
        for r in range(nc):
            x[r] = y[r] / norm
    lam_min = 1.0 / norm  # >= the smallest eigenvalue; equal once converged
    if not kkt:
        return lam_min > (FULL_RANK_MARGIN * rank_tol) ** 2 * trace
    w = 6 if F.dim == 3 else 3
    inv_norm, mass_sq, jac_sq = 0.0, 0.0, 0.0
    for b in range(F.nbody):
        block = 0.0
        for a in range(w):
            for m in range(w):
                block += F.body_inv_mass[b, a, m] ** 2
                mass_sq += F.body_mass_block[b, a, m] ** 2
        inv_norm = max(inv_norm, np.sqrt(block))
    for r in range(nc):
        for k in range(nv):
            jac_sq += D.J[r, k] ** 2
    m_min = 1.0 / inv_norm
    smallest = 1.0 / (1.0 / m_min + 2.0 / np.sqrt(m_min * lam_min) + 1.0 / lam_min)
    return smallest > FULL_RANK_MARGIN * rank_tol * np.sqrt(mass_sq + 2.0 * jac_sq)


@njit(**_JIT)
def schur_accelerations(F, D, alpha, beta, v, vdot):
    """v_dot and lambda (D.lam) with S's factor in D.S: lambda = S^-1 (J M^-1 Q - gamma*),
    v_dot = M^-1 (Q - J^T lambda); gamma* = gamma with Baumgarte's terms if alpha, beta."""
    nc, nv = F.nc, F.nv
    inverse_mass_times(F, D.Q, D.minv_q)
    rhs = D.lam
    for r in range(nc):
        g = D.gamma[r]
        if alpha != 0.0 or beta != 0.0:  # Baumgarte: gamma - 2 alpha (J v + Phi_t) - beta^2 Phi
            jv = row_dot(F, D.J, r, v)
            g = g - 2.0 * alpha * (jv + D.phi_t[r]) - beta**2 * D.phi[r]
        rhs[r] = row_dot(F, D.J, r, D.minv_q) - g
    schur_solve(F, D, rhs)
    minv_jt_times(F, D, rhs, vdot)
    for k in range(nv):
        vdot[k] = D.minv_q[k] - vdot[k]


@njit(**_JIT)
def lagrange_accelerations(F, D, P, v, vdot):
    """v_dot and lambda (D.lam) of [M J^T; J 0] [v_dot; lambda] = [Q; gamma*] through the Schur
    complement (mbsim.solvers.lagrange); False on rank loss."""
    if not schur_factor(F, D, P[RANK_TOL]):
        return False
    schur_accelerations(F, D, P[ALPHA], P[BETA], v, vdot)
    return True


@njit(**_JIT)
def q_rate_into(F, q, v, out):
    """dq/dt (quaternion rate 1/2 q ⊗ (0, omega_body) in 3D)."""
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


@njit(**_JIT)
def reset_stats(stats, start):
    """stats[start : start + 3] = (iterations 0, rank +inf, residual -inf): nothing solved yet."""
    stats[start], stats[start + 1], stats[start + 2] = 0.0, np.inf, -np.inf


@njit(**_JIT)
def _copy_stats(stats, src, dst):
    for k in range(3):
        stats[dst + k] = stats[src + k]


@njit(**_JIT)
def accelerations(F, D, P, t, q, v, vdot):
    """v_dot at (t, q, v) into vdot; returns (ok, power of non-conservative forces and drives).
    The solve's iterations, rank and residual are added to D.solve_stats[0:3]."""
    frames_into(F, D, q, v)
    power = forces_into(F, D, t, v)
    if F.nc == 0:
        inverse_mass_times(F, D.Q, vdot)
        return True, power
    constraints_into(F, D, t)
    method = int(P[METHOD])
    stats = D.solve_stats
    if method == LAGRANGE:
        if not lagrange_accelerations(F, D, P, v, vdot):
            return False, power
    elif method != AUGMENTED_LAGRANGIAN and certified_full_rank(F, D, P[CUT], method == GAUSS_KKT):
        schur_accelerations(F, D, 0.0, 0.0, v, vdot)  # the full-rank solve (see the module docstring)
        residual = 0.0
        for r in range(F.nc):
            residual = max(residual, abs(row_dot(F, D.J, r, vdot) - D.gamma[r]))
        if method == NULL_SPACE:
            stats[1] = min(stats[1], F.nc)
        stats[2] = max(stats[2], residual)
    else:
        if method == NULL_SPACE:
            n = null_space_accelerations(F, D, P[CUT], vdot, stats)
        elif method == GAUSS_KKT:
            n = gauss_kkt_accelerations(F, D, P[CUT], vdot, stats)
        else:
            n = augmented_lagrangian_accelerations(
                F, D, v, P[PENALTY], P[OMEGA], P[MU], P[AL_TOL], int(P[AL_MAX_ITER]), vdot
            )
        if n < 0:
            return False, power
        stats[0] += n
    for r in range(F.nc):  # drives do work: lambda^T Phi_t
        power += D.lam[r] * D.phi_t[r]
    return True, power


@njit(**_JIT)
def step_cut(F, D, P, t, y):
    """null_space and gauss (kkt) under an adaptive integrator: the rank cut for the coming step
    (the singular values of J M^-1/2, of the KKT matrix for gauss, at its start; the methods'
    before_adaptive_step; mbsim.solvers.linalg.gap_cut in Python). The rank r is
    decided as always (singular values above rank_tol times the largest); the cut is then put in
    the middle of the gap around it, sqrt(s_r s_r+1) / s_1 (s_r+1 = 0 at full rank), kept within
    [rank_tol / 10, 10 rank_tol]. So no singular value crosses the cut within the step unless it
    moves by a large factor: the right-hand side stays smooth over the integrator's stages, and
    a direction is dropped or taken back between steps. A full rank certified by
    certified_full_rank needs no SVD: its cut is rank_tol / 10."""
    nq, nv = F.nq, F.nv
    tau = P[RANK_TOL]
    if F.nc == 0:
        return tau
    kkt = int(P[METHOD]) == GAUSS_KKT
    q, v = y[:nq], y[nq : nq + nv]
    frames_into(F, D, q, v)
    constraints_into(F, D, t)
    if certified_full_rank(F, D, tau, kkt):
        return 0.1 * tau
    if kkt:  # the KKT matrix's singular values, as gelsd leaves them (Q does not change them)
        forces_into(F, D, t, v)
        if gauss_kkt_accelerations(F, D, tau, D.dx, D.solve_stats) < 0:
            return tau
        s = buffers(F, D)[11]
        rank = 0
        for k in range(s.shape[0]):
            if s[k] > tau * s[0]:
                rank += 1
    else:
        rank = min_norm_factor(F, D, tau)
        s = buffers(F, D)[3]
    if rank <= 0:
        return tau
    below = s[rank] if rank < s.shape[0] else 0.0
    cut = np.sqrt(s[rank - 1] * below) / s[0]
    return min(max(cut, 0.1 * tau), 10.0 * tau)


@njit(**_JIT)
def derivative(F, D, P, t, y, out):
    """out = (q_dot, v_dot, power) at y = (q, v, work); False on rank loss."""
    nq, nv = F.nq, F.nv
    q, v = y[:nq], y[nq : nq + nv]
    ok, power = accelerations(F, D, P, t, q, v, out[nq : nq + nv])
    q_rate_into(F, q, v, out[:nq])
    out[nq + nv] = power
    return ok


@njit(**_JIT)
def _first_stage(F, D, P, t, y, k1):
    """derivative(t, y) into k1, unless k1 holds it already (D.k1_valid: y is a state just
    recorded, whose evaluation advance kept: its solve counts as the step's first, as in
    OdeSolver.step). Starts the step's solve statistics."""
    if D.k1_valid[0]:
        D.k1_valid[0] = 0
        _copy_stats(D.solve_stats, 3, 0)
        return True
    reset_stats(D.solve_stats, 0)
    return derivative(F, D, P, t, y, k1)


@njit(**_JIT)
def integrate(F, D, P, t, h, y, out):
    """One fixed step of the integrator P[INTEGRATOR] from y into out (mbsim.solvers.integrators)."""
    nq, nv = F.nq, F.nv
    ny = y.shape[0]
    method = int(P[INTEGRATOR])
    k1, k2, k3, k4, yt = D.k1, D.k2, D.k3, D.k4, D.ytmp
    if method == 1:  # semi-implicit Euler: v first, then q with the new v
        q, v = y[:nq], y[nq : nq + nv]
        if not _first_stage(F, D, P, t, y, k1):  # its q rate is not used
            return False
        for k in range(nv):
            out[nq + k] = v[k] + h * k1[nq + k]
        q_rate_into(F, q, out[nq : nq + nv], k2[:nq])
        for k in range(nq):
            out[k] = q[k] + h * k2[k]
        out[ny - 1] = y[ny - 1] + h * k1[ny - 1]
        return True
    if not _first_stage(F, D, P, t, y, k1):
        return False
    if method == 0:
        for k in range(ny):
            out[k] = y[k] + h * k1[k]
        return True
    half = 0.5 * h
    for k in range(ny):
        yt[k] = y[k] + half * k1[k]
    if not derivative(F, D, P, t + 0.5 * h, yt, k2):
        return False
    for k in range(ny):
        yt[k] = y[k] + half * k2[k]
    if not derivative(F, D, P, t + 0.5 * h, yt, k3):
        return False
    for k in range(ny):
        yt[k] = y[k] + h * k3[k]
    if not derivative(F, D, P, t + h, yt, k4):
        return False
    sixth = h / 6.0
    for k in range(ny):
        out[k] = y[k] + sixth * (k1[k] + 2.0 * k2[k] + 2.0 * k3[k] + k4[k])
    return True


@njit(**_JIT)
def normalize(F, q):
    """Quaternions rescaled to unit norm (3D)."""
    if F.dim == 3:
        for b in range(F.nbody):
            o = 7 * b + 3
            n = np.sqrt(q[o] * q[o] + q[o + 1] * q[o + 1] + q[o + 2] * q[o + 2] + q[o + 3] * q[o + 3])
            for a in range(4):
                q[o + a] = q[o + a] / n


@njit(**_JIT)
def _frames_at_rest(F, D, q):
    """Body frames of q with zero velocities (what positions alone determine)."""
    D.dx[:] = 0.0
    frames_into(F, D, q, D.dx)


@njit(**_JIT)
def _constraints_at_rest(F, D, t, q):
    """Constraint values at (q, t) with zero velocities (the projections' Jacobian)."""
    _frames_at_rest(F, D, q)
    constraints_into(F, D, t)


@njit(**_JIT)
def _max_abs(x):
    m = 0.0
    for k in range(x.shape[0]):
        a = abs(x[k])
        if a > m or a != a:
            m = a
    return m


@njit(**_JIT)
def project(F, D, P, t, q, v):
    """Mass-weighted projection of q (Newton steps), then of v, in place
    (mbsim.solvers.projection). Returns (ok, Newton steps, max |Phi| at the returned q)."""
    nv, nc = F.nv, F.nc
    used, violation = 0, -1.0
    have_values = False
    if P[PROJ_POSITION] != 0.0:
        iterations, tol = int(P[PROJ_ITERATIONS]), P[PROJ_TOL]
        while True:
            _constraints_at_rest(F, D, t, q)
            violation = _max_abs(D.phi)
            if violation <= tol or used >= iterations:
                break
            r = D.rhs
            _copy(D.phi, r, 0)
            dx = D.dx
            if not correction(F, D, P, r, dx):
                return False, used, violation
            for k in range(nv):
                dx[k] = -dx[k]
            if F.dim == 3:
                retract3_into(q, dx, F.nbody, q)
            else:
                for k in range(nv):
                    q[k] = q[k] + dx[k]
            used += 1
        have_values = True
    if P[PROJ_VELOCITY] != 0.0:
        if not have_values:
            frames_into(F, D, q, v)
            constraints_into(F, D, t)
        r = D.rhs
        for c in range(nc):
            r[c] = row_dot(F, D.J, c, v) + D.phi_t[c]
        if not correction(F, D, P, r, D.dx):
            return False, used, violation
        for k in range(nv):
            v[k] = v[k] - D.dx[k]
    return True, used, violation


@njit(**_JIT)
def _all_finite(x):
    ok = True
    for k in range(x.shape[0]):
        ok = ok and np.isfinite(x[k])
    return ok


@njit(**_JIT)
def update_spring_references(F, D, t, q):
    """The unwrapped deflections of an accepted step become the next references (when any
    spring coordinate wraps: mbsim.model.dynamics.SpringGroups.update)."""
    wrapped = False
    for p in range(F.spr_wrap.shape[0]):
        wrapped = wrapped or F.spr_wrap[p] != 0
    if wrapped:
        _frames_at_rest(F, D, q)
        spring_deflections_into(F, D, t)
        for r in range(F.nspr):
            D.spr_ref[r] = D.spr_value[r]


@njit(**_JIT)
def _steps(F, D, P, t, q, v, work, h, t_end, nmax, max_violation, out):
    """Up to ``nmax`` steps of size h (the last one shortened to land on t_end, as
    mbsim.simulate.run does), q and v updated in place.

    Stops early, before taking it, at a step that fails (rank loss: RANK_DEFICIENT) or would
    leave a non-finite state (NOT_FINITE), and after a step whose position violation passes
    ``max_violation`` (VIOLATION). ``out`` (float64, 7) receives: t, work, steps taken,
    Newton steps of the last step, its position violation (-1: not projected), the largest
    violation over the steps, and the size of the last step. Returns the status (OK when
    nmax steps or t_end were reached).
    """
    nq, nv = F.nq, F.nv
    ny = nq + nv + 1
    y, ynew = D.y, D.ynew
    steps, status = 0, OK
    newton, violation, worst, h_last = 0, -1.0, 0.0, 0.0
    scale = max(1.0, t_end)
    while steps < nmax and t_end - t > 1e-12 * scale:
        h_try = min(h, t_end - t)
        if t_end - (t + h_try) < 1e-9 * h_try:  # land exactly on t_end
            h_try = t_end - t
        _copy(q, y, 0)
        _copy(v, y, nq)
        y[ny - 1] = work
        if not integrate(F, D, P, t, h_try, y, ynew):
            status = RANK_DEFICIENT
            break
        qn, vn = ynew[:nq], ynew[nq : nq + nv]
        normalize(F, qn)
        t_new = t + h_try
        ok = True
        if F.nc:
            ok, newton, violation = project(F, D, P, t_new, qn, vn)
        if not ok:
            status = RANK_DEFICIENT
            break
        if not (_all_finite(ynew)):
            status = NOT_FINITE
            break
        _copy_stats(D.solve_stats, 0, 6)
        if D.solve_stats[6] > 0.0:  # a method that iterates reports its own iterations (OdeSolver.step)
            newton = int(D.solve_stats[6])
        _copy(qn, q, 0)
        _copy(vn, v, 0)
        work = ynew[ny - 1]
        h_last = t_new - t  # as the Python step reports it
        t = t_new
        steps += 1
        update_spring_references(F, D, t, q)
        if violation < 0.0:
            if F.nc:
                _constraints_at_rest(F, D, t, q)
                step_violation = _max_abs(D.phi)
            else:
                step_violation = 0.0
        else:
            step_violation = violation
        worst = max(worst, step_violation)
        if step_violation > max_violation:
            status = VIOLATION
            break
    out[0], out[1], out[2], out[3], out[4], out[5], out[6] = t, work, steps, newton, violation, worst, h_last
    return status


@njit(**_JIT)
def extras_into(P, stats, row):
    """The last step's per-step values (EXTRAS) into the columns before the row's step number;
    NaN where no solve took place (no constraints), as the Python path records them."""
    method = int(P[METHOD])
    end = row.shape[0] - 1
    solved = stats[8] > -np.inf
    if method == NULL_SPACE:
        row[end - 2] = stats[7] if solved else np.nan
        row[end - 1] = stats[8] if solved else np.nan
    elif method == GAUSS_KKT:
        row[end - 2] = stats[8] if solved else np.nan
        row[end - 1] = 0.0 if solved else np.nan  # RESULT_CODES["kkt"]


@njit(**_JIT)
def advance(F, D, P, t, q, v, work, h, t_end, every, done, max_steps, max_rows, max_block, max_violation, rows, out):
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
    """
    nq, nv = F.nq, F.nv
    ny = nq + nv + 1
    seg = D.seg
    D.k1_valid[0] = 0  # the state may have changed since the last call
    taken, nrec, status = 0, 0, OK
    worst, newton, violation, h_last = 0.0, 0.0, -1.0, 0.0
    scale = max(1.0, t_end)
    while nrec < max_rows and taken < max_block and t_end - t > 1e-12 * scale:
        n = min(every - (done + taken) % every, max_steps + 1 - (done + taken), max_block - taken)
        status = _steps(F, D, P, t, q, v, work, h, t_end, n, max_violation, seg)
        k = int(seg[2])
        if k > 0:
            t, work = seg[0], seg[1]
            newton, violation, h_last = seg[3], seg[4], seg[6]
            worst = max(worst, seg[5])
            taken += k
        number = done + taken
        last = not (t_end - t > 1e-12 * scale)
        due = number % every == 0 or last or status == VIOLATION
        if k > 0 and due and number <= max_steps:
            y = D.y
            _copy(q, y, 0)
            _copy(v, y, nq)
            y[ny - 1] = work
            reset_stats(D.solve_stats, 0)
            if not derivative(F, D, P, t, y, D.k1):
                status = RECORD_FAILED
                break
            _copy_stats(D.solve_stats, 0, 3)
            D.k1_valid[0] = 1  # the next step's first stage
            row_into(F, D, t, q, v, work, newton, h_last, rows[nrec])
            extras_into(P, D.solve_stats, rows[nrec])
            rows[nrec, rows.shape[1] - 1] = number
            nrec += 1
        if status != OK or number > max_steps:
            break
    D.k1_valid[0] = 0
    out[0], out[1], out[2], out[3], out[4] = t, work, taken, nrec, worst
    out[5], out[6], out[7] = newton, violation, h_last
    return status
