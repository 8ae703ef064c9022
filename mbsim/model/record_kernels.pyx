"""The diagnostics of a recorded row, computed in compiled code (mbsim.diagnostics.record_row).

``row_into`` writes one row of the result file as flat columns, in the order of
mbsim.diagnostics.row_columns: time, q, v, body positions, velocities, orientations (3D) or
angles (2D), angular velocities (world axes), the energies, the constraint violations, the
contact and solver columns, the quaternion norm error (3D), the joint reactions and the drive
forces. It reads the state's frames, forces, constraint values and multipliers from the
FlatData, as the right-hand side at that state left them (mbsim.solvers.ode.ode_kernels calls it
right after that evaluation), and allocates nothing. Declared in record_kernels.pxd.
"""

from libc.math cimport fabs, isfinite, sqrt

from mbsim.model.force_kernels cimport spring_damper_potential_at
from mbsim.model.joint_force_kernels cimport joint_spring_potential_at
from mbsim.model.step_kernels cimport coordinates_into, outputs_into, row_dot


# 1/2 v^T M v, body by body.
cdef double kinetic_energy(FlatModel F, const double[::1] v) noexcept nogil:
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t b, a, m
    cdef double s, total = 0.0
    for b in range(F.nbody):
        s = 0.0
        for a in range(w):
            for m in range(w):
                s += v[w * b + a] * F.body_mass_block[b, a, m] * v[w * b + m]
        total += s
    return 0.5 * total


# Gravity, spring-dampers and joint springs (the spring deflections already in D).
cdef double potential_energy(FlatModel F, FlatData D) noexcept nogil:
    cdef Py_ssize_t d = F.dim
    cdef Py_ssize_t b, a
    cdef double pot = 0.0
    for b in range(F.nbody):
        for a in range(d):
            pot -= F.body_weight[b, a] * D.pos[b, a]
    pot += element_potential(F, D)
    return pot + joint_spring_potential_at(F.jc_stiffness, F.jc_rest, D.jc_value)


# The spring-dampers' elastic energy at the frames in D (mbsim.model.force_kernels) and the
# compliant contacts' (k g^(n+1)/(n+1) per point) of the force evaluation at the same frames.
cdef double element_potential(FlatModel F, FlatData D) noexcept nogil:
    cdef double pot = spring_damper_potential_at(F.dim, D.pos, D.rot, F.sd_b1, F.sd_b2, F.sd_s1, F.sd_s2, F.sd_k,
                                                 F.sd_rest)
    return pot + D.cc_total[2] if F.ncc else pot


# The compliant contacts' per-pair columns (mbsim.diagnostics.contact_columns: count, deepest
# penetration, class counts of the pairs that have classes) of the evaluation in D into out[c:];
# returns the column after them.
cdef Py_ssize_t contact_columns_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t k, j, c0, c1
    for k in range(F.ncc):
        out[c] = D.cc_pair[k, 0]
        out[c + 1] = D.cc_pair[k, 1]
        c += 2
        c0, c1 = F.cc_class_start[k], F.cc_class_start[k + 1]
        if c1 > c0:
            for j in range(c0 + k, c1 + k + 1):
                out[c] = D.cc_class_counts[j]
                c += 1
    return c


# Joint reactions (force and torque about the joint point in world axes on the reported body;
# 2D fx, fy, torque) and drive forces -lambda of the driven rows, from J and lambda in D, into
# out[start:]; returns the column after them (mbsim.diagnostics.reactions).
cdef Py_ssize_t reactions_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t start) noexcept nogil:
    cdef Py_ssize_t nb = F.nbody, d = F.dim
    cdef Py_ssize_t w = 6 if d == 3 else 3
    cdef double[:, ::1] gen = D.joint_gen
    cdef const double[:, :, ::1] R = D.rot
    cdef Py_ssize_t j, m, r, b, a, k, c
    cdef double ox, oy, oz, fx, fy, fz, tq
    for j in range(gen.shape[0]):
        for m in range(w):
            gen[j, m] = 0.0
    for r in range(F.nc):  # -J^T lambda on each joint's reported body
        b = F.rx_body[r]
        if b < nb:
            for m in range(w):
                gen[F.rx_joint[r], m] -= D.J[r, w * b + m] * D.lam[r]
    c = start
    for j in range(gen.shape[0]):
        b = F.joint_body[j]
        if d == 3:
            ox = R[b, 0, 0] * F.joint_point[j, 0] + R[b, 0, 1] * F.joint_point[j, 1] + R[b, 0, 2] * F.joint_point[j, 2]
            oy = R[b, 1, 0] * F.joint_point[j, 0] + R[b, 1, 1] * F.joint_point[j, 1] + R[b, 1, 2] * F.joint_point[j, 2]
            oz = R[b, 2, 0] * F.joint_point[j, 0] + R[b, 2, 1] * F.joint_point[j, 1] + R[b, 2, 2] * F.joint_point[j, 2]
            fx, fy, fz = gen[j, 0], gen[j, 1], gen[j, 2]
            out[c], out[c + 1], out[c + 2] = fx, fy, fz
            for a in range(3):
                tq = R[b, a, 0] * gen[j, 3] + R[b, a, 1] * gen[j, 4] + R[b, a, 2] * gen[j, 5]
                if a == 0:
                    tq -= oy * fz - oz * fy
                elif a == 1:
                    tq -= oz * fx - ox * fz
                else:
                    tq -= ox * fy - oy * fx
                out[c + 3 + a] = tq
            c += 6
        else:
            ox = R[b, 0, 0] * F.joint_point[j, 0] + R[b, 0, 1] * F.joint_point[j, 1]
            oy = R[b, 1, 0] * F.joint_point[j, 0] + R[b, 1, 1] * F.joint_point[j, 1]
            fx, fy = gen[j, 0], gen[j, 1]
            out[c], out[c + 1] = fx, fy
            out[c + 2] = gen[j, 2] - (ox * fy - oy * fx)
            c += 3
    for k in range(F.driven_rows.shape[0]):
        out[c] = -D.lam[F.driven_rows[k]]
        c += 1
    return c


# A row's first columns: time, q, v, body positions and velocities (from the frames in D);
# returns the column after them (the orientations of a 3D row come next).
cdef Py_ssize_t state_columns_into(FlatModel F, FlatData D, double t, const double[::1] q,
                                   const double[::1] v, double[::1] out) noexcept nogil:
    cdef Py_ssize_t nb = F.nbody, d = F.dim
    cdef Py_ssize_t nq = q.shape[0], nv = v.shape[0]
    cdef Py_ssize_t c = 0, k, b, a
    out[c] = t
    c += 1
    for k in range(nq):
        out[c + k] = q[k]
    c += nq
    for k in range(nv):
        out[c + k] = v[k]
    c += nv
    for b in range(nb):
        for a in range(d):
            out[c + d * b + a] = D.pos[b, a]
    c += d * nb
    for b in range(nb):
        for a in range(d):
            out[c + d * b + a] = D.vel[b, a]
    return c + d * nb


# After a 3D row's orientations: the angular velocities (world axes); in 2D the angles, then
# the angular velocities. Returns the column after them.
cdef Py_ssize_t rotation_columns_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t nb = F.nbody
    cdef Py_ssize_t b, a
    if F.dim == 3:
        for b in range(nb):
            for a in range(3):
                out[c + 3 * b + a] = D.omega[b, a]
        return c + 3 * nb
    for b in range(nb):
        out[c + b] = D.angle[b]
    c += nb
    for b in range(nb):
        out[c + b] = D.omega2[b]
    return c + nb


# One recorded row of the state (t, q, v, work) into out (the columns of the module docstring);
# ``iterations`` and ``h`` are those of the step that reached it.
cdef void row_into(FlatModel F, FlatData D, double t, const double[::1] q, const double[::1] v, double work,
                   double iterations, double h, double[::1] out) noexcept nogil:
    cdef Py_ssize_t nb = F.nbody, nc = F.nc, d = F.dim
    cdef Py_ssize_t c, b, a, r, o
    cdef double kinetic, potential, pos_violation, vel_violation, x, err, n
    c = state_columns_into(F, D, t, q, v, out)
    if d == 3:
        for b in range(nb):
            for a in range(4):
                out[c + 4 * b + a] = q[7 * b + 3 + a]
        c += 4 * nb
    c = rotation_columns_into(F, D, out, c)
    kinetic = kinetic_energy(F, v)
    potential = potential_energy(F, D)
    # Python's max (the first unless the second is larger: a NaN violation is not taken)
    pos_violation, vel_violation = 0.0, 0.0
    for r in range(nc):
        x = fabs(D.phi[r])
        if x > pos_violation:
            pos_violation = x
        x = fabs(row_dot(F, D.J, r, v) + D.phi_t[r])
        if x > vel_violation:
            vel_violation = x
    out[c] = kinetic
    out[c + 1] = potential
    out[c + 2] = kinetic + potential
    out[c + 3] = work
    out[c + 4] = pos_violation
    out[c + 5] = vel_violation
    out[c + 6] = D.cc_total[0] if F.ncc else 0.0
    out[c + 7] = D.cc_total[1] if F.ncc else 0.0
    out[c + 8] = iterations
    out[c + 9] = h
    c += 10
    if d == 3:
        err = 0.0
        for b in range(nb):
            o = 7 * b + 3
            n = sqrt(q[o] * q[o] + q[o + 1] * q[o + 1] + q[o + 2] * q[o + 2] + q[o + 3] * q[o + 3])
            x = fabs(n - 1.0)
            if x > err:
                err = x
        out[c] = err
        c += 1
    c = reactions_into(F, D, out, c)
    if not F.jc_forces:  # the right-hand side had no need of the joint coordinates: the row has
        coordinates_into(F, D, t, v)
    c = driven_columns_into(F, D, out, c)
    c = outputs_into(F, D, t, out, c)
    contact_columns_into(F, D, out, c)


# CONTRACT §8's columns (mbsim.diagnostics.driven_columns) from the forces' evaluation at the
# state in D: the coordinates and rates of the joints with one (rows in joint order), the stop
# forces of the limited ones, the friction forces of the frictional ones, the actuators' forces
# and powers gear f qd; returns the column after them (the outputs come next).
cdef Py_ssize_t driven_columns_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t r, a
    for r in range(F.njc):
        out[c] = D.jc_value[r]
        c += 1
    for r in range(F.njc):
        out[c] = D.jc_qd[r]
        c += 1
    for r in range(F.njc):
        if isfinite(F.jc_lower[r]) or isfinite(F.jc_upper[r]):
            out[c] = D.jc_limit_force[r]
            c += 1
    for r in range(F.njc):
        if F.jc_coulomb[r] > 0.0 or F.jc_static[r] > 0.0 or F.jc_viscous[r] > 0.0:
            out[c] = D.jc_friction_force[r]
            c += 1
    for a in range(F.nact):
        out[c + a] = D.act_force[a]
        out[c + F.nact + a] = F.act_gear[a] * D.act_force[a] * D.jc_qd[F.act_row[a]]
    return c + 2 * F.nact
