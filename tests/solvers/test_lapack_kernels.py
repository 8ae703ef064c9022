"""mbsim.solvers.numerics.lapack_kernels (Cython over scipy.linalg.cython_lapack) against numpy's and scipy's
own LAPACK calls: the compiled steps and the Python path must get the same numbers to round-off."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from mbsim.solvers.numerics.lapack_kernels import (
    cholesky_envelope,
    cholesky_envelope_solve,
    cholesky_in_place,
    cholesky_solve,
    lstsq_symmetric_into,
    solve_into,
    svd_into,
)


def _rank_deficient(rng, m: int, n: int, rank: int) -> np.ndarray:
    return rng.normal(size=(m, rank)) @ rng.normal(size=(rank, n))


@pytest.mark.parametrize("m, n", [(3, 5), (5, 3), (4, 4), (1, 6), (7, 1)], ids=lambda v: str(v))
def test_svd_is_numpys_gesdd(m, n):
    """Full SVD of an (m, n) matrix through its C-order transpose: numpy's U, s, V (same routine,
    gesdd with all vectors), signs included, to round-off."""
    rng = np.random.default_rng(m * 10 + n)
    A = rng.normal(size=(m, n))
    at = A.T.copy()  # destroyed (a copy: A.T of a single row or column is contiguous already)
    u_t, s, v = np.empty((m, m)), np.empty(min(m, n)), np.empty((n, n))
    assert svd_into(at, u_t, s, v) == 0
    U, S, Vt = np.linalg.svd(A)
    np.testing.assert_allclose(s, S, rtol=1e-13, atol=0)
    np.testing.assert_allclose(u_t, U.T, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v, Vt.T, rtol=0, atol=1e-12)
    k = min(m, n)
    np.testing.assert_allclose((u_t.T[:, :k] * s) @ v.T[:k], A, rtol=0, atol=1e-12)


def test_svd_of_a_rank_deficient_matrix():
    """A rank-2 (4, 6) matrix: two singular values at round-off, the rest as numpy's."""
    rng = np.random.default_rng(1)
    A = _rank_deficient(rng, 4, 6, 2)
    u_t, s, v = np.empty((4, 4)), np.empty(4), np.empty((6, 6))
    assert svd_into(np.ascontiguousarray(A.T), u_t, s, v) == 0
    S = np.linalg.svd(A, compute_uv=False)
    np.testing.assert_allclose(s, S, rtol=0, atol=1e-13 * S[0])
    assert s[2] < 1e-14 * s[0] and s[3] < 1e-14 * s[0]


@pytest.mark.parametrize("n, rank", [(6, 6), (6, 4), (9, 5)], ids=["full", "rank4", "rank5of9"])
def test_lstsq_symmetric_is_scipys_gelsd(n, rank):
    """Minimum-norm least squares of a symmetric system with scipy's lstsq(gelsd, cond): the same
    solution, singular values and rank."""
    rng = np.random.default_rng(n + rank)
    B = _rank_deficient(rng, n, n, rank)
    K = B + B.T
    b = rng.normal(size=n)
    a, x, s, r = K.copy(), b.copy(), np.empty(n), np.zeros(1, dtype=np.intc)
    assert lstsq_symmetric_into(a, x, s, 1e-10, r) == 0
    expected, _, erank, es = scipy.linalg.lstsq(K, b, cond=1e-10, lapack_driver="gelsd")
    np.testing.assert_allclose(x, expected, rtol=0, atol=1e-11 * np.abs(expected).max())
    np.testing.assert_allclose(s, es, rtol=0, atol=1e-13 * es[0])
    assert r[0] == erank == np.linalg.matrix_rank(K)


def test_solve_is_numpys_gesv():
    """LU with partial pivoting of a non-symmetric system given transposed, as numpy.linalg.solve;
    a singular matrix gives info > 0."""
    rng = np.random.default_rng(7)
    n = 8
    A = rng.normal(size=(n, n))
    b = rng.normal(size=n)
    x, piv = b.copy(), np.zeros(n, dtype=np.intc)
    assert solve_into(np.ascontiguousarray(A.T), x, piv) == 0
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=0, atol=1e-12 * np.abs(x).max())
    singular = A.copy()
    singular[:, 3] = 0.0  # an exact zero pivot
    assert solve_into(singular.T.copy(), b.copy(), piv) > 0


def test_cholesky_is_numpys():
    """The loop Cholesky gives numpy's factor, its solve the dense solve; an indefinite matrix is
    refused."""
    rng = np.random.default_rng(3)
    n = 12
    B = rng.normal(size=(n, n))
    A = B @ B.T + n * np.eye(n)
    L = A.copy()
    assert cholesky_in_place(L)
    np.testing.assert_allclose(np.tril(L), np.linalg.cholesky(A), rtol=0, atol=1e-13 * np.abs(A).max())
    b = rng.normal(size=n)
    x = b.copy()
    cholesky_solve(L, x)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=0, atol=1e-13 * np.abs(x).max())
    indefinite = A - 2 * np.abs(np.linalg.eigvalsh(A)).max() * np.eye(n)
    assert not cholesky_in_place(indefinite)


def test_envelope_cholesky_of_a_banded_matrix_is_the_dense_one():
    """A tridiagonal matrix (envelope: one left of the diagonal): the envelope factor equals numpy's
    and its solve the dense solve."""
    n = 10
    A = 4 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    first = np.maximum(np.arange(n) - 1, 0).astype(np.int64)
    last = np.minimum(np.arange(n) + 1, n - 1).astype(np.int64)
    L = np.tril(A)
    assert cholesky_envelope(L, first)
    np.testing.assert_allclose(np.tril(L), np.linalg.cholesky(A), rtol=0, atol=1e-14)
    b = np.arange(n, dtype=float)
    x = b.copy()
    cholesky_envelope_solve(L, first, last, x)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=0, atol=1e-13)
