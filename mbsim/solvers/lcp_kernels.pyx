"""Compiled sweeps of the projected Gauss-Seidel solver (mbsim.solvers.lcp.pgs), on a dense A
and on a CSR A; ``pgs`` checks the arguments and calls them through mbsim.solvers.lcp's names."""


# One PGS row update: the new x_i from its residual r = (A x + b)_i, its box (a friction row's
# +-mu_i max(x_k, 0) of the current normal impulse); the largest change and |x| are tracked.
cdef inline void _update_row(Py_ssize_t i, double r, const double[::1] lo, const double[::1] hi, double[::1] x,
                             const long long[::1] friction_normal, const double[::1] mu, const double[::1] diag,
                             double omega, double* change, double* size) noexcept nogil:
    cdef long long k = friction_normal[i]
    cdef double bound, low, high, new
    if k >= 0:
        bound = mu[i] * max(x[k], 0.0)
        low = -bound
        high = bound
    else:
        low = lo[i]
        high = hi[i]
    new = min(max(x[i] - omega * r / diag[i], low), high)
    change[0] = max(change[0], abs(new - x[i]))
    x[i] = new
    size[0] = max(size[0], abs(new))


cdef (Py_ssize_t, bint) _pgs_dense_c(const double[:, ::1] A, const double[::1] b, const double[::1] lo,
                                      const double[::1] hi, double[::1] x, const long long[::1] friction_normal,
                                      const double[::1] mu, const double[::1] diag, Py_ssize_t iterations,
                                      double tol, double omega) noexcept nogil:
    cdef Py_ssize_t n = x.shape[0], sweep, i, j
    cdef double change, size, r
    for sweep in range(1, iterations + 1):
        change = 0.0
        size = 0.0
        for i in range(n):
            r = b[i]
            for j in range(n):
                r += A[i, j] * x[j]
            _update_row(i, r, lo, hi, x, friction_normal, mu, diag, omega, &change, &size)
        if change <= tol * max(1.0, size):
            return sweep, True
    return iterations, False


def _pgs_dense(const double[:, ::1] A, const double[::1] b, const double[::1] lo, const double[::1] hi,
               double[::1] x, const long long[::1] friction_normal, const double[::1] mu, const double[::1] diag,
               Py_ssize_t iterations, double tol, double omega):
    """PGS sweeps on a dense C-ordered A (n, n), updating x in place; returns (sweeps, converged).

    Row i: r = (A x + b)_i, x_i <- clip(x_i - omega r / A_ii, lo_i, hi_i), where a friction row
    (friction_normal[i] = k >= 0) uses the box +-mu_i max(x_k, 0) of the current normal impulse.
    """
    cdef (Py_ssize_t, bint) result
    with nogil:
        result = _pgs_dense_c(A, b, lo, hi, x, friction_normal, mu, diag, iterations, tol, omega)
    return result[0], result[1]


cdef (Py_ssize_t, bint) _pgs_csr_c(const long long[::1] indptr, const long long[::1] indices,
                                    const double[::1] data, const double[::1] b, const double[::1] lo,
                                    const double[::1] hi, double[::1] x, const long long[::1] friction_normal,
                                    const double[::1] mu, const double[::1] diag, Py_ssize_t iterations,
                                    double tol, double omega) noexcept nogil:
    cdef Py_ssize_t n = x.shape[0], sweep, i, p
    cdef double change, size, r
    for sweep in range(1, iterations + 1):
        change = 0.0
        size = 0.0
        for i in range(n):
            r = b[i]
            for p in range(indptr[i], indptr[i + 1]):
                r += data[p] * x[indices[p]]
            _update_row(i, r, lo, hi, x, friction_normal, mu, diag, omega, &change, &size)
        if change <= tol * max(1.0, size):
            return sweep, True
    return iterations, False


def _pgs_csr(const long long[::1] indptr, const long long[::1] indices, const double[::1] data,
             const double[::1] b, const double[::1] lo, const double[::1] hi, double[::1] x,
             const long long[::1] friction_normal, const double[::1] mu, const double[::1] diag,
             Py_ssize_t iterations, double tol, double omega):
    """:func:`_pgs_dense` on a CSR matrix (indptr (n+1,), indices, data (nnz,))."""
    cdef (Py_ssize_t, bint) result
    with nogil:
        result = _pgs_csr_c(indptr, indices, data, b, lo, hi, x, friction_normal, mu, diag, iterations, tol, omega)
    return result[0], result[1]
