"""Method ``lagrange``: the index-1 DAE with Lagrange multipliers.

At each right-hand-side evaluation the augmented system

    [M  J^T] [v_dot ]   [Q    ]
    [J   0 ] [lambda] = [gamma*],   gamma* = gamma - 2 alpha (J v + Phi_t) - beta^2 Phi

is solved through the Schur complement S = J M^-1 J^T (lambda = S^-1 (J M^-1 Q - gamma*),
v_dot = M^-1 (Q - J^T lambda)); alpha = beta = 0 is the plain index-1 form, positive values
are Baumgarte's stabilisation. After each step, quaternions are rescaled to unit norm and
positions then velocities are projected onto the constraints in the mass-matrix norm
(papers/unilateral-constraints-lcp-projection-correction.txt §3, mbsim.solvers.projection).

Symbols: M mass matrix, Q generalized forces, J = Phi_q (w.r.t. velocities), gamma the
acceleration right side (mbsim.model.constraints), lambda multipliers (constraint force
-J^T lambda).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.model.constraints import constraint_values
from mbsim.model.dynamics import generalized_forces, kinetic_energy
from mbsim.model.model import Model, State
from mbsim.scene.fields import Context, Field, Number, Sub
from mbsim.solvers.base import Evaluation, StepInfo, read_options
from mbsim.solvers.integrators import FIXED_STEP, SCIPY_METHODS, AdaptiveStepper
from mbsim.solvers.linalg import factorize, inverse_mass_times
from mbsim.solvers.projection import PROJECTION_FIELDS, ProjectionOptions, project_positions, project_velocities

NAME = "lagrange"
CAPABILITIES = {"rigid_contacts": False, "integrators": True}

BAUMGARTE_FIELDS = {
    "alpha": Field(Number(minimum=0), "velocity feedback 2 alpha (J v + Phi_t), 1/s", 0.0),
    "beta": Field(Number(minimum=0), "position feedback beta^2 Phi, 1/s", 0.0),
}
OPTION_FIELDS = {
    "projection": Field(
        Sub(PROJECTION_FIELDS, "projection"),
        "mass-weighted projection after each step",
        {"position": True, "velocity": True, "iterations": 2, "tol": 1e-13},
    ),
    "baumgarte": Field(
        Sub(BAUMGARTE_FIELDS, "baumgarte"),
        "Baumgarte stabilisation of the acceleration equations",
        {"alpha": 0.0, "beta": 0.0},
    ),
    "rank_tol": Field(
        Number(positive=True),
        "relative pivot of J M^-1 J^T below which the Jacobian counts as rank deficient (exit 3)",
        1e-12,
    ),
    "max_step": Field(Number(positive=True), "largest step of the adaptive (scipy:*) integrators, s", None),
}


@dataclass(frozen=True)
class Options:
    projection: ProjectionOptions = ProjectionOptions()
    alpha: float = 0.0
    beta: float = 0.0
    rank_tol: float = 1e-12
    max_step: float | None = None


def parse_options(ctx: Context, raw: dict) -> Options:
    got = read_options(ctx, ("solver",), raw, OPTION_FIELDS)
    proj = got["projection"]
    return Options(
        projection=ProjectionOptions(
            bool(proj["position"]), bool(proj["velocity"]), int(proj["iterations"]), float(proj["tol"])
        ),
        alpha=got["baumgarte"]["alpha"],
        beta=got["baumgarte"]["beta"],
        rank_tol=got["rank_tol"],
        max_step=got["max_step"],
    )


class Solver:
    """Lagrange-multiplier dynamics with a choice of integrator (see the module docstring)."""

    def __init__(self, model: Model, options: Options, integrator: str, rtol: float, atol: float) -> None:
        self.model = model
        self.options = options
        self.integrator = integrator
        self.nq, self.nv = model.nq, model.nv
        self._fixed = FIXED_STEP.get(integrator)
        self._adaptive = None
        if integrator in SCIPY_METHODS:
            self._adaptive = AdaptiveStepper(
                integrator, rtol, atol, model.t_end, options.max_step if options.max_step else np.inf
            )
        self._cached: tuple[float, np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ dynamics

    def _solve(self, t: float, q: np.ndarray, v: np.ndarray, for_record: bool = False):
        """Accelerations, multipliers, non-conservative power and the pieces for recording."""
        m = self.model
        frames = m.frames(q, v)
        forces = generalized_forces(m, frames, v, t, with_potential=for_record)
        Q = forces.q_force
        if m.nc == 0:
            return inverse_mass_times(m, Q), np.zeros(0), forces.power_nc, forces, None, frames
        cv = constraint_values(m, frames, t)
        J = cv.jacobian
        gamma = cv.gamma
        o = self.options
        if o.alpha or o.beta:
            gamma = gamma - 2.0 * o.alpha * (J @ v + cv.phi_t) - o.beta**2 * cv.phi
        schur = factorize(m, J, o.rank_tol, t, "acceleration solve")
        minv_q = inverse_mass_times(m, Q)
        lam = schur.solve(J @ minv_q - gamma)
        vdot = minv_q - schur.minv_jt @ lam
        # drives do work: constraint power -lambda^T J v = lambda^T Phi_t
        power = forces.power_nc + float(lam @ cv.phi_t)
        return vdot, lam, power, forces, cv, frames

    def acceleration(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        vdot, _, power, _, _, _ = self._solve(t, q, v)
        return vdot, power

    def q_rate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.model.q_rate(q, v)

    def derivative(self, t: float, y: np.ndarray) -> np.ndarray:
        nq, nv = self.nq, self.nv
        q, v = y[:nq], y[nq : nq + nv]
        vdot, _, power, _, _, _ = self._solve(t, q, v)
        return np.concatenate((self.model.q_rate(q, v), vdot, (power,)))

    # ------------------------------------------------------------------ stepping

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        m = self.model
        y = np.concatenate((state.q, state.v, (state.work,)))
        if self._adaptive is not None:
            t_new, y_new, h_next = self._adaptive.step(self, state.t, y, h)
        else:
            f0 = None
            if self._cached is not None and self._cached[0] == state.t and np.array_equal(self._cached[1], y):
                f0 = self._cached[2]
            y_new = self._fixed(self, state.t, y, h, f0)
            t_new, h_next = state.t + h, h
        q = m.normalize(y_new[: self.nq])
        v = y_new[self.nq : self.nq + self.nv]
        p = self.options.projection
        iterations, violation, values = 0, None, None
        if m.nc:
            if p.position:
                q, iterations, violation, values = project_positions(
                    m, q, t_new, p.iterations, p.tol, self.options.rank_tol
                )
            if p.velocity:
                v = project_velocities(m, q, v, t_new, self.options.rank_tol, values)
        new = State(t_new, q, v, float(y_new[-1]))
        return new, StepInfo(iterations=iterations, h=t_new - state.t, position_violation=violation), h_next

    def evaluate(self, state: State) -> Evaluation:
        m = self.model
        vdot, lam, power, forces, cv, frames = self._solve(state.t, state.q, state.v, for_record=True)
        y = np.concatenate((state.q, state.v, (state.work,)))
        self._cached = (state.t, y, np.concatenate((m.q_rate(state.q, state.v), vdot, (power,))))
        if cv is None:
            empty = np.zeros(0)
            return Evaluation(empty, empty, empty, None, kinetic_energy(m, state.v), forces.potential, frames)
        return Evaluation(
            lam,
            cv.phi,
            cv.jacobian @ state.v + cv.phi_t,
            cv.jacobian,
            kinetic_energy(m, state.v),
            forces.potential,
            frames,
        )


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    options = parse_options(ctx, solver_spec.options)
    return Solver(model, options, solver_spec.integrator, solver_spec.rtol, solver_spec.atol)
