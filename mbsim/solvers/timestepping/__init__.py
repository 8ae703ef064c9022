"""Method ``timestepping``: velocity-impulse time-stepping with unilateral contacts.

papers/unilateral-constraints-lcp-projection-correction.txt eqs. (4)-(14), in the form of
Moreau-Jean's midpoint scheme (the works it cites: Moreau, Jean, Stewart-Trinkle,
Anitescu-Potra). One step from (q, v) at t with step h:

1. q_m = q + h/2 v (the midpoint), where contacts are detected (mbsim.model.contact) and
   forces, joint Jacobians and contact Jacobians are evaluated;
2. the impulses P = (P_E joints, P_N normal, P_T friction) solve the mixed LCP of eq. (14):

       v+ = v + h M^-1 Q + M^-1 (J_E^T P_E + J_N^T P_N + J_T^T P_T),
       J_E v+ + Phi_t = 0,
       0 <= P_N  _|_  J_N v+ - r_N >= 0,
       Coulomb friction on J_T v+ with |P_T| <= mu P_N;

   the joint rows are eliminated exactly (Schur complement), the contact rows go to the contact
   solver (option ``lcp``; mbsim.solvers.numerics.cone): ``active_set`` (the default) and ``pgs``
   with Coulomb's round cone |P_T| <= mu P_N -- block Gauss-Seidel sweeps warm-started from the
   previous step's impulses of the same contact features, then (``active_set``) the exact solve of
   the active set they found, which is what keeps a stack of boxes standing; or ``lemke`` with
   the Stewart-Trinkle polyhedral cone spanned by +-t1, +-t2 (|P_t1| + |P_t2| <= mu P_N: mu along
   a tangent, mu/sqrt(2) along a diagonal; in 2D the cones are the same), its answer checked and
   degenerate LCPs retried with a diagonal shift;
3. q+ = q_m + h/2 v+;
4. the paper's error projection correction (§3, eqs. 15-18): positions then velocities of the
   new state projected onto the bilateral joints in the mass-matrix norm (option ``projection``,
   1-2 Newton steps), so that the next step's LCP starts from a consistent state, as the paper
   asks (and the recorded state is the corrected one).

The target velocity r_N of a contact, with u = -J_N v its approach speed: closed at the
midpoint (gap <= 0) it is Newton's restitution law, r_N = e max(u, 0) (eqs. 8-9; below
``restitution_threshold`` approach speed e counts as 0, so that resting contact does not
chatter), or the penetration correction beta (-gap)/h if that is larger (``stabilization``
beta, default 0.2: a fifth of a penetration is removed per step, so resting contact does not
sink and the correction adds no bounce). Open at the midpoint but closing within the rest of
the step (gap <= u h/2) it is an impact now, r_N = e u (the bounce speed is exact; the
position is off by at most the gap, so apex heights are first order in h), or for e = 0 the
landing r_N = -gap/(h/2); open and not closing it is -gap/(h/2), which only acts if the step
would otherwise end in penetration. A gap within 1e-12 m of zero (step_kernels.RESTING_GAP) is
resting contact: Newton's law alone, without correction or landing, so that a stack's redundant
corners, whose gaps wander by ~1e-13 m, ask for consistent velocities and its contact problem
stays the same from step to step. Contacts are searched within ``margin`` plus the distance
the bodies can travel in the step, (|v| + |omega| R) h, with v the larger of the step's start
velocity and the velocity the forces alone would give.

Joint limits and joint friction (CONTRACT §8; mbsim.solvers.numerics.joint_rows): rows after the
contacts' in the same LCP, the force evaluation leaving out the smooth methods' compliant stops
and regularised friction. A stop (gap q - lower, row +c; upper - q, row -c) is a unilateral row
with the contacts' target velocity and the limit's restitution, taken when its gap is within
``margin`` plus the step's travel, or when the solved impulses would still close it within the
step (then solved again); friction is a box row c v+ = 0, |P| <= F(|c v|) h with the Stribeck
curve F at the step's start rate. Their impulses over h are the recorded limit and friction forces.

Where the step runs: compiled (mbsim.solvers.timestepping.step_kernels.FreeStep: the whole step,
free bodies and bilateral joints, their rows eliminated through S's envelope Cholesky factor, the
joint limits' and joint friction's rows and the projection compiled) unless ``lcp`` is ``lemke``, a
shape pair has no compiled narrow phase (every pair has one today, meshes' included), a force group
has no compiled form, or a sparse model's dense Jacobian would be too large; those steps run in
Python (``Solver.compiled_reason`` says why). With joints, a step whose S is not certified of full
rank (redundant joints, a singular position: the pseudo-inverse would cut) is handed back by the
compiled step and taken in Python, whose SVD decides (``Solver.python_steps`` counts them). Both
give the same states to round-off.

Recorded diagnostics: contact count (touching points: gap <= 0 or a positive impulse), the
largest penetration at the recorded state, /diagnostics/contacts/normal_impulse (sum of the
step's normal impulses), /diagnostics/contacts/residual (the contact problem's natural residual,
N s; Lemke: its checked complementarity error) and the solver's iterations (sweeps or Lemke pivots). The work of contact
impulses and non-conservative forces, P . (v + v+)/2, goes to the energy bookkeeping.
Joint reactions at a recorded state are the joints' whole impulse of the step divided by h: P_E plus
the velocity projection's, -lambda_v (step 4 changes v by -M^-1 J^T lambda_v), so that J^T of it is
M (v_end - v) - h Q, the momentum the joints gave. P_E alone misses half the centripetal pull (v+ is
tangent at the midpoint; the projection turns it tangent at the end). The position projection changes
no velocity and adds nothing (the impulse (2/h) M dq that would have moved q as far is the velocity
projection's again, to first order: counting both doubles the centripetal part). The record is the
step's mean force, first order in h: pendulum_2d.yaml's rod pull within 1.8 % of its largest at
h = 0.01 s and 0.18 % at 1e-3 s (P_E alone: 39 % at either), a conical pendulum's within 1.2 % and 0.12 %.
"""

from __future__ import annotations

import numpy as np

from mbsim.model.constraints import constraint_values
from mbsim.model.contact import ContactDetector
from mbsim.model.contact.jacobian import bounding_radii, contact_rows, contact_rows_csr, reach
from mbsim.model.contact.narrowphase import MAX_FEATURE
from mbsim.model.data import new_data
from mbsim.model.dynamics import applied_forces, generalized_forces, kinetic_energy
from mbsim.model.flat import DENSE_LIMIT, dense_reason, make_data, model_form, python_reason
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.model.sparse import is_sparse
from mbsim.scene.fields import MAX_ITERATIONS, Boolean, Choice, Context, Field, Number, Sub
from mbsim.solvers.base import SolverBase, read_options
from mbsim.solvers.numerics.cone import FIRST_SWEEPS, POLISH_MAX, BodySpace
from mbsim.solvers.numerics.contact_lcp import contact_lcp, rigid_friction
from mbsim.solvers.numerics.joint_rows import JointRows
from mbsim.solvers.numerics.linalg import MinNorm, inverse_mass_times
from mbsim.solvers.numerics.projection import project_positions, velocity_projection
from mbsim.solvers.ode import COMMON_OPTION_FIELDS, projection_options
from mbsim.solvers.timestepping.step_kernels import FreeStep, targets, warm_start

NAME = "timestepping"
_NONE = np.zeros(0)  # the joint impulses of a model without joints (read only)
_NONE.flags.writeable = False
TOUCHING_GAP = 1e-9  # m: a recorded contact at most this open counts as touching (diagnostics/contacts/count)
CAPABILITIES = {"rigid_contacts": True, "integrators": False}

PGS_FIELDS = {
    "iterations": Field(Number(minimum=1, maximum=MAX_ITERATIONS, integer=True), "sweeps at most per step", 500),
    "tol": Field(
        Number(positive=True),
        "accepted natural residual of the contact problem, and the largest change of an impulse in a sweep"
        " that ends the sweeps (relative to max(1, the largest impulse))",
        1e-10,
    ),
    "omega": Field(
        Number(positive=True, maximum=1.99), "over-relaxation factor of the joint-limit and friction rows", 1.0
    ),
    "warm_start": Field(Boolean(), "start from the previous step's impulses of the same contact features", True),
}
OPTION_FIELDS = {
    "projection": COMMON_OPTION_FIELDS["projection"],
    "lcp": Field(
        Choice(("active_set", "pgs", "lemke")),
        "solver of the contact impulses: active_set (round-cone Gauss-Seidel sweeps, then an exact active-set"
        " solve), pgs (the sweeps alone), lemke (Stewart-Trinkle's four-direction cone)",
        "active_set",
    ),
    "pgs": Field(
        Sub(PGS_FIELDS, "pgs"),
        "settings of the sweeps (lcp active_set and pgs)",
        {"iterations": 500, "tol": 1e-10, "omega": 1.0, "warm_start": True},
    ),  # fmt: skip
    "margin": Field(Number(minimum=0), "contacts closer than this (m) enter the LCP before they touch", 1e-3),
    "stabilization": Field(Number(minimum=0, maximum=1), "fraction of a penetration removed per step", 0.2),
    "restitution_threshold": Field(Number(minimum=0), "approach speed (m/s) below which an impact is inelastic", 1e-3),
    "rank_tol": Field(Number(positive=True), "rank tolerance of the joint rows (pseudo-inverse)", 1e-10),
}


class Solver(SolverBase):
    """Velocity-impulse time-stepping (see the module docstring)."""

    EXTRA_DIAGNOSTICS = {"contacts/normal_impulse": "last", "contacts/residual": "last"}
    integrator_label = "Moreau-Jean midpoint"  # solver.integrator is not used

    def __init__(self, model: Model, options: dict, friction: list[float]) -> None:
        self.model = model
        self.data = new_data(model)  # what this run changes (the model is never written)
        self.d, self.w = model.dimension, model.body_width
        self.projection = projection_options(options["projection"])
        self.lcp = options["lcp"]
        self.pgs = options["pgs"]
        self.margin = options["margin"]
        self.beta = options["stabilization"]
        self.threshold = options["restitution_threshold"]
        self.rank_tol = options["rank_tol"]
        self.detector = ContactDetector(model)
        entries = model.contacts
        self.restitution = np.array([float(c.values.get("restitution") or 0.0) for c in entries])
        self.friction = np.array(friction)
        self._warm_keys: np.ndarray | None = None  # contact features of the last step, sorted
        self._warm_values: np.ndarray | None = None  # their impulses (normal, tangents)
        self._warm_points: np.ndarray | None = None  # their points on body j (world, the step's midpoint)
        self.body_radius = bounding_radii(model)
        self._last_joint_impulse: tuple[float, np.ndarray] | None = None
        self.coordinates = JointRows(model)  # joint limits and friction (none: no rows, no cost)
        self._last_coordinate_forces: tuple[float, tuple[np.ndarray, np.ndarray]] | None = None
        # compiled shapes and forces (free bodies or bilateral joints): the whole step compiled
        # (step_kernels); with joints, D has the dense J, S and the pseudo-inverse's buffers
        self.compiled_reason = self._compiled_reason()
        self._free: FreeStep | None = None
        self.python_steps = 0  # steps the compiled step handed back (joint rows not certified of full rank)
        if not self.compiled_reason:
            flat = model_form(model)
            reference = self.data.coordinate_reference[0] if model.joint_coordinates else None
            joints = bool(model.nc)
            data = make_data(flat, robust=joints, dense=joints, coordinate_reference=reference)
            self._free = FreeStep(
                flat, data, self.detector, self.restitution, self.friction, self.body_radius, options,
                MAX_FEATURE, POLISH_MAX, FIRST_SWEEPS, self.projection, self.coordinates,
            )  # fmt: skip

    def _compiled_reason(self) -> str:
        """Why the step runs in Python ("" when step_kernels.FreeStep takes it; with joints it hands
        back a step whose joint rows are not certified of full rank, which then runs here)."""
        m = self.model
        if m.nc and dense_reason(m, DENSE_LIMIT):
            return dense_reason(m, DENSE_LIMIT)
        if self.lcp == "lemke":
            return "lcp lemke is Python's"
        if not self.detector._compiled:
            return f"shape pairs without a compiled narrow phase: {', '.join(self.detector.python_pairs)}"
        return python_reason(m)

    @property
    def compiled(self) -> bool:
        """Whether the step is the compiled one (step_kernels.FreeStep; with joints, but for the
        steps whose joint rows are not certified of full rank)."""
        return self._free is not None

    @property
    def extra_diagnostics(self) -> tuple[str, ...]:
        return tuple(self.EXTRA_DIAGNOSTICS)

    def carried(self) -> dict[str, np.ndarray]:
        """The warm-start memory (the last step's contact features, impulses and points): the
        sweeps of the next step start from it."""
        keys, values, points = self._free.warm if self._free is not None else (
            self._warm_keys, self._warm_values, self._warm_points)  # fmt: skip
        if keys is None:
            return super().carried()
        # the compiled step's are copies already; the Python path's are replaced, never written, by a step
        return super().carried() | {"warm_keys": keys, "warm_values": values, "warm_points": points}

    def restore(self, carried: dict[str, np.ndarray]) -> None:
        super().restore(carried)
        if "warm_keys" not in carried:
            return
        keys = np.ascontiguousarray(carried["warm_keys"], dtype=np.int64)
        values = np.ascontiguousarray(carried["warm_values"], dtype=float).reshape(len(keys), self.d)
        points = np.ascontiguousarray(carried["warm_points"], dtype=float).reshape(len(keys), self.d)
        self._warm_keys, self._warm_values, self._warm_points = keys, values, points
        if self._free is not None:
            self._free.set_warm(keys, values, points)

    # ------------------------------------------------------------------ contact Jacobians

    def _contact_rows(self, frames, batch):
        """Normal and tangent rows (J_N (k, nv), J_T (k (d-1), nv)): mbsim.model.contact.jacobian."""
        return contact_rows(self.model, frames, batch)

    # ------------------------------------------------------------------ the step

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        if self._free is not None:
            if self._free.step(state.q, state.v, state.t, h, state.work):
                return self._step_compiled(state, h)
            # the joint rows' factor is not certified (or the projection's SVD failed on a non-finite
            # state): this step in Python (its SVD, its errors), which continues
            # from the compiled step's warm-start memory and hands its own back
            self._warm_keys, self._warm_values, self._warm_points = self._free.warm
            self.python_steps += 1
            new = self._step_python(state, h)
            if self._warm_keys is not None:
                self._free.set_warm(self._warm_keys, self._warm_values, self._warm_points)
            return new
        return self._step_python(state, h)

    def _step_python(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        """The step in Python: lcp lemke, shape pairs or forces without a compiled form, a large sparse
        model, redundant joints or a singular position (see _compiled_reason)."""
        m = self.model
        q, v = state.q, state.v
        t_mid = state.t + 0.5 * h
        q_mid = m.normalize(m.retract(q, 0.5 * h * v))
        frames = m.frames(q_mid, v)
        applied = applied_forces(m, self.data, frames, v, t_mid, with_potential=False, nonsmooth=True)
        Q = generalized_forces(m, self.data, frames, v, t_mid, with_potential=False, applied=applied).q_force
        v_free = v + h * inverse_mass_times(m, Q)
        # contacts that can close by the end of the step: the margin grows with how far the
        # bodies can move from the midpoint, (|v| + |omega| R) h/2 each
        reach = max(self._reach(v), self._reach(v_free))  # forces may speed bodies up within the step
        batch = self.detector.detect(frames, self.margin + h * reach)
        k = len(batch.gap)

        # joint rows (eliminated exactly) and contact rows (to the LCP)
        J_E = phi_t = None
        if m.nc:
            cv = constraint_values(m, frames, t_mid)
            J_E, phi_t = cv.jacobian, cv.phi_t
        P_E = np.zeros(m.nc)
        P_C = np.zeros(0)
        iterations, residual = 0, 0.0
        blocks, b_K = [], np.zeros(0)
        # free bodies touching (no joints, no joint rows): the contact problem in body space, its
        # Delassus matrix never formed (mbsim.solvers.numerics.cone.BodySpace)
        body_space = None
        if k and not m.nc and not self.coordinates and self.lcp != "lemke":
            indptr, indices, data = contact_rows_csr(m, frames, batch)
            body_space = BodySpace(indptr, indices, data, m.inv_mass_blocks)
            J_all = body_space.matrix()
            rate, rate_free = J_all @ v, J_all @ v_free
            target = self._target(rate[:k], rate_free[:k], batch.gap, self.restitution[batch.entry], h)
            b_K = rate_free
            b_K[:k] -= target
        elif k:
            J_N, J_T = self._contact_rows(frames, batch)
            blocks = [J_N, J_T]
            target = self._target(J_N @ v, J_N @ v_free, batch.gap, self.restitution[batch.entry], h)
            b_K = np.concatenate(((J_N @ v_free) - target, J_T @ v_free))
        # the joint coordinates' stops (unilateral) and friction (box) rows after the contacts'; a
        # stop left out (farther than the step reaches) that the others' impulses would still close
        # within the step (a link yanked by its neighbour's impact) is taken in and the LCP solved again
        at = self._coordinate_state(frames, t_mid)
        stops = np.zeros(0, dtype=np.int64)
        if at:
            speed = np.maximum(np.abs(at[1] @ v), np.abs(at[1] @ v_free))
            stops = np.flatnonzero(at[0] <= self.margin + h * speed)
        while True:
            J_X, b_X, bound = self._coordinate_rows(at, stops, v, v_free, h)
            nx = len(b_X)
            if body_space is not None:
                P_C, iterations, residual = self._solve_lcp(body_space, b_K, batch, k, state.t, 0, np.zeros(0))
                impulse = J_all.T @ P_C
            elif k or nx:
                J_C = _vstack([*blocks, J_X] if nx else blocks)
                b_C = np.concatenate((b_K, b_X))
                A = _schur_product(m, J_C)
                if m.nc:
                    A, b_C, eliminate = self._eliminate(J_E, J_C, A, b_C, v_free, phi_t)
                P_C, iterations, residual = self._solve_lcp(A, b_C, batch, k, state.t, len(stops), bound)
                if m.nc:
                    P_E = eliminate(P_C)
                impulse = (J_C.T @ P_C) + (J_E.T @ P_E if m.nc else 0.0)
            elif m.nc:
                P_E = self._joint_impulses(J_E, v_free, phi_t)
                impulse = J_E.T @ P_E
            else:
                impulse = np.zeros(m.nv)
            v_new = v_free + inverse_mass_times(m, impulse)
            if not at:
                break
            missed = np.setdiff1d(np.flatnonzero(at[0] + 0.5 * h * (at[1] @ v_new) < 0.0), stops)
            if len(missed) == 0:
                break
            stops = np.union1d(stops, missed)
        q_new = m.normalize(m.retract(q_mid, 0.5 * h * v_new))
        # §3: the drift of the joints is projected out before the next step's LCP (and so before
        # this state is recorded): positions, then velocities, in the mass-matrix norm
        violation = values = None
        p = self.projection
        if m.nc and p.position:
            q_new, _, violation, values = project_positions(
                m, q_new, state.t + h, p.iterations, p.tol, self.rank_tol, True
            )
        if m.nc and p.velocity:
            # its impulse -J^T lambda is the joints' too: P_E becomes their whole impulse of the step
            v_new, lam_v = velocity_projection(m, q_new, v_new, state.t + h, self.rank_tol, values, True)
            P_E = P_E - lam_v
        mean = 0.5 * (v + v_new)
        work = state.work + h * float(applied.nonconservative @ mean) + float(impulse @ mean)
        self._last_joint_impulse = (state.t + h, P_E / h)
        if self.coordinates:  # the stops' and the friction rows' mean forces over the step, for the record
            P_X = P_C[len(P_C) - nx :] / h if nx else np.zeros(0)
            stop_force = np.zeros(self.coordinates.nstop)
            stop_force[stops] = P_X[: len(stops)]
            self._last_coordinate_forces = (state.t + h, self.coordinates.forces(stop_force, P_X[len(stops) :]))
        normal_total = float(np.sum(P_C[:k])) if k else 0.0
        info = StepInfo(iterations=iterations, h=h, position_violation=violation)
        info.extra = {"contacts/normal_impulse": normal_total, "contacts/residual": residual}
        return State(state.t + h, q_new, v_new, work), info, h

    def _step_compiled(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        """The compiled step's results (step_kernels.FreeStep.step has taken it)."""
        f = self._free
        self._last_joint_impulse = (state.t + h, f.joint_impulse / h if f.nc else _NONE)
        if self.coordinates:  # the stops' and the friction rows' mean forces over the step, for the record
            stops, impulses = f.coordinate_impulses
            stop_force = np.zeros(self.coordinates.nstop)
            stop_force[stops] = impulses[: len(stops)] / h
            forces = self.coordinates.forces(stop_force, impulses[len(stops) :] / h)
            self._last_coordinate_forces = (state.t + h, forces)
        violation = f.violation if f.violation >= 0.0 else None
        info = StepInfo(iterations=f.iterations, h=h, position_violation=violation)
        info.extra = {"contacts/normal_impulse": f.normal_total, "contacts/residual": f.residual}
        return State(state.t + h, f.q_end, f.v_end, f.work), info, h

    def _reach(self, v: np.ndarray) -> float:
        return reach(self.model, self.body_radius, v)

    def _target(
        self, approach: np.ndarray, approach_free: np.ndarray, gap: np.ndarray, restitution: np.ndarray, h: float
    ) -> np.ndarray:
        """Target normal velocities r_N of unilateral rows (contacts, joint stops) of gaps ``gap``
        (see the module docstring); approach_free is J_N of the velocity the forces alone would
        give at the end of the step."""
        # compiled: step_kernels.target_velocity, the compiled step's own
        return targets(
            np.ascontiguousarray(approach, dtype=float),
            np.ascontiguousarray(approach_free, dtype=float),
            np.ascontiguousarray(gap, dtype=float),
            np.ascontiguousarray(restitution, dtype=float),
            self.threshold,
            self.beta,
            h,
        )

    def _coordinate_state(self, frames, t: float):
        """(stop gaps, stop rows, friction rows) of the joint coordinates at the midpoint
        (mbsim.solvers.numerics.joint_rows), or None without stops and friction."""
        if not self.coordinates:
            return None
        reference = self.data.coordinate_reference[0] if self.data.coordinate_reference else None
        return self.coordinates.at(frames, t, reference)

    def _coordinate_rows(self, at, stops: np.ndarray, v: np.ndarray, v_free: np.ndarray, h: float):
        """The LCP rows of the joint coordinates: the ``stops`` (indices), unilateral with the
        contacts' target velocities, then the friction rows, c v+ = 0 within |P| <= F(|c v|) h
        (the Stribeck curve at the step's start rate: the static force at rest; 0 for a coordinate
        resting on a closed stop, which holds it: the stop's and the friction's forces are then
        statically indeterminate, and a stabilising stop would fight a sticking row). Returns
        (rows (nx, nv), b (nx,): w = rows v_free - target, bounds of the friction rows)."""
        if not at:
            return np.zeros((0, self.model.nv)), np.zeros(0), np.zeros(0)
        gap, G, C = at
        G = G[stops]
        rate, rate_free = G @ v, G @ v_free
        target = self._target(rate, rate_free, gap[stops], self.coordinates.stop_restitution[stops], h)
        b = np.concatenate((rate_free - target, C @ v_free))
        bound = self.coordinates.friction_bound(C @ v) * h
        closed = set(stops[gap[stops] <= 0.0].tolist())
        bound[[i for i, own in enumerate(self.coordinates.friction_stops) if closed & own]] = 0.0
        return np.vstack((G, C)), b, bound

    def _eliminate(self, J_E, J_C, A_CC, b_C, v_free, phi_t):
        """Eliminate the joint rows: P_E = -A_EE^+ (A_EC P_C + b_E); returns the reduced problem."""
        m = self.model
        JE = J_E.toarray() if is_sparse(J_E) else np.asarray(J_E)
        JC = J_C.toarray() if is_sparse(J_C) else np.asarray(J_C)
        mn = MinNorm(m, JE, self.rank_tol)
        # A_EE^+ x through the SVD of J_E M^-1/2 = U S V^T: A_EE = U S^2 U^T
        A_EC = JE @ inverse_mass_times(m, JC.T)
        b_E = JE @ v_free + phi_t

        inv_s2 = 1.0 / mn.s**2

        def solve_ee(x):
            y = mn.U.T @ x
            return mn.U @ (y * (inv_s2[:, None] if y.ndim == 2 else inv_s2))

        S_EC = solve_ee(A_EC)
        A_red = (A_CC.toarray() if is_sparse(A_CC) else A_CC) - A_EC.T @ S_EC
        b_red = b_C - A_EC.T @ solve_ee(b_E)
        return A_red, b_red, lambda P_C: -(S_EC @ P_C + solve_ee(b_E))

    def _joint_impulses(self, J_E, v_free, phi_t) -> np.ndarray:
        """P_E with J_E v+ + Phi_t = 0 when no contact is near: -A_EE^+ (J_E v_free + Phi_t)."""
        mn = MinNorm(self.model, J_E, self.rank_tol)
        b_E = (J_E @ v_free) + phi_t
        return -(mn.U @ ((mn.U.T @ b_E) / mn.s**2))

    def _solve_lcp(self, A, b, batch, k, t, nu, bound):
        """The contact LCP (mbsim.solvers.numerics.contact_lcp) with ``nu`` stop rows and the
        friction rows' ``bound`` after the contacts, the sweeps warm-started from the previous
        step's impulses of the same contact features (sorted keys, searchsorted), or, for a
        contact whose feature is new, of the nearest previous contact of the same shape pair
        within ``margin`` (_warm_nearby): two boxes resting face on face clip their manifold from
        either face, and which one wins may change from step to step while the points stay."""
        d = self.d
        mu = self.friction[batch.entry]
        x0 = None
        keys = batch.feature
        sweeps = self.lcp != "lemke"
        if sweeps and self.pgs["warm_start"] and self._warm_keys is not None and len(self._warm_keys):
            start = np.zeros((k, d))
            point = np.ascontiguousarray(batch.point_j, dtype=float)
            warm_start(
                keys, point, self._warm_keys, self._warm_values, self._warm_points, MAX_FEATURE, self.margin, start
            )
            x0 = np.concatenate((start.T.ravel(), np.zeros(nu + len(bound))))
        x, iterations, residual = contact_lcp(A, b, mu, d, self.lcp, self.pgs, t, x0, nu, bound)
        if sweeps:
            order = np.argsort(keys, kind="stable")
            self._warm_keys, self._warm_values = keys[order], x[: k * d].reshape(d, k).T[order]
            self._warm_points = batch.point_j[order]
        return x, iterations, residual

    # ------------------------------------------------------------------ recording

    def evaluate(self, state: State) -> Evaluation:
        m = self.model
        frames = m.frames(state.q, state.v)
        forces = generalized_forces(m, self.data, frames, state.v, state.t, nonsmooth=True)
        kinetic = kinetic_energy(m, state.v)
        coordinate_forces = None
        if self.coordinates:  # the last step's stop and friction forces (none before the first)
            last = self._last_coordinate_forces
            ncoord = self.coordinates.ncoord
            coordinate_forces = last[1] if last is not None and last[0] == state.t else (np.zeros(ncoord),) * 2
        # (resting contact sits at gap ~ +1e-15; the compiled step detects as the detector does)
        if self._free is not None:
            contacts = self._free.contacts(state.q, state.v, TOUCHING_GAP)
        else:
            gap = self.detector.detect(frames, 0.0).gap
            contacts = (int(np.sum(gap <= TOUCHING_GAP)), float(max(0.0, -np.min(gap))) if len(gap) else 0.0)
        if m.nc == 0:
            empty = np.zeros(0)
            potential = forces.potential
            return Evaluation(
                empty, empty, empty, None, kinetic, potential, frames, contacts, coordinate_forces=coordinate_forces
            )
        cv = constraint_values(m, frames, state.t)
        last = self._last_joint_impulse
        if last is not None and last[0] == state.t:
            lam = -last[1]  # impulses along +J^T; mbsim's multipliers act along -J^T
        else:
            mn = MinNorm(m, cv.jacobian, self.rank_tol)
            y_free = mn.w @ forces.q_force
            y = mn.pinv_times(cv.gamma) + mn.null @ (mn.null.T @ y_free)
            lam = mn.multipliers(y_free - y)
        return Evaluation(
            lam,
            cv.phi,
            cv.jacobian @ state.v + cv.phi_t,
            cv.jacobian,
            kinetic,
            forces.potential,
            frames,
            contacts,
            coordinate_forces=coordinate_forces,
        )


def _schur_product(model: Model, J):
    """J M^-1 J^T, dense or sparse like J."""
    if is_sparse(J):
        return (J @ model.inv_mass_matrix @ J.T).tocsr()
    return J @ inverse_mass_times(model, J.T)


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    friction = rigid_friction(model, ctx)
    return Solver(model, got, friction)


def _vstack(blocks):
    """Rows stacked, sparse when any block is."""
    if not any(is_sparse(b) for b in blocks):
        return np.vstack(blocks)
    import scipy.sparse as sp  # here, not at the top: mbsim.model.sparse

    return sp.vstack([b if is_sparse(b) else sp.csr_array(b) for b in blocks]).tocsr()
