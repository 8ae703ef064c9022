"""What every ODE-based method shares: integrators, projection, work bookkeeping, recording.

The methods ``lagrange``, ``augmented_lagrangian``, ``null_space`` and ``gauss`` differ only in
how they find the accelerations (and multipliers) of the constrained system at one state; that
solve exists once, compiled (mbsim.solvers.ode.ode_kernels.accelerations over a FlatModel, chosen by
P[METHOD]): the compiled blocks call it, and so does Python for a single evaluation (the recorded
initial row, a run that is not block-stepped, scipy's Radau and BDF) through
ode_kernels.accelerations_at / evaluation, with the forces of the groups that have no compiled
form (compliant contacts with brute_force detection) computed by the model's Python functions and
added to Q.
What stays in Python: gauss's optimizers slsqp and pso (other algorithms:
:meth:`OdeSolver.accelerations`), and lagrange's sparse LU for sparse models above DENSE_LIMIT.
Everything else is here, once: the state y = (q, v, work) goes through the integrator
(mbsim.solvers.ode.integrators), quaternions are rescaled to unit norm, and positions then
velocities are projected onto the constraints (mbsim.solvers.numerics.projection) when the
``projection`` option says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbsim.diagnostics import row_columns, row_width
from mbsim.errors import SimulationError
from mbsim.model.constraints import ConstraintValues, constraint_values
from mbsim.model.data import new_data
from mbsim.model.dynamics import generalized_forces, kinetic_energy
from mbsim.model.flat import DENSE_LIMIT, FlatModel, compiled_form, dense_reason, make_data, model_form
from mbsim.model.model import Evaluation, Frames, Model, State, StepInfo
from mbsim.scene.fields import Field, Number, Sub
from mbsim.solvers.base import Block, SolverBase, dense_states
from mbsim.solvers.numerics.linalg import dependent_rows, inverse_mass_times
from mbsim.solvers.numerics.projection import (
    PROJECTION_FIELDS,
    ProjectionOptions,
    project_positions,
    project_velocities,
)
from mbsim.solvers.ode import integrate, ode_kernels
from mbsim.solvers.ode.integrators import stepper

# a compiled block: most steps and rows before Python looks at signals and progress again
BLOCK_STEPS = 200
ROWS_PER_BLOCK = 200

# options every ODE-based method takes (each method adds its own)
COMMON_OPTION_FIELDS = {
    "projection": Field(
        Sub(PROJECTION_FIELDS, "projection"),
        "mass-weighted projection after each step",
        {"position": True, "velocity": True, "iterations": 2, "tol": 1e-13},
    ),
    "max_step": Field(Number(positive=True), "largest step of the adaptive (scipy:*) integrators, s", None),
}


def projection_options(raw: dict) -> ProjectionOptions:
    return ProjectionOptions(bool(raw["position"]), bool(raw["velocity"]), int(raw["iterations"]), float(raw["tol"]))


def common_arguments(solver_spec, got: dict) -> dict:
    """The OdeSolver arguments every method's ``create`` passes: integrator and tolerances from
    the scene's solver section, projection, max_step and rank_tol from the checked options."""
    return {
        "integrator": solver_spec.integrator,
        "rtol": solver_spec.rtol,
        "atol": solver_spec.atol,
        "projection": projection_options(got["projection"]),
        "max_step": got["max_step"],
        "rank_tol": got["rank_tol"],
    }


@dataclass
class Accelerations:
    """The result of one acceleration solve.

    Attributes:
        vdot: (nv,) accelerations.
        multipliers: (nc,) lambda with M vdot = Q - J^T lambda (minimum-norm where not unique).
        iterations: iterations of the method's own solver (multiplier, optimizer, swarm).
        extra: per-solve diagnostics recorded under /diagnostics/solver/ (see EXTRA_DIAGNOSTICS).
    """

    vdot: np.ndarray
    multipliers: np.ndarray
    iterations: int = 0
    extra: dict[str, float] = field(default_factory=dict)


class OdeSolver(SolverBase):
    """Base of the ODE-based methods (see the module docstring).

    Subclasses set ``robust`` (rank-robust projections: pseudo-inverse instead of failing on
    rank loss), ``rank_tol``, and implement ``accelerations``. ``EXTRA_DIAGNOSTICS`` names the
    per-step values a method records besides the common ones; they are aggregated over the
    solves of a step by ``aggregate`` ("max" or "last").
    """

    robust: bool = False
    EXTRA_DIAGNOSTICS: dict[str, str] = {}
    COMPILED: str | None = None  # the method's key in ode_kernels.METHODS, if it has a compiled step

    def __init__(
        self,
        model: Model,
        integrator: str,
        rtol: float,
        atol: float,
        projection: ProjectionOptions,
        max_step: float | None,
        rank_tol: float,
    ) -> None:
        self.model = model
        self.data = new_data(model)  # what this run changes (the model is never written)
        self.integrator = self.integrator_label = integrator
        self.projection = projection
        self.rank_tol = rank_tol
        self._cut = rank_tol  # null_space, gauss: the rank cut of the current adaptive step (before_adaptive_step)
        self.nq, self.nv = model.nq, model.nv
        self._fixed, self._adaptive = stepper(integrator, rtol, atol, model.t_end, max_step)
        # derivative at the last recorded state (the next step's first stage) and what its solve counted
        self._cached: tuple[float, np.ndarray, np.ndarray, int, dict] | None = None
        self._last_compiled = False  # whether the last step was the compiled pair's (its dense output)
        self._iterations = 0
        self._extra: dict[str, float] = {}
        self._flat: FlatModel | None = None
        # force groups without a compiled form (compliant contacts with brute_force detection): their forces
        # come from the model's Python functions at every stage, into the compiled acceleration solve
        self._python_forces = [g for g in model.forces if not compiled_form(g)]
        self.compiled_reason = "the method has no compiled step"
        if self.COMPILED is not None:
            # lagrange's compiled solve factors S within its envelope, but keeps J, M^-1 J^T and S
            # dense (nc x nv and nc x nc entries: gigabytes for a 3,000-link chain), so a sparse model
            # above DENSE_LIMIT keeps the sparse LU of lagrange.py. The rank-robust methods' only
            # solves are the compiled ones (their SVD / KKT buffers are dense, as any dense solve's)
            limit_reason = dense_reason(model, DENSE_LIMIT) if self.COMPILED == "lagrange" else ""
            flat = limit_reason or model_form(model)
            if isinstance(flat, FlatModel):
                # fixed steps and the embedded pairs (RK45, DOP853: mbsim.solvers.ode.integrate) run in
                # compiled blocks; Radau and BDF step in Python around the compiled right-hand side
                # the joint springs' references: the run's own array (Data.coordinate_reference), viewed
                reference = self.data.coordinate_reference[0] if model.joint_coordinates else None
                self._flat, self.data.flat = flat, make_data(flat, robust=self.robust, coordinate_reference=reference)
                self._params = self.compiled_parameters()
                self._block_out = np.zeros(8)
                self._rows = np.zeros((ROWS_PER_BLOCK, row_width(self.row_columns()) + 1))  # + the step number
                method = int(self._params[ode_kernels.INTEGRATOR])
                # the integrator's buffers and an adaptive pair's state across blocks
                self._work = integrate.Work(
                    self.nq + self.nv + 1, max(method, 0), rtol, atol, max_step or np.inf, model.t_end
                )
                self._h_carried: float | None = None  # the pair's next step when a block hands over to Python
                self.compiled_reason = "" if method >= 0 else f"integrator {integrator}: compiled right-hand side only"
                if self._python_forces:
                    names = ", ".join(sorted({type(g).__name__ for g in self._python_forces}))
                    self.compiled_reason = (
                        f"force group {names} has no compiled form: its forces by Python at every stage "
                        "into the compiled acceleration solve"
                    )
            else:
                self.compiled_reason = flat

    @property
    def compiled(self) -> bool:
        """Whether the acceleration solve is the compiled one (the model flattened; force groups without
        a compiled form may add their forces from Python)."""
        return self._flat is not None

    def load_compiled(self) -> None:
        """Run the compiled step once by a call that takes no step (built ahead of time: nothing
        compiles; this only touches the extension module and the run's buffers)."""
        if self._flat is None:
            return
        q, v = self.model.q0.copy(), self.model.v0.copy()
        if not self.block_stepping:  # the right-hand side alone (adaptive integrators)
            ode_kernels.derivative(
                self._flat,
                self.data.flat,
                self._params,
                0.0,
                np.concatenate((q, v, (0.0,))),
                np.empty(self.nq + self.nv + 1),
            )
            return
        ode_kernels.advance(
            self._flat,
            self.data.flat,
            self._params,
            0.0,
            q,
            v,
            0.0,
            0.0,
            0.0,
            1,
            0,
            0,
            0,
            0,
            0.0,
            self._rows,
            self._block_out,
        )

    def compiled_parameters(self) -> np.ndarray:
        """The parameter vector P of the compiled step (ode_kernels: METHOD ... PROJ_TOL)."""
        P = np.zeros(ode_kernels.NPARAMS)
        P[ode_kernels.METHOD] = ode_kernels.METHODS[self.COMPILED]
        P[ode_kernels.INTEGRATOR] = ode_kernels.INTEGRATORS.get(self.integrator, -1)  # -1: adaptive (scipy)
        P[ode_kernels.RANK_TOL] = self.rank_tol
        P[ode_kernels.CUT] = self.rank_tol
        p = self.projection
        P[ode_kernels.PROJ_POSITION] = float(p.position)
        P[ode_kernels.PROJ_VELOCITY] = float(p.velocity)
        P[ode_kernels.PROJ_ITERATIONS] = p.iterations
        P[ode_kernels.PROJ_TOL] = p.tol
        P[ode_kernels.ROBUST] = float(self.robust)
        # time.contact_step's step control in the compiled fixed steps (the compiled compliant contacts')
        if self.model.contact_step is not None and self._flat.ncc and self._adaptive is None:
            P[ode_kernels.CONTACT_STEP] = self.model.contact_step
        # solver.contact_integration implicit: Rosenbrock-W steps near compliant contact (ode_kernels._steps)
        if self.model.contact_implicit and self._flat.ncc and self._adaptive is None:
            P[ode_kernels.CONTACT_IMPLICIT] = 1.0
        return P

    @property
    def implicit_contact(self) -> str:
        """Why solver.contact_integration implicit cannot be taken ("": it is): the Rosenbrock-W
        step exists in the compiled blocks of fixed steps only (ode_kernels._steps)."""
        if self._adaptive is not None or self.integrator not in ("euler", "semi_implicit_euler", "rk4"):
            return f"integrator {self.integrator} is adaptive (the implicit contact step is a fixed step; try rk4)"
        if not self.block_stepping:
            return f"the run does not step in compiled blocks ({self.compiled_reason})"
        return ""

    def row_columns(self) -> list[tuple[str, tuple[int, ...]]]:
        """The rows :meth:`advance` records: the common columns, then the method's per-step
        values (ode_kernels.EXTRAS, in the order of EXTRA_DIAGNOSTICS)."""
        extras = [(f"diagnostics/solver/{name}", ()) for name in self.EXTRA_DIAGNOSTICS]
        return row_columns(self.model) + extras

    @property
    def block_stepping(self) -> bool:
        """Whether :meth:`advance` runs blocks of steps in compiled code (fixed-step integrators and
        the embedded pairs scipy:RK45, scipy:DOP853; no force group computed in Python)."""
        return self._flat is not None and self._params[ode_kernels.INTEGRATOR] >= 0 and not self._python_forces

    def advance(
        self, state: State, h: float, done: int, every: int, max_steps: int, t_end: float, max_violation: float
    ) -> Block:
        """Fixed steps of size h in compiled code from step number ``done`` (the last one landing on
        t_end) with a row recorded after every ``every``-th step and the last (at most
        BLOCK_STEPS steps, ROWS_PER_BLOCK rows and max_steps + 1 steps in all), stopping after a
        step whose position violation passes ``max_violation``. Under scipy:RK45 / scipy:DOP853 each
        step is one accepted step of the compiled pair (scipy's step control; h its first step)."""
        D = self.data.flat
        q, v = state.q.copy(), state.v.copy()
        out, rows = self._block_out, self._rows
        code = ode_kernels.advance(
            self._flat,
            D,
            self._params,
            state.t,
            q,
            v,
            state.work,
            h,
            t_end,
            every,
            done,
            int(min(max_steps, 2**62)),  # solver.max_steps is a number (1e9 by default)
            len(rows),
            BLOCK_STEPS,
            max_violation,
            rows,
            out,
            self._work,
        )
        if self._adaptive is not None:
            self._cut = float(self._params[ode_kernels.CUT])  # the last step's (null_space, gauss)
            # a step handed to Python starts the Python path's pair with the compiled pair's step size
            self._h_carried = self._work.h_abs if code not in (ode_kernels.OK, ode_kernels.VIOLATION) else None
        steps = int(out[2])
        self._last_compiled = self._last_compiled if not steps else True
        new = State(float(out[0]), q, v, float(out[1])) if steps else state
        violation = float(out[6])
        info = StepInfo(int(out[5]), float(out[7]), violation if violation >= 0 else None)
        status = {ode_kernels.OK: "ok", ode_kernels.VIOLATION: "violation", ode_kernels.RECORD_FAILED: "record"}
        return Block(new, steps, rows[: int(out[3])], info, float(out[4]), status.get(code, "python"))

    @property
    def contact_step_blocks(self) -> bool:
        """Whether the compiled blocks take time.contact_step's step control themselves (fixed steps
        of a model whose compliant contacts are compiled; ode_kernels: P[CONTACT_STEP])."""
        return self.block_stepping and self._params[ode_kernels.CONTACT_STEP] > 0.0

    @property
    def adaptive(self) -> bool:
        return self._adaptive is not None

    @property
    def interpolates(self) -> bool:
        return self._adaptive is not None

    def interpolant(self):
        """The last accepted step's dense output (scipy's interpolant of the pair, of Radau, of BDF)
        as states, projected onto the constraints as every step's end is (``projection``): the
        interpolant runs from the step's projected start to its end before the projection, and
        leaves the constraints by the order of the step's local error (4e-8 m in the four-box chain
        under DOP853 at rtol 1e-8), which a plot of the rows would show as spikes between steps."""
        if self._last_compiled:  # the compiled pair's step: its Work still holds the stages
            dense = integrate.dense(ode_kernels.system(self._flat, self.data.flat, self._params), self._work)
        else:
            dense = self._adaptive.dense_output()
        at = dense_states(dense, self.nq, self.nv, self.model.normalize)

        def projected(t: float) -> State:
            s = at(t)
            q, v, _, _ = self._projected(t, s.q, s.v)
            return State(t, q, v, s.work)

        return projected

    @property
    def extra_diagnostics(self) -> tuple[str, ...]:
        return tuple(self.EXTRA_DIAGNOSTICS)

    # ------------------------------------------------------------------ the method's part

    def accelerations(
        self, t: float, q: np.ndarray, v: np.ndarray, frames: Frames, Q: np.ndarray, cv: ConstraintValues
    ) -> Accelerations:
        """Accelerations and multipliers of the constrained system (M, Q, J, gamma) at a state, for a
        model without a compiled solve (gauss's optimizers, lagrange's sparse models above DENSE_LIMIT)."""
        raise TypeError(f"{type(self).__name__} has no Python acceleration solve")

    def failure(self, t: float) -> SimulationError:
        """The error of a compiled acceleration solve that failed at time t (the solve's matrices in
        the run's FlatData): rank loss (lagrange), an SVD or least-squares solve that did not
        converge (non-finite values). Methods with failures of their own override it."""
        return SimulationError(
            "the acceleration solve failed: LAPACK's SVD / least-squares solve did not converge "
            "(non-finite forces or constraint values?)",
            t=t,
        )

    def _rank_loss(self, t: float, what: str) -> SimulationError:
        """A rank loss of J M^-1 J^T found by the compiled solve, with the equations involved (J in the
        run's FlatData)."""
        rows = dependent_rows(np.asarray(self.data.flat.J), self.model.row_labels)
        return SimulationError(
            f"the constraint Jacobian is rank deficient in the {what} (a pivot of J M^-1 J^T at most "
            f"{self.rank_tol:g} times its row's diagonal); equations involved: "
            f"{', '.join(rows) if rows else 'unknown'}. Redundant constraints or a singular position: "
            f"use a method that survives rank loss",
            t=t,
        )

    def before_adaptive_step(self, t: float, y: np.ndarray) -> bool:
        """Called by the adaptive integrator before each step from (t, y): set what the right-hand
        side keeps fixed over the step's stages; True if that changed (null_space and gauss kkt fix
        their rank cut: _adaptive_cut; the other methods nothing)."""
        return False

    def _adaptive_cut(self, t: float, y: np.ndarray) -> bool:
        """Set the rank cut of the coming adaptive step (ode_kernels.step_cut, the compiled solve's
        parameter P[CUT]). True if it changed."""
        if self._flat is None:
            return False
        cut = float(ode_kernels.step_cut(self._flat, self.data.flat, self._params, t, np.ascontiguousarray(y, float)))
        self._params[ode_kernels.CUT] = cut
        changed, self._cut = cut != self._cut, cut
        return changed

    # ------------------------------------------------------------------ dynamics

    def _python_forces_at(
        self, t: float, q: np.ndarray, v: np.ndarray, frames: Frames | None = None
    ) -> tuple[np.ndarray | None, float, float, Frames | None]:
        """The generalized forces (nv,) of the force groups without a compiled form, the power of their
        non-conservative part and their potential energy, by the model's Python functions (the counters
        of compliant contacts go to the run's data), and the frames they used; (None, 0, 0, frames)
        without such groups."""
        if not self._python_forces:
            return None, 0.0, 0.0, frames
        m = self.model
        nb, w = m.nbody, m.body_width
        frames = frames if frames is not None else m.frames(q, v)
        cons, nonc = np.zeros((nb + 1, w)), np.zeros((nb + 1, w))
        potential = 0.0
        for group in self._python_forces:
            q_cons, q_nc, pot = group.evaluate(frames, t, self.data)
            potential += pot
            if q_cons is not None:
                cons += q_cons
            if q_nc is not None:
                nonc += q_nc
        Qn = nonc[:nb].reshape(-1)
        return cons[:nb].reshape(-1) + Qn, float(Qn @ v), potential, frames

    def _compiled_solve(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        """v_dot and power at a state by the compiled solve (ode_kernels.accelerations_at), the Python
        force groups' forces added; multipliers and constraint values left in the run's FlatData, the
        solve counted. Raises the method's error when the solve fails."""
        extra, extra_power, _, _ = self._python_forces_at(t, q, v)
        stats = self.data.flat.solve_stats
        ode_kernels.reset_stats(stats, 0)
        ok, vdot, power = ode_kernels.accelerations_at(
            self._flat, self.data.flat, self._params, t, np.ascontiguousarray(q, float), np.ascontiguousarray(v, float),
            extra,
        )  # fmt: skip
        if not ok:
            raise self.failure(t)
        self._count_solve(stats)
        return vdot, power + extra_power

    def _solve(self, t: float, q: np.ndarray, v: np.ndarray, for_record: bool = False):
        """A model without a compiled solve (gauss's optimizers, lagrange above DENSE_LIMIT): accelerations,
        multipliers, non-conservative power and the pieces for recording, by the method's Python solve."""
        m = self.model
        frames = m.frames(q, v)
        forces = generalized_forces(m, self.data, frames, v, t, with_potential=for_record)
        if m.nc == 0:
            vdot = inverse_mass_times(m, forces.q_force)
            return vdot, np.zeros(0), forces.power_nc, forces, None, frames
        cv = constraint_values(m, frames, t)
        acc = self.accelerations(t, q, v, frames, forces.q_force, cv)
        self._iterations += acc.iterations
        self._aggregate(acc.extra)
        # drives do work: constraint power -lambda^T J v = lambda^T Phi_t
        power = forces.power_nc + float(acc.multipliers @ cv.phi_t)
        return acc.vdot, acc.multipliers, power, forces, cv, frames

    def _count_solve(self, stats: np.ndarray) -> None:
        """A compiled solve's iterations, rank and residual (stats[0:3]) into the step's own."""
        self._iterations += int(stats[0])
        if stats[2] > -np.inf:  # a solve took place (constraints)
            values = {"rank": float(stats[1]), "acceleration_residual": float(stats[2]), "optimizer_result": 0.0}
            self._aggregate({key: values[key] for key in self.EXTRA_DIAGNOSTICS})

    def _aggregate(self, extra: dict[str, float]) -> None:
        for key, value in extra.items():
            how = self.EXTRA_DIAGNOSTICS.get(key)
            if how == "max":
                self._extra[key] = max(self._extra.get(key, -np.inf), value)
            elif how == "min":
                self._extra[key] = min(self._extra.get(key, np.inf), value)
            else:
                self._extra[key] = value

    def acceleration(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        if self._flat is not None:
            return self._compiled_solve(t, q, v)
        vdot, _, power, _, _, _ = self._solve(t, q, v)
        return vdot, power

    def q_rate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.model.q_rate(q, v)

    def derivative(self, t: float, y: np.ndarray) -> np.ndarray:
        nq, nv = self.nq, self.nv
        if self._flat is not None:
            if not self._python_forces:  # the compiled right-hand side whole
                out = np.empty(len(y))
                stats = self.data.flat.solve_stats
                ode_kernels.reset_stats(stats, 0)
                if not ode_kernels.derivative(
                    self._flat, self.data.flat, self._params, t, np.ascontiguousarray(y, float), out
                ):
                    raise self.failure(t)
                self._count_solve(stats)
                return out
            q, v = y[:nq], y[nq : nq + nv]
            vdot, power = self._compiled_solve(t, q, v)
            return np.concatenate((self.model.q_rate(q, v), vdot, (power,)))
        q, v = y[:nq], y[nq : nq + nv]
        vdot, _, power, _, _, _ = self._solve(t, q, v)
        return np.concatenate((self.model.q_rate(q, v), vdot, (power,)))

    # ------------------------------------------------------------------ stepping

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        m = self.model
        self._iterations, self._extra = 0, {}
        y = np.concatenate((state.q, state.v, (state.work,)))
        if self._flat is not None and m.joint_coordinates:  # the compiled right-hand side's spring references
            self.data.flat.jc_ref[:] = self.data.coordinate_reference[0]
        if self._adaptive is not None:
            if self._flat is not None and self._h_carried is not None:  # after a compiled block: its step size
                h, self._h_carried = min(self._h_carried, m.t_end - state.t), None
            t_new, y_new, h_next = self._adaptive.step(self, state.t, y, h, self.before_adaptive_step)
            self._last_compiled = False
        else:
            f0 = None
            if self._cached is not None and self._cached[0] == state.t and np.array_equal(self._cached[1], y):
                f0 = self._cached[2]
                self._iterations, self._extra = self._cached[3], dict(self._cached[4])  # that solve is a stage
            y_new = self._fixed(self, state.t, y, h, f0)
            t_new, h_next = state.t + h, h
        q, v, newton, violation = self._projected(
            t_new, m.normalize(y_new[: self.nq]), y_new[self.nq : self.nq + self.nv]
        )
        new = State(t_new, q, v, float(y_new[-1]))
        # a method that iterates reports its own iterations; otherwise the projection's Newton steps
        iterations = self._iterations if self._iterations else newton
        info = StepInfo(iterations=iterations, h=t_new - state.t, position_violation=violation)
        info.extra = dict(self._extra)
        return new, info, h_next

    def _projected(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, float | None]:
        """q, v projected onto the constraints as the ``projection`` option says (positions, then
        velocities); the Newton steps and the position violation (None: not projected)."""
        m, p = self.model, self.projection
        newton, violation, values = 0, None, None
        if m.nc:
            if p.position:
                q, newton, violation, values = project_positions(
                    m, q, t, p.iterations, p.tol, self.rank_tol, self.robust
                )
            if p.velocity:
                v = project_velocities(m, q, v, t, self.rank_tol, values, self.robust)
        return q, v, newton, violation

    def evaluate(self, state: State) -> Evaluation:
        """A recorded row's values at ``state``: over a FlatModel by the compiled solve's own functions
        (ode_kernels.evaluation; the Python force groups' forces and energy added), else by the method's
        Python solve. The derivative there is kept as the next fixed step's first stage."""
        m = self.model
        self._iterations, self._extra = 0, {}
        y = np.concatenate((state.q, state.v, (state.work,)))
        if self._flat is not None:
            if m.joint_coordinates:  # the references as the run's (Python steps may have moved them)
                self.data.flat.jc_ref[:] = self.data.coordinate_reference[0]
            extra, extra_power, extra_potential, frames = self._python_forces_at(state.t, state.q, state.v)
            stats = self.data.flat.solve_stats
            ode_kernels.reset_stats(stats, 0)
            ok, vdot, power, lam, phi, phi_dot, J, kinetic, potential = ode_kernels.evaluation(
                self._flat, self.data.flat, self._params, state.t, np.ascontiguousarray(state.q, float),
                np.ascontiguousarray(state.v, float), extra,
            )  # fmt: skip
            if not ok:
                raise self.failure(state.t)
            if self._flat.ncc:  # the compiled compliant contacts' counters, for the recorded row
                m.compliant.read_counters(self.data, self.data.flat)
            self._count_solve(stats)
            f0 = np.concatenate((m.q_rate(state.q, state.v), vdot, (power + extra_power,)))
            self._cached = (state.t, y, f0, self._iterations, dict(self._extra))
            potential += extra_potential
            if m.nc == 0:
                empty = np.zeros(0)
                return Evaluation(empty, empty, empty, None, kinetic, potential, frames)
            return Evaluation(lam, phi, phi_dot, J, kinetic, potential, frames)
        vdot, lam, power, forces, cv, frames = self._solve(state.t, state.q, state.v, for_record=True)
        f0 = np.concatenate((m.q_rate(state.q, state.v), vdot, (power,)))
        self._cached = (state.t, y, f0, self._iterations, dict(self._extra))
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
