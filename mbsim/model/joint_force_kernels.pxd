# The forces on the joint coordinates, compiled once (mbsim.model.joint_forces, mbsim.model.actuators):
# springs and dampers, the actuators, the smooth methods' compliant stops and regularised friction.
#
# The coordinates are a table of primitive items (FlatModel jc_*), item p giving rows row[p] ..
# row[p] + nrow[p] - 1 between bodies bi[p] and bj[p] (extended: nbody = the ground). Their values
# (the coordinates, unwrapped) and Jacobian come from the constraint primitives' evaluation; the
# Jacobian in body blocks, jac (ncoord, 2 w): row r's block of body bi in columns [0, w), of body
# bj in [w, 2 w) (w = 6 in 3D, 3 in 2D; rotational columns in body axes), so that its memory and
# work are linear in the coordinates whatever the model's size. Joint-coordinate methods
# (mbsim.solvers.recursive) apply coordinate_force_at to their coordinates directly.
#
# Defined here, inline, so that the compiled steps (step_kernels, recursive_kernels) and the
# records (record_kernels) compile them into their own loops; Python's single evaluations run
# them through step_kernels.element_forces.

from libc.math cimport M_PI, exp, fabs

from mbsim.model.expr_kernel cimport _mod, program_value
from mbsim.model.layout cimport FlatData, FlatModel


# 3D revolute angles come out of atan2 in (-pi, pi]: a torsion spring wound past half a turn must
# not snap back, so a wrapped item's deflections are taken within pi of ref, the unwrapped
# deflection of the last accepted step (the run's state: Data.coordinate_reference, which the
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


# Value of program k of F on D's registers.
cdef inline double _program(FlatModel F, FlatData D, Py_ssize_t k) noexcept nogil:
    return program_value(&F.prog_op[0], &F.prog_dst[0], &F.prog_args[0, 0], &F.prog_imm[0], &F.prog_start[0],
                         &F.prog_stop[0], &F.prog_result[0], k, &D.regs[0])


# The actuators (mbsim.model.actuators) at the coordinates and rates in D (D.jc_value, D.jc_qd):
# each one's force f by its law on its length L = gear q and rate Ld = gear qd (0 value, 1 position
# servo kp (target - L) + kd (rate - Ld), 2 velocity servo kd (target - Ld); value / target program
# act_expr[a], the target's rate program act_rate[a]), clamped to [lower, upper], into D.act_force;
# gear f summed per coordinate into D.jc_tau, each sum then clamped to +-effort (its actuators'
# forces scaled alike). D.regs[0] = t and
# the signals already in the registers.
cdef inline void actuator_forces_at(FlatModel F, FlatData D) noexcept nogil:
    cdef Py_ssize_t a, r
    cdef double f, length, rate
    for r in range(F.njc):
        D.jc_tau[r] = 0.0
    for a in range(F.nact):
        r = F.act_row[a]
        length, rate = F.act_gear[a] * D.jc_value[r], F.act_gear[a] * D.jc_qd[r]
        f = _program(F, D, F.act_expr[a])
        if F.act_law[a] == 1:
            f = F.act_kp[a] * (f - length) + F.act_kd[a] * (_program(F, D, F.act_rate[a]) - rate)
        elif F.act_law[a] == 2:
            f = F.act_kd[a] * (f - rate)
        # forcerange, then the transmission (MuJoCo's order)
        if f < F.act_lower[a]:
            f = F.act_lower[a]
        elif f > F.act_upper[a]:
            f = F.act_upper[a]
        D.act_force[a] = f
        D.jc_tau[r] += F.act_gear[a] * f
    # the joint's effort bound: each of its actuators' force scaled by the same factor, so that the
    # recorded forces and powers are the ones applied
    for a in range(F.nact):
        r = F.act_row[a]
        if fabs(D.jc_tau[r]) > F.jc_effort[r]:
            D.act_force[a] *= F.jc_effort[r] / fabs(D.jc_tau[r])
    for r in range(F.njc):
        if D.jc_tau[r] > F.jc_effort[r]:
            D.jc_tau[r] = F.jc_effort[r]
        elif D.jc_tau[r] < -F.jc_effort[r]:
            D.jc_tau[r] = -F.jc_effort[r]


# The force on joint coordinate r (mbsim.model.joint_forces) at its coordinate q and rate qd in D:
# returns the spring's elastic part -k (q - rest); into *other the rest: the damper -c qd, the
# actuators' D.jc_tau[r], the smooth methods' compliant stop beyond a limit (stop_k, stop_c: a
# linear spring-damper) and the regularised friction, whose values go to D.jc_limit_force and
# D.jc_friction_force. With ``nonsmooth`` (the LCP methods, timestepping and event_driven, whose own
# rows hold the stops and the Coulomb/Stribeck friction exactly) the stop and the Coulomb/Stribeck
# part are left out: viscous friction stays.
cdef inline double coordinate_force_at(FlatModel F, FlatData D, Py_ssize_t r, double *other,
                                       bint nonsmooth) noexcept nogil:
    cdef double q = D.jc_value[r]
    cdef double qd = D.jc_qd[r]
    cdef double stop = 0.0
    cdef double friction, slide, speed, ratio
    # the compliant stop, only beyond a limit
    if nonsmooth:
        pass
    elif q < F.jc_lower[r]:
        stop = F.jc_stop_k[r] * (F.jc_lower[r] - q) - F.jc_stop_c[r] * qd
    elif q > F.jc_upper[r]:
        stop = -F.jc_stop_k[r] * (q - F.jc_upper[r]) - F.jc_stop_c[r] * qd
    # viscous friction; Coulomb with the Stribeck curve F(|qd|), viscous below the smoothing rate
    friction = -F.jc_viscous[r] * qd
    if (F.jc_coulomb[r] > 0.0 or F.jc_static[r] > 0.0) and not nonsmooth:
        speed = fabs(qd)
        slide = F.jc_coulomb[r]
        if F.jc_stribeck[r] > 0.0:
            ratio = speed / F.jc_stribeck[r]
            slide += (F.jc_static[r] - F.jc_coulomb[r]) * exp(-ratio * ratio)
        friction -= slide * qd / (speed if speed > F.jc_smoothing[r] else F.jc_smoothing[r])
    D.jc_limit_force[r] = stop
    D.jc_friction_force[r] = friction
    other[0] = D.jc_tau[r] - F.jc_damping[r] * qd + stop + friction
    return -F.jc_stiffness[r] * (q - F.jc_rest[r])


# The joint springs' potential sum 1/2 k (q - rest)^2 (the records' energy; joint_forces_at returns it).
cdef inline double joint_spring_potential_at(const double[::1] k, const double[::1] rest,
                                             const double[::1] q) noexcept nogil:
    cdef Py_ssize_t r
    cdef double potential = 0.0
    for r in range(k.shape[0]):
        potential += 0.5 * k[r] * (q[r] - rest[r]) * (q[r] - rest[r])
    return potential


# The forces on the joint coordinates (coordinate_force_at; ``nonsmooth``: the LCP methods') through
# the coordinates' Jacobian in body blocks D.jc_jac (above): the elastic parts into Qc, the rest
# into Qn. Returns the springs' potential sum 1/2 k (q - rest)^2.
cdef inline double joint_forces_at(FlatModel F, FlatData D, double[::1] Qc, double[::1] Qn,
                                   bint nonsmooth) noexcept nogil:
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t p, a, r, side, b, col, m
    cdef Py_ssize_t body[2]
    cdef Py_ssize_t block[2]
    cdef double elastic, other
    for p in range(F.jc_row.shape[0]):
        # the item's bodies in ascending order, with their blocks' first column in jc_jac
        if F.jc_bi[p] <= F.jc_bj[p]:
            body[0], body[1], block[0], block[1] = F.jc_bi[p], F.jc_bj[p], 0, w
        else:
            body[0], body[1], block[0], block[1] = F.jc_bj[p], F.jc_bi[p], w, 0
        for a in range(F.jc_nrow[p]):
            r = F.jc_row[p] + a
            elastic = coordinate_force_at(F, D, r, &other, nonsmooth)
            for side in range(2):
                b, col = body[side], block[side]
                if b < F.nbody:
                    for m in range(w):
                        Qc[w * b + m] += D.jc_jac[r, col + m] * elastic
                        Qn[w * b + m] += D.jc_jac[r, col + m] * other
    return joint_spring_potential_at(F.jc_stiffness, F.jc_rest, D.jc_value)
