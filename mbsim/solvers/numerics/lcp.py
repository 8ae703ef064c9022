"""Linear complementarity solvers as pure numerics (imports nothing from mbsim but its compiled sweeps).

The contact and impact steps of papers/unilateral-constraints-lcp-projection-correction.txt
end in a standard LCP (its eq. (14), normal impulses S_N against post-impact normal velocities),
which the paper solves with "the Lemke algorithm or projected Gauss-Seidel". Both are here:

- :func:`pgs`: projected Gauss-Seidel (PGS) for the box-constrained mixed LCP (MLCP)

      w = A x + b,  lo <= x <= hi,
      x_i = lo_i => w_i >= 0,   x_i = hi_i => w_i <= 0,   lo_i < x_i < hi_i => w_i = 0,

  which holds standard LCP rows (lo = 0, hi = inf), bilateral rows (lo = -inf, hi = inf) and
  Coulomb friction boxes whose bounds +-mu x_n follow the current normal impulse. The sweep
  over rows is compiled (mbsim.solvers.numerics.lcp_kernels), on a dense A or on a scipy.sparse CSR A.
- :func:`lemke`: Lemke's complementary pivoting (covering vector d = 1) for the standard LCP

      w = M z + q >= 0,  z >= 0,  z^T w = 0,

  exact up to rounding on the problems it solves (P-matrices, and copositive-plus M when a
  solution exists), on a dense tableau.
- :func:`complementarity_error`: the natural residual used to judge both.
- :func:`brute_force_lcp`: enumeration of the 2^n complementary index sets, for tests.

Not here: forming the LCP (Delassus matrix, restitution) belongs to the solver that uses it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from mbsim.solvers.numerics.lcp_kernels import _pgs_csr, _pgs_dense

__all__ = ["LCPError", "LCPResult", "brute_force_lcp", "complementarity_error", "lemke", "pgs"]

# relative tolerance under which two ratios of Lemke's minimum-ratio test count as a tie
_TIE_TOL = 1e-9


class LCPError(ValueError):
    """An LCP solver found no solution: Lemke's ray termination, too many pivots, or no index set."""


@dataclass(frozen=True)
class LCPResult:
    """Solution of an (M)LCP and how it was reached.

    Attributes:
        x: (n,) the unknowns (impulses); ``z`` in Lemke's notation (``result.z`` is an alias).
        w: (n,) A x + b (velocities), computed from the returned x.
        iterations: PGS sweeps or Lemke pivots done.
        converged: PGS: the change of x in the last sweep fell below the tolerance; Lemke: True
            (it raises :class:`LCPError` instead of returning an unsolved problem).
        complementarity: :func:`complementarity_error` of (x, w) with the bounds of the problem
            (for friction rows the bounds +-mu x_n of the returned x).
    """

    x: np.ndarray
    w: np.ndarray
    iterations: int
    converged: bool
    complementarity: float

    @property
    def z(self) -> np.ndarray:
        """Alias of ``x`` in the standard-LCP notation (w = M z + q)."""
        return self.x


# ------------------------------------------------------------------- residual


def complementarity_error(A, b: np.ndarray, x: np.ndarray, lo=None, hi=None) -> float:
    """Natural residual of the box MLCP: max_i |x_i - mid(lo_i, x_i - w_i, hi_i)| with w = A x + b.

    It is zero exactly at a solution; for the standard LCP (lo = 0, hi = inf, the defaults) it
    equals max_i |min(x_i, w_i)|, and it also counts infeasibility (x_i < lo_i, or w_i < 0 at
    x_i = lo_i). Scale: the residual is absolute and mixes the units of x and of w (x - w), so
    it changes when rows of A and b are scaled; compare it against a tolerance in the units of
    the problem, e.g. tol * max(1, |x|_inf, |w|_inf), or scale the rows (Jacobi) first.

    Args:
        A: (n, n) dense array or scipy.sparse matrix.
        b: (n,) constant term.
        x: (n,) candidate solution.
        lo: (n,) lower bounds (may be -inf), or a scalar; default 0.
        hi: (n,) upper bounds (may be +inf), or a scalar; default +inf.

    Returns:
        The largest residual over the rows (0.0 for n = 0).
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    w = A @ x + np.asarray(b, dtype=float)
    lo = np.broadcast_to(np.asarray(0.0 if lo is None else lo, dtype=float), (n,))
    hi = np.broadcast_to(np.asarray(np.inf if hi is None else hi, dtype=float), (n,))
    if n == 0:
        return 0.0
    return float(np.max(np.abs(x - np.clip(x - w, lo, hi))))


# ------------------------------------------------------------------- projected Gauss-Seidel


def _vector(value, n: int, name: str, default: float) -> np.ndarray:
    """A float vector (n,) from an array, a scalar or None (the default)."""
    arr = np.asarray(default if value is None else value, dtype=float)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] != n):
        raise ValueError(f"{name}: expected shape ({n},) or a scalar, got {arr.shape}")
    # a fresh writeable copy (the sweeps write x; lo and hi are the caller's to keep)
    return np.array(np.broadcast_to(arr, (n,)), dtype=float)


def _friction_rows(friction_normal, mu, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Checked (friction_normal int64 (n,), mu float (n,)); all -1 and zeros when not given."""
    if (friction_normal is None) != (mu is None):
        raise ValueError("friction_normal and mu must be given together")
    if friction_normal is None:
        return np.full(n, -1, dtype=np.int64), np.zeros(n)
    fn = np.asarray(friction_normal)
    if fn.shape != (n,) or not np.issubdtype(fn.dtype, np.integer):
        raise ValueError(f"friction_normal: expected an integer array of shape ({n},), got {fn.dtype} {fn.shape}")
    fn = fn.astype(np.int64)
    mu = _vector(mu, n, "mu", 0.0)
    rows = np.flatnonzero(fn >= 0)
    targets = fn[rows]
    bad = (targets >= n) | (targets == rows)
    bad[~bad] |= fn[targets[~bad]] >= 0  # a friction row must point at a normal row
    if bad.any():
        i = int(rows[np.argmax(bad)])
        raise ValueError(
            f"friction_normal[{i}]: expected the index of a normal (non-friction) row in [0, {n}), got {fn[i]}"
        )
    wrong = ~np.isfinite(mu[rows]) | (mu[rows] < 0)
    if wrong.any():
        i = int(rows[np.argmax(wrong)])
        raise ValueError(f"mu[{i}]: expected a finite friction coefficient >= 0, got {mu[i]}")
    if np.any(fn < -1):
        raise ValueError(f"friction_normal: expected -1 or a row index, got {int(fn.min())}")
    return fn, mu


def _effective_bounds(x, lo, hi, fn, mu) -> tuple[np.ndarray, np.ndarray]:
    """lo, hi with friction rows replaced by +-mu max(x_n, 0)."""
    rows = np.flatnonzero(fn >= 0)
    if rows.size == 0:
        return lo, hi
    lo, hi = lo.copy(), hi.copy()
    bound = mu[rows] * np.maximum(x[fn[rows]], 0.0)
    lo[rows], hi[rows] = -bound, bound
    return lo, hi


def pgs(
    A,
    b: np.ndarray,
    lo,
    hi,
    x0: np.ndarray | None = None,
    *,
    friction_normal: np.ndarray | None = None,
    mu: np.ndarray | None = None,
    iterations: int = 200,
    tol: float = 1e-10,
    omega: float = 1.0,
    unique_entries: bool = False,
) -> LCPResult:
    """Projected Gauss-Seidel (PGS, projected SOR for omega != 1) for the box-constrained MLCP.

    Finds x with lo <= x <= hi and, for w = A x + b: x_i = lo_i => w_i >= 0, x_i = hi_i =>
    w_i <= 0, lo_i < x_i < hi_i => w_i = 0. Row kinds: standard LCP (lo = 0, hi = inf),
    bilateral (lo = -inf, hi = inf: w_i = 0), and friction rows: where ``friction_normal[i] =
    k >= 0``, row i's bounds are [-mu_i x_k, mu_i x_k] with x_k the current normal impulse
    (max(x_k, 0), updated row by row; ``lo``/``hi`` of friction rows are ignored, and row k
    must not be a friction row itself). The sweep is x_i <- clip(x_i - omega (A x + b)_i / A_ii)
    in row order, compiled; it converges for symmetric positive definite A with
    omega in (0, 2) (and in practice for semidefinite A when a solution exists); friction
    boxes that follow x_n make the problem non-symmetric: then PGS is a good heuristic, not a
    guarantee.

    Args:
        A: (n, n) dense array or scipy.sparse matrix (converted to CSR); diagonal > 0.
            ``unique_entries=True`` promises a sparse A without duplicate entries (as sparse
            products give), which skips sorting its indices.
        b: (n,) constant term.
        lo: (n,) lower bounds, or a scalar; may be -inf.
        hi: (n,) upper bounds, or a scalar; may be +inf.
        x0: (n,) warm start (clipped to the bounds), default zeros.
        friction_normal: (n,) int, for friction rows the index of their normal row, else -1.
        mu: (n,) friction coefficients (read on friction rows only); given with friction_normal.
        iterations: the largest number of sweeps.
        tol: stop when the largest change of x in a sweep is <= tol * max(1, |x|_inf).
        omega: over-relaxation factor in (0, 2).

    Returns:
        LCPResult with x, w = A x + b, sweeps done and whether the tolerance was met (no error is
        raised when it was not: the caller decides what an unconverged step means).

    Raises:
        ValueError: bad shapes or values, lo > hi, or a diagonal entry A_ii <= 0 (row named).
    """
    b = np.array(b, dtype=float)
    if b.ndim != 1:
        raise ValueError(f"b: expected a vector (n,), got shape {b.shape}")
    n = b.shape[0]
    # nothing is scipy.sparse before scipy.sparse was imported (which costs start-up: not at the top)
    sparse = "scipy.sparse" in sys.modules and sys.modules["scipy.sparse"].issparse(A)
    if not sparse:
        A = np.ascontiguousarray(A, dtype=float)
    if A.shape != (n, n):
        raise ValueError(f"A: expected shape ({n}, {n}), got {A.shape}")
    if not 0.0 < omega < 2.0:
        raise ValueError(f"omega: expected a value in (0, 2), got {omega}")
    if iterations < 0 or tol < 0:
        raise ValueError(f"iterations and tol: expected >= 0, got {iterations} and {tol}")
    lo = _vector(lo, n, "lo", 0.0)
    hi = _vector(hi, n, "hi", np.inf)
    if np.isnan(lo).any() or np.isnan(hi).any() or np.any(lo > hi):
        bad = int(np.flatnonzero(np.isnan(lo) | np.isnan(hi) | (lo > hi))[0])
        raise ValueError(f"row {bad}: expected lo <= hi, got lo={lo[bad]}, hi={hi[bad]}")
    fn, mu = _friction_rows(friction_normal, mu, n)

    if sparse:
        import scipy.sparse as sp

        A = sp.csr_array(A, dtype=float)
        # the sweep needs no sorted indices, only no duplicate entries; a caller that built A
        # by sparse products (which never repeat an entry) says so and skips the sort
        if not (unique_entries or A.has_canonical_format):
            A.sum_duplicates()
        if not A.data.flags.writeable:
            A.data = A.data.copy()
        diag = np.ascontiguousarray(A.diagonal())
        finite = np.isfinite(A.data).all()
    else:
        if not A.flags.writeable:
            A = A.copy()
        diag = np.ascontiguousarray(np.diagonal(A))
        finite = np.isfinite(A).all()
    if not finite or not np.isfinite(b).all():
        raise ValueError("A and b: expected finite entries")
    if np.any(~(diag > 0)):
        bad = int(np.flatnonzero(~(diag > 0))[0])
        raise ValueError(f"row {bad}: expected a diagonal entry A[{bad}, {bad}] > 0, got {diag[bad]}")

    # warm start inside the box: normal rows first, then the friction boxes they imply
    x = np.zeros(n) if x0 is None else np.array(x0, dtype=float).reshape(n)
    x = np.clip(x, lo, hi)
    x = np.clip(x, *_effective_bounds(x, lo, hi, fn, mu))

    if sparse:
        indptr = A.indptr.astype(np.int64)
        indices = A.indices.astype(np.int64)
        sweeps, converged = _pgs_csr(
            indptr, indices, A.data, b, lo, hi, x, fn, mu, diag, int(iterations), float(tol), float(omega)
        )
    else:
        sweeps, converged = _pgs_dense(A, b, lo, hi, x, fn, mu, diag, int(iterations), float(tol), float(omega))

    w = A @ x + b
    elo, ehi = _effective_bounds(x, lo, hi, fn, mu)
    error = complementarity_error(A, b, x, elo, ehi)
    return LCPResult(x=x, w=w, iterations=int(sweeps), converged=bool(converged), complementarity=error)


# ------------------------------------------------------------------- Lemke


def _check_standard(M, q) -> tuple[np.ndarray, np.ndarray]:
    M = np.array(M, dtype=float)
    q = np.array(q, dtype=float)
    if q.ndim != 1 or M.shape != (q.shape[0], q.shape[0]):
        raise ValueError(f"M, q: expected shapes (n, n) and (n,), got {M.shape} and {q.shape}")
    if not (np.isfinite(M).all() and np.isfinite(q).all()):
        raise ValueError("M and q: expected finite entries")
    return M, q


def _pivot(T: np.ndarray, row: int, col: int) -> None:
    """Gauss-Jordan pivot of the tableau T on (row, col), in place."""
    factor = T[:, col].copy()
    factor[row] = 0.0
    T[row] /= T[row, col]
    T -= np.outer(factor, T[row])
    T[:, col] = 0.0
    T[row, col] = 1.0


def _ratio_test(T: np.ndarray, col: np.ndarray, rows: np.ndarray, n: int, z0_row: int) -> int:
    """Row of the lexicographic minimum ratio among ``rows`` (entries col > 0).

    Ratios rhs_i / col_i within _TIE_TOL (relative) of the minimum tie; z0 leaves whenever it
    is among them (Lemke then stops); otherwise ties are broken by the rows of B^-1 (tableau
    columns 0..n-1) divided by col_i, lexicographically, then by the smallest row index.
    """
    for k in (-1, *range(n)):
        ratios = T[rows, k] / col[rows]
        least = ratios.min()
        rows = rows[ratios <= least + _TIE_TOL * max(1.0, abs(least))]
        if k == -1 and z0_row in rows:
            return z0_row
        if rows.size == 1:
            break
    return int(rows[0])


def lemke(M, q, *, max_pivots: int | None = None, pivot_tol: float = 1e-12) -> LCPResult:
    """Lemke's complementary pivoting for the standard LCP w = M z + q >= 0, z >= 0, z^T w = 0.

    The augmented system w = M z + d z0 + q with covering vector d = 1 starts from the basis
    w, pivots z0 in on the row of the most negative q_i, and then lets the complement of each
    leaving variable enter, with a lexicographic minimum-ratio test (ties within a relative
    1e-9; z0 leaves first when it ties) until z0 leaves the basis. The final complementary basis
    alpha (basic z's) is then solved once more from the original data, M_aa z_a = -q_a, which
    removes the round-off the tableau accumulated; the more accurate of the two is returned.
    q >= 0 returns z = 0 without pivoting. Finds a solution for P-matrices (the unique one) and
    for copositive-plus M whenever the LCP is feasible.

    Args:
        M: (n, n) dense matrix.
        q: (n,) constant term.
        max_pivots: the largest number of pivots; default 50 n.
        pivot_tol: tableau entries of the entering column <= pivot_tol * max(1, |column|_inf)
            do not block (are treated as <= 0).

    Returns:
        LCPResult with x = z, w = M z + q, pivots done, converged True.

    Raises:
        LCPError: ray termination (the entering column has no positive entry: the LCP may have
            no solution, e.g. M not copositive-plus or the problem infeasible), or more than
            max_pivots pivots (cycling).
        ValueError: bad shapes or non-finite entries.
    """
    M, q = _check_standard(M, q)
    n = q.shape[0]
    if n == 0 or q.min() >= 0.0:
        z = np.zeros(n)
        return LCPResult(x=z, w=q.copy(), iterations=0, converged=True, complementarity=complementarity_error(M, q, z))
    max_pivots = 50 * n if max_pivots is None else int(max_pivots)

    # tableau [I | -M | -d | q]: columns w_0..w_{n-1}, z_0..z_{n-1}, z0 (index 2n), rhs; the
    # w columns carry B^-1 for the lexicographic test
    z0 = 2 * n
    T = np.zeros((n, 2 * n + 2))
    T[:, :n] = np.eye(n)
    T[:, n : 2 * n] = -M
    T[:, z0] = -1.0
    T[:, -1] = q
    basis = np.arange(n)

    # first pivot: z0 in on the most negative q; among ties the last row keeps the tableau
    # lexicographically positive
    least = q.min()
    row = int(np.flatnonzero(q <= least + _TIE_TOL * max(1.0, abs(least)))[-1])
    leaving = int(basis[row])
    _pivot(T, row, z0)
    basis[row] = z0
    pivots = 1
    while leaving != z0:
        if pivots >= max_pivots:
            raise LCPError(f"Lemke: no solution after {pivots} pivots (max_pivots={max_pivots}); cycling suspected")
        entering = leaving + n if leaving < n else leaving - n
        col = T[:, entering]
        rows = np.flatnonzero(col > pivot_tol * max(1.0, float(np.abs(col).max())))
        if rows.size == 0:
            kind = "z" if entering >= n else "w"
            raise LCPError(
                f"Lemke: ray termination after {pivots} pivots (entering {kind}_{entering % n} is unblocked); "
                "the LCP may have no solution (M not copositive-plus, or the problem infeasible)"
            )
        z0_rows = np.flatnonzero(basis == z0)
        row = _ratio_test(T, col, rows, n, int(z0_rows[0]))
        leaving = int(basis[row])
        _pivot(T, row, entering)
        basis[row] = entering
        pivots += 1

    # z from the tableau, then from the final basis solved afresh
    z = np.zeros(n)
    is_z = basis >= n
    z[basis[is_z] - n] = T[is_z, -1]
    z = np.maximum(z, 0.0)
    best, best_error = z, complementarity_error(M, q, z)
    alpha = np.sort(basis[is_z] - n)
    if alpha.size:
        try:
            refined = np.zeros(n)
            refined[alpha] = np.linalg.solve(M[np.ix_(alpha, alpha)], -q[alpha])
            refined = np.maximum(refined, 0.0)
            error = complementarity_error(M, q, refined)
            if error <= best_error:
                best, best_error = refined, error
        except np.linalg.LinAlgError:
            pass
    return LCPResult(x=best, w=M @ best + q, iterations=pivots, converged=True, complementarity=best_error)


# ------------------------------------------------------------------- enumeration (tests)


def brute_force_lcp(M, q, tol: float = 1e-9) -> np.ndarray:
    """Solve the standard LCP by trying every complementary index set (2^n of them), for tests.

    For each alpha (rows where z may be positive, in order of increasing size), solves
    M_aa z_a = -q_a and accepts z when z >= -tol s and w = M z + q >= -tol s, with
    s = max(1, |q|_inf). Returns the first accepted z (clipped at 0): the unique solution
    when M is a P-matrix, one of them otherwise.

    Args:
        M: (n, n) matrix, n <= 12.
        q: (n,) constant term.
        tol: relative feasibility tolerance.

    Returns:
        z (n,).

    Raises:
        LCPError: no index set gives a solution.
        ValueError: n > 12 or bad shapes.
    """
    M, q = _check_standard(M, q)
    n = q.shape[0]
    if n > 12:
        raise ValueError(f"brute_force_lcp: expected n <= 12, got {n}")
    slack = tol * max(1.0, float(np.abs(q).max(initial=0.0)))
    for size in range(n + 1):
        for alpha in combinations(range(n), size):
            idx = np.array(alpha, dtype=int)
            z = np.zeros(n)
            if size:
                try:
                    z[idx] = np.linalg.solve(M[np.ix_(idx, idx)], -q[idx])
                except np.linalg.LinAlgError:
                    continue
            if z.min(initial=0.0) >= -slack and (M @ z + q).min(initial=0.0) >= -slack:
                return np.maximum(z, 0.0)
    raise LCPError("brute_force_lcp: no complementary index set solves the LCP")
