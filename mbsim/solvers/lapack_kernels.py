"""Dense linear algebra of the compiled steps, allocating nothing: LAPACK's SVD and least
squares, and a Cholesky factorisation in plain loops (for the small systems of a step a LAPACK
call costs more than the work).

numba's own ``np.linalg.svd`` and ``np.linalg.lstsq`` allocate their results, which the step
kernels (compiled without numba's runtime, ``_nrt=False``: they write into preallocated
buffers only) cannot call. Underneath, numba calls LAPACK through two C helpers of its own,
``numba_ez_gesdd``, ``numba_ez_gelsd`` and ``numba_xgesv`` (numba.np.linalg._LAPACK), which take raw pointers,
query and allocate the routine's workspace themselves and find LAPACK in scipy's
``cython_lapack`` on first use. Binding the same helpers here gives the compiled kernels the
routines the Python path uses (numpy's ``svd`` is gesdd, ``solve`` is gesv, numpy's ``lstsq`` and
scipy's with ``lapack_driver="gelsd"`` are gelsd), so the two paths agree to round-off, and the calls stay
cacheable (a helper symbol, not a pointer).

LAPACK is column-major: an (m, n) matrix in Fortran order is the C-order (n, m) array of its
transpose, which is how the buffers below are passed.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.np.linalg import _LAPACK

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "_nrt": False}

_GESDD = _LAPACK().numba_ez_gesdd(types.float64)
_GELSD = _LAPACK().numba_ez_gelsd(types.float64)
_GESV = _LAPACK().numba_xgesv(types.float64)
_DOUBLE = ord("d")
_ALL = ord("A")


@njit(**_JIT)
def svd_into(at, u_t, s, v):
    """Full SVD A = U diag(s) V^T of the (m, n) matrix A given as ``at`` = A^T, C-order (n, m),
    destroyed. Writes u_t (m, m) = U^T (row k: the k-th left singular vector), s (min(m, n),)
    descending and v (n, n) = V (column k: the k-th right singular vector). Returns LAPACK's
    info (0: converged)."""
    n, m = at.shape
    return _GESDD(_DOUBLE, _ALL, m, n, at.ctypes, m, s.ctypes, u_t.ctypes, m, v.ctypes, n)


@njit(**_JIT)
def lstsq_symmetric_into(a, b, s, rcond, rank):
    """Minimum-norm least-squares solution of a x = b for a symmetric (n, n) ``a`` (so C and
    Fortran order coincide; destroyed), singular values below rcond times the largest treated
    as zero (scipy's ``lstsq(cond=rcond)``). b (n,) is overwritten with x; s (n,) receives the
    singular values, rank (1,) the effective rank. Returns LAPACK's info."""
    n = a.shape[0]
    return _GELSD(_DOUBLE, n, n, 1, a.ctypes, n, b.ctypes, n, s.ctypes, rcond, rank.ctypes)


@njit(**_JIT)
def solve_into(at, b, pivots):
    """a x = b by LU with partial pivoting (LAPACK gesv, numpy's ``solve``) for the (n, n) matrix a
    given as ``at`` = a^T, C-order (destroyed); b (n,) is overwritten with x; pivots (n,) of
    LAPACK's integer type (mbsim.model.flat: kkt_rank's dtype). Returns LAPACK's info (> 0: a is
    singular)."""
    n = at.shape[0]
    return _GESV(_DOUBLE, n, 1, at.ctypes, n, pivots.ctypes, b.ctypes, n)


@njit(**_JIT)
def cholesky_in_place(A):
    """A = L L^T in place (lower triangle); False if A is not positive definite."""
    n = A.shape[0]
    for c in range(n):
        d = A[c, c]
        for k in range(c):
            d -= A[c, k] * A[c, k]
        if not d > 0.0:
            return False
        d = np.sqrt(d)
        A[c, c] = d
        for r in range(c + 1, n):
            s = A[r, c]
            for k in range(c):
                s -= A[r, k] * A[c, k]
            A[r, c] = s / d
    return True


@njit(**_JIT)
def cholesky_solve(L, x):
    """x <- (L L^T)^-1 x."""
    n = L.shape[0]
    for r in range(n):
        s = x[r]
        for k in range(r):
            s -= L[r, k] * x[k]
        x[r] = s / L[r, r]
    for r in range(n - 1, -1, -1):
        s = x[r]
        for k in range(r + 1, n):
            s -= L[k, r] * x[k]
        x[r] = s / L[r, r]


@njit(**_JIT)
def cholesky_envelope(A, first):
    """A = L L^T in place (lower triangle) for a symmetric A whose row i is zero left of column
    first[i] (its envelope, which holds L's row too): the operations of cholesky_in_place less
    the products with those zeros, so the same numbers. False if A is not positive definite."""
    n = A.shape[0]
    for i in range(n):
        fi = first[i]
        for j in range(fi, i):
            s = A[i, j]
            for k in range(max(fi, first[j]), j):
                s -= A[i, k] * A[j, k]
            A[i, j] = s / A[j, j]
        d = A[i, i]
        for k in range(fi, i):
            d -= A[i, k] * A[i, k]
        if not d > 0.0:
            return False
        A[i, i] = np.sqrt(d)
    return True


@njit(**_JIT)
def cholesky_envelope_solve(L, first, last, x):
    """x <- (L L^T)^-1 x for a factor from cholesky_envelope; last[r]: the last row whose
    envelope reaches column r (entries outside the envelope are zero)."""
    n = L.shape[0]
    for r in range(n):
        s = x[r]
        for k in range(first[r], r):
            s -= L[r, k] * x[k]
        x[r] = s / L[r, r]
    for r in range(n - 1, -1, -1):
        s = x[r]
        for k in range(r + 1, last[r] + 1):
            if first[k] <= r:
                s -= L[k, r] * x[k]
        x[r] = s / L[r, r]
