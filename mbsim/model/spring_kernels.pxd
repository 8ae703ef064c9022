# Joint springs, compiled once (mbsim.model.dynamics.SpringGroups): a spring and a damper on a
# joint coordinate, f = -k (coordinate - rest) - c (coordinate rate), acting through the
# coordinate's Jacobian.
#
# The coordinates are a table of primitive items (mbsim.model.flat: spr_*), item p giving rows
# row[p] .. row[p] + nrow[p] - 1 between bodies bi[p] and bj[p] (extended: nbody = the ground).
# The deflections (coordinate - rest, in value) and their Jacobian come from the constraint
# primitives' evaluation; the Jacobian in body blocks, jac (ncoord, 2 w): row r's block of body
# bi in columns [0, w), of body bj in [w, 2 w) (w = 6 in 3D, 3 in 2D; rotational columns in body
# axes), so that its memory and work are linear in the springs whatever the model's size.
#
# Defined here, inline, so that the compiled step (step_kernels.spring_deflections_into and
# applied_forces_into) and the records (record_kernels) compile them into their own loops; the
# Python evaluation (SpringGroups) runs the same kernels through spring_kernels.pyx's def wrappers.

from libc.math cimport M_PI

from mbsim.model.expr_kernel cimport _mod


# 3D revolute angles come out of atan2 in (-pi, pi]: a torsion spring wound past half a turn must
# not snap back, so a wrapped item's deflections are taken within pi of ref, the unwrapped
# deflection of the last accepted step (the run's state: Data.spring_reference, which the
# compiled step's FlatData.spr_ref views). Python's float % (the sign of 2 pi), not C's fmod.
cdef inline void unwrap_at(const long long[::1] row, const long long[::1] nrow, const long long[::1] wrap,
                           const double[::1] ref, double[::1] value) noexcept nogil:
    cdef Py_ssize_t p, a, r
    for p in range(row.shape[0]):
        if wrap[p]:
            for a in range(nrow[p]):
                r = row[p] + a
                value[r] = ref[r] + _mod(value[r] - ref[r] + M_PI, 2.0 * M_PI) - M_PI


# Generalized forces of the joint springs at deflections ``value`` and coordinate Jacobian ``jac``
# (body blocks, above): the elastic part Qc -= J^T (k value), the damping Qn -= J^T (c J v);
# returns the potential sum 1/2 k value^2 (joint_spring_potential_at's). Each row's two blocks are
# taken lower body first, so its sums run in the order of a dense row.
cdef inline double joint_springs_at(Py_ssize_t nbody, Py_ssize_t w, const long long[::1] bi,
                                    const long long[::1] bj, const long long[::1] row, const long long[::1] nrow,
                                    const double[::1] k, const double[::1] c, const double[::1] value,
                                    const double[:, ::1] jac, const double[::1] v, double[::1] Qc,
                                    double[::1] Qn) noexcept nogil:
    cdef Py_ssize_t p, a, r, side, b, col, m
    cdef Py_ssize_t body[2]
    cdef Py_ssize_t block[2]
    cdef double elastic, rate, damping
    for p in range(row.shape[0]):
        # the item's bodies in ascending order, with their blocks' first column in jac
        if bi[p] <= bj[p]:
            body[0], body[1], block[0], block[1] = bi[p], bj[p], 0, w
        else:
            body[0], body[1], block[0], block[1] = bj[p], bi[p], w, 0
        for a in range(nrow[p]):
            r = row[p] + a
            # the coordinate's rate J v, then k value and c J v through J^T
            rate = 0.0
            for side in range(2):
                b, col = body[side], block[side]
                if b < nbody:
                    for m in range(w):
                        rate += jac[r, col + m] * v[w * b + m]
            elastic = k[r] * value[r]
            damping = c[r] * rate
            for side in range(2):
                b, col = body[side], block[side]
                if b < nbody:
                    for m in range(w):
                        Qc[w * b + m] -= jac[r, col + m] * elastic
                        Qn[w * b + m] -= jac[r, col + m] * damping
    return joint_spring_potential_at(k, value)


# The joint springs' potential sum 1/2 k value^2 (the records' energy; joint_springs_at returns it).
cdef inline double joint_spring_potential_at(const double[::1] k, const double[::1] value) noexcept nogil:
    cdef Py_ssize_t r
    cdef double potential = 0.0
    for r in range(k.shape[0]):
        potential += 0.5 * k[r] * value[r] * value[r]
    return potential
