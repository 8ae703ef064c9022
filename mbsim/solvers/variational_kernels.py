"""Compiled steps of the method ``variational``: the Newton solve of the discrete Euler-Lagrange
equations, the constrained inverse Legendre transform and the recorded rows.

What mbsim.solvers.variational.Solver.step does in Python (see its module docstring for the
mathematics: papers/quaternion-symplectic-multibody.txt eqs. (33)-(39)), over a FlatModel and a
FlatData (mbsim.model.flat, with the rank-robust buffers for the reactions of a row) plus the
method's own constants (VarModel) and buffers (VarData): the same formulas in the same order,
the linear systems by the LAPACK routines numpy's ``solve`` and ``lstsq`` call
(mbsim.solvers.lapack_kernels), so that both paths agree to round-off.

Coordinates u = mbsim's q (3D per body: centre of mass r, quaternion p; 2D: x, y, angle); the
constraint vector is the unit quaternions first (3D), then the joints. A step the compiled code
cannot finish (Newton did not converge, a singular Newton matrix, a non-finite state) is not
taken: ``advance`` returns with the state before it and the Python path takes that step,
raising the error with its message.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)
from mbsim.model.record_kernels import row_into
from mbsim.model.step_kernels import applied_forces_into, constraints_into, forces_into, frames_into
from mbsim.solvers.lapack_kernels import lstsq_symmetric_into, solve_into
from mbsim.solvers.ode_kernels import update_spring_references
from mbsim.solvers.robust_kernels import null_space_accelerations

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "_nrt": False}

OK, FAILED, VIOLATION, RECORD_FAILED = 0, 1, 3, 4  # as ode_kernels' status codes


class VarModel(NamedTuple):
    """The method's constants: sizes n = nq, nquat (3D: nbody), m = nquat + nc; GT (4, 3, 4) with
    G(p) = sum_i p_i GT[i]; mass (nbody,), inertia (nbody, 3, 3) (2D: [0, 0]); mass_scale (n,);
    forces_vary (1: forces besides gravity, their Jacobian by differences); tol, max_iter,
    rank_tol (the reactions of a row)."""

    n: int
    nquat: int
    m: int
    GT: np.ndarray
    mass: np.ndarray
    inertia: np.ndarray
    mass_scale: np.ndarray
    forces_vary: int
    tol: float
    max_iter: int
    rank_tol: float


class VarData(NamedTuple):
    """The node carried between steps -- p (n,) the momentum p_k^-, rate (n,) the last step's
    (b - a)/h, lam (m,), h (1,) the last step (0: none) -- and the step's buffers: lam_start (m,)
    lam before the step (restored if it fails); um, ud (n,) and v_mid (nv,) the midpoint state;
    f_total, f_nc (n,) the forces at a perturbed b; a, b, D1, D2, F_total, F_nc, R1, work_u,
    force0, bk (n,); Ca, Cu (m, n) and C, Ct, Ca_t (m,) the
    constraints at the step's two ends; Kt (n + m, n + m) the transposed Newton matrix, rhs
    (n + m,), pivots (n + m,) LAPACK's integers; K2, rhs2, s2 (n + m) the Legendre system;
    G1, G2, JG1, JG2 (3, 4), blk (4, 4) scratch of one body; vdot (nv,); out (8,) the report."""

    p: np.ndarray
    rate: np.ndarray
    lam: np.ndarray
    h: np.ndarray
    lam_start: np.ndarray
    um: np.ndarray
    ud: np.ndarray
    v_mid: np.ndarray
    f_total: np.ndarray
    f_nc: np.ndarray
    a: np.ndarray
    b: np.ndarray
    D1: np.ndarray
    D2: np.ndarray
    F_total: np.ndarray
    F_nc: np.ndarray
    R1: np.ndarray
    work_u: np.ndarray
    force0: np.ndarray
    bk: np.ndarray
    Ca: np.ndarray
    Cu: np.ndarray
    C: np.ndarray
    Ct: np.ndarray
    Ca_t: np.ndarray
    Kt: np.ndarray
    rhs: np.ndarray
    pivots: np.ndarray
    K2: np.ndarray
    rhs2: np.ndarray
    s2: np.ndarray
    rank: np.ndarray
    G1: np.ndarray
    G2: np.ndarray
    JG1: np.ndarray
    JG2: np.ndarray
    blk: np.ndarray
    vdot: np.ndarray


def make_var_data(n: int, m: int, nv: int, int_dtype) -> VarData:
    """Fresh buffers (``int_dtype``: LAPACK's integer, mbsim.model.flat's kkt_rank dtype)."""
    k = n + m
    return VarData(
        p=np.zeros(n), rate=np.zeros(n), lam=np.zeros(m), h=np.zeros(1), lam_start=np.zeros(m), um=np.zeros(n),
        ud=np.zeros(n), v_mid=np.zeros(nv), f_total=np.zeros(n), f_nc=np.zeros(n), a=np.zeros(n), b=np.zeros(n),
        D1=np.zeros(n), D2=np.zeros(n), F_total=np.zeros(n), F_nc=np.zeros(n), R1=np.zeros(n),
        work_u=np.zeros(n), force0=np.zeros(n), bk=np.zeros(n), Ca=np.zeros((m, n)), Cu=np.zeros((m, n)),
        C=np.zeros(m), Ct=np.zeros(m), Ca_t=np.zeros(m), Kt=np.zeros((k, k)), rhs=np.zeros(k),
        pivots=np.zeros(k, dtype=int_dtype), K2=np.zeros((k, k)), rhs2=np.zeros(k), s2=np.zeros(k),
        rank=np.zeros(1, dtype=int_dtype), G1=np.zeros((3, 4)), G2=np.zeros((3, 4)), JG1=np.zeros((3, 4)),
        JG2=np.zeros((3, 4)), blk=np.zeros((4, 4)), vdot=np.zeros(nv),
    )  # fmt: skip


@njit(inline="always")
def _g_entry(V, p0, p1, p2, p3, j, k):
    """G(p)[j, k] = sum_i p_i GT[i, j, k]."""
    return p0 * V.GT[0, j, k] + p1 * V.GT[1, j, k] + p2 * V.GT[2, j, k] + p3 * V.GT[3, j, k]


@njit(**_JIT)
def _g_into(V, p0, p1, p2, p3, G):
    """G = G(p) (3, 4) = sum_i p_i GT[i]."""
    for j in range(3):
        for k in range(4):
            G[j, k] = _g_entry(V, p0, p1, p2, p3, j, k)


@njit(**_JIT)
def kinetic_into(V, W, a, b, h, Kt):
    """The kinetic parts of D1 L_d and D2 L_d into W.D1, W.D2 and, when ``Kt`` has rows, dD1/db
    (block diagonal) into its upper-left (n, n) part, transposed (Solver._kinetic)."""
    nb = V.mass.shape[0]
    jac = Kt.shape[0] > 0
    if V.nquat == 0:  # 2D: T = 1/2 (m x'^2 + m y'^2 + I angle'^2)
        for body in range(nb):
            for c in range(3):
                i = 3 * body + c
                M = V.inertia[body, 0, 0] if c == 2 else V.mass[body]
                t_ud = M * (b[i] - a[i]) / h
                W.D1[i], W.D2[i] = -t_ud, t_ud
                if jac:
                    Kt[i, i] = -M / h
        return
    G1, G2, JG1, JG2, blk = W.G1, W.G2, W.JG1, W.JG2, W.blk
    I = V.inertia
    for body in range(nb):
        o = 7 * body
        m = V.mass[body]
        for c in range(3):
            t_ud = m * ((b[o + c] - a[o + c]) / h)
            W.D1[o + c] = 0.5 * h * 0.0 - t_ud
            W.D2[o + c] = 0.5 * h * 0.0 + t_ud
        pm = (0.5 * (a[o + 3] + b[o + 3]), 0.5 * (a[o + 4] + b[o + 4]), 0.5 * (a[o + 5] + b[o + 5]),
              0.5 * (a[o + 6] + b[o + 6]))  # fmt: skip
        pd = ((b[o + 3] - a[o + 3]) / h, (b[o + 4] - a[o + 4]) / h, (b[o + 5] - a[o + 5]) / h,
              (b[o + 6] - a[o + 6]) / h)  # fmt: skip
        _g_into(V, pm[0], pm[1], pm[2], pm[3], G1)  # Gm
        _g_into(V, pd[0], pd[1], pd[2], pd[3], G2)  # Gd
        w0 = G1[0, 0] * pd[0] + G1[0, 1] * pd[1] + G1[0, 2] * pd[2] + G1[0, 3] * pd[3]
        w1 = G1[1, 0] * pd[0] + G1[1, 1] * pd[1] + G1[1, 2] * pd[2] + G1[1, 3] * pd[3]
        w2 = G1[2, 0] * pd[0] + G1[2, 1] * pd[1] + G1[2, 2] * pd[2] + G1[2, 3] * pd[3]
        Jw = (I[body, 0, 0] * w0 + I[body, 0, 1] * w1 + I[body, 0, 2] * w2,
              I[body, 1, 0] * w0 + I[body, 1, 1] * w1 + I[body, 1, 2] * w2,
              I[body, 2, 0] * w0 + I[body, 2, 1] * w1 + I[body, 2, 2] * w2)  # fmt: skip
        for k in range(4):
            t_ud = 4.0 * (G1[0, k] * Jw[0] + G1[1, k] * Jw[1] + G1[2, k] * Jw[2])
            t_u = -4.0 * (G2[0, k] * Jw[0] + G2[1, k] * Jw[1] + G2[2, k] * Jw[2])
            W.D1[o + 3 + k] = 0.5 * h * t_u - t_ud
            W.D2[o + 3 + k] = 0.5 * h * t_u + t_ud
        if not jac:
            continue
        for c in range(3):
            Kt[o + c, o + c] = -(m / h)
        for j in range(3):  # JG = I G
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


@njit(**_JIT)
def u_rate_to_v(F, V, u, ud, v):
    """(r', p') -> (v, omega_body = 2 G(p) p' / |p|^2) (Solver._u_rate_to_v)."""
    if V.nquat == 0:
        for k in range(F.nv):
            v[k] = ud[k]
        return
    for body in range(F.nbody):
        o, ov = 7 * body, 6 * body
        p0, p1, p2, p3 = u[o + 3], u[o + 4], u[o + 5], u[o + 6]
        norm = p0 * p0 + p1 * p1 + p2 * p2 + p3 * p3
        for c in range(3):
            v[ov + c] = ud[o + c]
        for j in range(3):
            s = 0.0
            for k in range(4):
                s += _g_entry(V, p0, p1, p2, p3, j, k) * ud[o + 3 + k]
            v[ov + 3 + j] = 2.0 * s / norm


@njit(**_JIT)
def forces_u(F, D, V, W, a, b, h, t_mid, total, nonc):
    """Applied forces at the midpoint in u coordinates into total (all) and nonc (the
    non-conservative part) (Solver._forces); the midpoint state goes through W.um, W.ud, W.v_mid."""
    n = V.n
    if V.forces_vary == 0:  # gravity alone: constant, no rotational part
        w = 7 if V.nquat else 3
        for k in range(n):
            total[k] = 0.0
            nonc[k] = 0.0
        for body in range(F.nbody):
            for c in range(F.dim):
                total[w * body + c] = F.body_weight[body, c]
        return
    um, ud, v = W.um, W.ud, W.v_mid
    for k in range(n):
        um[k] = 0.5 * (a[k] + b[k])
        ud[k] = (b[k] - a[k]) / h
    u_rate_to_v(F, V, um, ud, v)
    frames_into(F, D, um, v)
    applied_forces_into(F, D, t_mid, v)
    _v_vector_to_u(F, V, D.Q, um, total)  # rows over v -> over u (D.Q = Qc + Qn as in Python)
    _v_vector_to_u(F, V, D.Qn, um, nonc)


@njit(**_JIT)
def _v_vector_to_u(F, V, x, u, out):
    """out (n,) = x (nv,), a row over velocity coordinates, as a row over u: [x_r, 2 x_omega G(p)
    / |p|^2] per body (Solver._v_to_u_rows of one row)."""
    if V.nquat == 0:
        for k in range(F.nv):
            out[k] = x[k]
        return
    for body in range(F.nbody):
        o, ov = 7 * body, 6 * body
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


@njit(**_JIT)
def constraints_u(F, D, V, u, t, C, Cu, Ct):
    """C (m,), C_u (m, n) and C_t (m,) at (u, t): unit quaternions first, then the joints
    (Solver._constraints)."""
    n, nq4 = V.n, V.nquat
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
    if F.nc:
        zero = D.dx
        for k in range(F.nv):
            zero[k] = 0.0
        frames_into(F, D, u, zero)
        constraints_into(F, D, t)
        for r in range(F.nc):
            C[nq4 + r] = D.phi[r]
            Ct[nq4 + r] = D.phi_t[r]
            _v_vector_to_u(F, V, D.J[r], u, Cu[nq4 + r])  # row r over v -> over u


@njit(**_JIT)
def momentum_to_rate(F, V, W, u, p, Cu, Ct, rate):
    """u' with M(u) u' + C_u^T nu = p, C_u u' = -C_t (Solver._momentum_to_rate): LU (gesv), and
    the least-squares solution (gelsd, rcond 1e-13) if the system is singular. False if both fail."""
    n, m = V.n, V.m
    for attempt in range(2):
        K, rhs = W.K2, W.rhs2
        for i in range(n + m):
            for k in range(n + m):
                K[i, k] = 0.0
        if V.nquat == 0:
            for body in range(F.nbody):
                for c in range(3):
                    K[3 * body + c, 3 * body + c] = V.inertia[body, 0, 0] if c == 2 else V.mass[body]
        else:
            G = W.G1
            I = V.inertia
            for body in range(F.nbody):
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


@njit(**_JIT)
def step(F, D, V, W, t0, h, work):
    """One step from the node in W (W.a = u_k, W.p, W.lam, W.rate, W.h, W.Ca, W.Ca_t at u_k):
    Newton on eqs. (38)-(39), then the new node in W (u_{k+1} in W.a, its constraints in W.Ca,
    W.Ca_t) and its velocity into D.ynew[:nv]. Returns (ok, work, iterations, residual, joint
    violation)."""
    n, m, nq4 = V.n, V.m, V.nquat
    a, b, lam = W.a, W.b, W.lam
    t1 = t0 + h
    t_mid = 0.5 * (t0 + t1)
    for k in range(n):
        b[k] = a[k] + h * W.rate[k]  # predictor
    scale = h / W.h[0] if W.h[0] else 1.0
    for r in range(m):
        W.lam_start[r] = lam[r]
        lam[r] = lam[r] * scale
    Kt, rhs = W.Kt, W.rhs
    residual = np.inf
    converged = False
    iteration = 0
    for iteration in range(1, V.max_iter + 1):  # noqa: B007
        for i in range(n + m):
            for k in range(n + m):
                Kt[i, k] = 0.0
        kinetic_into(V, W, a, b, h, Kt)
        forces_u(F, D, V, W, a, b, h, t_mid, W.F_total, W.F_nc)
        constraints_u(F, D, V, b, t1, W.C, W.Cu, W.Ct)
        size = 1.0
        for k in range(n):
            size = max(size, abs(b[k]))
        momentum = 0.0
        for k in range(n):
            s = 0.0
            for r in range(m):
                s += W.Ca[r, k] * lam[r]
            R = W.D1[k] + 0.5 * h * W.F_total[k] + W.p[k] - s
            W.R1[k] = R
            momentum = max(momentum, abs(h * R / V.mass_scale[k]))
        momentum = momentum / size
        violation = 0.0
        for r in range(m):
            violation = max(violation, abs(W.C[r]))
        violation = violation / size
        residual = max(momentum, 100.0 * violation)
        if residual <= V.tol:
            converged = True
            break
        if V.forces_vary:  # + h/2 dF/db by forward differences (Solver._force_jacobian), transposed
            eps = 1e-7 * size
            for k in range(n):
                W.force0[k] = W.F_total[k]
            for c in range(n):
                for k in range(n):
                    W.bk[k] = b[k]
                W.bk[c] += eps
                forces_u(F, D, V, W, a, W.bk, h, t_mid, W.f_total, W.f_nc)
                for k in range(n):
                    Kt[c, k] += 0.5 * h * ((W.f_total[k] - W.force0[k]) / eps)
            for k in range(n):
                W.F_total[k] = W.force0[k]
        for r in range(m):  # K[:n, n:] = -Ca^T, K[n:, :n] = Cu_b (transposed)
            for k in range(n):
                Kt[n + r, k] = -W.Ca[r, k]
                Kt[k, n + r] = W.Cu[r, k]
        for k in range(n):
            rhs[k] = -W.R1[k]
        for r in range(m):
            rhs[n + r] = -W.C[r]
        if solve_into(Kt, rhs, W.pivots) != 0:
            break
        for k in range(n):
            b[k] = b[k] + rhs[k]
        for r in range(m):
            lam[r] = lam[r] + rhs[n + r]
    # p_{k+1}^- (into force0 until the step is sure), the work, the node velocity u' (into R1)
    p_plus, rate = W.force0, W.R1
    new_work = 0.0
    for k in range(n):
        p_plus[k] = W.D2[k] + 0.5 * h * W.F_total[k]
        new_work += W.F_nc[k] * (b[k] - a[k])
    if not (converged and momentum_to_rate(F, V, W, b, p_plus, W.Cu, W.Ct, rate)):
        for r in range(m):  # not taken: the node stays as it was
            lam[r] = W.lam_start[r]
        return False, work, iteration, residual, 0.0
    drive = 0.0
    for r in range(nq4, m):
        drive += lam[r] * W.Ca_t[r]
    work = work + new_work + drive
    u_rate_to_v(F, V, b, rate, D.ynew)
    joints = 0.0
    for r in range(nq4, m):
        joints = max(joints, abs(W.C[r]))
    for k in range(n):
        W.p[k] = p_plus[k]
        W.rate[k] = (b[k] - a[k]) / h
        a[k] = b[k]
    for r in range(m):
        W.Ca_t[r] = W.Ct[r]
        for k in range(n):
            W.Ca[r, k] = W.Cu[r, k]
    W.h[0] = h
    return True, work, iteration, residual, joints


@njit(**_JIT)
def _record(F, D, V, W, t, q, v, work, iterations, h, residual, row):
    """A recorded row at (t, q, v): reactions as Solver.evaluate (minimum-norm multipliers of
    the continuous equations), then row_into, the Newton residual and the step number's column."""
    frames_into(F, D, q, v)
    forces_into(F, D, t, v)
    if F.nc:
        constraints_into(F, D, t)
        if null_space_accelerations(F, D, V.rank_tol, W.vdot, D.solve_stats) < 0:
            return False
    row_into(F, D, t, q, v, work, iterations, h, row)
    row[row.shape[0] - 2] = residual
    return True


@njit(**_JIT)
def advance(F, D, V, W, t, q, v, work, h, t_end, every, done, max_steps, max_rows, max_block, max_violation, rows, out):
    """Steps and recorded rows (ode_kernels.advance's rules), q and v updated in place, the node
    carried in W. ``out`` (9,): t, work, steps, rows, the largest joint violation, and of the
    last step: Newton iterations, joint violation, step size, Newton residual. Returns the status."""
    n = V.n
    taken, nrec, status = 0, 0, OK
    worst, iterations, violation, h_last, residual = 0.0, 0.0, -1.0, 0.0, np.nan
    scale = max(1.0, t_end)
    for k in range(n):
        W.a[k] = q[k]
    constraints_u(F, D, V, q, t, W.C, W.Ca, W.Ca_t)  # the node: C_u and C_t at u_k
    while nrec < max_rows and taken < max_block and t_end - t > 1e-12 * scale:
        if done + taken > max_steps:
            break
        h_try = min(h, t_end - t)
        if t_end - (t + h_try) < 1e-9 * h_try:  # land exactly on t_end
            h_try = t_end - t
        ok, new_work, it, res, joints = step(F, D, V, W, t, h_try, work)
        ynew = D.ynew
        finite = ok
        for k in range(n):
            finite = finite and np.isfinite(W.b[k])
        for k in range(F.nv):
            finite = finite and np.isfinite(ynew[k])
        if not finite:  # not taken: the node in W is the state before the step (b was not accepted)
            status = FAILED
            break
        for k in range(n):
            q[k] = W.a[k]
        for k in range(F.nv):
            v[k] = ynew[k]
        t_new = t + h_try
        h_last = t_new - t
        t, work = t_new, new_work
        taken += 1
        iterations, violation, residual = float(it), joints, res
        update_spring_references(F, D, t, q)
        worst = max(worst, joints)
        number = done + taken
        last = not (t_end - t > 1e-12 * scale)
        due = number % every == 0 or last or joints > max_violation
        if due and number <= max_steps:
            if not _record(F, D, V, W, t, q, v, work, iterations, h_last, residual, rows[nrec]):
                status = RECORD_FAILED
                break
            rows[nrec, rows.shape[1] - 1] = number
            nrec += 1
        if joints > max_violation:
            status = VIOLATION
            break
        if number > max_steps:
            break
    out[0], out[1], out[2], out[3], out[4] = t, work, taken, nrec, worst
    out[5], out[6], out[7], out[8] = iterations, violation, h_last, residual
    return status
