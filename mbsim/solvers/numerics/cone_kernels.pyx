"""Compiled sweeps of the contact solver on the round Coulomb cone (mbsim.solvers.numerics.cone).

The problem (w = A x + b, n = k d + nu + nb rows): k contacts with a normal row c and
tangent rows k + c (and 2k + c in 3D); then nu unilateral rows and nb box rows with bounds lo, hi.
Contact c: 0 <= x_N _|_ w_N >= 0 and Coulomb's law with the round cone |x_T| <= mu x_N, the
friction impulse the one of maximal dissipation (x_T . w_T minimal over the disc: sticking
inside with w_T = 0, else x_T on the rim against w_T). One sweep is block Gauss-Seidel (the
nonsmooth Gauss-Seidel of Jean and Moreau): per contact the normal row, then its tangent pair solved
exactly for the current normal impulse, a trust-region problem in two unknowns; then the scalar
rows. Sweeps alternate forward and backward (symmetric Gauss-Seidel), so that a load passes a stack
of n bodies in one sweep whichever way the contacts are numbered.

A is read in one of two forms (``Rows``): assembled (CSR, the Delassus matrix J M^-1 J^T or its
reduction by the joints), or in body space (Catto's sequential impulses; Box2D, Bullet): the rows J
(CSR) and U = J M^-1 with the same pattern, and the velocity change v = M^-1 J^T x kept up to date,
so that row i costs its two bodies' blocks: w_i = J_i v + b_i, and a change of x_i moves v by U_i.
For a pile of spheres (each touching ~8 others) a body-space sweep does ~5 times fewer products,
and nothing is assembled.
"""

import numpy as np

from libc.math cimport fabs, sqrt

from mbsim.solvers.numerics.lapack_kernels cimport (cholesky_envelope_raw, cholesky_envelope_solve_ptr, lu_factor_raw,
                                                    lu_solve_raw)


# w_i = (A x + b)_i, or J_i v + b_i in body space.
cdef inline double _row(Rows* R, Py_ssize_t i) noexcept nogil:
    cdef double r = R.b[i]
    cdef long long p
    cdef const double* y = R.x if R.u == NULL else R.v
    for p in range(R.indptr[i], R.indptr[i + 1]):
        r += R.data[p] * y[R.indices[p]]
    return r


# x_i <- value (in body space, v follows: v += (value - x_i) U_i); returns |change|.
cdef inline double _set(Rows* R, Py_ssize_t i, double value) noexcept nogil:
    cdef double delta = value - R.x[i]
    cdef long long p
    if delta != 0.0 and R.u != NULL:
        for p in range(R.indptr[i], R.indptr[i + 1]):
            R.v[R.indices[p]] += delta * R.u[p]
    R.x[i] = value
    return fabs(delta)


# min 1/2 y' T y + g' y over |y| <= radius, T = [[a, c], [c, e]] symmetric positive semidefinite:
# inside when T's own minimiser is, else (T + lambda I) y = -g with |y| = radius (Moré and Sorensen,
# "Computing a trust region step", 1983), lambda by safeguarded Newton on 1/|y(lambda)| - 1/radius,
# nearly linear in lambda (exactly so when T is a multiple of I: one step).
cdef inline void _disc(double a, double c, double e, double g1, double g2, double radius,
                       double* y1, double* y2) noexcept nogil:
    cdef double half = 0.5 * (a + e), dev = sqrt(0.25 * (a - e) * (a - e) + c * c)
    cdef double l1 = half + dev, l2 = half - dev, q1, q2, u1, u2, h1, h2, norm, lam, lo, hi
    cdef double s, ds, psi, dpsi, gnorm
    cdef int it
    if radius <= 0.0:
        y1[0] = 0.0
        y2[0] = 0.0
        return
    # the eigenvectors of T: (q1, q2) for l1, (-q2, q1) for l2
    q1, q2 = 1.0, 0.0
    # (a nearly isotropic T keeps the axes: its eigenvector formula loses every digit)
    if dev > 1e-12 * fabs(half):
        if a >= e:
            q1, q2 = a - l2, c
        else:
            q1, q2 = c, e - l2
        norm = sqrt(q1 * q1 + q2 * q2)
        if norm > 0.0:
            q1 /= norm
            q2 /= norm
        else:
            q1, q2 = 1.0, 0.0
    h1 = q1 * g1 + q2 * g2
    h2 = -q2 * g1 + q1 * g2
    gnorm = sqrt(h1 * h1 + h2 * h2)
    if gnorm <= 1e-300:
        y1[0] = 0.0
        y2[0] = 0.0
        return
    if l2 < 0.0:
        l2 = 0.0
    # the unconstrained minimiser, when T is definite enough and it lies in the disc
    if l2 > 1e-14 * l1:
        u1 = -h1 / l1
        u2 = -h2 / l2
        if u1 * u1 + u2 * u2 <= radius * radius:
            y1[0] = q1 * u1 - q2 * u2
            y2[0] = q2 * u1 + q1 * u2
            return
    # on the rim: lambda in [lo, hi], |y(hi)| <= radius since l2 + hi >= |g| / radius
    lo = 0.0
    hi = gnorm / radius
    lam = lo if l2 > 1e-14 * l1 else 1e-14 * hi
    for it in range(60):
        u1 = h1 / (l1 + lam)
        u2 = h2 / (l2 + lam)
        s = u1 * u1 + u2 * u2
        norm = sqrt(s)
        psi = 1.0 / norm - 1.0 / radius
        if fabs(psi) <= 1e-15 / radius:
            break
        if psi < 0.0:
            lo = lam
        else:
            hi = lam
        ds = -2.0 * (u1 * u1 / (l1 + lam) + u2 * u2 / (l2 + lam))
        dpsi = -0.5 * ds / (s * norm)
        lam = lam - psi / dpsi
        if not (lo < lam < hi):
            lam = 0.5 * (lo + hi)
        if hi - lo <= 1e-15 * hi:
            break
    u1 = -h1 / (l1 + lam)
    u2 = -h2 / (l2 + lam)
    # on the rim exactly (the Newton iterate is within rounding of it)
    norm = sqrt(u1 * u1 + u2 * u2)
    u1 *= radius / norm
    u2 *= radius / norm
    y1[0] = q1 * u1 - q2 * u2
    y2[0] = q2 * u1 + q1 * u2


# One contact's block: the normal row, then the tangent rows for the normal impulse it got.
cdef inline double _contact(Rows* R, Py_ssize_t c, Py_ssize_t k, int d, const double* mu, const double* diag,
                            const double* block, double omega) noexcept nogil:
    cdef double change = 0.0, new, g1, g2, y1 = 0.0, y2 = 0.0, radius
    cdef const double* t = &block[3 * c]
    cdef double* x = R.x
    if diag[c] > 0.0:
        new = x[c] - omega * _row(R, c) / diag[c]
        change = _set(R, c, new if new > 0.0 else 0.0)
    radius = mu[c] * x[c]
    if d == 2:
        new = 0.0
        if t[0] > 0.0 and radius > 0.0:
            new = min(max(x[k + c] - _row(R, k + c) / t[0], -radius), radius)
        return max(change, _set(R, k + c, new))
    if radius > 0.0:
        # the rows' parts that are not this contact's own friction impulse
        g1 = _row(R, k + c) - t[0] * x[k + c] - t[1] * x[2 * k + c]
        g2 = _row(R, 2 * k + c) - t[1] * x[k + c] - t[2] * x[2 * k + c]
        _disc(t[0], t[1], t[2], g1, g2, radius, &y1, &y2)
    change = max(change, _set(R, k + c, y1))
    return max(change, _set(R, 2 * k + c, y2))


cdef inline double _scalar(Rows* R, Py_ssize_t i, const double* lo, const double* hi, const double* diag,
                           double omega) noexcept nogil:
    if not diag[i] > 0.0:
        return 0.0
    return _set(R, i, min(max(R.x[i] - omega * _row(R, i) / diag[i], lo[i]), hi[i]))


# Block Gauss-Seidel sweeps over the n rows of R (cone_sweeps' docstring) updating R.x (and R.v);
# returns the sweeps done, converged[0] whether the last one changed x by at most tol max(1, |x|_inf).
cdef Py_ssize_t sweeps_into(Rows* R, Py_ssize_t n, Py_ssize_t k, int d, const double* mu, const double* lo,
                            const double* hi, const double* diag, const double* block, Py_ssize_t iterations,
                            double tol, double omega, bint* converged) noexcept nogil:
    cdef Py_ssize_t sweep, c, i, first = k * (d - 1) + k, done = iterations
    cdef double change, size
    converged[0] = False
    if n == 0:
        converged[0] = True
        return 0
    for sweep in range(1, iterations + 1):
        change = 0.0
        if sweep % 2:
            for c in range(k):
                change = max(change, _contact(R, c, k, d, mu, diag, block, omega))
            for i in range(first, n):
                change = max(change, _scalar(R, i, lo, hi, diag, omega))
        else:
            for i in range(n - 1, first - 1, -1):
                change = max(change, _scalar(R, i, lo, hi, diag, omega))
            for c in range(k - 1, -1, -1):
                change = max(change, _contact(R, c, k, d, mu, diag, block, omega))
        size = 0.0
        for i in range(n):
            size = max(size, fabs(R.x[i]))
        if change <= tol * max(1.0, size):
            done = sweep
            converged[0] = True
            break
    return done


# The natural residual (mbsim.solvers.numerics.cone.ContactProblem.residual) of x with w = A x + b:
# per row |x - clip(x - w / A_ii, lo, hi)| (rows that cannot move: A_ii <= 1e-12 max A_jj, step 0),
# a contact's normal entry the larger of its own and its friction's: |x_T - proj(x_T - w_T / a_T)|
# onto the disc of radius mu max(x_N, 0), a_T the mean of its tangent rows' A_ii; the largest.
cdef double natural_residual(const double* x, const double* w, Py_ssize_t n, Py_ssize_t k, int d, const double* mu,
                             const double* lo, const double* hi, const double* diag) noexcept nogil:
    cdef Py_ssize_t i, c, first = k * d
    cdef double scale = 0.0, inv, y, r, out = 0.0, a_t, p1, p2, t1, t2, radius, norm, f
    for i in range(n):
        scale = max(scale, diag[i])
    scale = 1e-12 * max(scale, 1e-300)
    for i in range(n):
        if k <= i < first:  # the tangents: with their normal below
            continue
        inv = 1.0 / diag[i] if diag[i] > scale else 0.0
        y = min(max(x[i] - w[i] * inv, lo[i]), hi[i])
        r = fabs(x[i] - y)
        if i < k:
            a_t = diag[k + i] if d == 2 else 0.5 * (diag[k + i] + diag[2 * k + i])
            inv = 1.0 / a_t if a_t > 0.0 else 0.0
            radius = mu[i] * max(x[i], 0.0)
            t1 = x[k + i] - w[k + i] * inv
            if d == 2:
                p1 = min(max(t1, -radius), radius)
                f = (x[k + i] - p1) * (x[k + i] - p1)
            else:
                t2 = x[2 * k + i] - w[2 * k + i] * inv
                norm = sqrt(t1 * t1 + t2 * t2)
                f = radius / (norm if norm > 0.0 else 1.0) if norm > radius else 1.0
                p1 = t1 * f
                p2 = t2 * f
                f = (x[k + i] - p1) * (x[k + i] - p1) + (x[2 * k + i] - p2) * (x[2 * k + i] - p2)
            r = max(r, sqrt(f))
        out = max(out, r)
    return out


def residual(const double[::1] x, const double[::1] w, Py_ssize_t k, int d, const double[::1] mu,
             const double[::1] lo, const double[::1] hi, const double[::1] diag):
    """The natural residual of x (n,) with w = A x + b (n,) (natural_residual above): k contacts of
    dimension d, mu (k,), bounds lo, hi (n,) and A's diagonal (n,)."""
    cdef Py_ssize_t n = x.shape[0]
    cdef double zero = 0.0, out = 0.0
    if n == 0:
        return 0.0
    with nogil:
        out = natural_residual(&x[0], &w[0], n, k, d, &mu[0] if k else &zero, &lo[0], &hi[0], &diag[0])
    return out


def cone_sweeps(const long long[::1] indptr, const long long[::1] indices, const double[::1] data,
                const double[::1] b, double[::1] x, Py_ssize_t k, int d, const double[::1] mu,
                const double[::1] lo, const double[::1] hi, const double[::1] diag, const double[::1] block,
                Py_ssize_t iterations, double tol, double omega, const double[::1] u=None, double[::1] v=None):
    """Block Gauss-Seidel sweeps (module docstring) updating x (and v) in place; returns (sweeps, converged).

    Args: the rows as CSR (indptr (n+1,), indices, data): A, or with ``u`` and ``v`` J in body space
    (u: U = J M^-1 on J's pattern; v (nv,): M^-1 J^T x of the start x, kept up to date); b (n,); x
    (n,) the start, feasible; k contacts of dimension d (2 or 3); mu (k,); lo, hi (n,) bounds of the
    rows after the contacts' (others unread); diag (n,) A's diagonal (a row with diag <= 0 is left
    alone); block (3k,) each contact's tangent block (A_11, A_12, A_22; 2D: A_11); omega the
    over-relaxation of the scalar rows. Converged: the largest change of x in a sweep <= tol
    max(1, |x|_inf).
    """
    cdef Py_ssize_t n = x.shape[0], done = 0
    cdef bint converged = False
    cdef Rows R
    if n == 0:
        return 0, True
    R.indptr = &indptr[0]
    R.indices = &indices[0] if indices.shape[0] else NULL
    R.data = &data[0] if data.shape[0] else NULL
    R.u = NULL if u is None else (&u[0] if u.shape[0] else &data[0])
    R.v = NULL if v is None else &v[0]
    R.b = &b[0]
    R.x = &x[0]
    with nogil:
        done = sweeps_into(&R, n, k, d, &mu[0], &lo[0], &hi[0], &diag[0], &block[0], iterations, tol, omega,
                           &converged)
    return done, converged


# ---------------------------------------------------------------------- the active-set solve

# Its constants (mbsim.solvers.numerics.cone): active-set rounds per solve, fixed-point updates of the
# sliding directions per round, the relative Tikhonov shift of the least squares and its refinements at
# most (the error falls by TIKHONOV / (lambda / max L_ii + TIKHONOV) on an eigenvalue lambda each: at
# once where L is well conditioned, slowly on a nearly redundant direction; they stop when met).
cdef enum:
    ROUNDS = 12
    FIXED_POINT = 4
    REFINEMENTS = 30
cdef double TIKHONOV = 1e-10


# w = A x + b over the dense (n, n) C-order A (four partial sums: the products do not wait on
# one another's additions).
cdef inline void _dense_w(const double* A, const double* b, const double* x, Py_ssize_t n, double* w) noexcept nogil:
    cdef Py_ssize_t i, j, n4 = n - n % 4
    cdef double s0, s1, s2, s3
    cdef const double* row
    for i in range(n):
        row = &A[i * n]
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for j in range(0, n4, 4):
            s0 += row[j] * x[j]
            s1 += row[j + 1] * x[j + 1]
            s2 += row[j + 2] * x[j + 2]
            s3 += row[j + 3] * x[j + 3]
        for j in range(n4, n):
            s0 += row[j] * x[j]
        w[i] = ((s0 + s1) + (s2 + s3)) + b[i]


# The minimum-norm solution z (m,) of L z = r for a consistent, possibly rank-deficient L (m, m)
# (redundant contact points) by iterated Tikhonov regularisation: z <- z + (L + eps I)^-1 (r - L z)
# from z = 0 on one factorisation of L + eps I; each iteration shrinks the error by eps / (lambda + eps)
# on every nonzero eigenvalue lambda and the iterates stay in L's range (symmetric L: no null-space
# part). A symmetric L (no sliding contact: L is a principal block of A, positive semidefinite) is
# factored by Cholesky inside its envelope (lapack_kernels.cholesky_envelope: a stack's system,
# its contacts' rows together, is banded: ~m b^2 / 2 operations for a band b, against LU's 2 m^3 / 3),
# the products too; else (or when that fails) by LU (lu, m^2), ~20 times cheaper than the SVD of a
# least-squares driver. first, last: 2 m slots. False: LAPACK failed.
cdef bint _least_squares(const double* L, const double* r, Py_ssize_t m, double* z, double* lu, double* res,
                         int* pivots, bint symmetric, long long* first, double goal) noexcept nogil:
    cdef Py_ssize_t i, j, it
    cdef double eps = 0.0, s, size, change
    cdef bint done
    cdef long long* last = &first[m]
    cdef bint envelope = symmetric
    for i in range(m):
        eps = max(eps, fabs(L[i * m + i]))
    eps = TIKHONOV * max(eps, 1e-300)
    if envelope:
        # row i's first nonzero column (its envelope) and the last row reaching column i
        for i in range(m):
            first[i] = i
            for j in range(i):
                if L[i * m + j] != 0.0:
                    first[i] = j
                    break
            last[i] = i
        for i in range(m):
            for j in range(first[i], i):
                last[j] = max(last[j], <long long>i)
        for i in range(m):
            for j in range(first[i], i + 1):
                lu[i * m + j] = L[i * m + j]
            lu[i * m + i] += eps
        envelope = cholesky_envelope_raw(m, lu, first)
    if not envelope:
        for i in range(m):
            first[i] = 0
            last[i] = m - 1
        # (L + eps I)^T in C order: LAPACK's column-major L + eps I, as scipy's lu_factor factors it
        for i in range(m):
            for j in range(m):
                lu[j * m + i] = L[i * m + j]
            lu[i * m + i] += eps
        if lu_factor_raw(m, lu, pivots) < 0:
            return False
    for i in range(m):
        z[i] = r[i]
    if envelope:
        cholesky_envelope_solve_ptr(m, lu, first, last, z)
    else:
        lu_solve_raw(m, lu, pivots, z)
    size = 1e300
    for it in range(REFINEMENTS):
        # (row i of a symmetric L is zero outside columns first[i] .. last[i])
        done = True
        change = 0.0
        for i in range(m):
            s = r[i]
            for j in range(first[i], last[i] + 1):
                s -= L[i * m + j] * z[j]
            res[i] = s
            done = done and fabs(s) <= goal * fabs(L[i * m + i])
            change = max(change, fabs(s))
        # met (each row's velocity within ``goal`` of its impulse units), or no longer falling (the
        # round-off, or what a least-squares answer of an inconsistent L leaves)
        if done or change >= size:
            break
        size = change
        if envelope:
            cholesky_envelope_solve_ptr(m, lu, first, last, res)
        else:
            lu_solve_raw(m, lu, pivots, res)
        for i in range(m):
            z[i] += res[i]
    return True


# The contacts in reverse Cuthill-McKee order (George and Liu, "Computer Solution of Large Sparse
# Positive Definite Systems", 1981, §4.3) of the graph whose edges are A's nonzero normal-normal
# entries (contacts that share a body): breadth first from a contact of least degree, neighbours by
# increasing degree, reversed. A stack comes out bottom to top (or top to bottom) whatever order the
# detection gave, so that the active-set solve's matrix is banded. order, mark: (k,).
cdef void contact_order(const double* A, Py_ssize_t n, Py_ssize_t k, int* order, int* mark) noexcept nogil:
    cdef Py_ssize_t c, e, head = 0, tail = 0, start, best, lo, i, tmp
    cdef int* degree = mark  # degree while unvisited, -1 once queued
    for c in range(k):
        degree[c] = 0
        for e in range(k):
            if e != c and A[c * n + e] != 0.0:
                degree[c] += 1
    while tail < k:
        # a new component: its unvisited contact of least degree
        start = -1
        for c in range(k):
            if degree[c] >= 0 and (start < 0 or degree[c] < degree[start]):
                start = c
        order[tail] = <int>start
        degree[start] = -1
        tail += 1
        while head < tail:
            c = order[head]
            head += 1
            lo = tail
            for e in range(k):
                if degree[e] >= 0 and e != c and A[c * n + e] != 0.0:
                    order[tail] = <int>e
                    tail += 1
            # the new neighbours by increasing degree (insertion sort: a few each); marked queued after
            for i in range(lo + 1, tail):
                tmp = order[i]
                best = i
                while best > lo and degree[order[best - 1]] > degree[tmp]:
                    order[best] = order[best - 1]
                    best -= 1
                order[best] = <int>tmp
            for i in range(lo, tail):
                degree[order[i]] = -1
    for c in range(k // 2):
        tmp = order[c]
        order[c] = order[k - 1 - c]
        order[k - 1 - c] = <int>tmp


cdef Py_ssize_t polish_doubles(Py_ssize_t n) noexcept nogil:
    return 2 * n * n + 10 * n + 4


# w = A out + b of polish_into's answer, in its work buffer (after it returned True)
cdef const double* polish_w(const double* work, Py_ssize_t n) noexcept nogil:
    return &work[2 * n * n + 4 * n]


cdef Py_ssize_t polish_ints(Py_ssize_t n) noexcept nogil:
    return 8 * n + 1


# The active-set solve from x (mbsim.solvers.numerics.cone, module docstring): set changes as in
# non-negative least squares (Lawson and Hanson), so that a redundant face (four corners carrying a
# tilted load, whose minimum-norm shares may come out negative) does not cycle: a round whose solve
# pulls on some contacts only drops those; only a round whose impulses are all admissible adds the
# contacts that penetrate and switches sticking contacts past the rim to sliding, sliding ones whose
# slip reversed to sticking. The rows as in natural_residual (lo, hi: the box rows' bounds are
# -lo = hi); A dense (n, n) C-order; work, iwork of polish_doubles(n), polish_ints(n) entries.
# True: out (n,) holds an answer of residual <= tol.
cdef bint polish_into(const double* A, const double* b, Py_ssize_t n, Py_ssize_t k, int d, Py_ssize_t nu,
                      const double* mu, const double* lo, const double* hi, const double* diag, const double* x,
                      double tol, double* out, double* work, int* iwork) noexcept nogil:
    cdef Py_ssize_t nt = d - 1, first = k * d, nb = n - k * d - nu
    cdef Py_ssize_t c, a, i, j, m, ns, row, rnd, fp, e
    cdef double scale = 0.0, dscale = 0.0, size, norm, change, step
    cdef bint changed
    cdef int attempt, mode, swap
    # the work buffers
    cdef double* lhs = work
    cdef double* lu = &work[n * n]
    cdef double* rhs = &work[2 * n * n]
    cdef double* z = &rhs[n]
    cdef double* res = &z[n]
    cdef double* x0 = &res[n]
    cdef double* w = &x0[n]
    cdef double* direction = &w[n]  # (k, nt)
    cdef double* sign = &direction[2 * k]  # (nb,)
    cdef double* unit = &sign[nb + 1]  # (nt,) scratch
    cdef int* E = iwork
    cdef int* pivots = &iwork[n]
    cdef int* touching = &iwork[2 * n]
    cdef int* sliding = &touching[k]
    cdef int* sticking = &sliding[k]
    cdef int* slide = &sticking[k]  # positions among E's normals of the sliding contacts
    cdef int* stop_on = &slide[k]
    cdef int* inside = &stop_on[nu]
    cdef int* movable = &inside[nb]
    cdef int* order = &movable[n]  # (k,) the contacts in the unknowns' order
    cdef int* mark = &order[k]  # (k,) scratch of contact_order
    for i in range(n):
        scale = max(scale, fabs(x[i]))
        dscale = max(dscale, diag[i])
    scale = max(scale, 1e-300)
    # rows x cannot move (a direction the joints lock) stay out (ContactProblem.movable)
    for i in range(n):
        movable[i] = diag[i] > 1e-12 * max(dscale, 1e-300)
    contact_order(A, n, k, order, mark)
    # the start (attempt 0): the sets x gives, with two amendments for the sweeps' answer on a stack:
    # a closed contact that carries nothing (w_N ~ 0: a redundant corner the sweeps left unloaded)
    # touches, so that a face's corners share the load from the first round; a contact on its rim
    # that does not slip (w_T ~ 0) or carries next to nothing sticks. Attempt 1 (when attempt 0 failed
    # within half the rounds, as from the far from converged sweeps of a cold start, which try it
    # first): every contact touching and sticking, the stops closed.
    _dense_w(A, b, x, n, w)
    # (a start far from converged, a residual above 1e-3 of its largest impulse, as a cold start's
    # sweeps leave: the all-sticking attempt first)
    swap = natural_residual(x, w, n, k, d, mu, lo, hi, diag) > 1e-3 * scale
    for attempt in range(2):
        mode = attempt ^ swap
        for c in range(k):
            if mode:
                touching[c] = movable[c]
                sliding[c] = False
                continue
            touching[c] = (x[c] > 1e-12 * scale or w[c] <= 1e-6 * scale * diag[c]) and movable[c]
            size = 0.0
            norm = 0.0
            for a in range(nt):
                size += x[k + a * k + c] * x[k + a * k + c]
                norm += w[k + a * k + c] * w[k + a * k + c]
            size = sqrt(size)
            sliding[c] = (touching[c] and mu[c] > 0.0 and size >= mu[c] * x[c] * (1.0 - 1e-9) and size > 0.0
                          and sqrt(norm) > 1e-6 * scale * diag[k + c] and x[c] > 1e-9 * scale)
            for a in range(nt):
                direction[c * nt + a] = x[k + a * k + c] / size if sliding[c] else 0.0
        for j in range(nu):
            stop_on[j] = (x[first + j] > 1e-12 * scale or mode) and movable[first + j]
        for j in range(nb):
            i = first + nu + j
            inside[j] = fabs(x[i]) < hi[i] * (1.0 - 1e-9) and movable[i]
            sign[j] = -1.0 if x[i] < 0.0 else 1.0
        for rnd in range(ROUNDS if mode else ROUNDS // 2):
            for c in range(k):
                sticking[c] = touching[c] and mu[c] > 0.0 and not sliding[c]
            # unknowns (their rows of x, each with its own equation w = 0): the touching normals (a
            # sliding contact's friction follows its normal impulse), the sticking tangents, the closed
            # stops and the free box rows; x = x0 elsewhere (the box rows at a bound)
            m = 0
            ns = 0
            # (a contact's rows together, in contact_order: a stack's system is then banded, its
            # Cholesky envelope narrow)
            for e in range(k):
                c = order[e]
                if touching[c]:
                    if sliding[c]:
                        slide[ns] = <int>m
                        ns += 1
                    E[m] = <int>c
                    m += 1
                if sticking[c]:
                    for a in range(nt):
                        E[m] = <int>(k + a * k + c)
                        m += 1
            for j in range(nu):
                if stop_on[j]:
                    E[m] = <int>(first + j)
                    m += 1
            for j in range(nb):
                if inside[j]:
                    E[m] = <int>(first + nu + j)
                    m += 1
            for i in range(n):
                x0[i] = 0.0
            for j in range(nb):
                if not inside[j]:
                    x0[first + nu + j] = sign[j] * hi[first + nu + j]
            for i in range(n):
                out[i] = x0[i]
            if m:
                for i in range(m):
                    row = E[i]
                    step = b[row]
                    for j in range(first + nu, n):  # (x0 is zero but at the box rows)
                        step += A[row * n + j] * x0[j]
                    rhs[i] = -step
                for fp in range(FIXED_POINT):
                    for i in range(m):
                        row = E[i]
                        for j in range(m):
                            lhs[i * m + j] = A[row * n + E[j]]
                    # d w / d x_N of a sliding contact: its normal column plus mu s along its tangents
                    for e in range(ns):
                        c = E[slide[e]]
                        for a in range(nt):
                            step = mu[c] * direction[c * nt + a]
                            for i in range(m):
                                lhs[i * m + slide[e]] += A[E[i] * n + k + a * k + c] * step
                    if not _least_squares(lhs, rhs, m, z, lu, res, pivots, ns == 0, <long long*>&unit[nt], 1e-3 * tol):
                        return False
                    for i in range(n):
                        out[i] = x0[i]
                    for i in range(m):
                        out[E[i]] = z[i]
                    for e in range(ns):
                        c = E[slide[e]]
                        for a in range(nt):
                            out[k + a * k + c] = mu[c] * direction[c * nt + a] * z[slide[e]]
                    if ns == 0:
                        break
                    # the sliding directions from the tangential velocities they give (fixed point)
                    _dense_w(A, b, out, n, w)
                    change = 0.0
                    for e in range(ns):
                        c = E[slide[e]]
                        size = 0.0
                        for a in range(nt):
                            size += w[k + a * k + c] * w[k + a * k + c]
                        size = sqrt(size)
                        for a in range(nt):
                            unit[a] = -w[k + a * k + c] / size if size > 0.0 else direction[c * nt + a]
                            change = max(change, fabs(unit[a] - direction[c * nt + a]))
                        # (stored below only when the fixed point moved: as the Python path did)
                        for a in range(nt):
                            res[e * nt + a] = unit[a]
                    if change <= 1e-12:
                        break
                    for e in range(ns):
                        c = E[slide[e]]
                        for a in range(nt):
                            direction[c * nt + a] = res[e * nt + a]
            # a solve that pulls on contacts or stops (by more than the tolerance: a redundant corner's
            # share of nothing comes out as round-off of either sign): those leave, nothing else changes
            # (all at once from the sweeps' sets; from every contact touching one at a time, the one
            # pulled on most, as in Lawson and Hanson's algorithm: a face whose minimum-norm shares
            # pull on two corners may need only one of them gone)
            changed = False
            e = -1
            for c in range(k):
                if touching[c] and out[c] < -tol and (e < 0 or out[c] < out[e]):
                    e = c
                    if not mode:
                        touching[c] = False
            if e >= 0:
                touching[e] = False
                changed = True
            for j in range(nu):
                if stop_on[j] and out[first + j] < -tol:
                    stop_on[j] = False
                    changed = True
            if changed:
                continue
            _dense_w(A, b, out, n, w)
            if natural_residual(out, w, n, k, d, mu, lo, hi, diag) <= tol:
                return True
            # admissible impulses: penetrating contacts and stops join, friction switches
            for c in range(k):
                if w[c] < -tol and movable[c] and not touching[c]:
                    touching[c] = True
                    changed = True
            for j in range(nu):
                if w[first + j] < -tol and movable[first + j] and not stop_on[j]:
                    stop_on[j] = True
                    changed = True
            for c in range(k):
                size = 0.0
                for a in range(nt):
                    size += out[k + a * k + c] * out[k + a * k + c]
                size = sqrt(size)
                # past the rim (by more than the tolerance): sliding along its impulse
                if sticking[c] and size > mu[c] * max(out[c], 0.0) + tol:
                    for a in range(nt):
                        direction[c * nt + a] = out[k + a * k + c] / size
                    sliding[c] = True
                    changed = True
                elif sliding[c]:  # slip reversed: sticking
                    norm = 0.0
                    for a in range(nt):
                        norm += w[k + a * k + c] * direction[c * nt + a]
                    if norm > 0.0:
                        sliding[c] = False
                        changed = True
            for j in range(nb):
                i = first + nu + j
                if inside[j] and fabs(out[i]) > hi[i]:
                    sign[j] = 1.0 if out[i] > 0.0 else -1.0
                    inside[j] = False
                    changed = True
            if not changed:  # the same sets would give the same answer: this attempt is over
                break
    return False


def polish(const double[:, ::1] A, const double[::1] b, Py_ssize_t k, int d, Py_ssize_t nu, const double[::1] mu,
           const double[::1] lo, const double[::1] hi, const double[::1] diag, const double[::1] x, double tol):
    """The active-set solve (polish_into) on the dense (n, n) A from x (n,): the answer (n,) of natural
    residual <= tol, or None when it fails; k contacts of dimension d, nu stops, then box rows of
    bounds lo = -hi; mu (k,); diag (n,) A's diagonal."""
    cdef Py_ssize_t n = x.shape[0]
    cdef double zero = 0.0
    cdef bint ok
    if n == 0:
        return None
    out = np.zeros(n)
    work = np.zeros(polish_doubles(n))
    iwork = np.zeros(polish_ints(n), dtype=np.intc)
    cdef double[::1] o = out, wk = work
    cdef int[::1] iw = iwork
    with nogil:
        ok = polish_into(&A[0, 0], &b[0], n, k, d, nu, &mu[0] if k else &zero, &lo[0], &hi[0], &diag[0], &x[0],
                         tol, &o[0], &wk[0], &iw[0])
    return out if ok else None
