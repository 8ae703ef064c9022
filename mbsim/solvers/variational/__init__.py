"""Method ``variational``: the symplectic discrete-action integrator of
papers/quaternion-symplectic-multibody.txt (§2-§4), constraints met at every time node.

Coordinates u are mbsim's q (3D: centre of mass and quaternion p per body; 2D: x, y, angle).
On a step of length h the action is approximated as the paper's eqs. (33)-(35) do:

    L_d(a, b) = h T(u_m, u_d) - h V(u_m),   u_m = (a + b)/2,  u_d = (b - a)/h,

with the kinetic energy of eqs. (19)-(20), per 3D body T = 1/2 m |r'|^2 + 2 p'^T G(p)^T J G(p) p'
(omega_body = 2 G(p) p'), and the constraints -- unit quaternions and every joint -- imposed at
the nodes with multipliers. Non-conservative forces (dampers, applied loads) enter through the
discrete Lagrange-d'Alembert principle as F_d = h/2 F(u_m, u_d) on both ends of a step.
With the momentum p_k^- = D2 L_d(u_{k-1}, u_k) + F_d (the paper's f_k, eq. (36)), one step solves

    D1 L_d(u_k, u_{k+1}) + F_d + p_k^- - C_u(u_k)^T Lambda_k = 0,   C(u_{k+1}, t_{k+1}) = 0

(eqs. (38)-(39)) for u_{k+1} and the node multipliers Lambda_k by Newton's method with the
analytic Jacobian of the kinetic and constraint terms (the forces' derivative, when there are
forces besides gravity, by finite differences); ``tol`` is the residual tolerance, ``max_iter``
the iteration limit, failure is exit 3. The start momentum is the Legendre transform (37),
p_0 = dT/du'.

Recording: the velocity at a node is the constrained inverse Legendre transform of p_k^-, so
velocity constraints hold at the nodes; energies, violations and reactions are then computed
as for every method (reactions from the continuous equations at the node, minimum norm).
The work of non-conservative forces is F(u_m, u_d) . (u_{k+1} - u_k) per step; drives add
Lambda_k^T C_t (the constraint impulse times the node velocity).

The step exists once, compiled (mbsim.solvers.variational.variational_kernels): Newton, the kinetic terms, the
Legendre transforms and, over a FlatModel, the model's joints and forces and the recorded rows, in
blocks of steps. A model flatten does not take (compliant contacts with brute_force detection) steps
through the same compiled step one step at a time, its joints and forces evaluated by the model's Python
functions; this module keeps the set-up, the start node and the recorded rows of that case.
"""

from __future__ import annotations

import numpy as np

from mbsim.diagnostics import row_columns, row_width
from mbsim.errors import SimulationError
from mbsim.model.constraints import constraint_values
from mbsim.model.data import new_data
from mbsim.model.dynamics import applied_forces, generalized_forces, kinetic_energy
from mbsim.model.flat import make_data, model_form, python_reason
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.model.sparse import is_sparse
from mbsim.scene.fields import MAX_ITERATIONS, Context, Field, Number, Raw
from mbsim.solvers.base import Block, SolverBase, read_options
from mbsim.solvers.numerics.linalg import MinNorm
from mbsim.solvers.ode import BLOCK_STEPS, ROWS_PER_BLOCK
from mbsim.solvers.variational import variational_kernels as vk

NAME = "variational"
CAPABILITIES = {"rigid_contacts": False, "integrators": False}

OPTION_FIELDS = {
    "projection": Field(
        Raw("mapping"),
        "accepted and ignored: the constraints hold at every node already (so scenes written for the "
        "projecting methods run unchanged)",
        None,
    ),
    "tol": Field(
        Number(positive=True),
        "Newton tolerance on the momentum residual as the position error it would cause (h R / mass) and "
        "on 100 times the constraint residual, both relative to max(1, |u|)",
        1e-12,
    ),
    "max_iter": Field(
        Number(minimum=1, maximum=MAX_ITERATIONS, integer=True), "Newton iterations at most per step", 25
    ),
    "rank_tol": Field(Number(positive=True), "rank tolerance of the reaction solve at recorded nodes", 1e-12),
}


def _g_tensor() -> np.ndarray:
    """GT[i] = G(e_i): G(p) = sum_i p_i GT[i], with omega_body = 2 G(p) p' for unit p."""

    def g(p):
        w, x, y, z = p
        return np.array([[-x, w, z, -y], [-y, -z, w, x], [-z, y, -x, w]])

    return np.array([g(e) for e in np.eye(4)])


GT = _g_tensor()

# why a step was not taken, as the error that ends the run
_FAILURES = {
    vk.SINGULAR: "the Newton matrix of the discrete Euler-Lagrange equations is singular (redundant constraints "
    "or a singular position)",
    vk.LEGENDRE_FAILED: "the velocity at the node (the constrained inverse Legendre transform) has no solution",
}


class Solver(SolverBase):
    """Discrete-action integrator (see the module docstring)."""

    EXTRA_DIAGNOSTICS = {"newton_residual": "last"}
    integrator_label = "discrete action (midpoint)"  # solver.integrator is not used

    def __init__(self, model: Model, tol: float, max_iter: int, rank_tol: float) -> None:
        self.model = model
        self.data = new_data(model)  # what this run changes (the model is never written)
        self.tol, self.max_iter, self.rank_tol = tol, max_iter, rank_tol
        self.nb, self.dim = model.nbody, model.dimension
        self.n = model.nq
        self.nquat = self.nb if self.dim == 3 else 0
        self.m = self.nquat + model.nc
        self.forces_vary = bool(model.forces or model.joint_coordinates)
        inertia = np.zeros((self.nb, 3, 3))
        k = model.body_inertia.shape[1]  # (nb, 3, 3) 3D, (nb, 1, 1) 2D
        inertia[:, :k, :k] = model.body_inertia
        # momentum residual -> position-equivalent error h R / (mass scale), per coordinate
        mass = np.asarray(model.body_mass, dtype=float)
        if self.dim == 3:
            rot = 4.0 * np.max(np.linalg.eigvalsh(inertia), axis=1)
            mass_scale = np.concatenate((np.repeat(mass[:, None], 3, 1), np.repeat(rot[:, None], 4, 1)), 1)
        else:
            mass_scale = np.stack([mass, mass, inertia[:, 0, 0]], axis=1)
        gravity = np.zeros((self.nb, 7 if self.dim == 3 else 3))
        gravity[:, : self.dim] = model.weight
        self.var_model = vk.VarModel(
            n=self.n, nquat=self.nquat, m=self.m, nv=model.nv, GT=GT, mass=mass, inertia=inertia,
            mass_scale=mass_scale.reshape(-1), gravity_u=gravity.reshape(-1), forces_vary=int(self.forces_vary),
            tol=tol, max_iter=max_iter, rank_tol=rank_tol,
        )  # fmt: skip
        self.data.var = vk.make_var_data(self.n, self.m, model.nv, self.nb, np.intc)  # LAPACK's C int (cython_lapack)
        self._node: tuple[float, np.ndarray] | None = None  # (t, u) of the node data.var holds
        self._restored: dict[str, np.ndarray] = {}  # the node's values a continued run starts from (restore)
        self._compiled = self._compile()
        # what remains in Python: compliant contacts with brute_force detection have no compiled form, so
        # such a model's joints and forces come from the model's Python functions into the same compiled step
        if self._compiled is None:
            self.evaluator = vk.PyEvaluator(model.nc, model.nv, self._joints, self._forces)

    def _compile(self):
        """The compiled blocks' evaluator and buffers over the FlatModel, or None (no FlatModel)."""
        m = self.model
        # dense linear algebra for every model: the Newton matrix is dense (n + m)^2 whatever the size
        self.compiled_reason = python_reason(m)
        if self.compiled_reason:
            return None
        flat = model_form(m)
        # robust: the reactions of a row are minimum-norm (evaluate); the springs' references are the run's
        reference = self.data.coordinate_reference[0] if m.joint_coordinates else None
        self.data.flat = make_data(flat, robust=True, coordinate_reference=reference)
        self.evaluator = vk.FlatEvaluator(flat, self.data.flat)
        rows = np.zeros((ROWS_PER_BLOCK, row_width(self.row_columns()) + 1))  # + the step number
        return rows, np.zeros(9)

    @property
    def block_stepping(self) -> bool:
        """Whether :meth:`advance` runs blocks of steps in compiled code."""
        return self._compiled is not None

    def row_columns(self) -> list[tuple[str, tuple[int, ...]]]:
        """The rows :meth:`advance` records: the common columns, then the Newton residual."""
        return row_columns(self.model) + [("diagnostics/solver/newton_residual", ())]

    def load_compiled(self) -> None:
        """A call of the compiled step that takes no step (the structures' types checked once)."""
        if self._compiled is None:
            return
        rows, out = self._compiled
        q, v = self.model.q0.copy(), self.model.v0.copy()
        vk.advance(self.evaluator, self.var_model, self.data.var, 0.0, q, v, 0.0, 0.0, 0.0, 1, 0, 0, 0, 0, 0.0,
                   rows, out)  # fmt: skip

    def advance(
        self, state: State, h: float, done: int, every: int, max_steps: int, t_end: float, max_violation: float
    ) -> Block:
        """Compiled steps and rows (variational_kernels.advance) from the node of ``state``."""
        rows, out = self._compiled
        self._start(state)
        q, v = state.q.copy(), state.v.copy()
        code = vk.advance(
            self.evaluator, self.var_model, self.data.var, state.t, q, v, state.work, h, t_end, every, done,
            max_steps, len(rows), BLOCK_STEPS, max_violation, rows, out,
        )  # fmt: skip
        steps = int(out[2])
        new = state
        if steps:
            new = State(float(out[0]), q, v, float(out[1]))
            self._node = (new.t, q.copy())
        info = StepInfo(iterations=int(out[5]), h=float(out[7]), position_violation=float(out[6]))
        info.extra = {"newton_residual": float(out[8])}
        # a step not taken is taken again by step(), which raises its error
        status = {vk.OK: "ok", vk.VIOLATION: "violation", vk.RECORD_FAILED: "record"}.get(code, "python")
        return Block(new, steps, rows[: int(out[3])], info, float(out[4]), status)

    @property
    def extra_diagnostics(self) -> tuple[str, ...]:
        return tuple(self.EXTRA_DIAGNOSTICS)

    # ------------------------------------------------------------------ the model's Python functions

    def _joints(self, u: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """phi, the dense Jacobian J (nc, nv) and phi_t at (u, t) at rest (PyEvaluator)."""
        m = self.model
        cv = constraint_values(m, m.frames(u, np.zeros(m.nv)), t)
        J = cv.jacobian.toarray() if is_sparse(cv.jacobian) else cv.jacobian
        return cv.phi, J, cv.phi_t

    def _forces(self, u: np.ndarray, v: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The generalized applied forces at (u, v, t): all of them, the non-conservative part (PyEvaluator)."""
        m = self.model
        f = applied_forces(m, self.data, m.frames(u, v), v, t, with_potential=False)
        return f.conservative + f.nonconservative, f.nonconservative

    # ------------------------------------------------------------------ stepping

    # the node's values a step goes on from (the discrete momentum of eq. (37) is not M v of the
    # recorded velocity): what a continued run restores (mbsim run --from)
    NODE_FIELDS = ("p", "rate", "lam", "h")

    def carried(self) -> dict[str, np.ndarray]:
        """The node of the last step (data.var's p, rate, lam, h) besides the base method's."""
        fields = self.data.var._asdict()  # the arrays the kernels' views share
        node = {f"node_{name}": np.array(fields[name]) for name in self.NODE_FIELDS} if self._node else {}
        return super().carried() | node

    def restore(self, carried: dict[str, np.ndarray]) -> None:
        super().restore(carried)
        # the node of the continued state: made by the first _start there, then these values
        self._restored = {name: carried[f"node_{name}"] for name in self.NODE_FIELDS if f"node_{name}" in carried}

    def _start(self, state: State) -> None:
        """The node of ``state`` in data.var: kept from the last step when it ended there, else a new
        one (momentum by the Legendre transform, eq. (37)), or the node a continued run restored."""
        node = self._node
        if node is not None and node[0] == state.t and np.array_equal(node[1], state.q):
            return
        rate = self.model.q_rate(state.q, state.v)
        vk.start_node(self.evaluator, self.var_model, self.data.var, state.t, state.q, rate)
        self._node = (state.t, state.q.copy())
        restored, self._restored = self._restored, {}
        fields = self.data.var._asdict()
        for name, value in restored.items():
            fields[name][...] = value

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        """One step of the compiled step (variational_kernels.step_once); a step not taken raises."""
        self._start(state)
        W = self.data.var
        outcome, work, iterations, residual, joints = vk.step_once(
            self.evaluator, self.var_model, W, state.t, h, state.work
        )
        if outcome != vk.TAKEN:
            reason = _FAILURES.get(outcome) or (
                f"Newton's method on the discrete Euler-Lagrange equations did not converge in {self.max_iter} "
                f"iterations (residual {residual:.3g}, tol {self.tol:g})"
            )
            raise SimulationError(reason, t=state.t)
        new = State(state.t + h, W.a.copy(), W.v_new.copy(), work)
        self._node = (new.t, new.q.copy())
        info = StepInfo(iterations=iterations, h=h, position_violation=joints)
        info.extra = {"newton_residual": residual}
        return new, info, h

    def evaluate(self, state: State) -> Evaluation:
        """A recorded row's values at ``state``: reactions minimum-norm from the continuous equations at
        the node. Over a FlatModel by the compiled rows' own functions (variational_kernels.evaluation);
        a model without one (compliant contacts with brute_force detection) by the model's Python
        functions."""
        m = self.model
        if self._compiled is not None:
            lam, phi, phi_dot, J, kinetic, potential = vk.evaluation(self.evaluator, self.var_model, state.t,
                                                                     state.q, state.v)  # fmt: skip
            if model_form(m).ncc:  # the compiled compliant contacts' counters, for the recorded row
                m.compliant.read_counters(self.data, self.data.flat)
            return Evaluation(lam, phi, phi_dot, J if m.nc else None, kinetic, potential, None)
        frames = m.frames(state.q, state.v)
        forces = generalized_forces(m, self.data, frames, state.v, state.t)
        kinetic = kinetic_energy(m, state.v)
        if m.nc == 0:
            empty = np.zeros(0)
            return Evaluation(empty, empty, empty, None, kinetic, forces.potential, frames)
        cv = constraint_values(m, frames, state.t)
        mn = MinNorm(m, cv.jacobian, self.rank_tol)
        y_free = mn.w @ forces.q_force
        y = mn.pinv_times(cv.gamma) + mn.null @ (mn.null.T @ y_free)
        lam = mn.multipliers(y_free - y)
        return Evaluation(lam, cv.phi, cv.jacobian @ state.v + cv.phi_t, cv.jacobian, kinetic, forces.potential, frames)


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    return Solver(model, tol=got["tol"], max_iter=int(got["max_iter"]), rank_tol=got["rank_tol"])
