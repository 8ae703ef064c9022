# Joint springs, compiled once (mbsim.model.dynamics.SpringGroups): a spring and a damper on a
# joint coordinate, f = -k (coordinate - rest) - c (coordinate rate), acting through the
# coordinate's Jacobian.
#
# The coordinates are a table of primitive items (mbsim.model.flat: jc_*), item p giving rows
# row[p] .. row[p] + nrow[p] - 1 between bodies bi[p] and bj[p] (extended: nbody = the ground).
# The deflections (coordinate - rest, in value) and their Jacobian come from the constraint
# primitives' evaluation; the Jacobian in body blocks, jac (ncoord, 2 w): row r's block of body
# bi in columns [0, w), of body bj in [w, 2 w) (w = 6 in 3D, 3 in 2D; rotational columns in body
# axes), so that its memory and work are linear in the springs whatever the model's size.
#
# Defined here, inline, so that the compiled step (step_kernels.spring_deflections_into and
# applied_forces_into) and the records (record_kernels) compile them into their own loops; the
# Python evaluation (SpringGroups) runs the same kernels through spring_kernels.pyx's def wrappers.

from libc.math cimport M_PI, exp, fabs

from mbsim.model.expr_kernel cimport _mod, run_expression


# 3D revolute angles come out of atan2 in (-pi, pi]: a torsion spring wound past half a turn must
# not snap back, so a wrapped item's deflections are taken within pi of ref, the unwrapped
# deflection of the last accepted step (the run's state: Data.spring_reference, which the
# compiled step's FlatData.jc_ref views). Python's float % (the sign of 2 pi), not C's fmod.
cdef inline void unwrap_at(const long long[::1] row, const long long[::1] nrow, const long long[::1] wrap,
                           const double[::1] ref, double[::1] value) noexcept nogil:
    cdef Py_ssize_t p, a, r
    for p in range(row.shape[0]):
        if wrap[p]:
            for a in range(nrow[p]):
                r = row[p] + a
                value[r] = ref[r] + _mod(value[r] - ref[r] + M_PI, 2.0 * M_PI) - M_PI


# The coordinates' rates qd = J v (body blocks, above), lower body first as a dense row sums.
cdef inline void coordinate_rates_at(Py_ssize_t nbody, Py_ssize_t w, const long long[::1] bi,
                                     const long long[::1] bj, const long long[::1] row, const long long[::1] nrow,
                                     const double[:, ::1] jac, const double[::1] v, double[::1] qd) noexcept nogil:
    cdef Py_ssize_t p, a, r, side, b, col, m
    cdef Py_ssize_t body[2]
    cdef Py_ssize_t block[2]
    cdef double rate
    for p in range(row.shape[0]):
        if bi[p] <= bj[p]:
            body[0], body[1], block[0], block[1] = bi[p], bj[p], 0, w
        else:
            body[0], body[1], block[0], block[1] = bj[p], bi[p], w, 0
        for a in range(nrow[p]):
            r = row[p] + a
            rate = 0.0
            for side in range(2):
                b, col = body[side], block[side]
                if b < nbody:
                    for m in range(w):
                        rate += jac[r, col + m] * v[w * b + m]
            qd[r] = rate


# The actuators (mbsim.model.actuators) at coordinates q, rates qd: each one's force f by its law
# on its length L = gear q and rate Ld = gear qd (0 value, 1 position servo kp (target - L) +
# kd (rate - Ld), 2 velocity servo kd (target - Ld); value / target expression expr[a], the
# target's rate expression rate_expr[a]), clamped to [lower, upper], into force[a]; gear f added to
# tau[row[a]] (zeroed here first), each row's sum then clamped to +-effort. regs[0] = t already.
cdef inline void actuator_forces_at(const long long[::1] act_row, const long long[::1] law,
                                    const long long[::1] expr, const long long[::1] rate_expr,
                                    const double[::1] kp, const double[::1] kd, const double[::1] gear,
                                    const double[::1] lower, const double[::1] upper, const double[::1] effort,
                                    const double[::1] q, const double[::1] qd, const long long[::1] op,
                                    const long long[::1] dst, const long long[:, ::1] args, const double[::1] imm,
                                    const long long[::1] start, const long long[::1] stop,
                                    const long long[::1] result, double[::1] regs, double[::1] force,
                                    double[::1] tau) noexcept nogil:
    cdef Py_ssize_t a, r
    cdef double f, length, rate
    for r in range(tau.shape[0]):
        tau[r] = 0.0
    for a in range(act_row.shape[0]):
        r = act_row[a]
        length, rate = gear[a] * q[r], gear[a] * qd[r]
        f = run_expression(op, dst, args, imm, start, stop, result, expr[a], regs)
        if law[a] == 1:
            f = kp[a] * (f - length) + kd[a] * (run_expression(op, dst, args, imm, start, stop, result, rate_expr[a],
                                                               regs) - rate)
        elif law[a] == 2:
            f = kd[a] * (f - rate)
        # forcerange, then the transmission (MuJoCo's order)
        if f < lower[a]:
            f = lower[a]
        elif f > upper[a]:
            f = upper[a]
        force[a] = f
        tau[r] += gear[a] * f
    for r in range(tau.shape[0]):
        if tau[r] > effort[r]:
            tau[r] = effort[r]
        elif tau[r] < -effort[r]:
            tau[r] = -effort[r]


# Generalized forces of the forces on the joint coordinates (mbsim.model.joint_forces) at
# coordinates q (unwrapped), rates qd and Jacobian jac (body blocks, above): per row the spring's
# elastic part -k (q - rest) through J^T into Qc; into Qn the damper -c qd, the actuators' tau, the
# smooth methods' compliant stop beyond a limit (stop_k, stop_c: a linear spring-damper) and the
# regularised friction, whose values go to limit_force, friction_force. With ``nonsmooth`` (the LCP
# methods, timestepping and event_driven, whose own rows hold the stops and the Coulomb/Stribeck
# friction exactly) the stop and the Coulomb/Stribeck part are left out: viscous friction stays.
# Returns the springs' potential sum 1/2 k (q - rest)^2.
cdef inline double joint_forces_at(Py_ssize_t nbody, Py_ssize_t w, const long long[::1] bi,
                                   const long long[::1] bj, const long long[::1] row, const long long[::1] nrow,
                                   const double[::1] k, const double[::1] c, const double[::1] rest,
                                   const double[::1] lower, const double[::1] upper, const double[::1] stop_k,
                                   const double[::1] stop_c, const double[::1] coulomb, const double[::1] static,
                                   const double[::1] stribeck, const double[::1] viscous,
                                   const double[::1] smoothing, const double[::1] q, const double[::1] qd,
                                   const double[:, ::1] jac, const double[::1] tau, double[::1] limit_force,
                                   double[::1] friction_force, double[::1] Qc, double[::1] Qn,
                                   bint nonsmooth) noexcept nogil:
    cdef Py_ssize_t p, a, r, side, b, col, m
    cdef Py_ssize_t body[2]
    cdef Py_ssize_t block[2]
    cdef double elastic, other, stop, friction, slide, speed, ratio
    cdef double potential = 0.0
    for p in range(row.shape[0]):
        # the item's bodies in ascending order, with their blocks' first column in jac
        if bi[p] <= bj[p]:
            body[0], body[1], block[0], block[1] = bi[p], bj[p], 0, w
        else:
            body[0], body[1], block[0], block[1] = bj[p], bi[p], w, 0
        for a in range(nrow[p]):
            r = row[p] + a
            elastic = k[r] * (q[r] - rest[r])
            potential += 0.5 * elastic * (q[r] - rest[r])
            # the compliant stop, only beyond a limit
            stop = 0.0
            if not nonsmooth:
                if q[r] < lower[r]:
                    stop = stop_k[r] * (lower[r] - q[r]) - stop_c[r] * qd[r]
                elif q[r] > upper[r]:
                    stop = -stop_k[r] * (q[r] - upper[r]) - stop_c[r] * qd[r]
            # Coulomb with the Stribeck curve F(|qd|), viscous below the smoothing rate; viscous friction
            friction = -viscous[r] * qd[r]
            if (coulomb[r] > 0.0 or static[r] > 0.0) and not nonsmooth:
                speed = fabs(qd[r])
                slide = coulomb[r]
                if stribeck[r] > 0.0:
                    ratio = speed / stribeck[r]
                    slide += (static[r] - coulomb[r]) * exp(-ratio * ratio)
                friction -= slide * qd[r] / (speed if speed > smoothing[r] else smoothing[r])
            limit_force[r] = stop
            friction_force[r] = friction
            other = tau[r] - c[r] * qd[r] + stop + friction
            for side in range(2):
                b, col = body[side], block[side]
                if b < nbody:
                    for m in range(w):
                        Qc[w * b + m] -= jac[r, col + m] * elastic
                        Qn[w * b + m] += jac[r, col + m] * other
    return potential


# The joint springs' potential sum 1/2 k (q - rest)^2 (the records' energy; joint_forces_at returns it).
cdef inline double joint_spring_potential_at(const double[::1] k, const double[::1] rest,
                                             const double[::1] q) noexcept nogil:
    cdef Py_ssize_t r
    cdef double potential = 0.0
    for r in range(k.shape[0]):
        potential += 0.5 * k[r] * (q[r] - rest[r]) * (q[r] - rest[r])
    return potential
