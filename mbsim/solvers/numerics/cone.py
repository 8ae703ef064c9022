"""The contact problem with Coulomb's round friction cone: block Gauss-Seidel, then an active-set solve.

w = A x + b over k contacts (A the Delassus matrix J M^-1 J^T or its reduction by the joints), with
x = (x_N (k,), x_T (k (d-1),)) ordered as mbsim.solvers.numerics.contact_lcp says, then ``nu``
unilateral rows and box rows |x| <= bound. Per contact c (Jean and Moreau's nonsmooth contact law;
Acary and Brogliato, "Numerical Methods for Nonsmooth Dynamical Systems", 2008, §12-13):

    0 <= x_N _|_ w_N >= 0,
    |x_T| <= mu x_N, and x_T minimises x_T . w_T over that disc (maximal dissipation):
    sticking (|x_T| < mu x_N) means w_T = 0, sliding means x_T = -mu x_N w_T / |w_T|.

The disc is round: the friction allowed along a diagonal of the tangent basis is mu, as along a
tangent (a box's four-sided pyramid allows sqrt(2) mu, Stewart and Trinkle's four-direction cone
mu / sqrt(2)), so the result does not depend on how the tangents were picked.

Two stages (method ``active_set``; ``pgs`` is stage 1 alone):

1. block Gauss-Seidel sweeps (mbsim.solvers.numerics.cone_kernels): a contact's normal row, then its
   tangent pair solved exactly for that normal impulse (a two-unknown trust-region problem), then
   the scalar rows; forward and backward in turn; warm-started. It converges on every problem of
   this kind, but on a stack of n bodies at a rate that falls with n (the load must travel the
   stack), so that a tight tolerance costs thousands of sweeps;
2. an active-set solve, the step that makes stacks exact: from the sweeps' answer, the touching
   contacts (x_N > 0, or closed and unloaded: w_N ~ 0, a redundant corner the sweeps left without
   load) are split into sticking (w_N = 0, w_T = 0) and sliding (on the rim and slipping: w_N = 0,
   x_T = mu x_N s with s the friction's direction), the stops and box rows likewise; those equations
   are linear in the remaining unknowns and are solved at once (least squares, minimum norm:
   redundant contact points of a face share the load evenly; iterated Tikhonov regularisation,
   by an envelope Cholesky factorisation with the contacts in reverse Cuthill-McKee order when
   nothing slides, so that a stack's banded system costs ~n b^2 and not n^3); the sliding directions
   are then updated from w_T (a fixed point, quadratic in practice). The answer is accepted when its
   natural residual is below the tolerance; else the contact pulled on most leaves the set (one at
   a time, as in Lawson and Hanson's non-negative least squares), or, when none pulls, penetrating
   ones join it, sticking ones past the rim start sliding, and it is solved again (at most ROUNDS
   times: cone_kernels); a second attempt starts from every contact touching and sticking (the
   sweeps' answer of a cold start can be far from the sets: such a start tries it first), then back
   to more sweeps. On a stack the sweeps barely reduce the residual's slow part (the load travelling
   the stack): when the problem changes from step to step, the active-set solve clears what
   accumulates. Problems of more than ``POLISH_MAX``
   unknowns (piles of hundreds of bodies) skip it: their sweeps converge fast enough, and the dense
   solve would not be cheaper.

The natural residual (impulse units, the rows' velocities scaled by their inverse diagonal) is
|x_N - max(0, x_N - w_N / A_NN)| for a normal row, |x_T - proj(x_T - w_T / a_T)| for a tangent pair
(proj onto the disc of radius mu x_N, a_T the mean of its diagonal entries), and
|x - clip(x - w / A_ii)| for the others; it is zero exactly at a solution.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from mbsim.solvers.numerics.cone_kernels import cone_sweeps
from mbsim.solvers.numerics.cone_kernels import polish as cone_polish
from mbsim.solvers.numerics.cone_kernels import residual as cone_residual

POLISH_MAX = 1500  # unknowns; above this the active-set solve is skipped (a dense least squares)
FIRST_SWEEPS = 8  # sweeps before the first polish (a warm start often has the right active set)


@dataclass(frozen=True)
class ConeResult:
    """x (n,), the sweeps done, the natural residual and whether it met the tolerance."""

    x: np.ndarray
    iterations: int
    residual: float
    converged: bool


def _csr(A):
    """(indptr, indices, data, diagonal, dense or None) of A as int64/float arrays."""
    sparse = "scipy.sparse" in sys.modules and sys.modules["scipy.sparse"].issparse(A)
    if sparse:
        import scipy.sparse as sp

        # (no sorting: the sweeps need no sorted indices, and the Delassus products repeat no entry)
        A = sp.csr_array(A, dtype=float)
        return A.indptr.astype(np.int64), A.indices.astype(np.int64), np.asarray(A.data, float), A.diagonal(), A
    D = np.ascontiguousarray(A, dtype=float)
    n = D.shape[0]
    indptr = np.arange(n + 1, dtype=np.int64) * n
    indices = np.tile(np.arange(n, dtype=np.int64), n)
    return indptr, indices, D.ravel(), np.diagonal(D).copy(), D


def _entries(A, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    if isinstance(A, np.ndarray):
        return A[rows, cols]
    return np.asarray(A[rows, cols]).ravel()


def _disc_projection(x1: np.ndarray, x2: np.ndarray | None, radius: np.ndarray):
    """(x1, x2) projected onto the discs |x| <= radius (2D: the interval)."""
    if x2 is None:
        return np.clip(x1, -radius, radius), None
    norm = np.hypot(x1, x2)
    scale = np.where(norm > radius, radius / np.where(norm > 0, norm, 1.0), 1.0)
    return x1 * scale, x2 * scale


class BodySpace:
    """A contact problem's rows in body space: J (n, nv) as CSR arrays whose rows hold their bodies'
    width-w blocks (mbsim.model.contact.jacobian_kernels), the inverse mass blocks (nbody, w, w); A =
    J M^-1 J^T is never formed for the sweeps (mbsim.solvers.numerics.cone_kernels: U = J M^-1)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, inv_mass_blocks: np.ndarray):
        self.indptr, self.indices, self.data = indptr, indices, data
        self.inv_mass = inv_mass_blocks
        nbody, w, _ = inv_mass_blocks.shape
        self.nv = nbody * w
        n = len(indptr) - 1
        # U's blocks: J_r,b M_b^-1 (a row's entries come in whole blocks of w, body by body)
        blocks = data.reshape(-1, w)
        body = indices[::w] // w
        self.u = np.einsum("ej,eji->ei", blocks, inv_mass_blocks[body]).ravel()
        self.row = np.repeat(np.arange(n), np.diff(indptr))
        self.diag = np.bincount(self.row, weights=self.data * self.u, minlength=n)

    def matrix(self):
        import scipy.sparse as sp

        n = len(self.indptr) - 1
        return sp.csr_array((self.data, self.indices, self.indptr), shape=(n, self.nv))

    def u_matrix(self):
        import scipy.sparse as sp

        n = len(self.indptr) - 1
        return sp.csr_array((self.u, self.indices, self.indptr), shape=(n, self.nv))

    def pair(self, r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
        """A's entries (r1, r2) of rows with the same pattern (one contact's rows): J_r1 . U_r2."""
        if not len(r1):
            return np.zeros(0)
        length = self.indptr[r1 + 1] - self.indptr[r1]
        offset = np.cumsum(length) - length
        within = np.arange(int(length.sum())) - np.repeat(offset, length)
        first = np.repeat(self.indptr[r1], length) + within
        second = np.repeat(self.indptr[r2], length) + within
        products = self.data[first] * self.u[second]
        return np.add.reduceat(products, offset)

    def velocity(self, x: np.ndarray) -> np.ndarray:
        """M^-1 J^T x (nv,)."""
        return np.bincount(self.indices, weights=self.u * x[self.row], minlength=self.nv)


class ContactProblem:
    """One contact problem (module docstring): A (or its rows in body space: ``BodySpace``), b, mu
    (k,), d, nu stops, box ``bound`` (nb,)."""

    def __init__(self, A, b: np.ndarray, mu: np.ndarray, d: int, nu: int = 0, bound: np.ndarray | None = None):
        self.k = k = len(mu)
        self.d = d
        self.nu = nu
        self.bound = np.zeros(0) if bound is None else np.asarray(bound, dtype=float)
        self.b = np.ascontiguousarray(b, dtype=float)
        self.n = n = len(self.b)
        self.first = k * d  # the first row after the contacts'
        if n != self.first + nu + len(self.bound):
            raise ValueError(f"b: expected {self.first + nu + len(self.bound)} rows, got {n}")
        self.body = A if isinstance(A, BodySpace) else None
        c = np.arange(k)
        block = np.zeros((k, 3))
        if self.body is not None:
            self.indptr, self.indices, self.data, self.diag = A.indptr, A.indices, A.data, A.diag
            self._A = None
            if d == 3:
                block[:, 1] = A.pair(k + c, 2 * k + c)
        else:
            self.indptr, self.indices, self.data, self.diag, self._A = _csr(A)
            if d == 3:
                block[:, 1] = _entries(self._A, k + c, 2 * k + c) if k else 0.0
        self.mu = np.ascontiguousarray(mu, dtype=float)
        self.lo = np.concatenate((np.zeros(self.first + nu), -self.bound))
        self.hi = np.concatenate((np.full(self.first + nu, np.inf), self.bound))
        if d >= 2:
            block[:, 0] = self.diag[k + c]
        if d == 3:
            block[:, 2] = self.diag[2 * k + c]
        self.block = block.ravel()
        scale = float(np.max(self.diag, initial=0.0))
        # rows x cannot move (a direction the joints lock) are left at zero
        self.movable = self.diag > 1e-12 * max(scale, 1e-300)
        self.diag_used = np.where(self.movable, self.diag, 0.0)
        self.block[0::3] = np.where(self.movable[k : 2 * k], block[:, 0], 0.0) if d >= 2 else 0.0

    @property
    def A(self):  # noqa: N802 (the matrix of the module docstring)
        """A, dense or sparse (assembled from the body-space rows when asked: the active-set solve)."""
        if self._A is None:
            J = self.body.matrix()
            self._A = (J @ self.body.u_matrix().T).toarray()
        return self._A

    # ------------------------------------------------------------------ pieces

    def w(self, x: np.ndarray) -> np.ndarray:
        if self.body is not None and self._A is None:
            return self.body.matrix() @ self.body.velocity(x) + self.b
        return self.A @ x + self.b

    def feasible(self, x: np.ndarray) -> np.ndarray:
        """x moved into the feasible set (normals >= 0, tangents in their discs, bounds)."""
        k, d = self.k, self.d
        x = np.where(self.movable, x, 0.0)
        x[:k] = np.maximum(x[:k], 0.0)
        radius = self.mu * x[:k]
        x1, x2 = _disc_projection(x[k : 2 * k], x[2 * k : 3 * k] if d == 3 else None, radius)
        x[k : 2 * k] = x1
        if d == 3:
            x[2 * k : 3 * k] = x2
        x[self.first :] = np.clip(x[self.first :], self.lo[self.first :], self.hi[self.first :])
        return x

    def residual(self, x: np.ndarray, w: np.ndarray | None = None) -> float:
        """The natural residual (module docstring), impulse units (compiled: cone_kernels.residual)."""
        if self.n == 0:
            return 0.0
        w = self.w(x) if w is None else w
        mu = self.mu if self.k else np.zeros(1)
        x, w = np.ascontiguousarray(x, dtype=float), np.ascontiguousarray(w, dtype=float)
        return cone_residual(x, w, self.k, self.d, mu, self.lo, self.hi, np.ascontiguousarray(self.diag, dtype=float))

    def sweeps(self, x: np.ndarray, iterations: int, tol: float, omega: float) -> tuple[int, bool]:
        if self.n == 0 or iterations <= 0:
            return 0, True
        mu = self.mu if self.k else np.zeros(1)
        block = self.block if self.k else np.zeros(3)
        if self.body is None:
            return cone_sweeps(
                self.indptr, self.indices, self.data, self.b, x, self.k, self.d, mu,
                self.lo, self.hi, self.diag_used, block, int(iterations), float(tol), float(omega),
            )  # fmt: skip
        v = self.body.velocity(x)
        return cone_sweeps(
            self.indptr, self.indices, self.data, self.b, x, self.k, self.d, mu, self.lo, self.hi,
            self.diag_used, block, int(iterations), float(tol), float(omega), self.body.u, v,
        )  # fmt: skip

    # ------------------------------------------------------------------ the active-set solve

    def polish(self, x: np.ndarray, tol: float) -> np.ndarray | None:
        """The active-set solve from x (module docstring; compiled: cone_kernels.polish_into, which
        documents its set changes); the answer, or None when it fails."""
        A = self.A.toarray() if not isinstance(self.A, np.ndarray) else self.A
        mu = self.mu if self.k else np.zeros(1)
        x = np.ascontiguousarray(x, dtype=float)
        A = np.ascontiguousarray(A, dtype=float)
        diag = np.ascontiguousarray(self.diag, dtype=float)
        return cone_polish(A, self.b, self.k, self.d, self.nu, mu, self.lo, self.hi, diag, x, float(tol))


def solve_cone(
    A,
    b: np.ndarray,
    mu: np.ndarray,
    d: int,
    *,
    nu: int = 0,
    bound: np.ndarray | None = None,
    x0: np.ndarray | None = None,
    iterations: int = 500,
    tol: float = 1e-10,
    omega: float = 1.0,
    polish: bool = True,
) -> ConeResult:
    """Solve the contact problem (module docstring).

    Args:
        A: (n, n) dense array or scipy.sparse matrix; b: (n,); mu: (k,) Coulomb coefficients;
        d: 2 or 3; nu: unilateral rows after the contacts'; bound: (nb,) box rows after those;
        x0: a warm start (made feasible); iterations: most sweeps; tol: the residual (impulse
        units) accepted, relative to max(1, |x|_inf), and the sweeps' own stopping change;
        omega: over-relaxation of the scalar rows; polish: run stage 2 (method ``active_set``).
    Returns:
        ConeResult (x, sweeps, natural residual, whether it is below the tolerance).
    """
    problem = ContactProblem(A, b, mu, d, nu, bound)
    n = problem.n
    x = problem.feasible(np.zeros(n) if x0 is None else np.array(x0, dtype=float).reshape(n))
    polish = polish and 0 < n <= POLISH_MAX
    chunk = min(FIRST_SWEEPS, iterations) if polish else iterations
    return _cone_loop(problem, x, 0, chunk, iterations, tol, omega, polish)


def _cone_loop(
    problem: ContactProblem,
    x: np.ndarray,
    done: int,
    chunk: int,
    iterations: int,
    tol: float,
    omega: float,
    polish: bool,
) -> ConeResult:
    """The sweeps in chunks, each followed by the active-set solve (``polish``), from x (compiled for
    free bodies: mbsim.solvers.timestepping.step_kernels.FreeStep)."""
    while True:
        # (with the active-set solve the residual decides: the sweeps' own stop is made tighter)
        swept, converged = problem.sweeps(x, chunk, tol * (1e-3 if polish else 1.0), omega)
        done += swept
        if polish:
            tight = tol * max(1.0, float(np.max(np.abs(x), initial=0.0)))
            residual = problem.residual(x)
            if residual <= tight:
                return ConeResult(x, done, residual, True)
            answer = problem.polish(x, tight)
            if answer is not None:
                return ConeResult(answer, done, problem.residual(answer), True)
        if (converged and not polish) or done >= iterations:
            break
        chunk = min(max(2 * chunk, FIRST_SWEEPS), iterations - done)
    residual = problem.residual(x)
    return ConeResult(x, done, residual, residual <= tol * max(1.0, float(np.max(np.abs(x), initial=0.0))))
