"""The contact LCP of the rigid-contact methods (timestepping, event_driven), one place.

w = A x + b over k contacts: x = (x_N (k,), x_T (k (d-1),)), normal entries first, then the
tangent entries ordered by tangent, then contact (mbsim.model.contact.jacobian.contact_rows).
The normal part is complementary, 0 <= x_N _|_ w_N >= 0; the tangent part is Coulomb friction
on w_T with coefficient mu per contact. Impulses and relative velocities (timestepping, the
impacts of event_driven) or forces and relative accelerations (event_driven's closed contacts)
are the same problem.

Solvers (``method``):
- ``active_set`` (the default) and ``pgs``: Coulomb's round cone |x_T| <= mu x_N, by block
  Gauss-Seidel sweeps, then (``active_set``) an exact active-set solve (mbsim.solvers.numerics.cone);
  rows that x cannot move (a direction the joints lock: zero diagonal) stay at zero;
- ``lemke``: Stewart-Trinkle's LCP with the polyhedral cone spanned by +-t1, +-t2
  (|x_t1| + |x_t2| <= mu x_N: mu along a tangent, mu/sqrt(2) along a diagonal), solved by
  Lemke's method, its answer checked, degenerate problems retried with a small diagonal shift.
All are exact for sliding along a tangent, and in 2D the cones are the same.

After the contact rows may come ``nu`` more unilateral rows (0 <= x _|_ w >= 0: joint limits) and
box rows |x| <= bound with w = 0 inside (joint friction, bounded by a constant:
mbsim.solvers.numerics.joint_rows); Lemke's method takes a box row as x = x+ - x- with a slack
lambda: 0 <= x+ _|_ w + lambda >= 0, 0 <= x- _|_ -w + lambda >= 0, 0 <= lambda _|_ bound - x+ - x- >= 0.
"""

from __future__ import annotations

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.sparse import is_sparse
from mbsim.solvers.numerics.cone import solve_cone
from mbsim.solvers.numerics.lcp import LCPError, complementarity_error, lemke


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


def contact_lcp(
    A,
    b: np.ndarray,
    mu: np.ndarray,
    d: int,
    method: str,
    pgs_options: dict,
    t: float,
    x0=None,
    nu: int = 0,
    bound: np.ndarray | None = None,
):
    """Solve the contact problem (module docstring) by ``method``. ``mu`` (k,) per contact;
    ``pgs_options`` the sweeps' settings (iterations, tol, omega); ``x0`` their start; ``nu``
    unilateral rows and box rows of ``bound`` (nb,) after the contact rows. Returns (x, iterations:
    sweeps or Lemke pivots, residual: the natural residual of mbsim.solvers.numerics.cone, or Lemke's
    checked complementarity error). Raises SimulationError when Lemke's method fails."""
    bound = np.zeros(0) if bound is None else np.asarray(bound, dtype=float)
    if method == "lemke":
        return stewart_trinkle(A, b, mu, d, t, nu, bound)
    result = solve_cone(A, b, mu, d, nu=nu, bound=bound, x0=x0, iterations=int(pgs_options["iterations"]),
                        tol=pgs_options["tol"], omega=pgs_options["omega"], polish=method == "active_set")  # fmt: skip
    return result.x, int(result.iterations), result.residual


def stewart_trinkle(
    A, b: np.ndarray, mu: np.ndarray, d: int, t: float, nu: int = 0, bound: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Stewart-Trinkle LCP with the polyhedral cone (directions +-t of every contact with
    friction), plus ``nu`` unilateral rows and box rows |x| <= ``bound`` (module docstring):
    x = G y with y = (x_N, beta, x_U, x_B+, x_B-), x_T = D beta, x_B = x_B+ - x_B-, and the slacks
    s = (lambda per rough contact, lambda per box row); contacts with mu = 0 have only their
    normal row. Returns (x, pivots, the complementarity error of Lemke's answer)."""
    A = A.toarray() if is_sparse(A) else np.asarray(A)
    bound = np.zeros(0) if bound is None else np.asarray(bound, dtype=float)
    k, nb = len(mu), len(bound)
    nt = k * (d - 1)
    rough = np.nonzero(mu > 0.0)[0]
    f = len(rough)
    ndir = 2 * (d - 1)  # +t1, -t1 (, +t2, -t2)
    nb_dir = f * ndir
    n = k + nt + nu + nb
    ny = k + nb_dir + nu + 2 * nb
    # G maps y to x; D (its tangent block) maps direction weights to tangent entries
    G = np.zeros((n, ny))
    G[:k, :k] = np.eye(k)
    for a in range(d - 1):
        for slot, c in enumerate(rough):
            G[k + a * k + c, k + (2 * a) * f + slot] = 1.0
            G[k + a * k + c, k + (2 * a + 1) * f + slot] = -1.0
    tail = k + nt
    G[tail : tail + nu, k + nb_dir : k + nb_dir + nu] = np.eye(nu)
    first = k + nb_dir + nu
    G[tail + nu :, first : first + nb] = np.eye(nb)
    G[tail + nu :, first + nb :] = -np.eye(nb)
    # the slacks: E groups a rough contact's directions, the box rows' lambda both of their signs
    ns = f + nb
    H = np.zeros((ny, ns))
    for s_ in range(ndir):
        H[k + s_ * f : k + (s_ + 1) * f, :f] = np.eye(f)
    H[first : first + nb, f:] = np.eye(nb)
    H[first + nb :, f:] = np.eye(nb)
    S = -H.T  # the slack rows: mu x_N - sum beta, bound - x_B+ - x_B-
    S[:f, :k] = np.eye(k)[rough] * mu[rough][:, None]
    M = np.zeros((ny + ns, ny + ns))
    M[:ny, :ny] = G.T @ A @ G
    M[:ny, ny:] = H
    M[ny:, :ny] = S
    qv = np.concatenate((G.T @ b, np.zeros(f), bound))
    z, pivots, error = lemke_checked(M, qv, t)
    return G @ z[:ny], pivots, error


def lemke_checked(M: np.ndarray, q: np.ndarray, t: float) -> tuple[np.ndarray, int, float]:
    """Lemke's method with its answer checked (natural residual below 1e-7, relative);
    degenerate contact LCPs (redundant face points give a rank-deficient normal block, and the
    pivoting can end on a wrong basis) are retried with a small diagonal shift, M + delta I,
    delta up to 1e-8 (relative), which picks one of their many solutions. Returns (z, pivots, the
    answer's complementarity error)."""
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
            return result.x, pivots, error
        last = f"the answer's complementarity error is {error:.3g}"
    raise SimulationError(f"Lemke's method failed on the contact LCP: {last}", t=t)
