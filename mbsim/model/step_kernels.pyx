"""Compiled stages of a right-hand side over a FlatModel, writing into a FlatData.

One kernel per stage (MuJoCo's pipeline): body frames -> applied and inertial forces ->
constraint values, Jacobian and acceleration right side, over the primitive kernels
(mbsim.model.kernels ``*_at``), allocating nothing. The constraint rows exist here once:
Python's single evaluations (mbsim.model.constraints: constraint_values, constraint_residual,
the joint springs' coordinates) run them through the def entry constraint_rows. Declared in
step_kernels.pxd (with the inline row helpers row_nbody, row_body, row_has_body, row_dot).

Symbols as in mbsim.model.constraints: phi = value - offset - c(t), J with respect to the
velocities (rotational columns in body axes), gamma = -bias + c''(t), phi_t = -c'(t).
"""

from libc.math cimport M_PI

import numpy as np

from mbsim.model.expr_kernel cimport _mod, program_value
from mbsim.model.contact.compliant_kernels cimport compliant_forces_into
from mbsim.model.force_kernels cimport loads_at, spring_damper_potential_at, spring_dampers_at
from mbsim.model.signal_kernels cimport signals_at
from mbsim.model.joint_force_kernels cimport actuator_forces_at, coordinate_rates_at, joint_forces_at, unwrap_at
# the primitive kinds of the flat table (kernels.pxd; mbsim.model.flat checks its own against them)
from mbsim.model.kernels cimport (
    ANGLE2,
    ANGLE3,
    COUPLING,
    DOT1_3,
    DOT2_3,
    POINT2,
    POINT3,
    angle2_at,
    angle3_at,
    coupling_at,
    dot1_3_at,
    dot2_2_at,
    dot2_3_at,
    frames2_into,
    frames3_into,
    point2_at,
    point3_at,
    vec3,
)


# Body frames of (q, v) into D (see FlatData).
cdef void frames_into(FlatModel F, FlatData D, const double[::1] q, const double[::1] v) noexcept nogil:
    if F.dim == 3:
        frames3_into(q, v, F.nbody, D.pos, D.rot, D.vel, D.omega_body, D.omega)
    else:
        frames2_into(q, v, F.nbody, D.pos, D.rot, D.vel, D.omega2, D.angle)


# Value of expression ``index`` of the model's programs (variables already in D.regs).
cdef double expression(FlatModel F, FlatData D, Py_ssize_t index) noexcept nogil:
    return program_value(&F.prog_op[0], &F.prog_dst[0], &F.prog_args[0, 0], &F.prog_imm[0], &F.prog_start[0],
                         &F.prog_stop[0], &F.prog_result[0], index, &D.regs[0])


# local vector c of item p of a primitive table (n, 3, 3)
cdef inline vec3 _vec(const double[:, :, ::1] vec, Py_ssize_t p, Py_ssize_t c) noexcept nogil:
    return (vec[p, c, 0], vec[p, c, 1], vec[p, c, 2])


# Evaluate primitive p of a table into D's scratch row.
cdef inline void _primitive_row(FlatData D, long long kind, Py_ssize_t i, Py_ssize_t j,
                                const double[:, :, ::1] vec, Py_ssize_t p) noexcept nogil:
    if kind == POINT3:
        point3_at(D.pos, D.rot, D.omega, i, j, _vec(vec, p, 0), _vec(vec, p, 1),
                  D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias, 0)
    elif kind == DOT1_3:
        dot1_3_at(D.rot, D.omega, i, j, _vec(vec, p, 0), _vec(vec, p, 1),
                  D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias, 0)
    elif kind == DOT2_3:
        dot2_3_at(D.pos, D.rot, D.vel, D.omega, i, j, _vec(vec, p, 0), _vec(vec, p, 1), _vec(vec, p, 2),
                  D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias, 0)
    elif kind == ANGLE3:
        angle3_at(D.rot, D.omega, i, j, _vec(vec, p, 0), _vec(vec, p, 1), _vec(vec, p, 2),
                  D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias, 0)
    elif kind == POINT2:
        point2_at(D.pos, D.rot, D.omega2, i, j, _vec(vec, p, 0), _vec(vec, p, 1),
                  D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias, 0)
    elif kind == ANGLE2:
        angle2_at(D.angle, i, j, D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias, 0)
    else:  # DOT2_2
        dot2_2_at(D.pos, D.rot, D.vel, D.omega2, i, j, _vec(vec, p, 0), _vec(vec, p, 1), _vec(vec, p, 2),
                  D.row_val, D.row_jac_i, D.row_jac_j, D.row_bias, 0)


# Row r of J from a coupling's four body blocks (parts p and p + 1, the scratch rows 0 and 1 of
# coupling_at): blocks of a body that appears twice add; ``blocks``: J is constraint_blocks_into's
# Jb, block `side` of the row's bodies (row_body) in columns [side w, (side + 1) w).
cdef inline void _coupling_blocks(FlatModel F, double[:, ::1] J, Py_ssize_t r, const long long[::1] bi,
                                  const long long[::1] bj, Py_ssize_t p, const double[:, :, ::1] rJi,
                                  const double[:, :, ::1] rJj, bint blocks) noexcept nogil:
    cdef Py_ssize_t nb = F.nbody
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t side, k, b, col, m
    for side in range(row_nbody(F, r)):
        b = row_body(F, r, side)
        if b < nb:
            col = side * w if blocks else b * w
            for m in range(w):
                J[r, col + m] = 0.0
    # parts a then b, body i then j of each: a body shared by both parts sums in this order
    for k in range(4):
        b = bi[p + k // 2] if k % 2 == 0 else bj[p + k // 2]
        if b >= nb:
            continue
        col = b * w
        if blocks:
            for side in range(row_nbody(F, r)):
                if row_body(F, r, side) == b:
                    col = side * w
        for m in range(w):
            J[r, col + m] += rJi[k // 2, 0, m] if k % 2 == 0 else rJj[k // 2, 0, m]


# phi, phi_t, gamma and the dense Jacobian rows of one primitive table (constraints or spring
# coordinates) at time t; J's columns of bodies a row does not touch are left as they are (zero
# since allocation: the structure never changes). ``blocks``: J is (rows, 2 w) instead, each row's
# body i block in columns [0, w) and body j's in [w, 2 w) (memory linear in the rows).
cdef void primitives_into(FlatModel F, FlatData D, double t, const long long[::1] kind, const long long[::1] bi,
                          const long long[::1] bj, const double[:, :, ::1] vec, const long long[::1] row,
                          const long long[::1] nrow, const double[:, ::1] offset, const long long[::1] drive,
                          const long long[::1] wrap, double[::1] phi, double[::1] phi_t, double[::1] gamma,
                          double[:, ::1] J, bint blocks=False) noexcept nogil:
    cdef Py_ssize_t nb = F.nbody
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef double[:, ::1] rv = D.row_val, rb = D.row_bias
    cdef double[:, :, ::1] rJi = D.row_jac_i, rJj = D.row_jac_j
    cdef Py_ssize_t p, i, j, r0, a, m, ci, cj
    cdef double c, c1, c2, target, residual, bias
    for p in range(kind.shape[0]):
        if nrow[p] == 0:  # a coupling's part: evaluated with its coupling, the entry before
            continue
        i, j = bi[p], bj[p]
        if kind[p] == COUPLING:  # parts p + 1, p + 2; offset: (the coupling's, its ratio)
            coupling_at(D.pos, D.rot, D.vel, D.omega, D.omega2, D.angle, kind, bi, bj, vec, offset, wrap, p + 1,
                        offset[p, 1], 0.0, rv, rJi, rJj, rb, 0)
        else:
            _primitive_row(D, kind[p], i, j, vec, p)
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
            if wrap[p]:  # Python's float % (the sign of 2 pi), not C's fmod
                residual = _mod(residual + M_PI, 2.0 * M_PI) - M_PI
            phi[r0 + a] = residual
            bias = rb[0, a] - c2 if (a == 0 and drive[p] >= 0) else rb[0, a]
            phi_t[r0 + a] = -c1 if a == 0 else 0.0
            gamma[r0 + a] = -bias
            if kind[p] == COUPLING:
                _coupling_blocks(F, J, r0, bi, bj, p + 1, rJi, rJj, blocks)
                continue
            ci = 0 if blocks else i * w
            cj = w if blocks else j * w
            if i < nb:
                for m in range(w):
                    J[r0 + a, ci + m] = rJi[0, a, m]
            if j < nb:
                for m in range(w):
                    J[r0 + a, cj + m] = rJj[0, a, m]


# Phi, Phi_t, gamma and J of every joint equation into D.phi, D.phi_t, D.gamma, D.J.
cdef void constraints_into(FlatModel F, FlatData D, double t) noexcept nogil:
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


# Phi, Phi_t, gamma of every joint equation into D.phi, D.phi_t, D.gamma and each row's body
# blocks of J into Jb (nc, 2 w; 4 w for a model with couplings): columns [0, w) of body F.row_bi[r],
# [w, 2 w) of F.row_bj[r], then a coupling's row_bk, row_bl (no dense J: the recursive method's
# diagnostics at thousands of bodies, which has no couplings; row_blocks_dot reads it).
cdef void constraint_blocks_into(FlatModel F, FlatData D, double t, double[:, ::1] Jb) noexcept nogil:
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
        Jb,
        True,
    )


# A Python Frames' arrays (mbsim.model.model.Frames, the ground included) into D's frame buffers;
# the 2D frames fill the upper-left part of D's 3D layout (the 2D kernels read no more).
cdef load_frames(FlatModel F, FlatData D, frames):
    cdef Py_ssize_t d = F.dim, n = F.nbody + 1
    cdef Py_ssize_t b, a, c
    cdef const double[:, :] pos, vel, om3
    cdef const double[:, :, :] rot
    cdef const double[:] om2, ang
    pos, vel, rot = frames.pos, frames.vel, frames.rot
    om3 = frames.omega if d == 3 else frames.pos  # (2D: omega is checked below)
    if (pos.shape[0] != n or pos.shape[1] != d or vel.shape[0] != n or vel.shape[1] != d or rot.shape[0] != n
            or rot.shape[1] != d or rot.shape[2] != d or om3.shape[0] != n or om3.shape[1] != d):
        raise ValueError(f"constraint_rows: expected frames of {n} bodies (the ground included), {d}D")
    # the 2D frames fill the upper-left part of D's 3D layout (the 2D kernels read no more)
    for b in range(n):
        for a in range(d):
            D.pos[b, a] = pos[b, a]
            D.vel[b, a] = vel[b, a]
            for c in range(d):
                D.rot[b, a, c] = rot[b, a, c]
    if d == 3:
        for b in range(n):
            for a in range(3):
                D.omega[b, a] = om3[b, a]
        if frames.omega_body is not None:
            om3 = frames.omega_body
            if om3.shape[0] != n or om3.shape[1] != 3:
                raise ValueError(f"constraint_rows: expected frames of {n} bodies (the ground included)")
            for b in range(n):
                for a in range(3):
                    D.omega_body[b, a] = om3[b, a]
    else:
        om2, ang = frames.omega, frames.angle
        if om2.shape[0] != n or ang.shape[0] != n:
            raise ValueError(f"constraint_rows: expected frames of {n} bodies (the ground included)")
        for b in range(n):
            D.omega2[b] = om2[b]
            D.angle[b] = ang[b]


# Python's one entry to the rows (mbsim.model.constraints: constraint_values, constraint_residual,
# coordinate_rows): the frames of one state copied into D (``frames``: a mbsim.model.model.Frames, 2D
# arrays d columns wide), or computed from ``q`` at zero velocity (frames None), then
# primitives_into over the constraint table, or over the joint-coordinate table (``coordinates``), its
# deflections unwrapped against ``reference`` (joint_force_kernels.unwrap_at), into the caller's phi,
# phi_t, gamma and J (dense nc x nv, or the rows' body blocks: ``blocks``, constraint_blocks_into's
# layout). The GIL is held throughout: D is scratch no other call reads, so one D serves a model's
# every thread.
def constraint_rows(FlatModel F, FlatData D, double t, frames, double[::1] phi, double[::1] phi_t,
                    double[::1] gamma, double[:, ::1] J, bint blocks, bint coordinates=False,
                    double[::1] reference=None, q=None):
    cdef Py_ssize_t d = F.dim, n = F.nbody + 1, nrows = F.njc if coordinates else F.nc
    cdef Py_ssize_t b
    cdef const double[::1] q_
    if phi.shape[0] != nrows or phi_t.shape[0] != nrows or gamma.shape[0] != nrows or J.shape[0] != nrows:
        raise ValueError(f"constraint_rows: expected {nrows} rows")
    # J's columns: nv, or the body blocks, 2 w a row (4 w when a coupling's row has four bodies)
    cdef Py_ssize_t ncol = F.nv
    if blocks:
        ncol = 2 * (6 if d == 3 else 3)
        for b in range(F.nc if not coordinates else 0):
            if F.row_bk[b] < F.nbody:
                ncol = 2 * ncol
                break
    if J.shape[1] != ncol:
        raise ValueError(f"constraint_rows: expected J of {ncol} columns")
    if frames is None:  # frames of (q, 0) by the compiled kinematics (model.frames' own)
        q_ = np.ascontiguousarray(q, dtype=np.float64)
        if q_.shape[0] != F.nq:
            raise ValueError(f"constraint_rows: expected q of {F.nq}")
        frames_into(F, D, q_, np.zeros(F.nv))
    else:
        load_frames(F, D, frames)
    if coordinates:
        primitives_into(F, D, t, F.jc_kind, F.jc_bi, F.jc_bj, F.jc_vec, F.jc_row, F.jc_nrow, F.jc_offset,
                        F.jc_drive, F.jc_wrap, phi, phi_t, gamma, J, blocks)
        if reference is not None:
            if reference.shape[0] != nrows:
                raise ValueError(f"constraint_rows: expected a reference of {nrows}")
            unwrap_at(F.jc_row, F.jc_nrow, F.jc_wrap, reference, phi)
    else:
        primitives_into(F, D, t, F.prim_kind, F.prim_bi, F.prim_bj, F.prim_vec, F.prim_row, F.prim_nrow,
                        F.prim_offset, F.prim_drive, F.prim_wrap, phi, phi_t, gamma, J, blocks)


# The joint coordinates, unwrapped against D.jc_ref (joint_force_kernels.unwrap_at), into D.jc_value
# and their Jacobian in body blocks into D.jc_jac (ncoord, 2 w; joint_force_kernels.pxd); the frames of
# the state are in D already.
cdef void coordinate_values_into(FlatModel F, FlatData D, double t) noexcept nogil:
    if F.njc == 0:
        return
    primitives_into(F, D, t, F.jc_kind, F.jc_bi, F.jc_bj, F.jc_vec, F.jc_row, F.jc_nrow, F.jc_offset, F.jc_drive,
                    F.jc_wrap, D.jc_value, D.jc_rate, D.jc_bias, D.jc_jac, True)
    unwrap_at(F.jc_row, F.jc_nrow, F.jc_wrap, D.jc_ref, D.jc_value)


# The joint coordinates (coordinate_values_into) and their rates J v into D.jc_qd.
cdef void coordinates_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil:
    if F.njc == 0:
        return
    coordinate_values_into(F, D, t)
    coordinate_rates_at(F.nbody, 6 if F.dim == 3 else 3, F.jc_bi, F.jc_bj, F.jc_row, F.jc_nrow, D.jc_jac, v, D.jc_qd)


# The signals (mbsim.model.signals) into their registers, from the frames, coordinates and
# actuator forces in D.
cdef void signals_into(FlatModel F, FlatData D) noexcept nogil:
    if F.nsig:
        signals_at(F.dim, D.pos, D.rot, D.vel, D.omega, D.omega2, D.angle, D.jc_value, D.jc_qd, D.act_force,
                   F.sig_kind, F.sig_index, F.sig_comp, F.dist_body, F.dist_point, F.sig_first, D.regs)


# The forces on the joint coordinates (coordinates, signals and element forces done): the
# actuators' into D.act_force and D.jc_tau, then every row's through J^T into Qc (springs) and Qn;
# returns the springs' potential.
cdef double joint_forces_into(FlatModel F, FlatData D, double t, double[::1] Qc, double[::1] Qn,
                              bint nonsmooth) noexcept nogil:
    if F.njc == 0:
        return 0.0
    if F.nact:
        D.regs[0] = t
        actuator_forces_at(F, D)
    return joint_forces_at(F, D, Qc, Qn, nonsmooth)


# The outputs' values (mbsim.model.signals) into out[start:], after a force evaluation at the
# state (the actuator forces in D): the signals again, with the actuators' forces; returns the
# column after them.
cdef Py_ssize_t outputs_into(FlatModel F, FlatData D, double t, double[::1] out, Py_ssize_t start) noexcept nogil:
    cdef Py_ssize_t k
    D.regs[0] = t
    signals_into(F, D)
    for k in range(F.nout):
        out[start + k] = expression(F, D, F.out_expr[k])
    return start + F.nout


# Generalized forces Q (all) and Qn (non-conservative) into D.Q, D.Qn; returns the power of the
# non-conservative part, Qn . v (mbsim.model.dynamics.generalized_forces).
# The frames of the state are in D already. Order: gravity, spring-dampers, applied loads,
# joint springs (applied_forces_into), then the gyroscopic term -omega x (I omega) (3D, body axes).
cdef double forces_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil:
    return _forces(F, D, t, v, False)


cdef double nonsmooth_forces_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil:
    return _forces(F, D, t, v, True)


# forces_into (nonsmooth: without the compliant stops and the joint friction: joint_forces_into)
cdef double _forces(FlatModel F, FlatData D, double t, const double[::1] v, bint nonsmooth) noexcept nogil:
    cdef double power = _applied_forces(F, D, t, v, nonsmooth)
    cdef Py_ssize_t b
    cdef double Iw0, Iw1, Iw2
    cdef double[::1] Qc
    cdef const double[:, ::1] o
    cdef const double[:, :, ::1] I
    if F.dim == 3:  # gyroscopic term -omega x (I omega), body axes
        Qc = D.Q
        o = D.omega_body
        I = F.body_inertia
        for b in range(F.nbody):
            Iw0 = I[b, 0, 0] * o[b, 0] + I[b, 0, 1] * o[b, 1] + I[b, 0, 2] * o[b, 2]
            Iw1 = I[b, 1, 0] * o[b, 0] + I[b, 1, 1] * o[b, 1] + I[b, 1, 2] * o[b, 2]
            Iw2 = I[b, 2, 0] * o[b, 0] + I[b, 2, 1] * o[b, 1] + I[b, 2, 2] * o[b, 2]
            Qc[6 * b + 3] += -(o[b, 1] * Iw2 - o[b, 2] * Iw1)
            Qc[6 * b + 4] += -(o[b, 2] * Iw0 - o[b, 0] * Iw2)
            Qc[6 * b + 5] += -(o[b, 0] * Iw1 - o[b, 1] * Iw0)
    return power


# Gravity, force elements and joint springs (mbsim.model.dynamics.applied_forces): all of them
# into D.Q, the non-conservative part into D.Qn; returns Qn . v.
cdef double applied_forces_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil:
    return _applied_forces(F, D, t, v, False)


# applied_forces_into (nonsmooth: as joint_forces_into's)
cdef double _applied_forces(FlatModel F, FlatData D, double t, const double[::1] v, bint nonsmooth) noexcept nogil:
    cdef Py_ssize_t nb = F.nbody, nv = F.nv, d = F.dim
    cdef Py_ssize_t w = 6 if d == 3 else 3
    cdef Py_ssize_t k, b, a
    cdef double power
    cdef double[::1] Qc = D.Q, Qn = D.Qn
    for k in range(nv):
        Qc[k] = 0.0
        Qn[k] = 0.0
    for b in range(nb):
        for a in range(d):
            Qc[w * b + a] = F.body_weight[b, a]
    # the joint coordinates and the signals first: the loads' and actuators' expressions read them
    if F.jc_forces:
        coordinates_into(F, D, t, v)
    signals_into(F, D)
    element_forces_into(F, D, t, Qc, Qn)
    # the forces on the joint coordinates (joint_force_kernels): springs into Qc, the rest into Qn (the
    # smooth methods' compliant stops and regularised friction unless nonsmooth)
    if F.jc_forces:
        joint_forces_into(F, D, t, Qc, Qn, nonsmooth)
    power = 0.0
    for k in range(nv):
        power += Qn[k] * v[k]
        Qc[k] += Qn[k]
    return power


# Add the force elements' generalized forces (body axes) to Qc (conservative: spring-dampers'
# elastic part, the compliant contacts' elastic part) and Qn (their damping, the applied loads, the
# contacts' friction); the frames of the state are in D already. The elements' one implementation
# is mbsim.model.force_kernels (the force groups' evaluate runs it too), the compliant contacts'
# mbsim.model.contact.compliant_kernels (their counters and potential left in D.cc_*).
cdef void element_forces_into(FlatModel F, FlatData D, double t, double[::1] Qc, double[::1] Qn) noexcept nogil:
    if F.ncc:
        compliant_forces_into(F, D, Qc, Qn)
    if F.sd_k.shape[0]:
        spring_dampers_at(F.dim, F.nbody, D.pos, D.rot, D.vel, D.omega, D.omega2, F.sd_b1, F.sd_b2, F.sd_s1,
                          F.sd_s2, F.sd_k, F.sd_c, F.sd_rest, Qc, Qn)
    if F.ld_body.shape[0]:
        loads_at(F.dim, F.nbody, D.pos, D.rot, D.vel, D.omega, D.omega2, D.angle, t, F.ld_body, F.ld_point,
                 F.ld_body_frame, F.ld_torque, F.ld_expr, F.prog_op, F.prog_dst, F.prog_args, F.prog_imm,
                 F.prog_start, F.prog_stop, F.prog_result, D.regs, Qn)


# out = B x (nv,) for a block-diagonal B given by its (nbody, w, w) blocks.
cdef void block_diagonal_times(FlatModel F, const double[:, :, ::1] blocks, const double[::1] x,
                               double[::1] out) noexcept nogil:
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t b, a, m
    cdef double s
    for b in range(F.nbody):
        for a in range(w):
            s = 0.0
            for m in range(w):
                s += blocks[b, a, m] * x[w * b + m]
            out[w * b + a] = s


# out = M^-1 x (nv,), block by block.
cdef void inverse_mass_times(FlatModel F, const double[::1] x, double[::1] out) noexcept nogil:
    block_diagonal_times(F, F.body_inv_mass, x, out)


# The compiled force elements and the forces on the joint coordinates at one state given by its
# Frames (Python's single evaluations: mbsim.model.dynamics.applied_forces) added into Qc
# (elastic) and Qn (the rest); ``reference``: the run's unwrapping state (Data.coordinate_reference).
# Returns their potential (spring-dampers, compliant contacts and joint springs). The actuators' forces, the
# coordinates and the stop and friction forces are left in D (read right after, holding the GIL).
# ``nonsmooth``: the LCP methods' forces, without the compliant stops and the Coulomb/Stribeck friction.
def element_forces(FlatModel F, FlatData D, double t, frames, const double[::1] v, reference, double[::1] Qc,
                   double[::1] Qn, bint nonsmooth=False) -> float:
    cdef Py_ssize_t r
    cdef double potential
    cdef const double[::1] ref
    if v.shape[0] != F.nv or Qc.shape[0] != F.nv or Qn.shape[0] != F.nv:
        raise ValueError(f"element_forces: expected v, Qc, Qn of {F.nv}")
    load_frames(F, D, frames)
    if reference is not None:
        ref = reference
        if ref.shape[0] != F.njc:
            raise ValueError(f"element_forces: expected a reference of {F.njc}")
        for r in range(F.njc):
            D.jc_ref[r] = ref[r]
    with nogil:
        coordinates_into(F, D, t, v)
        signals_into(F, D)
        element_forces_into(F, D, t, Qc, Qn)
        potential = joint_forces_into(F, D, t, Qc, Qn, nonsmooth)
        if F.sd_k.shape[0]:
            potential += spring_damper_potential_at(F.dim, D.pos, D.rot, F.sd_b1, F.sd_b2, F.sd_s1, F.sd_s2, F.sd_k,
                                                    F.sd_rest)
        if F.ncc:
            potential += D.cc_total[2]
    return potential


# The outputs' values (nout,) right after element_forces at the same state on the same D.
def output_values(FlatModel F, FlatData D, double t):
    out = np.zeros(F.nout)
    cdef double[::1] view = out
    with nogil:
        outputs_into(F, D, t, view, 0)
    return out
