"""Compiled sweeps of the projected Gauss-Seidel solver (mbsim.solvers.numerics.lcp.pgs), on a dense A
and on a CSR A; ``pgs`` checks the arguments and calls them through mbsim.solvers.numerics.lcp's names."""


# Row i: r = (A x + b)_i, x_i <- clip(x_i - omega r / A_ii, lo_i, hi_i), a friction row
# (friction_normal[i] = k >= 0) within +-mu_i max(x_k, 0). The rows and x are read through
# pointers: the views' index arithmetic in the inner product cost ~6 % of a sweep.
cdef (Py_ssize_t, bint) _pgs_dense_c(const double[:, ::1] A, const double[::1] b, const double[::1] lo,
                                      const double[::1] hi, double[::1] x, const long long[::1] friction_normal,
                                      const double[::1] mu, const double[::1] diag, Py_ssize_t iterations,
                                      double tol, double omega) noexcept nogil:
    cdef Py_ssize_t n = x.shape[0], sweep, i, j
    cdef long long k
    cdef double change, size, r, bound, low, high, new
    cdef const double* row
    cdef double* xp
    xp = &x[0]  # the data pointer (no element is read when n = 0)
    for sweep in range(1, iterations + 1):
        change = 0.0
        size = 0.0
        for i in range(n):
            r = b[i]
            row = &A[i, 0]
            for j in range(n):
                r += row[j] * xp[j]
            k = friction_normal[i]
            if k >= 0:
                bound = mu[i] * max(xp[k], 0.0)
                low = -bound
                high = bound
            else:
                low = lo[i]
                high = hi[i]
            new = min(max(xp[i] - omega * r / diag[i], low), high)
            change = max(change, abs(new - xp[i]))
            xp[i] = new
            size = max(size, abs(new))
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


# _pgs_dense_c's sweep over the rows of a CSR matrix (indptr (n+1,), indices, data (nnz,)).
cdef (Py_ssize_t, bint) _pgs_csr_c(const long long[::1] indptr, const long long[::1] indices,
                                    const double[::1] data, const double[::1] b, const double[::1] lo,
                                    const double[::1] hi, double[::1] x, const long long[::1] friction_normal,
                                    const double[::1] mu, const double[::1] diag, Py_ssize_t iterations,
                                    double tol, double omega) noexcept nogil:
    cdef Py_ssize_t n = x.shape[0], sweep, i, p
    cdef long long k
    cdef double change, size, r, bound, low, high, new
    cdef double* xp
    xp = &x[0]  # the data pointer (no element is read when n = 0)
    for sweep in range(1, iterations + 1):
        change = 0.0
        size = 0.0
        for i in range(n):
            r = b[i]
            for p in range(indptr[i], indptr[i + 1]):
                r += data[p] * xp[indices[p]]
            k = friction_normal[i]
            if k >= 0:
                bound = mu[i] * max(xp[k], 0.0)
                low = -bound
                high = bound
            else:
                low = lo[i]
                high = hi[i]
            new = min(max(xp[i] - omega * r / diag[i], low), high)
            change = max(change, abs(new - xp[i]))
            xp[i] = new
            size = max(size, abs(new))
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
