"""Method ``lagrange``: the index-1 DAE with Lagrange multipliers.

At each right-hand-side evaluation the augmented system

    [M  J^T] [v_dot ]   [Q    ]
    [J   0 ] [lambda] = [gamma*],   gamma* = gamma - 2 alpha (J v + Phi_t) - beta^2 Phi

is solved through the Schur complement S = J M^-1 J^T (lambda = S^-1 (J M^-1 Q - gamma*),
v_dot = M^-1 (Q - J^T lambda)); alpha = beta = 0 is the plain index-1 form, positive values
are Baumgarte's stabilisation. After each step, quaternions are rescaled to unit norm and
positions then velocities are projected onto the constraints in the mass-matrix norm
(papers/unilateral-constraints-lcp-projection-correction.txt §3, mbsim.solvers.numerics.projection).

The solve is compiled (mbsim.solvers.ode.ode_kernels.lagrange_accelerations, S factored within its
envelope); a sparse model above mbsim.model.flat.DENSE_LIMIT solves by sparse LU here instead.

Symbols: M mass matrix, Q generalized forces, J = Phi_q (w.r.t. velocities), gamma the
acceleration right side (mbsim.model.constraints), lambda multipliers (constraint force
-J^T lambda).
"""

from __future__ import annotations

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.constraints import ConstraintValues
from mbsim.model.model import Frames, Model
from mbsim.scene.fields import Context, Field, Number, Sub
from mbsim.solvers.base import read_options
from mbsim.solvers.numerics.linalg import factorize, inverse_mass_times
from mbsim.solvers.ode import COMMON_OPTION_FIELDS, Accelerations, OdeSolver, common_arguments, ode_kernels

NAME = "lagrange"
CAPABILITIES = {"rigid_contacts": False, "integrators": True}

BAUMGARTE_FIELDS = {
    "alpha": Field(Number(minimum=0), "velocity feedback 2 alpha (J v + Phi_t), 1/s", 0.0),
    "beta": Field(Number(minimum=0), "position feedback beta^2 Phi, 1/s", 0.0),
}
OPTION_FIELDS = {
    **COMMON_OPTION_FIELDS,
    "baumgarte": Field(
        Sub(BAUMGARTE_FIELDS, "baumgarte"),
        "Baumgarte stabilisation of the acceleration equations",
        {"alpha": 0.0, "beta": 0.0},
    ),
    "rank_tol": Field(
        Number(positive=True),
        "pivot of J M^-1 J^T relative to its row's diagonal below which the Jacobian is rank deficient (exit 3)",
        1e-12,
    ),
}


class Solver(OdeSolver):
    """Lagrange-multiplier dynamics (see the module docstring); fails cleanly on rank loss."""

    COMPILED = "lagrange"

    def __init__(self, model: Model, alpha: float, beta: float, **common) -> None:
        self.alpha, self.beta = alpha, beta
        super().__init__(model, **common)

    def compiled_parameters(self) -> np.ndarray:
        P = super().compiled_parameters()
        P[ode_kernels.ALPHA], P[ode_kernels.BETA] = self.alpha, self.beta
        return P

    def failure(self, t: float) -> SimulationError:
        """The compiled solve fails only on a rank loss of S = J M^-1 J^T."""
        return self._rank_loss(t, "acceleration solve")

    def accelerations(
        self, t: float, q: np.ndarray, v: np.ndarray, frames: Frames, Q: np.ndarray, cv: ConstraintValues
    ) -> Accelerations:
        """The solve of a sparse model above DENSE_LIMIT (sparse LU; every other model's is the compiled
        one, mbsim.solvers.ode.ode_kernels.lagrange_accelerations): the compiled step keeps J, M^-1 J^T and
        S dense, which such a model's memory does not allow."""
        m = self.model
        J, gamma = cv.jacobian, cv.gamma
        if self.alpha or self.beta:
            gamma = gamma - 2.0 * self.alpha * (J @ v + cv.phi_t) - self.beta**2 * cv.phi
        schur = factorize(m, J, self.rank_tol, t, "acceleration solve")
        minv_q = inverse_mass_times(m, Q)
        lam = schur.solve(J @ minv_q - gamma)
        return Accelerations(minv_q - schur.minv_jt @ lam, lam)


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    return Solver(
        model,
        alpha=got["baumgarte"]["alpha"],
        beta=got["baumgarte"]["beta"],
        **common_arguments(solver_spec, got),
    )
