# The signals the compiled expressions read (mbsim.model.signals), evaluated once per force
# evaluation into the registers after the free variables: regs[first + s] for signal s of the
# table (kind, index, component). Inline, so the compiled step and the records compile it into
# their own loops; signal_kernels.pyx checks the kinds against mbsim.model.signals.KINDS.

from libc.math cimport sqrt

cdef enum:
    SIG_COORDINATE = 0
    SIG_RATE = 1
    SIG_POSITION = 2
    SIG_VELOCITY = 3
    SIG_ANGULAR_VELOCITY = 4
    SIG_QUATERNION = 5
    SIG_ANGLE = 6
    SIG_DISTANCE = 7
    SIG_ACTUATOR = 8


# Component m (w, x, y, z) of the unit quaternion of rotation matrix R[b] with w >= 0
# (Shepperd's method: the largest of the four diagonal combinations is divided by).
cdef inline double quaternion_component(const double[:, :, ::1] R, Py_ssize_t b, Py_ssize_t m) noexcept nogil:
    cdef double tr = R[b, 0, 0] + R[b, 1, 1] + R[b, 2, 2]
    cdef double qv[4]
    cdef double s, sign
    if tr >= R[b, 0, 0] and tr >= R[b, 1, 1] and tr >= R[b, 2, 2]:
        s = 2.0 * sqrt(1.0 + tr)
        qv[0], qv[1], qv[2], qv[3] = 0.25 * s, (R[b, 2, 1] - R[b, 1, 2]) / s, (R[b, 0, 2] - R[b, 2, 0]) / s, \
            (R[b, 1, 0] - R[b, 0, 1]) / s
    elif R[b, 0, 0] >= R[b, 1, 1] and R[b, 0, 0] >= R[b, 2, 2]:
        s = 2.0 * sqrt(1.0 + R[b, 0, 0] - R[b, 1, 1] - R[b, 2, 2])
        qv[0], qv[1], qv[2], qv[3] = (R[b, 2, 1] - R[b, 1, 2]) / s, 0.25 * s, (R[b, 0, 1] + R[b, 1, 0]) / s, \
            (R[b, 0, 2] + R[b, 2, 0]) / s
    elif R[b, 1, 1] >= R[b, 2, 2]:
        s = 2.0 * sqrt(1.0 + R[b, 1, 1] - R[b, 0, 0] - R[b, 2, 2])
        qv[0], qv[1], qv[2], qv[3] = (R[b, 0, 2] - R[b, 2, 0]) / s, (R[b, 0, 1] + R[b, 1, 0]) / s, 0.25 * s, \
            (R[b, 1, 2] + R[b, 2, 1]) / s
    else:
        s = 2.0 * sqrt(1.0 + R[b, 2, 2] - R[b, 0, 0] - R[b, 1, 1])
        qv[0], qv[1], qv[2], qv[3] = (R[b, 1, 0] - R[b, 0, 1]) / s, (R[b, 0, 2] + R[b, 2, 0]) / s, \
            (R[b, 1, 2] + R[b, 2, 1]) / s, 0.25 * s
    sign = -1.0 if qv[0] < 0.0 else 1.0
    return sign * qv[m]


# The signals into regs[first + s]: frames pos, rot, vel, omega (world, 3D) / omega2, angle (2D)
# with the ground at index nbody; joint coordinates q and rates qd; actuator forces act_force;
# distances between body points (dist_body (n, 2), dist_point (n, 2, 3) in body axes).
cdef inline void signals_at(Py_ssize_t dim, const double[:, ::1] pos, const double[:, :, ::1] rot,
                            const double[:, ::1] vel, const double[:, ::1] omega, const double[::1] omega2,
                            const double[::1] angle, const double[::1] q, const double[::1] qd,
                            const double[::1] act_force, const long long[::1] kind, const long long[::1] index,
                            const long long[::1] comp, const long long[:, ::1] dist_body,
                            const double[:, :, ::1] dist_point, Py_ssize_t first, double[::1] regs) noexcept nogil:
    cdef Py_ssize_t s, i, b, a, m
    cdef double value, total, x
    for s in range(kind.shape[0]):
        i, m = index[s], comp[s]
        if kind[s] == SIG_COORDINATE:
            value = q[i]
        elif kind[s] == SIG_RATE:
            value = qd[i]
        elif kind[s] == SIG_POSITION:
            value = pos[i, m]
        elif kind[s] == SIG_VELOCITY:
            value = vel[i, m]
        elif kind[s] == SIG_ANGULAR_VELOCITY:
            value = omega[i, m] if dim == 3 else omega2[i]
        elif kind[s] == SIG_QUATERNION:
            value = quaternion_component(rot, i, m)
        elif kind[s] == SIG_ANGLE:
            value = angle[i]
        elif kind[s] == SIG_DISTANCE:
            # |(pos_2 + R_2 p_2) - (pos_1 + R_1 p_1)|
            total = 0.0
            for a in range(dim):
                x = 0.0
                b = dist_body[i, 1]
                x += pos[b, a]
                for m in range(dim):
                    x += rot[b, a, m] * dist_point[i, 1, m]
                b = dist_body[i, 0]
                x -= pos[b, a]
                for m in range(dim):
                    x -= rot[b, a, m] * dist_point[i, 0, m]
                total += x * x
            value = sqrt(total)
        else:  # SIG_ACTUATOR
            value = act_force[i]
        regs[first + s] = value
