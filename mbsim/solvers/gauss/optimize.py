"""Optimizers of Gauss' least-constraint problem, as pure numerics (imports nothing from mbsim).

The problem, in mass-scaled accelerations y = M^1/2 v_dot (so that Gauss' function is a plain
squared distance):

    minimise  G(y) = 1/2 |y - y_free|^2   subject to   J_hat y = gamma,

with y_free = M^-1/2 Q (the free motion) and J_hat = J M^-1/2. It is a strictly convex
quadratic program: its minimiser is unique even when J_hat loses rank (only the multipliers
are not), so any exact optimizer finds the same accelerations.

- ``kkt``: the KKT system of the unscaled problem solved in the least-squares sense (SVD,
  LAPACK gelsd), rank-robust: compiled, the one implementation is
  mbsim.solvers.numerics.robust_kernels.gauss_kkt_accelerations.
- ``slsqp``: scipy.optimize's SLSQP on the scaled problem, redundant rows removed first.
- ``pso``: the improved particle swarm of papers/singular-positions-gauss-pso.txt §2.2, then
  a local refinement (:func:`particle_swarm`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def slsqp(
    y_free: np.ndarray, J_hat: np.ndarray, gamma: np.ndarray, y0: np.ndarray, tol: float, max_iter: int
) -> tuple[np.ndarray, int, bool, str]:
    """SLSQP on min 1/2 |y - y_free|^2 s.t. J_hat y = gamma; J_hat must have independent rows.

    ``tol`` is relative: SLSQP's ftol is absolute, so it is scaled by the objective at the
    least-squares feasible point (an upper bound of the optimum).

    Returns:
        (y, iterations, success, message).
    """
    from scipy.optimize import minimize  # here: importing scipy.optimize costs 60 ms a command

    feasible = np.linalg.lstsq(J_hat, gamma, rcond=None)[0]
    scale = max(1.0, 0.5 * float((feasible - y_free) @ (feasible - y_free)))
    result = minimize(
        lambda y: 0.5 * float((y - y_free) @ (y - y_free)),
        y0,
        jac=lambda y: y - y_free,
        constraints=[{"type": "eq", "fun": lambda y: J_hat @ y - gamma, "jac": lambda y: J_hat}],
        method="SLSQP",
        options={"ftol": tol * scale, "maxiter": max_iter},
    )
    return result.x, int(result.nit), bool(result.success), str(result.message)


@dataclass(frozen=True)
class SwarmOptions:
    """Parameters of the improved particle swarm (defaults in mbsim.solvers.gauss)."""

    particles: int
    max_iter: int
    inertia: float
    c1: float
    c2: float
    mutation: float  # rho, the paper's mutation factor
    mutation_rate: float
    penalty: float
    tol: float
    patience: int


def particle_swarm(
    objective,
    initial: np.ndarray,
    options: SwarmOptions,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float, int]:
    """Minimise ``objective`` (vectorised: (P, D) -> (P,)) from the swarm ``initial`` (P, D).

    The update is the classical one, X_{k+1} = X_k + V_{k+1} with
    V_{k+1} = w V_k + c1 r1 (P_i - X_k) + c2 r2 (P_g - X_k), r1, r2 uniform in (0, 1),
    all velocities zero at the start (the paper's step 1). Our reading of the paper's mutation
    operator (its eqs. (26)-(27) are lost in the text): after each move, every particle is,
    with probability ``mutation_rate``, thrown to P_g + rho (r - 1/2) |X - P_g| with r uniform
    in (0, 1)^D and rho = ``mutation`` (the paper's 2), which widens the search around the best
    point by up to the particle's own distance from it. The loop stops after ``max_iter``
    iterations or when the best value improved by less than ``tol`` (relative) for
    ``patience`` iterations in a row.

    Returns:
        (best position (D,), best value, iterations).
    """
    X = initial.copy()
    V = np.zeros_like(X)
    best = X.copy()
    best_f = objective(X)
    g = int(np.argmin(best_f))
    stall = 0
    iterations = 0
    for iterations in range(1, options.max_iter + 1):  # noqa: B007 - the count is returned
        r1 = rng.random(X.shape)
        r2 = rng.random(X.shape)
        V = options.inertia * V + options.c1 * r1 * (best - X) + options.c2 * r2 * (best[g] - X)
        X = X + V
        mutate = rng.random(len(X)) < options.mutation_rate
        if mutate.any():
            spread = np.abs(X[mutate] - best[g])
            X[mutate] = best[g] + options.mutation * (rng.random(spread.shape) - 0.5) * spread
        f = objective(X)
        better = f < best_f
        best[better] = X[better]
        best_f[better] = f[better]
        previous = best_f[g]
        g = int(np.argmin(best_f))
        if previous - best_f[g] <= options.tol * max(abs(previous), 1e-300):
            stall += 1
            if stall >= options.patience:
                break
        else:
            stall = 0
    return best[g].copy(), float(best_f[g]), iterations
