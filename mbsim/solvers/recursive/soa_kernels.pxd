# Spatial-operator recursions over a tree in joint coordinates (soa_kernels.pyx: the conventions,
# the joint codes and what each kernel computes). What other compiled modules cimport: the joint
# codes, the articulated-body scratch AbaWork and the two sweeps that write into given arrays.

from mbsim.model.layout cimport Record

# a row of a 3x3 / 6x6 block (a pointer to its first element indexes as M[i][j])
ctypedef double row3[3]
ctypedef double row6[6]

# joint codes (the Python names FIXED ... PLANAR_FREE hold the same numbers)
cdef enum:
    J_FIXED = 0
    J_REVOLUTE = 1
    J_PRISMATIC = 2
    J_CYLINDRICAL = 3
    J_UNIVERSAL = 4
    J_SPHERICAL = 5
    J_FREE = 6
    J_PLANAR_FREE = 7


# the scratch arrays of the articulated-body sweep of a tree of nb bodies, nv velocities
cdef class AbaWork(Record):
    cdef readonly Py_ssize_t nb
    cdef readonly Py_ssize_t nv
    cdef double[:, :, ::1] P
    cdef double[:, ::1] z
    cdef double[:, ::1] aprime
    cdef double[:, ::1] G
    cdef double[::1] nu


cdef void kinematics_into_c(
    const long long[::1] order, const long long[::1] parent, const long long[::1] jtype,
    const long long[::1] qadr, const long long[::1] vadr, const double[:, ::1] rp, const double[:, ::1] rc,
    const double[:, ::1] qrel0, const double[:, ::1] ax1, const double[:, ::1] ax2, const double[::1] ang0,
    const double[::1] q, const double[::1] qd, double[:, ::1] quat, double[:, :, ::1] rot, double[:, ::1] o,
    double[:, ::1] com, double[:, ::1] V, double[:, ::1] vcom, double[::1] angle, double[:, ::1] Hs,
    double[:, ::1] acor, double[::1] rel,
) noexcept nogil


cdef void articulated_body_into_c(
    const long long[::1] order, const long long[::1] parent, const long long[::1] vadr, const long long[::1] nvj,
    const double[::1] mass, const double[:, :, ::1] inertia, const double[::1] gravity,
    const double[:, :, ::1] rot, const double[:, ::1] o, const double[:, ::1] com, const double[:, ::1] V,
    const double[:, ::1] Hs, const double[:, ::1] acor, const double[:, ::1] ext, const double[::1] tau,
    const signed char[::1] presc, const double[::1] qdd_presc, const double[::1] armature,
    AbaWork work, double[::1] qdd, double[:, ::1] f, double[:, ::1] alpha,
) noexcept nogil
