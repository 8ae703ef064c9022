"""Compiled stages of a right-hand side over a FlatModel, writing into a FlatData.

One kernel per stage (MuJoCo's pipeline): body frames -> applied and inertial forces ->
constraint values, Jacobian and acceleration right side. They compute what
mbsim.model.dynamics and mbsim.model.constraints compute, with the same primitive kernels
(mbsim.model.kernels ``*_at``), the same order of operations where it is cheap to keep
(results agree with the Python path to round-off), and allocate nothing.

Symbols as in mbsim.model.constraints: phi = value - offset - c(t), J with respect to the
velocities (rotational columns in body axes), gamma = -bias + c''(t), phi_t = -c'(t).
"""

from __future__ import annotations

import numpy as np
from numba import njit

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)
from mbsim.model.expr_kernel import run_expression
from mbsim.model.flat import ANGLE2, ANGLE3, DOT1_3, DOT2_3, POINT2, POINT3
from mbsim.model.kernels import (
    angle2_at,
    angle3_at,
    dot1_3_at,
    dot2_2_at,
    dot2_3_at,
    frames2_into,
    frames3_into,
    point2_at,
    point3_at,
)

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "_nrt": False}


@njit(**_JIT)
def frames_into(F, D, q, v):
    """Body frames of (q, v) into D (see FlatData)."""
    if F.dim == 3:
        frames3_into(q, v, F.nbody, D.pos, D.rot, D.vel, D.omega_body, D.omega)
    else:
        frames2_into(q, v, F.nbody, D.pos, D.rot, D.vel, D.omega2, D.angle)


@njit(inline="always")
def expression(F, D, index):
    """Value of expression ``index`` of the model's programs (variables already in D.regs)."""
    return run_expression(
        F.prog_op, F.prog_dst, F.prog_args, F.prog_imm, F.prog_start, F.prog_stop, F.prog_result, index, D.regs
    )


@njit(inline="always")
def _primitive_row(F, D, kind, i, j, vec, p):
    """Evaluate primitive p of a table into D's scratch row."""
    rv, rJi, rJj, rb = D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias
    if kind == POINT3:
        point3_at(D.pos, D.rot, D.omega, i, j, vec[:, 0], vec[:, 1], p, rv, rJi, rJj, rb, 0)
    elif kind == DOT1_3:
        dot1_3_at(D.rot, D.omega, i, j, vec[:, 0], vec[:, 1], p, rv, rJi, rJj, rb, 0)
    elif kind == DOT2_3:
        dot2_3_at(D.pos, D.rot, D.vel, D.omega, i, j, vec[:, 0], vec[:, 1], vec[:, 2], p, rv, rJi, rJj, rb, 0)
    elif kind == ANGLE3:
        angle3_at(D.rot, D.omega, i, j, vec[:, 0], vec[:, 1], vec[:, 2], p, rv, rJi, rJj, rb, 0)
    elif kind == POINT2:
        point2_at(D.pos, D.rot, D.omega2, i, j, vec[:, 0], vec[:, 1], p, rv, rJi, rJj, rb, 0)
    elif kind == ANGLE2:
        angle2_at(D.angle, i, j, rv, rJi, rJj, rb, 0)
    else:  # DOT2_2
        dot2_2_at(D.pos, D.rot, D.vel, D.omega2, i, j, vec[:, 0], vec[:, 1], vec[:, 2], p, rv, rJi, rJj, rb, 0)


@njit(**_JIT)
def primitives_into(F, D, t, kind, bi, bj, vec, row, nrow, offset, drive, wrap, phi, phi_t, gamma, J):
    """phi, phi_t, gamma and the dense Jacobian rows of one primitive table (constraints or
    spring coordinates) at time t; J's columns of bodies a row does not touch are left as they
    are (zero since allocation: the structure never changes)."""
    nb = F.nbody
    w = 6 if F.dim == 3 else 3
    rv, rJi, rJj, rb = D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias
    for p in range(kind.shape[0]):
        i, j = bi[p], bj[p]
        _primitive_row(F, D, kind[p], i, j, vec, p)
        r0 = row[p]
        c, c1, c2 = 0.0, 0.0, 0.0
        if drive[p] >= 0:  # prescribed c(t): Phi = value - offset - c, Phi_t = -c', gamma += c''
            D.regs[0] = t
            c = expression(F, D, drive[p])
            c1 = expression(F, D, drive[p] + 1)
            c2 = expression(F, D, drive[p] + 2)
        for a in range(nrow[p]):
            target = offset[p, a] + c if (a == 0 and drive[p] >= 0) else offset[p, a]
            residual = rv[0, a] - target
            if wrap[p]:
                residual = (residual + np.pi) % (2.0 * np.pi) - np.pi
            phi[r0 + a] = residual
            bias = rb[0, a] - c2 if (a == 0 and drive[p] >= 0) else rb[0, a]
            phi_t[r0 + a] = -c1 if a == 0 else 0.0
            gamma[r0 + a] = -bias
            if i < nb:
                for m in range(w):
                    J[r0 + a, i * w + m] = rJi[0, a, m]
            if j < nb:
                for m in range(w):
                    J[r0 + a, j * w + m] = rJj[0, a, m]


@njit(**_JIT)
def constraints_into(F, D, t):
    """Phi, Phi_t, gamma and J of every joint equation into D.phi, D.phi_t, D.gamma, D.J."""
    primitives_into(
        F,
        D,
        t,
        F.prim_kind,
        F.prim_bi,
        F.prim_bj,
        F.prim_vec,
        F.prim_row,
        F.prim_nrow,
        F.prim_offset,
        F.prim_drive,
        F.prim_wrap,
        D.phi,
        D.phi_t,
        D.gamma,
        D.J,
    )


@njit(**_JIT)
def spring_deflections_into(F, D, t):
    """Joint-spring deflections (unwrapped against D.spr_ref, mbsim.model.dynamics.SpringGroups)
    and their Jacobian into D.spr_value, D.spr_jac; the frames of the state are in D already."""
    if F.nspr == 0:
        return
    primitives_into(
        F,
        D,
        t,
        F.spr_kind,
        F.spr_bi,
        F.spr_bj,
        F.spr_vec,
        F.spr_row,
        F.spr_nrow,
        F.spr_offset,
        F.spr_drive,
        F.spr_wrap,
        D.spr_value,
        D.spr_rate,
        D.spr_bias,
        D.spr_jac,
    )
    for p in range(F.spr_kind.shape[0]):
        if F.spr_wrap[p]:  # a torsion spring wound past half a turn must not snap back
            for a in range(F.spr_nrow[p]):
                r = F.spr_row[p] + a
                ref = D.spr_ref[r]
                D.spr_value[r] = ref + (D.spr_value[r] - ref + np.pi) % (2.0 * np.pi) - np.pi


@njit(inline="always")
def _point_force(F, D, out, b, rx, ry, rz, fx, fy, fz, sign):
    """Add sign * (force f at offset r (world) from body b's centre) to out (generalized, body axes)."""
    if b >= F.nbody:
        return
    if F.dim == 3:
        tx, ty, tz = ry * fz - rz * fy, rz * fx - rx * fz, rx * fy - ry * fx
        R = D.rot
        out[6 * b] += sign * fx
        out[6 * b + 1] += sign * fy
        out[6 * b + 2] += sign * fz
        out[6 * b + 3] += sign * (R[b, 0, 0] * tx + R[b, 1, 0] * ty + R[b, 2, 0] * tz)
        out[6 * b + 4] += sign * (R[b, 0, 1] * tx + R[b, 1, 1] * ty + R[b, 2, 1] * tz)
        out[6 * b + 5] += sign * (R[b, 0, 2] * tx + R[b, 1, 2] * ty + R[b, 2, 2] * tz)
    else:
        out[3 * b] += sign * fx
        out[3 * b + 1] += sign * fy
        out[3 * b + 2] += sign * (rx * fy - ry * fx)


@njit(inline="always")
def _body_point(F, D, b, s):
    """R_b s (world offset of a body-fixed point)."""
    R = D.rot
    if F.dim == 3:
        return (
            R[b, 0, 0] * s[0] + R[b, 0, 1] * s[1] + R[b, 0, 2] * s[2],
            R[b, 1, 0] * s[0] + R[b, 1, 1] * s[1] + R[b, 1, 2] * s[2],
            R[b, 2, 0] * s[0] + R[b, 2, 1] * s[1] + R[b, 2, 2] * s[2],
        )
    return (R[b, 0, 0] * s[0] + R[b, 0, 1] * s[1], R[b, 1, 0] * s[0] + R[b, 1, 1] * s[1], 0.0)


@njit(inline="always")
def _point_velocity(F, D, b, r):
    """Velocity of the body point at world offset r from body b's centre."""
    if F.dim == 3:
        w = D.omega
        return (
            D.vel[b, 0] + w[b, 1] * r[2] - w[b, 2] * r[1],
            D.vel[b, 1] + w[b, 2] * r[0] - w[b, 0] * r[2],
            D.vel[b, 2] + w[b, 0] * r[1] - w[b, 1] * r[0],
        )
    w2 = D.omega2[b]
    return (D.vel[b, 0] - w2 * r[1], D.vel[b, 1] + w2 * r[0], 0.0)


@njit(**_JIT)
def forces_into(F, D, t, v):
    """Generalized forces Q (all) and Qn (non-conservative) into D.Q, D.Qn; returns the power
    of the non-conservative part, Qn . v (mbsim.model.dynamics.generalized_forces).

    The frames of the state are in D already. Order: gravity, spring-dampers, applied loads,
    joint springs (applied_forces_into), then the gyroscopic term -omega x (I omega) (3D, body axes)."""
    power = applied_forces_into(F, D, t, v)
    if F.dim == 3:  # gyroscopic term -omega x (I omega), body axes
        Qc = D.Q
        for b in range(F.nbody):
            o = D.omega_body
            I = F.body_inertia
            Iw0 = I[b, 0, 0] * o[b, 0] + I[b, 0, 1] * o[b, 1] + I[b, 0, 2] * o[b, 2]
            Iw1 = I[b, 1, 0] * o[b, 0] + I[b, 1, 1] * o[b, 1] + I[b, 1, 2] * o[b, 2]
            Iw2 = I[b, 2, 0] * o[b, 0] + I[b, 2, 1] * o[b, 1] + I[b, 2, 2] * o[b, 2]
            Qc[6 * b + 3] += -(o[b, 1] * Iw2 - o[b, 2] * Iw1)
            Qc[6 * b + 4] += -(o[b, 2] * Iw0 - o[b, 0] * Iw2)
            Qc[6 * b + 5] += -(o[b, 0] * Iw1 - o[b, 1] * Iw0)
    return power


@njit(**_JIT)
def applied_forces_into(F, D, t, v):
    """Gravity, force elements and joint springs (mbsim.model.dynamics.applied_forces): all of
    them into D.Q, the non-conservative part into D.Qn; returns Qn . v."""
    nb, nv, d = F.nbody, F.nv, F.dim
    w = 6 if d == 3 else 3
    Qc, Qn = D.Q, D.Qn
    for k in range(nv):
        Qc[k] = 0.0
        Qn[k] = 0.0
    for b in range(nb):
        for a in range(d):
            Qc[w * b + a] = F.body_weight[b, a]
    element_forces_into(F, D, t, Qc, Qn)
    # joint springs: Qc -= J^T (k deflection), Qn -= J^T (c J v)
    if F.nspr:
        spring_deflections_into(F, D, t)
        for r in range(F.nspr):
            elastic = F.spr_stiffness[r] * D.spr_value[r]
            rate = 0.0
            for k in range(nv):
                rate += D.spr_jac[r, k] * v[k]
            damping = F.spr_damping[r] * rate
            for k in range(nv):
                Qc[k] -= D.spr_jac[r, k] * elastic
                Qn[k] -= D.spr_jac[r, k] * damping
    power = 0.0
    for k in range(nv):
        power += Qn[k] * v[k]
        Qc[k] += Qn[k]
    return power


@njit(**_JIT)
def element_forces_into(F, D, t, Qc, Qn):
    """Add the force elements' generalized forces (body axes) to Qc (conservative:
    spring-dampers' elastic part) and Qn (their damping, the applied loads); the frames of the
    state are in D already."""
    d = F.dim
    # spring-dampers: f = k (L - L0) + c dL/dt along the line, on body2; body1 the opposite
    for e in range(F.sd_k.shape[0]):
        b1, b2 = F.sd_b1[e], F.sd_b2[e]
        r1 = _body_point(F, D, b1, F.sd_s1[e])
        r2 = _body_point(F, D, b2, F.sd_s2[e])
        dx = D.pos[b2, 0] + r2[0] - D.pos[b1, 0] - r1[0]
        dy = D.pos[b2, 1] + r2[1] - D.pos[b1, 1] - r1[1]
        dz = D.pos[b2, 2] + r2[2] - D.pos[b1, 2] - r1[2] if d == 3 else 0.0
        length = np.sqrt(dx * dx + dy * dy + dz * dz)
        scale = length if length > 1e-12 else 1.0
        ux, uy, uz = dx / scale, dy / scale, dz / scale
        v1 = _point_velocity(F, D, b1, r1)
        v2 = _point_velocity(F, D, b2, r2)
        rate = ux * (v2[0] - v1[0]) + uy * (v2[1] - v1[1]) + uz * (v2[2] - v1[2])
        for out, magnitude in ((Qc, F.sd_k[e] * (length - F.sd_rest[e])), (Qn, F.sd_c[e] * rate)):
            if magnitude == 0.0:
                continue
            fx, fy, fz = -magnitude * ux, -magnitude * uy, -magnitude * uz
            _point_force(F, D, out, b1, r1[0], r1[1], r1[2], fx, fy, fz, -1.0)
            _point_force(F, D, out, b2, r2[0], r2[1], r2[2], fx, fy, fz, 1.0)
    # applied forces and torques: expressions of t and the body's state (mbsim.model.forces.applied)
    for e in range(F.ld_body.shape[0]):
        b = F.ld_body[e]
        regs = D.regs
        regs[0] = t
        if d == 3:
            for a in range(3):
                regs[1 + a] = D.pos[b, a]
                regs[4 + a] = D.vel[b, a]
                regs[7 + a] = D.omega[b, a]
        else:
            regs[1], regs[2], regs[3] = D.pos[b, 0], D.pos[b, 1], D.angle[b]
            regs[4], regs[5], regs[6] = D.vel[b, 0], D.vel[b, 1], D.omega2[b]
        vals = D.vec3
        for a in range(3):  # components past the load's own (-1) are zero
            vals[a] = expression(F, D, F.ld_expr[e, a]) if F.ld_expr[e, a] >= 0 else 0.0
        R = D.rot
        if F.ld_body_frame[e] and d == 3:
            wx = R[b, 0, 0] * vals[0] + R[b, 0, 1] * vals[1] + R[b, 0, 2] * vals[2]
            wy = R[b, 1, 0] * vals[0] + R[b, 1, 1] * vals[1] + R[b, 1, 2] * vals[2]
            wz = R[b, 2, 0] * vals[0] + R[b, 2, 1] * vals[1] + R[b, 2, 2] * vals[2]
        elif F.ld_body_frame[e] and not F.ld_torque[e]:
            wx = R[b, 0, 0] * vals[0] + R[b, 0, 1] * vals[1]
            wy = R[b, 1, 0] * vals[0] + R[b, 1, 1] * vals[1]
            wz = 0.0
        else:
            wx, wy, wz = vals[0], vals[1], vals[2]
        if F.ld_torque[e]:
            if d == 3:
                Qn[6 * b + 3] += R[b, 0, 0] * wx + R[b, 1, 0] * wy + R[b, 2, 0] * wz
                Qn[6 * b + 4] += R[b, 0, 1] * wx + R[b, 1, 1] * wy + R[b, 2, 1] * wz
                Qn[6 * b + 5] += R[b, 0, 2] * wx + R[b, 1, 2] * wy + R[b, 2, 2] * wz
            else:
                Qn[3 * b + 2] += vals[0]
        else:
            r = _body_point(F, D, b, F.ld_point[e])
            _point_force(F, D, Qn, b, r[0], r[1], r[2], wx, wy, wz, 1.0)


@njit(**_JIT)
def block_diagonal_times(F, blocks, x, out):
    """out = B x (nv,) for a block-diagonal B given by its (nbody, w, w) blocks."""
    w = 6 if F.dim == 3 else 3
    for b in range(F.nbody):
        for a in range(w):
            s = 0.0
            for m in range(w):
                s += blocks[b, a, m] * x[w * b + m]
            out[w * b + a] = s


@njit(inline="always")
def inverse_mass_times(F, x, out):
    """out = M^-1 x (nv,), block by block."""
    block_diagonal_times(F, F.body_inv_mass, x, out)


@njit(inline="always")
def row_bodies(F, r):
    """The two bodies of constraint row r, each once (nbody: none)."""
    bi, bj = F.row_bi[r], F.row_bj[r]
    return bi, (bj if bj != bi else F.nbody)


@njit(inline="always")
def row_dot(F, J, r, x):
    """J[r] . x over the column blocks of row r's two bodies (the rest of the row is zero)."""
    w = 6 if F.dim == 3 else 3
    s = 0.0
    for b in row_bodies(F, r):
        if b < F.nbody:
            for m in range(w):
                s += J[r, w * b + m] * x[w * b + m]
    return s
