# Dense linear algebra of the compiled steps (lapack_kernels.pyx): LAPACK's SVD, least squares and
# LU solve, and Cholesky factorisations in plain loops. Each returns LAPACK's info (0: success) or
# whether the matrix was positive definite; nothing raises, nothing needs the GIL.

# over typed memoryviews (cpdef: Python calls the same functions, as the tests do)
cpdef int svd_into(double[:, ::1] at, double[:, ::1] u_t, double[::1] s, double[:, ::1] v) noexcept nogil
cpdef int lstsq_symmetric_into(double[:, ::1] a, double[::1] b, double[::1] s, double rcond, int[::1] rank) noexcept nogil
cpdef int solve_into(double[:, ::1] at, double[::1] b, int[::1] pivots) noexcept nogil
cpdef bint cholesky_in_place(double[:, ::1] A) noexcept nogil
cpdef void cholesky_solve(const double[:, ::1] L, double[::1] x) noexcept nogil
cpdef bint cholesky_envelope(double[:, ::1] A, const long long[::1] first) noexcept nogil
cpdef void cholesky_envelope_solve(const double[:, ::1] L, const long long[::1] first, const long long[::1] last, double[::1] x) noexcept nogil

# the same over raw C-order buffers (robust_kernels' matrices are offsets into one work array):
# the (m, n) matrix A given as at = A^T (n, m); a, L (n, n)
cdef int svd_raw(Py_ssize_t m, Py_ssize_t n, double* at, double* u_t, double* s, double* v) noexcept nogil
# singular values only (gesdd jobz 'N'; at destroyed)
cdef int svd_values_raw(Py_ssize_t m, Py_ssize_t n, double* at, double* s) noexcept nogil
# A = Q B P^T (gebrd) in place: d, e the bidiagonal (min(m, n), min(m, n) - 1), tauq, taup (min(m, n))
cdef int bidiagonal_raw(Py_ssize_t m, Py_ssize_t n, double* at, double* d, double* e, double* tauq,
                        double* taup) noexcept nogil
# with that factor: the minimum-norm least-squares x of A x = b (transpose: A^T x = b), singular values
# <= rcond times the largest cut (gelsd's bidiagonal solve, lalsd); b (max(m, n)) holds b on entry
# (its rows), x on exit (its columns); the rank into rank[0]
cdef int bidiagonal_lstsq_raw(Py_ssize_t m, Py_ssize_t n, const double* at, const double* d, const double* e,
                              const double* tauq, const double* taup, bint transpose, double* b, double rcond,
                              int* rank) noexcept nogil
cdef int lstsq_symmetric_raw(Py_ssize_t n, double* a, double* b, double* s, double rcond, int* rank) noexcept nogil
cdef int solve_raw(Py_ssize_t n, double* at, double* b, int* pivots) noexcept nogil
# LU with partial pivoting (getrf, scipy's lu_factor) of the (n, n) matrix a given as at = a^T, in
# place; then a x = b with that factor (getrs, lu_solve), b overwritten with x: one factor, many solves
cdef int lu_factor_raw(Py_ssize_t n, double* at, int* pivots) noexcept nogil
cdef int lu_solve_raw(Py_ssize_t n, const double* lu, const int* pivots, double* b) noexcept nogil
cdef bint cholesky_in_place_raw(Py_ssize_t n, double* A) noexcept nogil
cdef void cholesky_solve_raw(Py_ssize_t n, const double* L, double* x) noexcept nogil
cdef void cholesky_envelope_solve_raw(const double[:, ::1] L, const long long[::1] first, const long long[::1] last, double* x) noexcept nogil
# the envelope Cholesky factor and solve over raw C-order (n, n) buffers (first[i]: row i's first
# column inside the envelope, last[r]: the last row whose envelope reaches column r)
cdef bint cholesky_envelope_raw(Py_ssize_t n, double* A, const long long* first) noexcept nogil
cdef void cholesky_envelope_solve_ptr(Py_ssize_t n, const double* L, const long long* first, const long long* last,
                                      double* x) noexcept nogil
