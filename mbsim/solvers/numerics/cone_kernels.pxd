# Compiled sweeps and residual of the round-cone contact problem (cone_kernels.pyx), for a compiled
# step that keeps its own buffers.

# The rows of the problem: assembled (u == NULL: data is A's CSR, row i of A x) or in body space
# (data is J's CSR, u is U = J M^-1 on the same pattern, v = M^-1 J^T x).
cdef struct Rows:
    const long long* indptr
    const long long* indices
    const double* data
    const double* u
    const double* b
    double* x
    double* v

# sweeps over R's n rows (cone_sweeps); returns the sweeps done, converged[0] whether x settled
cdef Py_ssize_t sweeps_into(Rows* R, Py_ssize_t n, Py_ssize_t k, int d, const double* mu, const double* lo,
                            const double* hi, const double* diag, const double* block, Py_ssize_t iterations,
                            double tol, double omega, bint* converged) noexcept nogil
# the natural residual of x with w = A x + b (n rows, k contacts of dimension d)
cdef double natural_residual(const double* x, const double* w, Py_ssize_t n, Py_ssize_t k, int d, const double* mu,
                             const double* lo, const double* hi, const double* diag) noexcept nogil
# the active-set solve (polish_into in cone_kernels.pyx) on a dense (n, n) C-order A from x: True when
# out (n,) holds an answer of natural residual <= tol; work and iwork of polish_doubles(n) and
# polish_ints(n) entries (allocated by the caller, once)
cdef Py_ssize_t polish_doubles(Py_ssize_t n) noexcept nogil
cdef Py_ssize_t polish_ints(Py_ssize_t n) noexcept nogil
# w = A out + b of its answer, in its work buffer (after it returned True)
cdef const double* polish_w(const double* work, Py_ssize_t n) noexcept nogil
cdef bint polish_into(const double* A, const double* b, Py_ssize_t n, Py_ssize_t k, int d, Py_ssize_t nu,
                      const double* mu, const double* lo, const double* hi, const double* diag, const double* x,
                      double tol, double* out, double* work, int* iwork) noexcept nogil
