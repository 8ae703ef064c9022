"""Method ``gauss``: Gauss' principle of least constraint, solved as an optimisation.

papers/singular-positions-gauss-pso.txt §1.3: among all accelerations compatible with the
constraints, the true one minimises the constraint function (Gauss' "Zwang")

    G(v_dot) = 1/2 (v_dot - M^-1 Q)^T M (v_dot - M^-1 Q)   subject to   J v_dot = gamma,

a strictly convex quadratic program in the generalized coordinates: its minimiser is unique
even where J loses rank (singular positions, redundant joints), only the multipliers are not.
Optimizers (option ``optimizer``, mbsim.solvers.gauss.optimize):

- ``kkt`` (default): the KKT system [M J^T; J 0] solved in the least-squares sense (SVD; singular
  values below ``rank_tol``, default 1e-9, times the largest dropped: a singular value s of J
  gives the KKT matrix one of about s^2 / m, so this drops directions with s below ~3e-5 of the
  largest. With 1e-12 the IFToMM N four-bar (N = 4) under scipy:DOP853 at 1e-10 stopped at a fold
  with its step size collapsed, as null_space with its old rank tolerance; with 1e-9 it passes
  within 4e-9 m). The compiled step takes lagrange's Schur-complement solve instead where it
  certifies that the least-squares solve would drop nothing (mbsim.solvers.ode.ode_kernels.
  certified_full_rank): the same accelerations at lagrange's cost away from singular positions.
  Under an adaptive integrator rcond is set once per step in the middle of the KKT matrix's
  singular-value gap around rank_tol, as null_space does with its cut (before_adaptive_step);
- ``slsqp``: scipy's SLSQP in mass-scaled accelerations, dependent constraint rows removed;
- ``pso``: the paper's improved particle swarm -- the unconstrained optimum and the previous
  solve's optimum join the swarm as extra particles, a mutation operator with factor rho = 2
  keeps it diverse -- followed by a local refinement (the exact minimiser over the constraint
  set, reached from the swarm's best point). Each solve keeps whichever of the swarm's best
  and the refined point has the smaller constraint residual, then the smaller G; the choice
  goes to /diagnostics/solver/optimizer_result (0 kkt, 1 slsqp, 2 swarm best, 3 refined).

Every solve records the constraint residual max |J v_dot - gamma| of the result taken
(/diagnostics/solver/acceleration_residual, the largest over a step's solves). Multipliers are
the minimum-norm ones.
"""

from __future__ import annotations

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.constraints import ConstraintValues
from mbsim.model.model import Frames, Model
from mbsim.scene.fields import MAX_ITERATIONS, Choice, Context, Field, Number, Sub
from mbsim.solvers.base import read_options
from mbsim.solvers.gauss.optimize import SwarmOptions, particle_swarm, slsqp
from mbsim.solvers.numerics.linalg import MinNorm
from mbsim.solvers.ode import COMMON_OPTION_FIELDS, Accelerations, OdeSolver, common_arguments

NAME = "gauss"
CAPABILITIES = {"rigid_contacts": False, "integrators": True, "rank_loss": True}
OPTIMIZERS = ("kkt", "slsqp", "pso")
MAX_PARTICLES = 10_000  # a swarm holds particles x coordinates numbers per solve
RESULT_CODES = {"kkt": 0, "slsqp": 1, "swarm": 2, "refined": 3}

SLSQP_FIELDS = {
    "tol": Field(Number(positive=True), "SLSQP's ftol, relative to the size of the objective", 1e-14),
    "max_iter": Field(Number(minimum=1, maximum=MAX_ITERATIONS, integer=True), "iterations at most per solve", 100),
}
PSO_FIELDS = {
    "particles": Field(
        Number(minimum=3, maximum=MAX_PARTICLES, integer=True), "swarm size, the two extra particles included", 20
    ),
    "max_iter": Field(
        Number(minimum=1, maximum=MAX_ITERATIONS, integer=True), "swarm iterations at most per solve", 40
    ),
    "inertia": Field(Number(minimum=0), "inertia weight w", 0.729),
    "c1": Field(Number(minimum=0), "cognitive coefficient (pull to the particle's best)", 1.49445),
    "c2": Field(Number(minimum=0), "social coefficient (pull to the swarm's best)", 1.49445),
    "mutation": Field(Number(minimum=0), "mutation factor rho (the paper's 2)", 2.0),
    "mutation_rate": Field(Number(minimum=0, maximum=1), "probability that a particle mutates per iteration", 0.1),
    "penalty": Field(Number(positive=True), "weight of |J v_dot - gamma|^2 in the swarm's objective", 1e6),
    "tol": Field(Number(minimum=0), "relative improvement of the best value counted as progress", 1e-12),
    "patience": Field(
        Number(minimum=1, maximum=MAX_ITERATIONS, integer=True), "iterations without progress that end the search", 5
    ),
    "seed": Field(Number(minimum=0, integer=True), "seed of the random numbers (runs are reproducible)", 0),
}
OPTION_FIELDS = {
    **COMMON_OPTION_FIELDS,
    "optimizer": Field(Choice(OPTIMIZERS), "how the least-constraint problem is solved", "kkt"),
    "rank_tol": Field(
        Number(positive=True), "relative singular value below which a direction counts as lost (KKT and SVD)", 1e-9
    ),
    "slsqp": Field(Sub(SLSQP_FIELDS, "slsqp"), "SLSQP settings", {"tol": 1e-14, "max_iter": 100}),
    "pso": Field(
        Sub(PSO_FIELDS, "pso"),
        "particle swarm settings",
        {k: f.default for k, f in PSO_FIELDS.items()},
    ),
}


class Solver(OdeSolver):
    """Gauss' principle by optimisation (see the module docstring)."""

    robust = True
    EXTRA_DIAGNOSTICS = {"acceleration_residual": "max", "optimizer_result": "last"}

    def __init__(self, model: Model, optimizer: str, slsqp_options: dict, swarm: SwarmOptions, seed: int, **common):
        # kkt is a direct solve, compiled (mbsim.solvers.numerics.robust_kernels); the optimizers stay in Python
        self.COMPILED = "gauss_kkt" if optimizer == "kkt" else None
        super().__init__(model, **common)
        self.optimizer = optimizer
        self.slsqp_options = slsqp_options
        self.swarm = swarm
        self.rng = np.random.default_rng(seed)
        self._last_y: np.ndarray | None = None  # the previous solve's optimum (scaled)

    def before_adaptive_step(self, t: float, y: np.ndarray) -> bool:
        """kkt under an adaptive integrator: the rcond of the coming step in the middle of the KKT
        matrix's singular-value gap around rank_tol, so that no singular value crosses it within the
        step's stages; True if it changed."""
        return self.optimizer == "kkt" and self._adaptive_cut(t, y)

    def accelerations(
        self, t: float, q: np.ndarray, v: np.ndarray, frames: Frames, Q: np.ndarray, cv: ConstraintValues
    ) -> Accelerations:
        """The optimizers slsqp and pso (kkt's solve is the compiled one: robust_kernels.gauss_kkt_accelerations)."""
        gamma = cv.gamma
        mn = MinNorm(self.model, cv.jacobian, self.rank_tol)
        y_free = mn.w @ Q
        if self.optimizer == "slsqp":
            y, iterations, code = self._slsqp(mn, y_free, gamma, t)
        else:
            y, iterations, code = self._pso(mn, y_free, gamma)
        self._last_y = y
        residual = float(np.max(np.abs(mn.J_hat @ y - gamma)))
        extra = {"acceleration_residual": residual, "optimizer_result": code}
        return Accelerations(mn.w @ y, mn.multipliers(y_free - y), iterations, extra)

    def _start(self, y_free: np.ndarray) -> np.ndarray:
        last = self._last_y
        return last if last is not None and last.shape == y_free.shape else y_free

    def _slsqp(self, mn: MinNorm, y_free: np.ndarray, gamma: np.ndarray, t: float):
        # independent rows only: U_r^T J_hat y = U_r^T gamma (SLSQP needs a full-rank constraint matrix)
        J_red = mn.s[:, None] * mn.range.T
        y, iterations, ok, message = slsqp(
            y_free, J_red, mn.U.T @ gamma, self._start(y_free), self.slsqp_options["tol"],
            self.slsqp_options["max_iter"],
        )  # fmt: skip
        if not ok:
            raise SimulationError(f"SLSQP did not solve the least-constraint problem: {message}", t=t)
        return y, iterations, RESULT_CODES["slsqp"]

    def _pso(self, mn: MinNorm, y_free: np.ndarray, gamma: np.ndarray):
        o = self.swarm
        J_hat, null = mn.J_hat, mn.null
        y_feasible = mn.pinv_times(gamma)
        # the paper's step 1: particles that satisfy the constraints, spread over the null space
        spread = max(float(np.linalg.norm(null.T @ (y_free - y_feasible))), 1e-9 * max(1.0, np.linalg.norm(y_free)))
        z = self.rng.normal(scale=spread, size=(o.particles, null.shape[1]))
        X = y_feasible + z @ null.T
        X[-1] = y_free  # step 2: the unconstrained optimum ...
        X[-2] = self._start(y_free)  # ... and the previous optimum join the swarm

        def objective(Y: np.ndarray) -> np.ndarray:
            return 0.5 * np.sum((Y - y_free) ** 2, axis=1) + 0.5 * o.penalty * np.sum(
                (Y @ J_hat.T - gamma) ** 2, axis=1
            )

        best, _, iterations = particle_swarm(objective, X, o, self.rng)
        # local refinement from the swarm's best: the exact minimiser over {J_hat y = gamma}
        refined = best + null @ (null.T @ (y_free - best)) + mn.pinv_times(gamma - J_hat @ best)

        def merit(y):
            return float(np.max(np.abs(J_hat @ y - gamma))), 0.5 * float((y - y_free) @ (y - y_free))

        (res_b, g_b), (res_r, g_r) = merit(best), merit(refined)
        if res_b <= res_r and g_b < g_r:
            return best, iterations, RESULT_CODES["swarm"]
        return refined, iterations, RESULT_CODES["refined"]


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    p = got["pso"]
    swarm = SwarmOptions(
        particles=int(p["particles"]),
        max_iter=int(p["max_iter"]),
        inertia=p["inertia"],
        c1=p["c1"],
        c2=p["c2"],
        mutation=p["mutation"],
        mutation_rate=p["mutation_rate"],
        penalty=p["penalty"],
        tol=p["tol"],
        patience=int(p["patience"]),
    )
    return Solver(
        model,
        optimizer=got["optimizer"],
        slsqp_options={"tol": got["slsqp"]["tol"], "max_iter": int(got["slsqp"]["max_iter"])},
        swarm=swarm,
        seed=int(p["seed"]),
        **common_arguments(solver_spec, got),
    )
