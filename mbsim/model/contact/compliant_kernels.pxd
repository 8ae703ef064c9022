# Compiled kernels of the compliant contact force (mbsim.model.contact.compliant_kernels), for
# modules that call them from C; Python calls the def wrappers of the same names without ``_c``.

from mbsim.model.layout cimport FlatData, FlatModel

# Kernel codes of the contact laws (mbsim.model.contact.laws: each law names the code it uses)
cdef enum:
    NORMAL_HERTZ_C = 0        # f_N = k g^n + chi g^m dg/dt (eq. 36)
    NORMAL_DISSIPATIVE_C = 1  # f_N = k g^n (1 + alpha dg/dt) (Hunt-Crossley, Lankarani-Nikravesh)
    FRICTION_STRIBECK_C = 0   # mu(v) of eq. 38
    FRICTION_COULOMB_C = 1    # mu min(v / v_d, 1)

# One contact's row of the law arrays: mbsim.model.contact.laws.base.CONTACT_LAW, the same fields
# in the same order (8-byte fields only: no padding to disagree on)
cdef struct ContactLaw:
    long long normal
    double k
    double n
    double chi
    double m
    double alpha
    long long friction
    double mu_s
    double mu_d
    double v_s
    double v_d
    double stick_step
    double inv_mass_slave
    double inv_mass_master
    double inv_inertia_slave
    double inv_inertia_master

# The law arrays seen from C: the pointer to their rows, taken once (acquiring a struct
# memoryview checks its 16-field format, ~2.5 us, too slow for every pair evaluation)
cdef class LawTable:
    cdef readonly object array  # the CONTACT_LAW rows (kept alive: the pointer is into them)
    cdef const ContactLaw* rows
    cdef readonly Py_ssize_t count

cdef double normal_force(const ContactLaw* law, double g, double rate, double elastic) noexcept nogil
cdef double friction_coefficient(const ContactLaw* law, double v) noexcept nogil

cdef bint obb_overlap_one_c(const double[:] cA, const double[:, :] RA, const double[:] hA,
                            const double[:] cB, const double[:, :] RB, const double[:] hB,
                            double margin, double eps) noexcept nogil

cdef double pair_forces_c(const double[:, :] p, const double[:] g, const double[:, :] grad, const double[:] pos_s,
                          const double[:, :] rot_s, const double[:] vel_s, const double[:] om_s,
                          const double[:] pos_m, const double[:, :] rot_m, const double[:] vel_m,
                          const double[:] om_m, const ContactLaw* law, double[:, ::1] out, double* K,
                          double* C) noexcept nogil
cdef void normal_force_slopes(const ContactLaw* law, double g, double rate, double* by_depth,
                              double* by_rate) noexcept nogil

cdef Py_ssize_t penetrating_points_c(
    const double[:, ::1] points, const long long[::1] point_order, const double[:, ::1] node_centre,
    const double[::1] node_radius, const long long[::1] node_child_start, const long long[::1] node_child_count,
    const long long[::1] node_point_start, const long long[::1] node_point_count, bint use_tree,
    const double[:, ::1] R, const double[::1] t, const double* values, const Py_ssize_t* shape, const double* origin,
    double cell, const double* lo, const double* hi, double margin, double keep, const double* bound,
    const double* meta, long long[::1] out_idx, double[::1] out_d, double[:, ::1] out_g, Py_ssize_t* stack,
) noexcept nogil

# Every compliant pair of the FlatModel at the body frames in D: forces added to Qc (elastic) and
# Qn (damping, friction), body by body (force world, torque body axes); the counters into D.cc_*;
# with D.cc_linear[0] != 0 each pair's slopes into D.cc_stiffness, D.cc_damping (pair_forces_c's K,
# C); returns the elastic potential
cdef double compliant_forces_into(FlatModel F, FlatData D, double[::1] Qc, double[::1] Qn) noexcept nogil

# Whether some pair's bounding boxes overlap at the state (q, v) (body coordinates) or may within a
# step h (CompliantContacts.near; D's frames are overwritten): the step control of time.contact_step
cdef bint contacts_near(FlatModel F, FlatData D, const double[::1] q, const double[::1] v,
                        double h) noexcept nogil
# the same test at the body frames D holds (a method in joint coordinates fills them itself)
cdef bint frames_near(FlatModel F, FlatData D, double h) noexcept nogil
