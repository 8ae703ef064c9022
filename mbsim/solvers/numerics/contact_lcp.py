"""The contact LCP of the rigid-contact methods (timestepping, event_driven), one place.

w = A x + b over k contacts: x = (x_N (k,), x_T (k (d-1),)), normal entries first, then the
tangent entries ordered by tangent, then contact (mbsim.model.contact.jacobian.contact_rows).
The normal part is complementary, 0 <= x_N _|_ w_N >= 0; the tangent part is Coulomb friction
on w_T with coefficient mu per contact. Impulses and relative velocities (timestepping, the
impacts of event_driven) or forces and relative accelerations (event_driven's closed contacts)
are the same problem.

Solvers (``method``):
- ``pgs``: projected Gauss-Seidel with the friction box |x_t1|, |x_t2| <= mu x_N, a four-sided
  pyramid whose faces are normal to the tangents (up to sqrt(2) mu along a diagonal); rows that
  x cannot move (a direction the joints lock: zero diagonal) and friction rows with mu = 0 stay
  out with zero entries;
- ``lemke``: Stewart-Trinkle's LCP with the polyhedral cone spanned by +-t1, +-t2
  (|x_t1| + |x_t2| <= mu x_N: mu along a tangent, mu/sqrt(2) along a diagonal), solved by
  Lemke's method, its answer checked, degenerate problems retried with a small diagonal shift.
Both are exact for sliding along a tangent, and in 2D they are the same cone.
"""

from __future__ import annotations

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.sparse import is_sparse
from mbsim.solvers.numerics.lcp import LCPError, complementarity_error, lemke, pgs


def rigid_friction(model, ctx) -> list[float]:
    """Coulomb's coefficient of each entry of model.contacts (0 where none or not rigid), checked."""
    from mbsim.scene.fields import Number

    friction = []
    for item in model.contacts:  # a rigid contact's friction is one Coulomb coefficient
        value = item.values.get("friction")
        if item.values.get("type") == "rigid" and value is not None:
            friction.append(Number(minimum=0).read(ctx, (*item.path, "friction"), value))
        else:
            friction.append(0.0)
    return friction


def contact_lcp(A, b: np.ndarray, mu: np.ndarray, d: int, method: str, pgs_options: dict, t: float, x0=None):
    """Solve the contact LCP (module docstring). ``mu`` (k,) per contact; ``pgs_options`` the
    PGS settings (iterations, tol, omega); ``x0`` a PGS start. Returns (x, iterations: PGS
    sweeps or Lemke pivots). Raises SimulationError when Lemke's method fails."""
    k = len(mu)
    if method == "lemke":
        return stewart_trinkle(A, b, mu, d, t)
    nt = k * (d - 1)
    lo = np.zeros(k + nt)
    hi = np.concatenate((np.full(k, np.inf), np.zeros(nt)))
    friction_normal = np.concatenate((np.full(k, -1), np.tile(np.arange(k), d - 1)))
    mu_rows = np.concatenate((np.zeros(k), np.tile(mu, d - 1)))
    A_lcp = A.tocsr() if is_sparse(A) else np.asarray(A)
    diag = A_lcp.diagonal()
    active = diag > 1e-12 * max(float(diag.max(initial=0.0)), 1e-300)
    active[k:] &= mu_rows[k:] > 0.0
    active[k:] &= active[friction_normal[k:]]
    index = np.cumsum(active) - 1
    sub = np.nonzero(active)[0]
    fn = friction_normal[sub]
    fn = np.where(fn >= 0, index[np.maximum(fn, 0)], -1)
    A_sub = A_lcp if len(sub) == len(active) else A_lcp[sub][:, sub]
    result = pgs(A_sub, b[sub], lo[sub], hi[sub], None if x0 is None else x0[sub], friction_normal=fn,
                 mu=mu_rows[sub], iterations=int(pgs_options["iterations"]), tol=pgs_options["tol"],
                 omega=pgs_options["omega"], unique_entries=True)  # fmt: skip
    x = np.zeros(k + nt)
    x[sub] = result.x
    return x, int(result.iterations)


def stewart_trinkle(A, b: np.ndarray, mu: np.ndarray, d: int, t: float) -> tuple[np.ndarray, int]:
    """Stewart-Trinkle LCP with the polyhedral cone (directions +-t of every contact with
    friction): z = (x_N, beta, lambda), x_T = beta+ - beta-; contacts with mu = 0 have only
    their normal row. Returns (x, pivots)."""
    A = A.toarray() if is_sparse(A) else np.asarray(A)
    k = len(mu)
    nt = k * (d - 1)
    rough = np.nonzero(mu > 0.0)[0]
    f = len(rough)
    ndir = 2 * (d - 1)  # +t1, -t1 (, +t2, -t2)
    nb_dir = f * ndir
    # D (nt, nb_dir) maps direction weights to tangent entries; E (nb_dir, f) groups them by contact
    D = np.zeros((nt, nb_dir))
    E = np.zeros((nb_dir, f))
    for a in range(d - 1):
        for slot, c in enumerate(rough):
            D[a * k + c, (2 * a) * f + slot] = 1.0
            D[a * k + c, (2 * a + 1) * f + slot] = -1.0
    for s_ in range(ndir):
        E[s_ * f : (s_ + 1) * f, :] = np.eye(f)
    A_NN, A_NT, A_TT = A[:k, :k], A[:k, k:], A[k:, k:]
    size = k + nb_dir + f
    M = np.zeros((size, size))
    M[:k, :k] = A_NN
    M[:k, k : k + nb_dir] = A_NT @ D
    M[k : k + nb_dir, :k] = D.T @ A_NT.T
    M[k : k + nb_dir, k : k + nb_dir] = D.T @ A_TT @ D
    M[k : k + nb_dir, k + nb_dir :] = E
    M[k + nb_dir :, :k] = np.eye(k)[rough] * mu[rough][:, None]
    M[k + nb_dir :, k : k + nb_dir] = -E.T
    qv = np.concatenate((b[:k], D.T @ b[k:], np.zeros(f)))
    z, pivots = lemke_checked(M, qv, t)
    return np.concatenate((z[:k], D @ z[k : k + nb_dir])), pivots


def lemke_checked(M: np.ndarray, q: np.ndarray, t: float) -> tuple[np.ndarray, int]:
    """Lemke's method with its answer checked (natural residual below 1e-7, relative);
    degenerate contact LCPs (redundant face points give a rank-deficient normal block, and the
    pivoting can end on a wrong basis) are retried with a small diagonal shift, M + delta I,
    delta up to 1e-8 (relative), which picks one of their many solutions. Returns (z, pivots)."""
    scale = max(1.0, float(np.max(np.abs(M))), float(np.max(np.abs(q), initial=0.0)))
    last = "no attempt"
    pivots = 0
    for delta in (0.0, 1e-12, 1e-10, 1e-8):
        try:
            result = lemke(M + delta * scale * np.eye(len(q)), q)
        except LCPError as exc:
            last = str(exc)
            continue
        pivots += int(result.iterations)
        error = complementarity_error(M, q, result.x)
        if error <= 1e-7 * scale:
            return result.x, pivots
        last = f"the answer's complementarity error is {error:.3g}"
    raise SimulationError(f"Lemke's method failed on the contact LCP: {last}", t=t)
