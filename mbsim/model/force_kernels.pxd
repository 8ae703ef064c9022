# The force elements, compiled once (mbsim.model.forces): spring-dampers and applied loads.
#
# Each element type is one kernel over the body frames of a state, as the Python Frames
# (mbsim.model.model) and the compiled step's FlatData hold them: pos (nbody+1, >= d), rot
# (nbody+1, d, d) or (nbody+1, 3, 3) of which 2D reads the upper-left block, vel (nbody+1, >= d),
# omega (nbody+1, 3) in world axes (3D) or omega2 (nbody+1,) (2D), angle (nbody+1,) (2D), the
# ground at index nbody. Generalized forces are added into flat vectors, w = 6 (3D: force, then
# torque in body axes) or 3 (2D: force, torque) per body; the ground's row is not written.
#
# Defined here, inline, so that the compiled step (step_kernels.element_forces_into) and the
# records (record_kernels) compile them into their own loops: a call across modules would go
# through a function pointer and copy its ~20 memoryview arguments by value (~5 kB) on every
# right-hand side. The force groups' evaluate runs the same kernels through force_kernels.pyx's
# def wrappers.

from libc.math cimport sqrt

from mbsim.model.expr_kernel cimport program_value
from mbsim.model.kernels cimport vec3


# Add sign * (force f at world offset r from body b's centre) to out (generalized, body axes).
cdef inline void _point_force(Py_ssize_t dim, Py_ssize_t nbody, const double[:, :, ::1] R, double[::1] out,
                              Py_ssize_t b, vec3 r, double fx, double fy, double fz, double sign) noexcept nogil:
    cdef double tx, ty, tz
    if b >= nbody:
        return
    if dim == 3:
        tx, ty, tz = r[1] * fz - r[2] * fy, r[2] * fx - r[0] * fz, r[0] * fy - r[1] * fx
        out[6 * b] += sign * fx
        out[6 * b + 1] += sign * fy
        out[6 * b + 2] += sign * fz
        out[6 * b + 3] += sign * (R[b, 0, 0] * tx + R[b, 1, 0] * ty + R[b, 2, 0] * tz)
        out[6 * b + 4] += sign * (R[b, 0, 1] * tx + R[b, 1, 1] * ty + R[b, 2, 1] * tz)
        out[6 * b + 5] += sign * (R[b, 0, 2] * tx + R[b, 1, 2] * ty + R[b, 2, 2] * tz)
    else:
        out[3 * b] += sign * fx
        out[3 * b + 1] += sign * fy
        out[3 * b + 2] += sign * (r[0] * fy - r[1] * fx)


# R_b s_e (world offset of a body-fixed point).
cdef inline vec3 _body_point(Py_ssize_t dim, const double[:, :, ::1] R, Py_ssize_t b, const double[:, ::1] s,
                             Py_ssize_t e) noexcept nogil:
    if dim == 3:
        return (
            R[b, 0, 0] * s[e, 0] + R[b, 0, 1] * s[e, 1] + R[b, 0, 2] * s[e, 2],
            R[b, 1, 0] * s[e, 0] + R[b, 1, 1] * s[e, 1] + R[b, 1, 2] * s[e, 2],
            R[b, 2, 0] * s[e, 0] + R[b, 2, 1] * s[e, 1] + R[b, 2, 2] * s[e, 2],
        )
    return (R[b, 0, 0] * s[e, 0] + R[b, 0, 1] * s[e, 1], R[b, 1, 0] * s[e, 0] + R[b, 1, 1] * s[e, 1], 0.0)


# Velocity of the body point at world offset r from body b's centre: v + omega x r.
cdef inline vec3 _point_velocity(Py_ssize_t dim, const double[:, ::1] vel, const double[:, ::1] w,
                                 const double[::1] w2, Py_ssize_t b, vec3 r) noexcept nogil:
    if dim == 3:
        return (
            vel[b, 0] + w[b, 1] * r[2] - w[b, 2] * r[1],
            vel[b, 1] + w[b, 2] * r[0] - w[b, 0] * r[2],
            vel[b, 2] + w[b, 0] * r[1] - w[b, 1] * r[0],
        )
    return (vel[b, 0] - w2[b] * r[1], vel[b, 1] + w2[b] * r[0], 0.0)


# The vector from body i's point s1[e] to body j's point s2[e] (world); the points' world offsets
# from the centres into r1, r2.
cdef inline vec3 _span(Py_ssize_t dim, const double[:, ::1] pos, const double[:, :, ::1] rot, Py_ssize_t i,
                       Py_ssize_t j, const double[:, ::1] s1, const double[:, ::1] s2, Py_ssize_t e, vec3 *r1,
                       vec3 *r2) noexcept nogil:
    r1[0] = _body_point(dim, rot, i, s1, e)
    r2[0] = _body_point(dim, rot, j, s2, e)
    return (
        pos[j, 0] + r2[0][0] - pos[i, 0] - r1[0][0],
        pos[j, 1] + r2[0][1] - pos[i, 1] - r1[0][1],
        pos[j, 2] + r2[0][2] - pos[i, 2] - r1[0][2] if dim == 3 else 0.0,
    )


# A spring-damper's force of the given magnitude along the unit vector u from body1's point to
# body2's, on body2 (body1 the opposite), added to out; nothing for a zero magnitude.
cdef inline void _line_force(Py_ssize_t dim, Py_ssize_t nbody, const double[:, :, ::1] R, double[::1] out,
                             Py_ssize_t b1, Py_ssize_t b2, vec3 r1, vec3 r2, vec3 u, double magnitude) noexcept nogil:
    cdef double fx, fy, fz
    if magnitude == 0.0:
        return
    fx, fy, fz = -magnitude * u[0], -magnitude * u[1], -magnitude * u[2]
    _point_force(dim, nbody, R, out, b1, r1, fx, fy, fz, -1.0)
    _point_force(dim, nbody, R, out, b2, r2, fx, fy, fz, 1.0)


# Spring-dampers (mbsim.model.forces.spring_damper): f = k (L - L0) + c dL/dt along the line from
# body1's point s1 to body2's s2 (body axes), on body2 (body1 the opposite); the elastic part into Qc,
# the damping into Qn. Returns the potential sum 1/2 k (L - L0)^2.
cdef inline double spring_dampers_at(Py_ssize_t dim, Py_ssize_t nbody, const double[:, ::1] pos,
                                     const double[:, :, ::1] rot, const double[:, ::1] vel, const double[:, ::1] omega,
                                     const double[::1] omega2, const long long[::1] b1, const long long[::1] b2,
                                     const double[:, ::1] s1, const double[:, ::1] s2, const double[::1] k,
                                     const double[::1] c, const double[::1] rest, double[::1] Qc,
                                     double[::1] Qn) noexcept nogil:
    cdef Py_ssize_t e, i, j
    cdef vec3 r1, r2, v1, v2, u, span
    cdef double length, scale, rate, stretch
    cdef double potential = 0.0
    for e in range(k.shape[0]):
        i, j = b1[e], b2[e]
        # the line from body1's point to body2's: length L, unit vector u (any for L = 0)
        span = _span(dim, pos, rot, i, j, s1, s2, e, &r1, &r2)
        length = sqrt(span[0] * span[0] + span[1] * span[1] + span[2] * span[2])
        scale = length if length > 1e-12 else 1.0
        u = (span[0] / scale, span[1] / scale, span[2] / scale)
        # dL/dt = u . (v2 - v1), the points' velocities
        v1 = _point_velocity(dim, vel, omega, omega2, i, r1)
        v2 = _point_velocity(dim, vel, omega, omega2, j, r2)
        rate = u[0] * (v2[0] - v1[0]) + u[1] * (v2[1] - v1[1]) + u[2] * (v2[2] - v1[2])
        # the elastic part k (L - L0) into Qc with its potential, the damping c dL/dt into Qn
        stretch = length - rest[e]
        potential += k[e] * (stretch * stretch)
        _line_force(dim, nbody, rot, Qc, i, j, r1, r2, u, k[e] * stretch)
        _line_force(dim, nbody, rot, Qn, i, j, r1, r2, u, c[e] * rate)
    return 0.5 * potential


# Applied forces and torques (mbsim.model.forces.applied) into Qn: components in world or body
# axes (body_frame), expression expr[e, a] of the programs (mbsim.scene.expr.compile_programs over
# VARIABLES, run on regs; -1: zero); a force at its body point (body axes), with its moment.
cdef inline void loads_at(Py_ssize_t dim, Py_ssize_t nbody, const double[:, ::1] pos, const double[:, :, ::1] R,
                          const double[:, ::1] vel, const double[:, ::1] omega, const double[::1] omega2,
                          const double[::1] angle, double t, const long long[::1] body, const double[:, ::1] point,
                          const long long[::1] body_frame, const long long[::1] torque, const long long[:, ::1] expr,
                          const long long[::1] op, const long long[::1] dst, const long long[:, ::1] args,
                          const double[::1] imm, const long long[::1] start, const long long[::1] stop,
                          const long long[::1] result, double[::1] regs, double[::1] Qn) noexcept nogil:
    cdef Py_ssize_t e, b, a
    cdef double vals[3]
    cdef double wx, wy, wz
    cdef vec3 r
    for e in range(body.shape[0]):
        b = body[e]
        # the variables of the body's state (VARIABLES), then the components' expressions
        regs[0] = t
        if dim == 3:
            for a in range(3):
                regs[1 + a] = pos[b, a]
                regs[4 + a] = vel[b, a]
                regs[7 + a] = omega[b, a]
        else:
            regs[1], regs[2], regs[3] = pos[b, 0], pos[b, 1], angle[b]
            regs[4], regs[5], regs[6] = vel[b, 0], vel[b, 1], omega2[b]
        for a in range(3):  # components past the load's own (-1) are zero
            vals[a] = program_value(&op[0], &dst[0], &args[0, 0], &imm[0], &start[0], &stop[0], &result[0],
                                    expr[e, a], &regs[0]) if expr[e, a] >= 0 else 0.0
        # world components: R_b vals for a body-frame force or 3D torque (a 2D torque is a scalar)
        if body_frame[e] and dim == 3:
            wx = R[b, 0, 0] * vals[0] + R[b, 0, 1] * vals[1] + R[b, 0, 2] * vals[2]
            wy = R[b, 1, 0] * vals[0] + R[b, 1, 1] * vals[1] + R[b, 1, 2] * vals[2]
            wz = R[b, 2, 0] * vals[0] + R[b, 2, 1] * vals[1] + R[b, 2, 2] * vals[2]
        elif body_frame[e] and not torque[e]:
            wx = R[b, 0, 0] * vals[0] + R[b, 0, 1] * vals[1]
            wy = R[b, 1, 0] * vals[0] + R[b, 1, 1] * vals[1]
            wz = 0.0
        else:
            wx, wy, wz = vals[0], vals[1], vals[2]
        # a torque in body axes (R_b^T world); a force at its point, with its moment
        if torque[e]:
            if b >= nbody:
                continue
            if dim == 3:
                Qn[6 * b + 3] += R[b, 0, 0] * wx + R[b, 1, 0] * wy + R[b, 2, 0] * wz
                Qn[6 * b + 4] += R[b, 0, 1] * wx + R[b, 1, 1] * wy + R[b, 2, 1] * wz
                Qn[6 * b + 5] += R[b, 0, 2] * wx + R[b, 1, 2] * wy + R[b, 2, 2] * wz
            else:
                Qn[3 * b + 2] += vals[0]
        else:
            r = _body_point(dim, R, b, point, e)
            _point_force(dim, nbody, R, Qn, b, r, wx, wy, wz, 1.0)


# The spring-dampers' potential alone, as spring_dampers_at gives it (the records' energy).
cdef inline double spring_damper_potential_at(Py_ssize_t dim, const double[:, ::1] pos, const double[:, :, ::1] rot,
                                              const long long[::1] b1, const long long[::1] b2, const double[:, ::1] s1,
                                              const double[:, ::1] s2, const double[::1] k,
                                              const double[::1] rest) noexcept nogil:
    cdef Py_ssize_t e
    cdef vec3 r1, r2, span
    cdef double stretch
    cdef double potential = 0.0
    for e in range(k.shape[0]):
        span = _span(dim, pos, rot, b1[e], b2[e], s1, s2, e, &r1, &r2)
        stretch = sqrt(span[0] * span[0] + span[1] * span[1] + span[2] * span[2]) - rest[e]
        potential += k[e] * (stretch * stretch)
    return 0.5 * potential
