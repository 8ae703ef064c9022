"""Method ``null_space``: accelerations in the null space of the constraint Jacobian.

papers/singular-positions-gauss-pso.txt eqs. (10)-(14), after Phong and Hoang: with H a basis
of the null space of J, the equations M v_dot + J^T lambda = Q, J v_dot = gamma become the
square, positive definite system [H^T M; J] v_dot = [H^T Q; gamma], whatever the rank of J.
Here it is solved in mass-scaled coordinates y = M^1/2 v_dot: with J_hat = J M^-1/2 = U S V^T
(SVD; singular values below ``rank_tol`` times the largest count as zero), V = [V_r V_n],

    y = J_hat^+ gamma + V_n V_n^T M^-1/2 Q,      v_dot = M^-1/2 y,

i.e. the particular solution of smallest kinetic norm plus the free motion projected onto the
null space -- the same accelerations as Gauss' principle. Rank loss (singular positions) and
redundant constraints are handled: the null space simply grows. Reactions are reported as
the minimum-norm multipliers lambda = (J_hat^T)^+ M^-1/2 (Q - M v_dot).

Rank tolerance (default 1e-6): near a singular position the particular solution divides the
state's constraint inconsistency along a vanishing direction by its singular value. Under an
adaptive integrator the stages are not projected and carry inconsistencies of about the
integrator's tolerance; with the old cut-off 1e-9, on the IFToMM N four-bar (N = 4, scipy:DOP853
at 1e-10) four such directions at s ~ 1e-8 gave accelerations of 1e10 m/s^2 and the step size
collapsed at a fold. Cut at 1e-6 the same run passes every fold (B0 within 7e-8 m of the
one-coordinate solution over 20 s, 563 steps); cut at 1e-7 it is 8e-4 m off. A direction lost
for the brief time its singular value is below the cut follows the free motion there.

Under an adaptive integrator the cut is set once per step (before_adaptive_step;
ode_kernels.step_cut): the rank is decided by rank_tol at the step's start, and the cut goes in the
middle of the singular values' gap around it, within [rank_tol / 10, 10 rank_tol]. A cut fixed at
rank_tol let singular values cross it between the stages of a step, a jump of the right-hand side
that the error estimate rejects: on the N four-bar with N = 40 (up to 40 directions crossing one
after another at each fold) the second fold took steps of 1e-8 s for minutes. With the cut in the
gap the crossings fall between steps (20 s, 20 folds: 1,453 steps, B0 within 6e-5 m).

Cost: one SVD of the (nc x nv) Jacobian per right-hand side, dense (LAPACK gesdd; the one
implementation is compiled: mbsim.solvers.numerics.robust_kernels.null_space_accelerations). The compiled step takes
lagrange's Schur-complement solve instead where it certifies that the SVD would cut nothing
(mbsim.solvers.ode.ode_kernels.certified_full_rank): the same accelerations at lagrange's cost away
from singular positions.
"""

from __future__ import annotations

import numpy as np

from mbsim.model.model import Model
from mbsim.scene.fields import Context, Field, Number
from mbsim.solvers.base import read_options
from mbsim.solvers.ode import COMMON_OPTION_FIELDS, OdeSolver, common_arguments

NAME = "null_space"
CAPABILITIES = {"rigid_contacts": False, "integrators": True, "rank_loss": True}

OPTION_FIELDS = {
    **COMMON_OPTION_FIELDS,
    "rank_tol": Field(
        Number(positive=True), "singular values of J M^-1/2 below this times the largest count as zero", 1e-6
    ),
}


class Solver(OdeSolver):
    """Null-space accelerations (see the module docstring)."""

    robust = True
    COMPILED = "null_space"
    EXTRA_DIAGNOSTICS = {"rank": "min", "acceleration_residual": "max"}

    def before_adaptive_step(self, t: float, y: np.ndarray) -> bool:
        """The rank cut of the coming adaptive step, in the middle of J M^-1/2's singular-value gap
        around rank_tol (see the module docstring); True if it changed."""
        return self._adaptive_cut(t, y)


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    return Solver(
        model,
        **common_arguments(solver_spec, got),
    )
