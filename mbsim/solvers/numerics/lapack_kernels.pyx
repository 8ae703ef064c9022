"""Dense linear algebra of the compiled steps, allocating nothing the caller sees: LAPACK's SVD,
least squares and LU solve, and a Cholesky factorisation in plain loops (for the small systems of
a step a LAPACK call costs more than the work).

LAPACK is reached through scipy.linalg.cython_lapack (the routines scipy links, found at import
time): the routines the Python path uses (numpy's ``svd`` is gesdd with jobz 'A', ``solve`` is
gesv, numpy's ``lstsq`` and scipy's with ``lapack_driver="gelsd"`` are gelsd), so the two paths
agree to round-off. Each call queries its workspace (lwork = -1) and allocates it for the call;
an allocation that fails returns -1.

LAPACK is column-major: an (m, n) matrix in Fortran order is the C-order (n, m) array of its
transpose, which is how the buffers below are passed.
"""

from libc.math cimport isfinite, sqrt
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_lapack cimport dgebrd, dgelsd, dgesdd, dgesv, dgetrf, dgetrs, dlalsd, dormbr


cdef inline int _ld(Py_ssize_t k) noexcept nogil:
    """A leading dimension: LAPACK wants at least 1, also for an empty matrix."""
    return <int>k if k > 1 else 1


cdef int _gesdd(char jobz, Py_ssize_t m, Py_ssize_t n, double* at, double* s, double* u_t, int ldu, double* v,
                int ldvt) noexcept nogil:
    cdef int im = <int>m, jn = <int>n, lda = _ld(m), info = 0, lwork = -1
    cdef Py_ssize_t mn = m if m < n else n
    cdef double query = 0.0
    cdef int iquery = 0
    cdef double* work
    cdef int* iwork
    # the workspace size LAPACK wants, then the call itself (iwork: 8 min(m, n), gesdd's size)
    dgesdd(&jobz, &im, &jn, at, &lda, s, u_t, &ldu, v, &ldvt, &query, &lwork, &iquery, &info)
    if info < 0:
        return info
    lwork = <int>query
    work = <double*>malloc(sizeof(double) * (lwork if lwork > 1 else 1))
    iwork = <int*>malloc(sizeof(int) * (8 * mn if mn > 0 else 1))
    if work == NULL or iwork == NULL:
        free(work)
        free(iwork)
        return -1
    dgesdd(&jobz, &im, &jn, at, &lda, s, u_t, &ldu, v, &ldvt, work, &lwork, iwork, &info)
    free(work)
    free(iwork)
    return info


cdef int svd_raw(Py_ssize_t m, Py_ssize_t n, double* at, double* u_t, double* s, double* v) noexcept nogil:
    return _gesdd(b'A', m, n, at, s, u_t, _ld(m), v, _ld(n))


cdef int svd_values_raw(Py_ssize_t m, Py_ssize_t n, double* at, double* s) noexcept nogil:
    cdef double dummy = 0.0
    # gesdd with jobz 'N': the bidiagonal's values without vectors (a third of the full SVD's cost)
    return _gesdd(b'N', m, n, at, s, &dummy, 1, &dummy, 1)
    lwork = <int>query
    work = <double*>malloc(sizeof(double) * (lwork if lwork > 1 else 1))
    iwork = <int*>malloc(sizeof(int) * (8 * mn if mn > 0 else 1))
    if work == NULL or iwork == NULL:
        free(work)
        free(iwork)
        return -1
    dgesdd(&jobz, &im, &jn, at, &lda, s, &dummy, &one, &dummy, &one, work, &lwork, iwork, &info)
    free(work)
    free(iwork)
    return info


cdef int bidiagonal_raw(Py_ssize_t m, Py_ssize_t n, double* at, double* d, double* e, double* tauq,
                        double* taup) noexcept nogil:
    cdef int im = <int>m, jn = <int>n, lda = _ld(m), info = 0, lwork = -1
    cdef double query = 0.0
    cdef double* work
    # gebrd: A = Q B P^T, B upper bidiagonal (m >= n) or lower (m < n), Q and P as reflectors in at
    dgebrd(&im, &jn, at, &lda, d, e, tauq, taup, &query, &lwork, &info)
    if info < 0:
        return info
    lwork = <int>query
    work = <double*>malloc(sizeof(double) * (lwork if lwork > 1 else 1))
    if work == NULL:
        return -1
    dgebrd(&im, &jn, at, &lda, d, e, tauq, taup, work, &lwork, &info)
    free(work)
    return info


cdef int _apply_reflectors(char vect, char trans, Py_ssize_t m, Py_ssize_t n, const double* at,
                           const double* tau, double* x) noexcept nogil:
    """x <- Q x, Q^T x (vect 'Q', x of length m) or P x, P^T x (vect 'P', length n): ormbr on
    one column, the reflectors of bidiagonal_raw."""
    cdef char side = b'L'
    cdef int im = <int>m, jn = <int>n, lda = _ld(m), one = 1, info = 0, lwork = -1
    cdef int rows = im if vect == b'Q' else jn
    cdef int k = jn if vect == b'Q' else im
    cdef int ldc = rows if rows > 1 else 1
    cdef double query = 0.0
    cdef double* work
    if rows == 0 or k == 0:
        return 0
    dormbr(&vect, &side, &trans, &rows, &one, &k, <double*>at, &lda, <double*>tau, x, &ldc, &query, &lwork, &info)
    if info < 0:
        return info
    lwork = <int>query
    work = <double*>malloc(sizeof(double) * (lwork if lwork > 1 else 1))
    if work == NULL:
        return -1
    dormbr(&vect, &side, &trans, &rows, &one, &k, <double*>at, &lda, <double*>tau, x, &ldc, work, &lwork, &info)
    free(work)
    return info


cdef int bidiagonal_lstsq_raw(Py_ssize_t m, Py_ssize_t n, const double* at, const double* d, const double* e,
                              const double* tauq, const double* taup, bint transpose, double* b, double rcond,
                              int* rank) noexcept nogil:
    cdef Py_ssize_t k = m if m < n else n
    cdef Py_ssize_t rows = n if transpose else m
    cdef Py_ssize_t cols = m if transpose else n
    cdef Py_ssize_t i, nlvl
    cdef int smlsiz = 25, ik = <int>k, one = 1, ldb = _ld(k), info = 0
    cdef char uplo
    cdef double* mem
    cdef int* iwork
    rank[0] = 0
    if k == 0:
        for i in range(cols):
            b[i] = 0.0
        return 0
    # a non-finite value fails the solve here: LAPACK's dlascl would print its complaint on stdout
    # (mbsim's --json output) and go on
    for i in range(rows):
        if not isfinite(b[i]):
            return -1
    for i in range(k):
        if not isfinite(d[i]) or (i < k - 1 and not isfinite(e[i])):
            return -1
    # lalsd's workspace (LAPACK's dgelsd sizes, smlsiz 25 as ilaenv gives it) and copies of d, e
    nlvl = 1  # LAPACK's int(log2(k / (smlsiz + 1))) + 1, at least 1 (here never less)
    while (k >> nlvl) >= smlsiz + 1:
        nlvl += 1
    mem = <double*>malloc(sizeof(double) * (2 * k + 9 * k + 2 * k * smlsiz + 8 * k * nlvl + k + (smlsiz + 1) * (smlsiz + 1)))
    iwork = <int*>malloc(sizeof(int) * (3 * k * nlvl + 11 * k + 1))
    if mem == NULL or iwork == NULL:
        free(mem)
        free(iwork)
        return -1
    for i in range(k):
        mem[i] = d[i]
    for i in range(k - 1):
        mem[k + i] = e[i]
    # A x = b: B w = Q^T b, x = P w; A^T x = b: B^T u = P^T b, x = Q u (w, u zero past k)
    info = _apply_reflectors(b'P' if transpose else b'Q', b'T', m, n, at, taup if transpose else tauq, b)
    if info == 0:
        # B is upper bidiagonal when m >= n, B^T lower
        uplo = b'U' if (m >= n) != transpose else b'L'
        dlalsd(&uplo, &smlsiz, &ik, &one, mem, mem + k, b, &ldb, &rcond, rank, mem + 2 * k, iwork, &info)
    if info == 0:
        for i in range(k, cols):
            b[i] = 0.0
        info = _apply_reflectors(b'Q' if transpose else b'P', b'N', m, n, at, tauq if transpose else taup, b)
    free(mem)
    free(iwork)
    return info


cpdef int svd_into(double[:, ::1] at, double[:, ::1] u_t, double[::1] s, double[:, ::1] v) noexcept nogil:
    """Full SVD A = U diag(s) V^T of the (m, n) matrix A given as ``at`` = A^T, C-order (n, m),
    destroyed. Writes u_t (m, m) = U^T (row k: the k-th left singular vector), s (min(m, n),)
    descending and v (n, n) = V (column k: the k-th right singular vector). Returns LAPACK's
    info (0: converged)."""
    return svd_raw(at.shape[1], at.shape[0], &at[0, 0], &u_t[0, 0], &s[0], &v[0, 0])


cdef int lstsq_symmetric_raw(Py_ssize_t n, double* a, double* b, double* s, double rcond, int* rank) noexcept nogil:
    cdef int jn = <int>n, nrhs = 1, lda = _ld(n), info = 0, lwork = -1
    cdef double query = 0.0
    cdef int iquery = 0
    cdef double* work
    cdef int* iwork
    # the workspace sizes LAPACK wants (work and iwork), then the call itself
    dgelsd(&jn, &jn, &nrhs, a, &lda, b, &lda, s, &rcond, rank, &query, &lwork, &iquery, &info)
    if info < 0:
        return info
    lwork = <int>query
    work = <double*>malloc(sizeof(double) * (lwork if lwork > 1 else 1))
    iwork = <int*>malloc(sizeof(int) * (iquery if iquery > 1 else 1))
    if work == NULL or iwork == NULL:
        free(work)
        free(iwork)
        return -1
    dgelsd(&jn, &jn, &nrhs, a, &lda, b, &lda, s, &rcond, rank, work, &lwork, iwork, &info)
    free(work)
    free(iwork)
    return info


cpdef int lstsq_symmetric_into(double[:, ::1] a, double[::1] b, double[::1] s, double rcond, int[::1] rank) noexcept nogil:
    """Minimum-norm least-squares solution of a x = b for a symmetric (n, n) ``a`` (so C and
    Fortran order coincide; destroyed), singular values below rcond times the largest treated
    as zero (scipy's ``lstsq(cond=rcond)``). b (n,) is overwritten with x; s (n,) receives the
    singular values, rank (1,) the effective rank. Returns LAPACK's info."""
    return lstsq_symmetric_raw(a.shape[0], &a[0, 0], &b[0], &s[0], rcond, &rank[0])


cdef int solve_raw(Py_ssize_t n, double* at, double* b, int* pivots) noexcept nogil:
    cdef int jn = <int>n, nrhs = 1, lda = _ld(n), info = 0
    dgesv(&jn, &nrhs, at, &lda, pivots, b, &lda, &info)
    return info


cdef int lu_factor_raw(Py_ssize_t n, double* at, int* pivots) noexcept nogil:
    cdef int jn = <int>n, lda = _ld(n), info = 0
    dgetrf(&jn, &jn, at, &lda, pivots, &info)
    return info


cdef int lu_solve_raw(Py_ssize_t n, const double* lu, const int* pivots, double* b) noexcept nogil:
    cdef int jn = <int>n, nrhs = 1, lda = _ld(n), info = 0
    cdef char trans = b'N'
    dgetrs(&trans, &jn, &nrhs, <double*>lu, &lda, <int*>pivots, b, &lda, &info)
    return info


cpdef int solve_into(double[:, ::1] at, double[::1] b, int[::1] pivots) noexcept nogil:
    """a x = b by LU with partial pivoting (LAPACK gesv, numpy's ``solve``) for the (n, n) matrix a
    given as ``at`` = a^T, C-order (destroyed); b (n,) is overwritten with x; pivots (n,) of
    LAPACK's integer type (np.intc: mbsim.model.flat, kkt_rank's dtype). Returns LAPACK's info
    (> 0: a is singular)."""
    return solve_raw(at.shape[0], &at[0, 0], &b[0], &pivots[0])


cdef bint cholesky_in_place_raw(Py_ssize_t n, double* A) noexcept nogil:
    cdef Py_ssize_t c, k, r
    cdef double d, s
    for c in range(n):
        d = A[c * n + c]
        for k in range(c):
            d -= A[c * n + k] * A[c * n + k]
        if not d > 0.0:
            return False
        d = sqrt(d)
        A[c * n + c] = d
        for r in range(c + 1, n):
            s = A[r * n + c]
            for k in range(c):
                s -= A[r * n + k] * A[c * n + k]
            A[r * n + c] = s / d
    return True


cpdef bint cholesky_in_place(double[:, ::1] A) noexcept nogil:
    """A = L L^T in place (lower triangle); False if A is not positive definite."""
    return cholesky_in_place_raw(A.shape[0], &A[0, 0])


cdef void cholesky_solve_raw(Py_ssize_t n, const double* L, double* x) noexcept nogil:
    cdef Py_ssize_t r, k
    cdef double s
    for r in range(n):
        s = x[r]
        for k in range(r):
            s -= L[r * n + k] * x[k]
        x[r] = s / L[r * n + r]
    for r in range(n - 1, -1, -1):
        s = x[r]
        for k in range(r + 1, n):
            s -= L[k * n + r] * x[k]
        x[r] = s / L[r * n + r]


cpdef void cholesky_solve(const double[:, ::1] L, double[::1] x) noexcept nogil:
    """x <- (L L^T)^-1 x."""
    cholesky_solve_raw(L.shape[0], &L[0, 0], &x[0])


cdef bint cholesky_envelope_raw(Py_ssize_t n, double* A, const long long* first) noexcept nogil:
    cdef Py_ssize_t i, j, k, fi, start
    cdef double s, d
    for i in range(n):
        fi = first[i]
        for j in range(fi, i):
            s = A[i * n + j]
            start = fi if fi > first[j] else first[j]
            for k in range(start, j):
                s -= A[i * n + k] * A[j * n + k]
            A[i * n + j] = s / A[j * n + j]
        d = A[i * n + i]
        for k in range(fi, i):
            d -= A[i * n + k] * A[i * n + k]
        if not d > 0.0:
            return False
        A[i * n + i] = sqrt(d)
    return True


cpdef bint cholesky_envelope(double[:, ::1] A, const long long[::1] first) noexcept nogil:
    """A = L L^T in place (lower triangle) for a symmetric A whose row i is zero left of column
    first[i] (its envelope, which holds L's row too): the operations of cholesky_in_place less
    the products with those zeros, so the same numbers. False if A is not positive definite."""
    return cholesky_envelope_raw(A.shape[0], &A[0, 0], &first[0])


cdef void cholesky_envelope_solve_ptr(Py_ssize_t n, const double* L, const long long* first, const long long* last,
                                      double* x) noexcept nogil:
    cdef Py_ssize_t r, k
    cdef double s
    for r in range(n):
        s = x[r]
        for k in range(first[r], r):
            s -= L[r * n + k] * x[k]
        x[r] = s / L[r * n + r]
    for r in range(n - 1, -1, -1):
        s = x[r]
        for k in range(r + 1, last[r] + 1):
            if first[k] <= r:
                s -= L[k * n + r] * x[k]
        x[r] = s / L[r * n + r]


cdef void cholesky_envelope_solve_raw(const double[:, ::1] L, const long long[::1] first, const long long[::1] last, double* x) noexcept nogil:
    cholesky_envelope_solve_ptr(L.shape[0], &L[0, 0], &first[0], &last[0], x)


cpdef void cholesky_envelope_solve(const double[:, ::1] L, const long long[::1] first, const long long[::1] last, double[::1] x) noexcept nogil:
    """x <- (L L^T)^-1 x for a factor from cholesky_envelope; last[r]: the last row whose
    envelope reaches column r (entries outside the envelope are zero)."""
    cholesky_envelope_solve_raw(L, first, last, &x[0])
