"""Method ``augmented_lagrangian``: Bayo's penalty formulation with multiplier iteration.

papers/singular-positions-gauss-pso.txt eqs. (5)-(9), after Bayo, Garcia de Jalon and Serna:

    M v_dot + J^T alpha (Phi'' + 2 mu Omega Phi' + Omega^2 Phi) + J^T lambda* = Q,

with Phi'' = J v_dot - gamma and Phi' = J v + Phi_t. Starting from lambda*_0 = 0, each
iteration solves the symmetric positive definite system

    (M + alpha J^T J) v_dot_{i+1} = Q - J^T lambda*_i - alpha J^T (2 mu Omega Phi' + Omega^2 Phi - gamma)

and updates lambda*_{i+1} = lambda*_i + alpha (Phi''_{i+1} + 2 mu Omega Phi' + Omega^2 Phi),
until the accelerations change by less than ``tol`` (relative to max(1, |v_dot|), max norm).
The matrix stays positive definite when J loses rank, which is why the method passes singular
positions and redundant constraints; the reported multipliers are the converged lambda*.

Near a singular position the iteration stalls: it is a Richardson iteration on the multipliers
that shrinks the error along a singular direction of J M^-1/2 (singular value s) by
1 / (1 + alpha s^2) per iteration, so as s goes to zero that direction stops moving (on the
slider-crank 1e-3 degree before the fold, s = 1.8e-5: 0.9997 per iteration, a thousand
iterations leave the change at 5e-5). That direction is one the penalty cannot resolve, and
converging it would be wrong as well: its exact multiplier divides the constraint drift of the
state by s (conjugate gradients on the same fixed point, tried, reach it in 3 iterations and
take the slider-crank onto the other branch at the first fold under DOP853). So a direction
that has stalled counts as lost, as null_space's rank tolerance drops one: when two successive
iterations each shrink the change by less than 1 % (STALL) and the singular value that rate
implies, s^2 = (1 / ratio - 1) / alpha, is below 1e-3 (STALL_RANK) times the largest (estimated
by the largest diagonal of J M^-1 J^T), the iteration stops there and keeps its last iterate.
A stall that does not meet the second condition (a penalty too small for the masses) still ends
the run at ``max_iter``.

Default ``tol`` 1e-9: near a fold a direction converging at a rate r leaves an error of about
change * r / (1 - r) when the iteration stops, up to a hundred times ``tol``, and under an
adaptive integrator that error is integrated through every fold: on the N four-bar with N = 40
(IFToMM A02, DOP853 at 1e-10, 20 folds) tol 1e-6 ended 8.7e-4 m off B0 / 2 (the one-coordinate
model), 1e-8 1.9e-5 m, 1e-9 9.4e-6 m in the model's body order (bit-identical with one BLAS thread
or two) and 5.8e-5 m in the reverse Cuthill-McKee order it is factored in since (body_order: the
directions that stall at the folds follow the factor's round-off), 1e-11 9.8e-6 m. Away from
singular positions the contraction per iteration is ~1 / (1 + alpha s^2), about 1e-6 at the
default penalty, so the stricter tol costs at most one iteration there. Default ``max_iter``
3000: at tol 1e-9 the slider-crank's fold creeps at ratios just under STALL (0.98-0.99 per
iteration, a direction of s ~ 1e-4 that is not lost) and needs up to ~1500 iterations there.

Options: ``penalty`` (alpha), ``omega`` (Omega, 1/s), ``mu`` (damping ratio), ``tol``,
``max_iter``; the iterations of each step (summed over its right-hand sides) go to
/diagnostics/solver/iterations; non-convergence ends the run (exit 3). The one implementation is
compiled: mbsim.solvers.numerics.robust_kernels.augmented_lagrangian_accelerations (its stall test STALL,
STALL_RANK). It factors M + alpha J^T J with the bodies in the order ``body_order`` sets up once per run
(reverse Cuthill-McKee when the model's order spreads the envelope: the same solution to round-off,
bit-identical where the model's order is kept).
"""

from __future__ import annotations

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.flat import FlatModel, reverse_cuthill_mckee
from mbsim.model.model import Model
from mbsim.scene.fields import MAX_ITERATIONS, Context, Field, Number
from mbsim.solvers.base import read_options
from mbsim.solvers.numerics import robust_kernels
from mbsim.solvers.ode import COMMON_OPTION_FIELDS, OdeSolver, common_arguments, ode_kernels

NAME = "augmented_lagrangian"
CAPABILITIES = {"rigid_contacts": False, "integrators": True, "rank_loss": True}

OPTION_FIELDS = {
    **COMMON_OPTION_FIELDS,
    "penalty": Field(Number(positive=True), "alpha, the penalty factor", 1e6),
    "omega": Field(Number(minimum=0), "Omega, natural frequency of the constraint stabilisation, 1/s", 10.0),
    "mu": Field(Number(minimum=0), "mu, damping ratio of the constraint stabilisation", 1.0),
    "tol": Field(Number(positive=True), "relative change of the accelerations that ends the iteration", 1e-9),
    "max_iter": Field(
        Number(minimum=1, maximum=MAX_ITERATIONS, integer=True),
        "multiplier iterations at most per solve (a direction that stalls near a singular position counts as lost)",
        3000,
    ),
    "rank_tol": Field(
        Number(positive=True), "rank tolerance of the (pseudo-inverse) projections after each step", 1e-9
    ),
}


class Solver(OdeSolver):
    """Augmented Lagrangian accelerations (see the module docstring)."""

    robust = True
    COMPILED = "augmented_lagrangian"

    def __init__(self, model: Model, penalty: float, omega: float, mu: float, tol: float, max_iter: int, **common):
        self.penalty, self.omega, self.mu, self.tol, self.max_iter = penalty, omega, mu, tol, max_iter
        super().__init__(model, **common)
        if self._flat is not None:
            robust_kernels.augmented_lagrangian_order(self._flat, self.data.flat, body_order(self._flat))

    def compiled_parameters(self) -> np.ndarray:
        P = super().compiled_parameters()
        P[ode_kernels.PENALTY], P[ode_kernels.OMEGA], P[ode_kernels.MU] = self.penalty, self.omega, self.mu
        P[ode_kernels.AL_TOL], P[ode_kernels.AL_MAX_ITER] = self.tol, self.max_iter
        return P

    def failure(self, t: float) -> SimulationError:
        """The compiled iteration (robust_kernels.augmented_lagrangian_accelerations) did not converge
        (or M + alpha J^T J had no Cholesky factor: non-finite values)."""
        return SimulationError(
            f"the augmented Lagrangian multiplier iteration did not converge in {self.max_iter} iterations "
            f"(penalty {self.penalty:g}, omega {self.omega:g}, mu {self.mu:g}; or non-finite forces)",
            t=t,
        )


def body_order(flat: FlatModel) -> np.ndarray:
    """The position of each body's block in the factored M + alpha J^T J (robust_kernels.
    augmented_lagrangian_order): the reverse Cuthill-McKee order of the bodies (two adjacent when
    they share a constraint row) when it shrinks the envelope by a fifth or more, else the model's
    order (as mbsim.model.flat._schur_pattern chooses lagrange's row order). The IFToMM N four-bar
    lists all its cranks before its couplers, which spreads each coupler's rows back to its cranks."""
    nb = flat.nbody
    rows = np.stack([np.asarray(side) for side in (flat.row_bi, flat.row_bj, flat.row_bk, flat.row_bl)], axis=1)
    pairs = {(int(a), int(b)) for row in rows for a in row for b in row if a < nb and b < nb and a != b}
    neighbours: list[list[int]] = [[] for _ in range(nb)]
    for a, b in pairs:
        neighbours[a].append(b)

    def envelope(position: np.ndarray) -> int:
        # blocks below the diagonal within the envelope: each reaches back to its first neighbour
        return sum(int(position[b] - min([position[b]] + [position[c] for c in neighbours[b]])) for b in range(nb))

    given = np.arange(nb, dtype=np.int64)
    if nb < 3 or not pairs:
        return given
    rcm = reverse_cuthill_mckee([sorted(nodes) for nodes in neighbours])
    position = np.empty(nb, dtype=np.int64)
    position[rcm] = np.arange(nb)
    return position if envelope(position) <= 0.8 * envelope(given) else given


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    return Solver(
        model,
        penalty=got["penalty"],
        omega=got["omega"],
        mu=got["mu"],
        tol=got["tol"],
        max_iter=int(got["max_iter"]),
        **common_arguments(solver_spec, got),
    )
