# Kernels of the per-step hot path (kernels.pyx): body frames, primitive constraints and the
# retraction of 3D positions, for mbsim.model.step_kernels and the solvers' compiled steps.
# Conventions as in kernels.pyx (mbsim.model.spatial): ground at index nbody of the frames.

# a 3-vector by value (a C struct); 2D kernels use the first two components
ctypedef (double, double, double) vec3

# primitive kinds of the flat tables (mbsim.model.flat checks its own against them at import);
# a COUPLING entry is followed by its two parts (one-row kinds) in the table
cdef enum:
    POINT3 = 0
    DOT1_3 = 1
    DOT2_3 = 2
    ANGLE3 = 3
    POINT2 = 4
    ANGLE2 = 5
    DOT2_2 = 6
    COUPLING = 7

cdef void frames3_into(const double[::1] q, const double[::1] v, Py_ssize_t nbody, double[:, ::1] pos,
                       double[:, :, ::1] rot, double[:, ::1] vel, double[:, ::1] omega_body,
                       double[:, ::1] omega) noexcept nogil
cdef void frames2_into(const double[::1] q, const double[::1] v, Py_ssize_t nbody, double[:, ::1] pos,
                       double[:, :, ::1] rot, double[:, ::1] vel, double[::1] omega,
                       double[::1] angle) noexcept nogil

# Item kernels: one primitive between bodies i and j (its local vectors given by value) into row
# k of value (., k), Ji, Jj (., k, w), bias (., k), every entry of that row written.
cdef void point3_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] omega,
                    Py_ssize_t i, Py_ssize_t j, vec3 si, vec3 sj, double[:, ::1] value, double[:, :, ::1] Ji,
                    double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil
cdef void dot1_3_at(const double[:, :, ::1] rot, const double[:, ::1] omega, Py_ssize_t i, Py_ssize_t j,
                    vec3 ai, vec3 bj_vec, double[:, ::1] value, double[:, :, ::1] Ji, double[:, :, ::1] Jj,
                    double[:, ::1] bias, Py_ssize_t k) noexcept nogil
cdef void dot2_3_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] vel,
                    const double[:, ::1] omega, Py_ssize_t i, Py_ssize_t j, vec3 ai, vec3 si, vec3 sj,
                    double[:, ::1] value, double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias,
                    Py_ssize_t k) noexcept nogil
cdef void angle3_at(const double[:, :, ::1] rot, const double[:, ::1] omega, Py_ssize_t i, Py_ssize_t j,
                    vec3 b_i, vec3 e_i, vec3 c_j, double[:, ::1] value, double[:, :, ::1] Ji,
                    double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil
cdef void point2_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[::1] omega,
                    Py_ssize_t i, Py_ssize_t j, vec3 si, vec3 sj, double[:, ::1] value, double[:, :, ::1] Ji,
                    double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil
cdef void angle2_at(const double[::1] angle, Py_ssize_t i, Py_ssize_t j, double[:, ::1] value,
                    double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil
cdef void dot2_2_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] vel,
                    const double[::1] omega, Py_ssize_t i, Py_ssize_t j, vec3 ai, vec3 si, vec3 sj,
                    double[:, ::1] value, double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias,
                    Py_ssize_t k) noexcept nogil

# A coupling (value_a - off_a) - ratio (value_b - off_b) - offset, its parts a and b being items
# p and p + 1 of a table (kind, bi, bj, vec, offset[., 0], wrap; ANGLE3, DOT2_3, ANGLE2 or DOT2_2):
# value (., k), bias (., k); body blocks of a_i, a_j into Ji, Jj (., k) and of b_i, b_j (times
# -ratio) into Ji, Jj (., k + 1). 3D reads omega, 2D omega2 and angle (the other may be empty).
cdef void coupling_at(const double[:, ::1] pos, const double[:, :, ::1] rot, const double[:, ::1] vel,
                      const double[:, ::1] omega, const double[::1] omega2, const double[::1] angle,
                      const long long[::1] kind, const long long[::1] bi, const long long[::1] bj,
                      const double[:, :, ::1] vec, const double[:, ::1] offset, const long long[::1] wrap,
                      Py_ssize_t p, double ratio, double coupling_offset, double[:, ::1] value,
                      double[:, :, ::1] Ji, double[:, :, ::1] Jj, double[:, ::1] bias, Py_ssize_t k) noexcept nogil

# q moved by a velocity-space increment dx (exponential map, normalised) into out; out may be q
cdef void retract3_into(const double[::1] q, const double[::1] dx, Py_ssize_t nbody,
                        double[::1] out) noexcept nogil
