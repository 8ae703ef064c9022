# Compiled kernels of the compliant contact force (mbsim.model.contact.compliant_kernels), for
# modules that call them from C; Python calls the def wrappers of the same names without ``_c``.

cdef bint obb_overlap_one_c(const double[:] cA, const double[:, :] RA, const double[:] hA,
                            const double[:] cB, const double[:, :] RB, const double[:] hB,
                            double margin, double eps) noexcept nogil

cdef double pair_forces_c(const double[:, :] p, const double[:] g, const double[:, :] grad, const double[:] pos_s,
                          const double[:, :] rot_s, const double[:] vel_s, const double[:] om_s,
                          const double[:] pos_m, const double[:, :] rot_m, const double[:] vel_m,
                          const double[:] om_m, const double[:] law, double[:, ::1] out) noexcept nogil

cdef Py_ssize_t penetrating_points_c(
    const double[:, ::1] points, const long long[::1] point_order, const double[:, ::1] node_centre,
    const double[::1] node_radius, const long long[::1] node_child_start, const long long[::1] node_child_count,
    const long long[::1] node_point_start, const long long[::1] node_point_count, bint use_tree,
    const double[:, ::1] R, const double[::1] t, const double[:, :, ::1] values, const double[::1] origin, double cell,
    const double[::1] lo, const double[::1] hi, double margin, long long[::1] out_idx, double[::1] out_d,
    double[:, ::1] out_g, Py_ssize_t* stack,
) noexcept nogil
