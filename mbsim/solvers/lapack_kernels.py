"""LAPACK's SVD and least-squares solver callable from compiled code that allocates nothing.

numba's own ``np.linalg.svd`` and ``np.linalg.lstsq`` allocate their results, which the step
kernels (compiled without numba's runtime, ``_nrt=False``: they write into preallocated
buffers only) cannot call. Underneath, numba calls LAPACK through two C helpers of its own,
``numba_ez_gesdd`` and ``numba_ez_gelsd`` (numba.np.linalg._LAPACK), which take raw pointers,
query and allocate the routine's workspace themselves and find LAPACK in scipy's
``cython_lapack`` on first use. Binding the same helpers here gives the compiled kernels the
routines the Python path uses (numpy's ``svd`` is gesdd, scipy's ``lstsq`` with
``lapack_driver="gelsd"`` is gelsd), so the two paths agree to round-off, and the calls stay
cacheable (a helper symbol, not a pointer).

LAPACK is column-major: an (m, n) matrix in Fortran order is the C-order (n, m) array of its
transpose, which is how the buffers below are passed.
"""

from __future__ import annotations

from numba import njit, types
from numba.np.linalg import _LAPACK

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "_nrt": False}

_GESDD = _LAPACK().numba_ez_gesdd(types.float64)
_GELSD = _LAPACK().numba_ez_gelsd(types.float64)
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
