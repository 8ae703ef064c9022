# The diagnostics of a recorded row, computed in compiled code (record_kernels.pyx; the columns
# of mbsim.diagnostics.row_columns). All allocate nothing and run without the GIL.

from mbsim.model.layout cimport FlatModel, FlatData

# 1/2 v^T M v, body by body
cdef double kinetic_energy(FlatModel F, const double[::1] v) noexcept nogil
# gravity, spring-dampers and joint springs (the spring deflections already in D)
cdef double potential_energy(FlatModel F, FlatData D) noexcept nogil
# the spring-dampers' and compliant contacts' elastic energy at the frames in D
cdef double element_potential(FlatModel F, FlatData D) noexcept nogil
# the compliant contacts' per-pair columns into out[c:]; returns the column after them
cdef Py_ssize_t contact_columns_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t c) noexcept nogil
# joint reactions and drive forces from D.J, D.lam into out[start:]; returns the column after them
cdef Py_ssize_t reactions_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t start) noexcept nogil
# CONTRACT §8's columns (coordinates, rates, stop and friction forces, actuator forces and powers)
cdef Py_ssize_t driven_columns_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t c) noexcept nogil
# time, q, v, body positions and velocities into out[0:]; returns the column after them
cdef Py_ssize_t state_columns_into(FlatModel F, FlatData D, double t, const double[::1] q,
                                   const double[::1] v, double[::1] out) noexcept nogil
# angular velocities (3D), or angles then angular velocities (2D), into out[c:]; returns the next column
cdef Py_ssize_t rotation_columns_into(FlatModel F, FlatData D, double[::1] out, Py_ssize_t c) noexcept nogil
# one recorded row of the state (t, q, v, work) into out; iterations and h of the step that reached it
cdef void row_into(FlatModel F, FlatData D, double t, const double[::1] q, const double[::1] v, double work,
                   double iterations, double h, double[::1] out) noexcept nogil
