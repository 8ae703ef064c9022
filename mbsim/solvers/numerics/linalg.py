"""The Schur complement S = J M^-1 J^T of the constraint Jacobian, factorised once per use.

Dense Cholesky for small systems, sparse LU (SuperLU) for large ones. A pivot of the
factorisation much smaller than the largest (relative ``rank_tol``) means the Jacobian has
lost rank: redundant constraints or a singular position.
"""

from __future__ import annotations

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.model import Model, inverse_sqrt_mass_blocks
from mbsim.model.sparse import is_sparse


class RankDeficient(Exception):
    """S = J M^-1 J^T is singular to the tolerance."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio
        super().__init__(f"smallest pivot / its diagonal = {ratio:.3g}")


class Schur:
    """Factorised S = J M^-1 J^T; ``minv_jt`` is M^-1 J^T.

    Args:
        model: gives M^-1 and whether to go sparse.
        J: (nc, nv) Jacobian.
        rank_tol: relative pivot threshold: a pivot (L_ii^2 of S = L L^T) at most rank_tol times
            its row's diagonal S_ii raises RankDeficient. Per row, so that a long regular chain
            (whose pivots span many decades) is not mistaken for a singular one.
    """

    def __init__(self, model: Model, J, rank_tol: float = 1e-12) -> None:
        self.J = J
        if is_sparse(J):
            import scipy.sparse.linalg as spla  # here, not at the top: mbsim.model.sparse

            self.minv_jt = (model.inv_mass_matrix @ J.T).tocsc()
            S = (J @ self.minv_jt).tocsc()
            try:
                self.lu = spla.splu(
                    S, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True}
                )
            except RuntimeError:  # exactly singular
                raise RankDeficient(0.0) from None
            # U's diagonal holds the pivots of S permuted symmetrically: position k is row argsort(perm_c)[k]
            pivots = np.abs(self.lu.U.diagonal()) / S.diagonal()[np.argsort(self.lu.perm_c)]
            self.sparse = True
        else:
            from scipy.linalg.lapack import dpotrf  # here, not at the top: mbsim.model.sparse

            self.minv_jt = inverse_mass_times(model, J.T)
            S = J @ self.minv_jt
            diagonal = np.diagonal(S).copy()
            # LAPACK Cholesky directly: the numpy/scipy wrappers cost more than the work here
            self.factor, info = dpotrf(S, lower=True, clean=False)
            if info != 0:
                raise RankDeficient(0.0)
            pivots = np.diagonal(self.factor) ** 2 / diagonal
            self.sparse = False
        if len(pivots):
            ratio = float(pivots.min())
            if not ratio > rank_tol:
                raise RankDeficient(ratio)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """S^-1 rhs."""
        if self.sparse:
            return self.lu.solve(rhs)
        from scipy.linalg.lapack import dpotrs  # here, not at the top: mbsim.model.sparse

        x, info = dpotrs(self.factor, rhs, lower=True)
        return x


def factorize(model: Model, J, rank_tol: float, t: float, what: str) -> Schur:
    """Schur(model, J) or, on rank loss, a SimulationError naming the equations involved."""
    try:
        return Schur(model, J, rank_tol)
    except RankDeficient as exc:
        rows = dependent_rows(J, model.row_labels)
        raise SimulationError(
            f"the constraint Jacobian is rank deficient in the {what} ({exc}); equations involved: "
            f"{', '.join(rows) if rows else 'unknown'}. Redundant constraints or a singular position: "
            f"use a method that survives rank loss",
            t=t,
        ) from None


def inverse_sqrt_mass(model: Model) -> np.ndarray:
    """Dense M^-1/2 (nv, nv), block diagonal, cached on the model (rank-robust methods)."""
    cached = model.__dict__.get("_inverse_sqrt_mass")
    if cached is None:
        w = model.body_width
        cached = np.zeros((model.nv, model.nv))
        for b, block in enumerate(inverse_sqrt_mass_blocks(model)):
            cached[b * w : (b + 1) * w, b * w : (b + 1) * w] = block
        model.__dict__["_inverse_sqrt_mass"] = cached
    return cached


class MinNorm:
    """Rank-robust M-weighted least squares through the SVD of J M^-1/2 = U S V^T.

    Singular values below ``rank_tol`` times the largest count as zero: ``rank`` is the
    numerical rank, ``null`` (nv, nv - rank) an M^1/2-orthonormal basis of the null space in
    the scaled coordinates y = M^1/2 x.
    """

    def __init__(self, model: Model, J, rank_tol: float) -> None:
        dense = J.toarray() if is_sparse(J) else np.asarray(J)
        self.w = inverse_sqrt_mass(model)
        self.J_hat = dense @ self.w
        U, s, Vt = np.linalg.svd(self.J_hat, full_matrices=True)
        smax = s[0] if len(s) else 0.0
        r = int(np.sum(s > rank_tol * smax)) if smax > 0 else 0
        self.rank = r
        self.singular_values = s  # all of them, descending
        self.U, self.s, self.Vt = U[:, :r], s[:r], Vt
        self.range = Vt[:r].T  # (nv, r)
        self.null = Vt[r:].T  # (nv, nv - r)

    def pinv_times(self, r: np.ndarray) -> np.ndarray:
        """J_hat^+ r (nv,): the minimum-norm y with J_hat y = r in the least-squares sense."""
        return self.range @ ((self.U.T @ r) / self.s)

    def correction(self, r: np.ndarray) -> np.ndarray:
        """M^-1 J^T (J M^-1 J^T)^+ r = M^-1/2 J_hat^+ r: the M-smallest dx with J dx = r."""
        return self.w @ self.pinv_times(r)

    def multipliers(self, z: np.ndarray) -> np.ndarray:
        """Minimum-norm lambda with J_hat^T lambda = z (least squares): U S^-1 V_r^T z."""
        return self.U @ ((self.range.T @ z) / self.s)


def correction(model: Model, J, r: np.ndarray, rank_tol: float, t: float, what: str, robust: bool) -> np.ndarray:
    """dx = M^-1 J^T (J M^-1 J^T)^-1 r; ``robust`` uses the pseudo-inverse (rank loss allowed),
    otherwise a rank loss is a SimulationError naming the equations involved."""
    if robust:
        return MinNorm(model, J, rank_tol).correction(r)
    schur = factorize(model, J, rank_tol, t, what)
    return schur.minv_jt @ schur.solve(r)


def correction_multipliers(
    model: Model, J, r: np.ndarray, rank_tol: float, t: float, what: str, robust: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(dx, lambda) of :func:`correction`: lambda = (J M^-1 J^T)^-1 r (``robust``: the minimum-norm
    one, (J M^-1 J^T)^+ r) and dx = M^-1 J^T lambda -- the correction and the impulse that makes it
    (mbsim.solvers.timestepping records a velocity projection's)."""
    if robust:
        mn = MinNorm(model, J, rank_tol)
        y = mn.pinv_times(r)
        return mn.w @ y, mn.multipliers(y)
    schur = factorize(model, J, rank_tol, t, what)
    lam = schur.solve(r)
    return schur.minv_jt @ lam, lam


def inverse_mass_times(model: Model, X: np.ndarray) -> np.ndarray:
    """M^-1 X for a dense X (nv, k), using the block-diagonal structure: O(nv w k), not O(nv^2 k)."""
    nb, w = model.nbody, model.body_width
    return (model.inv_mass_blocks @ X.reshape(nb, w, -1)).reshape(X.shape)


def dependent_rows(J, labels: list[str], tol: float = 1e-8, limit: int = 12) -> list[str]:
    """Names of the constraint equations that take part in a rank loss of J.

    They are the rows with weight in the left null space of J (vectors y with J^T y = 0).
    """
    dense = J.toarray() if is_sparse(J) else np.asarray(J)
    if dense.shape[0] == 0 or dense.shape[0] > 4000:
        return []
    u, s, _ = np.linalg.svd(dense, full_matrices=True)
    smax = s.max() if len(s) else 1.0
    null = [k for k in range(dense.shape[0]) if k >= len(s) or s[k] <= tol * smax]
    if not null:
        null = [int(np.argmin(s))]
    weight = np.max(np.abs(u[:, null]), axis=1)
    rows = np.argsort(-weight)
    out = [labels[r] for r in rows if weight[r] > 1e-3][:limit]
    return out
