# Compiled contact Jacobians (jacobian_kernels.pyx), for a compiled step that keeps its own buffers.

# The k d rows of k contacts as CSR (indptr (k d + 1), indices, data: 2 w k d at least); pos row b at
# pos[b ps], rot (3D) row-major 3x3 per body, the ground at index nbody; returns the entries written.
cdef Py_ssize_t rows_into(const long long* body_i, const long long* body_j, const double* point_i,
                          const double* point_j, const double* normal, Py_ssize_t k, Py_ssize_t d, const double* pos,
                          Py_ssize_t ps, const double* rot, long long nbody, long long* indptr, long long* indices,
                          double* data) noexcept nogil
