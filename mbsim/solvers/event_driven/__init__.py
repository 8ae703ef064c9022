"""Method ``event_driven``: smooth integration between events, rigid contacts that switch.

papers/unilateral-constraints-lcp-projection-correction.txt §2 (the paragraph after eq. (14)):
integrate the smooth ODE; detect contact and impact; call the LCP solver; re-initialise the
velocities, accelerations and contact forces; continue the ODE -- with the position-then-velocity
projection of §3 before each LCP.

Between events the state y = (q, v, work) goes through the scene's integrator (scipy:DOP853 when
the scene names none). The accelerations are the index-1 dynamics of the ODE methods with the
joints and the closed contacts as bilateral constraints, solved rank-robustly as ``null_space``
does (the M-orthogonal projection onto the joints' tangent space, then the contact forces by least
squares), so that redundant contact points (a box's four corners on a floor) are no rank problem:

    v_dot = a0 + R W^T f,   K v_dot = gamma_K,

a0 the joint-constrained accelerations of the applied forces, R the joint-constrained response
to a force, K the rows of the closed contacts' relative accelerations (normal; and tangent when
sticking), W the directions of their forces (the normal, or n - mu s t for a contact sliding with
unit relative velocity s, Coulomb's friction opposing it), gamma_K = -dK/dt v taken by central
differences of K(q) v along the motion.

Each contact is ``open``, ``closed`` and ``stick`` or ``slide``. Events, located to ``event_tol``
(s) by Brent's method on the integrator's dense output (a cubic Hermite interpolant for the
fixed-step integrators), never stepped over: an open contact's gap reaches zero (impact, or
closing when it arrives at less than ``velocity_tol``); a closed contact's normal force reaches
zero (detach); a sticking contact's friction reaches the cone, mu f_N = |f_T| (slip); a sliding
contact's relative velocity reaches zero along its sliding direction (stick, or slip on).

At an event, at time t*:
1. §3's projection: positions onto the joints and the touching contacts (gap = 0), velocities
   onto the joints and the contacts that stay closed, in the mass-matrix norm;
2. impacts: the impact LCP of eq. (14) over all touching contacts at once, joints impulses
   eliminated exactly (R): 0 <= P_N _|_ g_dot+ + e g_dot- >= 0 (Newton's law, eqs. (8)-(9), e
   of the contact for an approaching one), Coulomb friction impulses where mu > 0;
3. the modes after it: the acceleration-level LCP (eqs. (5)-(7) in accelerations) over the
   touching contacts whose normal velocity is below ``velocity_tol``: closed where the normal
   force is positive, sticking where the friction force is inside the cone, else sliding in the
   direction of the tangential acceleration (a slip from rest, at a tangential speed below
   2 ``velocity_tol``: the direction s whose friction -mu f_N s leaves a_T along s, a_T . s > 0,
   Pfeiffer & Glocker's stick-slip transition; an onset without one is not committed), its residual
   tangential velocity projected to zero with the closed rows, so that the first step cannot
   reverse the direction chosen;
4. the integrator starts again from the post-event state.

Accumulation (Zeno): an impact whose approach speed is below ``accumulation_speed`` is the end of
a sequence of ever smaller bounces. The contact closes (e = 0 for that impact) and the event is
recorded as ``accumulation`` at the limit of the geometric sequence of its last flights,
t_k + d_k r / (1 - r) with d_k the last flight and r = d_k / d_(k-1) (the time of the impact
itself when there are fewer than three impacts or the flights do not shrink); the body then
rests, having moved by at most its last bounce height (u^2 / 2 g: 5e-12 m at 1e-5 m/s).

Joint limits (CONTRACT §8; mbsim.solvers.numerics.joint_rows) are frictionless contacts among
the contacts: entries after model.contacts', features -1 - stop, gap q - lower (or upper - q) and
normal row +c (or -c), so the same events, impacts (recorded as ``limit``), closed modes and
accumulation apply. Joint Coulomb/Stribeck friction has modes of its own (fmode): sticking, its
row c v_dot = -dc/dt v closed with the contacts' rows while |f| < F_s (event ('joint stick', i));
sliding with -s F(|qd|) applied while s qd > 0 (event ('joint slide', i)); held by a closed stop.
Decided after the contacts' modes at every event (_friction_modes); stick and slip are recorded.

Recorded: /events/time, kind (impact, limit, detach, stick, slip, accumulation) and contact (its name),
in time order; the work of impacts (the kinetic energy they remove) and of sliding friction goes
to the energy bookkeeping, so that total - work stays constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.constraints import constraint_values
from mbsim.model.contact import ContactDetector
from mbsim.model.contact.detect import ContactBatch
from mbsim.model.contact.jacobian import bounding_radii, contact_rows, reach
from mbsim.model.contact.laws import inelastic, newton_target
from mbsim.model.dynamics import generalized_forces, kinetic_energy
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.model.shapes import SHAPE_KINDS
from mbsim.model.sparse import is_sparse
from mbsim.scene.fields import Choice, Context, Field, Number, Sub
from mbsim.solvers import null_space
from mbsim.solvers.base import SolverBase, dense_states, read_options
from mbsim.solvers.numerics.contact_lcp import contact_lcp, rigid_friction
from mbsim.solvers.numerics.joint_rows import JointRows
from mbsim.solvers.numerics.linalg import MinNorm, correction, inverse_mass_times
from mbsim.solvers.ode import COMMON_OPTION_FIELDS, projection_options
from mbsim.solvers.ode.integrators import stepper
from mbsim.solvers.timestepping import PGS_FIELDS

NAME = "event_driven"
# default_integrator: when the scene names none (events are located on its dense output)
CAPABILITIES = {"rigid_contacts": True, "integrators": True, "default_integrator": "scipy:DOP853"}

OPTION_FIELDS = {
    **COMMON_OPTION_FIELDS,
    "lcp": Field(
        Choice(("active_set", "lemke", "pgs")),
        "solver of the impacts and of the contact modes (as timestepping's: active_set and pgs on Coulomb's"
        " round cone, lemke on Stewart-Trinkle's four-direction cone)",
        "active_set",
    ),
    "pgs": Field(
        Sub(PGS_FIELDS, "pgs"),
        "settings of the sweeps (lcp active_set and pgs)",
        {"iterations": 5000, "tol": 1e-14, "omega": 1.0, "warm_start": False},
    ),
    "event_tol": Field(Number(positive=True), "time within which an event is located, s", 1e-13),
    "margin": Field(
        Number(minimum=0),
        "detection margin, m (positive): nearer contacts are followed exactly, farther ones count as this far",
        1e-3,
    ),
    "contact_tol": Field(Number(positive=True), "gap below which a contact touches (impact and mode LCPs), m", 1e-9),
    "velocity_tol": Field(
        Number(positive=True),
        "relative speed below which a touching contact closes without impact, or sticks, m/s",
        1e-8,
    ),
    "accumulation_speed": Field(
        Number(minimum=0),
        "approach speed below which an impact ends an accumulation of impacts: the contact closes, m/s",
        1e-5,
    ),
    "rank_tol": Field(Number(positive=True), "rank tolerance of the joint and contact rows (pseudo-inverse)", 1e-10),
}

# sample points of a step (fractions of it) where the event functions are looked at before Brent's
# method brackets the first sign change: a contact that closes and opens again within one step
# between two samples is the only kind of event that can be missed
SAMPLES = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)
CROSSING = 1e-6  # a gap counts as crossed below -CROSSING * contact_tol (1e-15 m: round-off of the gap)
FORCE_TOL = 1e-9  # a closed contact detaches (or slips) below -FORCE_TOL times the largest contact force
MAX_EVENTS_AT_ONCE = 50  # events at one time without progress: the run fails instead of looping
ONSET_ITERATIONS = 20  # rounds over the contacts that start to slip (_modes)
ONSET_SAMPLES = 36  # angles sampled for a slip's direction at onset (_onset_direction)
HELD = 2.0  # a joint friction mode (Solver.fmode): the coordinate rests on a closed stop


@dataclass
class Mode:
    """A closed contact: ``stick`` or ``slide`` (with its sliding direction, tangent coordinates,
    at the start); ``onset``: a slide that starts from rest at this event (its direction is the
    tangential acceleration's, not its velocity's, which is zero to within velocity_tol)."""

    kind: str
    direction: np.ndarray | None = None
    onset: bool = False


@dataclass
class Rows:
    """The closed contacts at one state: their batch rows, K (rows of relative accelerations),
    W (force directions), and which row is which."""

    keys: np.ndarray  # (k,) feature keys of the closed contacts, in batch order
    index: np.ndarray  # (k,) their rows in the batch
    normal: np.ndarray  # (k, nv) J_N
    tangent: np.ndarray  # (k, d-1, nv) J_T per contact
    K: np.ndarray  # (r, nv)
    W: np.ndarray  # (r, nv)
    normal_row: np.ndarray  # (k,) row of K/W of each contact's normal force
    tangent_rows: list  # per contact, its tangent rows in K/W (empty when sliding)


@dataclass
class Solve:
    """The accelerations at one state and what they came from."""

    vdot: np.ndarray
    power: float
    forces: np.ndarray  # (r,) contact force multipliers f
    rows: Rows
    lam: np.ndarray  # joint multipliers (mbsim's sign: M v_dot = Q - J^T lambda)
    potential: float
    frames: object
    cv: object
    friction: np.ndarray  # (nfriction,) the joint friction's force on each frictional coordinate


class Solver(SolverBase):
    """Event-driven rigid contacts (see the module docstring)."""

    EXTRA_DIAGNOSTICS = {"events": "last"}

    def __init__(self, model: Model, options: dict, integrator: str, rtol: float, atol: float, friction) -> None:
        self.model = model
        self.d, self.w = model.dimension, model.body_width
        self.nq, self.nv = model.nq, model.nv
        self.integrator = self.integrator_label = integrator
        self.projection = projection_options(options["projection"])
        self.lcp, self.pgs = options["lcp"], options["pgs"]
        self.event_tol = options["event_tol"]
        self.margin = options["margin"]
        self.contact_tol = options["contact_tol"]
        self.velocity_tol = options["velocity_tol"]
        self.accumulation_speed = options["accumulation_speed"]
        self.rank_tol = options["rank_tol"]
        self._fixed, self._adaptive = stepper(integrator, rtol, atol, model.t_end, options["max_step"])
        # while no contact is closed the right-hand side is null_space's: its compiled one (the
        # same M-orthogonal projection onto the joints), when the model flattens
        self._free = null_space.Solver(
            model, integrator, rtol, atol, self.projection, options["max_step"], self.rank_tol
        )
        # what this run changes, one Data shared with the free phase: its compiled step views the
        # joint springs' references that the run's loop updates (a second one would leave them at t = 0)
        self.data = self._free.data
        self.detector = ContactDetector(model)
        self.radii = bounding_radii(model)
        # the joint limits are contacts too: entries after model.contacts' (mbsim.solvers.numerics.joint_rows)
        self.coordinates = JointRows(model)
        self.ncontacts = len(model.contacts)
        restitution = [float(c.values.get("restitution") or 0.0) for c in model.contacts]
        self.restitution = np.array(restitution + list(self.coordinates.stop_restitution))
        self.friction = np.array(list(friction) + [0.0] * self.coordinates.nstop)
        self.contact_names = [str(c.values.get("name") or f"contacts[{i}]") for i, c in enumerate(model.contacts)]
        self.contact_names += self.coordinates.stop_name
        self.modes: dict[int, Mode] = {}  # closed contacts by feature key
        self.entries: dict[int, int] = {}  # their contact entries
        self.events: list[tuple[float, str, str]] = []
        self._impacts: dict[int, list[float]] = {}  # impact times per feature (accumulation)
        self._started = False
        self._at_once = (None, 0)
        self._dense = None  # the last step's dense output (interpolant)
        # joint friction per frictional coordinate: 0 sticking, +-1 sliding with qd of that sign,
        # HELD resting on a closed stop (decided at every event: _friction_modes)
        self.fmode = np.ones(self.coordinates.nfriction)
        self._friction_known = False

    @property
    def adaptive(self) -> bool:
        return self._adaptive is not None

    @property
    def extra_diagnostics(self) -> tuple[str, ...]:
        return tuple(self.EXTRA_DIAGNOSTICS)

    # ------------------------------------------------------------------ contacts and rows

    def _detect(self, frames):
        """The contacts within ``margin``: every detection of this method uses the same margin, so
        that narrow phases whose points depend on it (a cylinder's cap lying flat within it rests
        on four rim points, else on its lowest one) report the same features throughout."""
        batch = self.detector.detect(frames, self.margin)
        if not self.coordinates.nstop:
            return batch
        # the joint stops within the margin, as rows of the batch (entry ncontacts + stop, feature
        # -1 - stop; their rows come from _contact_rows)
        gap = self._coordinate_rows(frames)[0]
        near = np.flatnonzero(gap <= self.margin)
        if len(near) == 0:
            return batch
        ground = np.full(len(near), self.model.nbody, dtype=np.int64)
        zero = np.zeros((len(near), self.d))
        return ContactBatch(
            *(np.concatenate((a, b)) for a, b in ((batch.body_i, ground), (batch.body_j, ground))),
            np.concatenate((batch.entry, self.ncontacts + near)),
            *(np.concatenate((a, zero)) for a in (batch.point_i, batch.point_j, batch.normal)),
            np.concatenate((batch.gap, gap[near])),
            np.concatenate((batch.feature, -1 - near)),
        )

    def _coordinate_rows(self, frames):
        """(stop gaps, stop rows, friction rows) of the joint coordinates at a state (JointRows.at;
        a joint coordinate does not depend on t)."""
        reference = self.data.coordinate_reference[0] if self.data.coordinate_reference else None
        return self.coordinates.at(frames, 0.0, reference)

    def _contact_rows(self, frames, batch):
        """J_N (k, nv), J_T (k (d-1), nv) of a batch (mbsim.model.contact.jacobian.contact_rows);
        a joint stop's normal row is its gap's Jacobian row, its tangent rows are zero."""
        stop = batch.entry >= self.ncontacts
        if not np.any(stop):
            return contact_rows(self.model, frames, batch)
        m, d, k = self.model, self.d, len(batch.gap)
        J_N, J_T = np.zeros((k, m.nv)), np.zeros((k * (d - 1), m.nv))
        real = np.flatnonzero(~stop)
        if len(real):
            jn, jt = contact_rows(m, frames, _take(batch, real))
            J_N[real] = jn.toarray() if is_sparse(jn) else jn
            jt = (jt.toarray() if is_sparse(jt) else np.asarray(jt)).reshape(d - 1, len(real), m.nv)
            for a in range(d - 1):
                J_T[a * k + real] = jt[a]
        J_N[stop] = self._coordinate_rows(frames)[1][batch.entry[stop] - self.ncontacts]
        return J_N, J_T

    def _rows(self, frames, batch, v: np.ndarray) -> Rows:
        """K and W of the closed contacts found in ``batch`` (module docstring)."""
        m, d = self.model, self.d
        keys = batch.feature
        index = np.array([i for i, key in enumerate(keys) if int(key) in self.modes], dtype=np.int64)
        k = len(index)
        if k == 0:
            empty = np.zeros((0, m.nv))
            return Rows(np.zeros(0, np.int64), index, empty, np.zeros((0, d - 1, m.nv)), empty, empty, index, [])
        sub = _take(batch, index)
        J_N, J_T = self._contact_rows(frames, sub)
        J_N = J_N.toarray() if is_sparse(J_N) else np.asarray(J_N)
        J_T = (J_T.toarray() if is_sparse(J_T) else np.asarray(J_T)).reshape(d - 1, k, m.nv).transpose(1, 0, 2)
        K, W, normal_row, tangent_rows = [], [], [], []
        for c in range(k):
            key = int(sub.feature[c])
            mode = self.modes[key]
            normal_row.append(len(K))
            K.append(J_N[c])
            if mode.kind == "frictionless":
                W.append(J_N[c])
                tangent_rows.append([])
            elif mode.kind == "slide":
                mu = self.friction[sub.entry[c]]
                s = self._sliding_direction(J_T[c] @ v, mode)
                W.append(J_N[c] - mu * (s @ J_T[c]))
                tangent_rows.append([])
            else:
                W.append(J_N[c])
                rows = []
                for a in range(d - 1):
                    rows.append(len(K))
                    K.append(J_T[c, a])
                    W.append(J_T[c, a])
                tangent_rows.append(rows)
        return Rows(sub.feature.copy(), index, J_N, J_T, np.array(K), np.array(W), np.array(normal_row), tangent_rows)

    def _sliding_direction(self, vt: np.ndarray, mode: Mode) -> np.ndarray:
        """Unit relative tangential velocity of a sliding contact (tangent coordinates): the
        current one, or the direction it started sliding in when it is slower than velocity_tol."""
        n = float(np.linalg.norm(vt))
        if n > self.velocity_tol or mode.direction is None:
            return vt / n if n > 0 else np.zeros_like(vt)
        return mode.direction

    # ------------------------------------------------------------------ the smooth dynamics

    def _solve(self, t: float, q: np.ndarray, v: np.ndarray, potential: bool = False) -> Solve:
        m = self.model
        frames = m.frames(q, v)
        forces = generalized_forces(m, self.data, frames, v, t, with_potential=potential, nonsmooth=True)
        Q = forces.q_force
        # joint friction: a sliding coordinate's force -s F(|qd|) (the Stribeck curve), a sticking
        # one's row C v_dot = -dC/dt v closed like a contact's, its force found with theirs
        friction = np.zeros(self.coordinates.nfriction)
        friction_power = 0.0
        stick = np.zeros(0, dtype=np.int64)
        if len(friction):
            C = self._coordinate_rows(frames)[2]
            rate = C @ v
            slide = np.abs(self.fmode) == 1
            friction[slide] = -self.fmode[slide] * self.coordinates.friction_bound(rate)[slide]
            Q = Q + C.T @ friction
            friction_power = float(friction @ rate)
            stick = np.flatnonzero(self.fmode == 0)
        cv = constraint_values(m, frames, t) if m.nc else None
        joints = MinNorm(m, cv.jacobian, self.rank_tol) if m.nc else None
        a0 = self._response(joints, Q[:, None])[:, 0]
        if joints is not None:
            a0 = a0 + joints.correction(cv.gamma)
        rows = self._rows(frames, self._detect(frames) if self.modes else ContactBatch.empty(self.d), v)
        K, W = rows.K, rows.W
        gamma_K = self._gamma(t, q, v, rows) if len(rows.keys) else np.zeros(0)
        if len(stick):
            K, W = np.vstack((K, C[stick])), np.vstack((W, C[stick]))
            gamma_K = np.concatenate((gamma_K, self._friction_gamma(q, v, stick)))
        f = np.zeros(len(K))
        vdot = a0
        contact_power = 0.0
        if len(K):
            RW = self._response(joints, W.T)  # (nv, r)
            A = K @ RW
            b = gamma_K - K @ a0
            f = np.linalg.lstsq(A, b, rcond=self.rank_tol)[0]
            vdot = a0 + RW @ f
            contact_power = float((W.T @ f) @ v)
        friction[stick] = f[len(rows.K) :]
        lam = np.zeros(m.nc)
        power = forces.power_nc + contact_power + friction_power
        if joints is not None:  # J^T lambda = Q + W^T f - M v_dot, least squares in the scaled coordinates
            residual = Q + (W.T @ f if len(f) else 0.0) - _mass_times(m, vdot)
            lam = joints.multipliers(joints.w @ residual)
            power += float(lam @ cv.phi_t)
        return Solve(vdot, power, f[: len(rows.K)], rows, lam, forces.potential, frames, cv, friction)

    def _friction_gamma(self, q: np.ndarray, v: np.ndarray, stick: np.ndarray) -> np.ndarray:
        """-dC/dt v of the sticking friction rows: central differences of C(q) v along q_dot
        (as _gamma's), 0 at rest."""
        m = self.model
        speed = reach(m, self.radii, v)
        if speed == 0.0:
            return np.zeros(len(stick))
        eps = 1e-5 / speed
        rates = []
        for sign in (1.0, -1.0):
            frames = m.frames(m.normalize(m.retract(q, sign * eps * v)), v)
            rates.append(self._coordinate_rows(frames)[2][stick] @ v)
        return -(rates[0] - rates[1]) / (2.0 * eps)

    def _response(self, joints: MinNorm | None, X: np.ndarray) -> np.ndarray:
        """R X: the accelerations (nv, k) that forces X (nv, k) give with the joints holding."""
        if joints is None:
            return inverse_mass_times(self.model, X)
        Y = joints.w @ X
        return joints.w @ (joints.null @ (joints.null.T @ Y))

    def _gamma(self, t: float, q: np.ndarray, v: np.ndarray, rows: Rows) -> np.ndarray:
        """-dK/dt v of the closed contacts' rows: central differences of K(q) v along q_dot, over a
        displacement of 1e-5 m of the fastest point. A contact whose feature key the detection
        does not find again at both displaced states (face-face contacts of boxes clip polygons
        whose vertices can change name) gets 0: its drift is then left to the projection."""
        m = self.model
        speed = reach(m, self.radii, v)
        gamma = np.zeros(len(rows.K))
        if speed == 0.0 or len(rows.K) == 0:
            return gamma
        eps = 1e-5 / speed
        shifted = []
        for sign in (1.0, -1.0):
            qs = m.normalize(m.retract(q, sign * eps * v))
            frames = m.frames(qs, v)
            found = self._rows(frames, self._detect(frames), v)
            shifted.append((found, found.K @ v, {int(key): c for c, key in enumerate(found.keys)}))
        for c, key in enumerate(rows.keys):
            at = [where.get(int(key)) for _, _, where in shifted]
            if None in at:
                continue
            mine = [rows.normal_row[c], *rows.tangent_rows[c]]
            (plus, rate_plus, _), (minus, rate_minus, _) = shifted
            a, b = at
            gamma[mine] = -(
                rate_plus[[plus.normal_row[a], *plus.tangent_rows[a]]]
                - rate_minus[[minus.normal_row[b], *minus.tangent_rows[b]]]
            ) / (2.0 * eps)
        return gamma

    def load_compiled(self) -> None:
        """The compiled free-phase right-hand side, and scipy's integrators and root finder (set-up,
        not the timed loop)."""
        import scipy.integrate  # noqa: F401
        import scipy.optimize  # noqa: F401

        self._free.load_compiled()

    def derivative(self, t: float, y: np.ndarray) -> np.ndarray:
        # free of contacts: the compiled null_space one (its forces are the smooth methods': not
        # with joint stops or friction, whose compliant and regularised forms it applies)
        if not self.modes and self._free.compiled and not self.coordinates:
            return self._free.derivative(t, y)
        nq, nv = self.nq, self.nv
        q, v = y[:nq], y[nq : nq + nv]
        s = self._solve(t, q, v)
        return np.concatenate((self.model.q_rate(q, v), s.vdot, (s.power,)))

    def acceleration(self, t: float, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, float]:
        s = self._solve(t, q, v)
        return s.vdot, s.power

    def q_rate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.model.q_rate(q, v)

    # ------------------------------------------------------------------ event functions

    def _watch(self, t: float, y: np.ndarray) -> dict:
        """The open contacts within the detection margin at the start of a step: feature ->
        (gap, normal speed) there."""
        q, v = y[: self.nq], y[self.nq : self.nq + self.nv]
        frames = self.model.frames(q, v)
        batch = self._detect(frames)
        open_ = {}
        if len(batch.gap):
            J_N, _ = self._contact_rows(frames, batch)
            rate = np.asarray(J_N @ v).ravel()
            for i, key in enumerate(batch.feature):
                if int(key) not in self.modes:
                    open_[int(key)] = (float(batch.gap[i]), float(rate[i]))
        if any(mode.kind == "slide" for mode in self.modes.values()):  # sliding speeds at the start
            rows = self._rows(frames, batch, v)
            for c, key in enumerate(rows.keys):
                if self.modes[int(key)].kind == "slide":
                    open_[("slide", int(key))] = float(np.linalg.norm(rows.tangent[c] @ v))
        if self.coordinates.nfriction:  # the sliding joint coordinates' rates at the start
            rate = self._coordinate_rows(frames)[2] @ v
            for i in np.flatnonzero(np.abs(self.fmode) == 1):
                open_[("joint slide", int(i))] = abs(float(rate[i]))
        return open_

    def _event_values(self, t: float, y: np.ndarray, t0: float, watched: dict) -> dict:
        """Event functions at (t, y): key -> value, an event where a value turns negative.
        ('gap', f): min(gap, margin) of an open contact (a continuous function: the detection
        reports every contact within the margin), divided by t - t0 for one touching at t0 (its
        sign is then that of its mean approach since t0); ('normal', f): a closed contact's normal force;
        ('cone', f): mu f_N - |f_T| of a sticking one; ('slide', f): its relative velocity along
        the direction it slides in; ('lost', f): -1 once the detection no longer finds it;
        ('joint stick', i): F_s - |f| of a sticking joint coordinate's friction force f;
        ('joint slide', i): a sliding joint coordinate's rate along its sliding sign."""
        q, v = y[: self.nq], y[self.nq : self.nq + self.nv]
        values: dict = {}
        frames = self.model.frames(q, v)
        batch = self._detect(frames)
        gaps = {
            int(key): float(g) for key, g in zip(batch.feature, batch.gap, strict=True) if int(key) not in self.modes
        }
        crossing = CROSSING * self.contact_tol
        for key in {*gaps, *(k for k in watched if not isinstance(k, tuple))}:
            g = min(gaps.get(key, self.margin), self.margin)
            g0, rate0 = watched.get(key, (self.margin, 0.0))
            if g0 <= self.contact_tol:  # touching at t0 (and separating): the mean rate decides
                values[("gap", key)] = (g + crossing) / (t - t0) if t > t0 else max(rate0, self.velocity_tol)
            else:
                values[("gap", key)] = g + crossing
        if self.coordinates.nfriction:
            values.update(self._friction_values(t, q, v, t0, watched))
        if self.modes:
            s = self._solve(t, q, v)
            rows = s.rows
            # round-off of the least-squares forces of a redundant set is no detachment or slip
            slack = FORCE_TOL * float(np.max(np.abs(s.forces), initial=0.0))
            # a closed contact the detection no longer reports (its feature changed: a cylinder's
            # rim point, a box corner leaving a face) is an event: the modes are taken again there
            found = {int(key) for key in rows.keys}
            for key in self.modes:
                values[("lost", key)] = 1.0 if key in found else -1.0
            for c, key in enumerate(rows.keys):
                key = int(key)
                fn = float(s.forces[rows.normal_row[c]])
                values[("normal", key)] = fn + slack
                mode = self.modes[key]
                mu = self.friction[self.entries[key]]
                if mode.kind == "stick" and mu > 0:
                    ft = s.forces[rows.tangent_rows[c]]
                    values[("cone", key)] = mu * fn - float(np.linalg.norm(ft)) + slack
                elif mode.kind == "slide":
                    along = float(mode.direction @ (rows.tangent[c] @ v))
                    if watched.get(("slide", key), np.inf) <= self.velocity_tol:  # starts from rest
                        along = along / (t - t0) if t > t0 else self.velocity_tol
                    values[("slide", key)] = along
                    # in 3D the sliding direction can turn as the speed vanishes without ever
                    # reversing: a stop below velocity_tol is an event too
                    speed = float(np.linalg.norm(rows.tangent[c] @ v))
                    if watched.get(("slide", key), np.inf) > 2.0 * self.velocity_tol:
                        values[("stop", key)] = speed - self.velocity_tol
        return values

    def _friction_values(self, t, q, v, t0, watched) -> dict:
        """The joint friction's event functions (_event_values)."""
        values: dict = {}
        stick = np.flatnonzero(self.fmode == 0)
        if len(stick):
            f = self._solve(t, q, v).friction
            # the breakaway force F(0); no slack (a constant bound, no redundant set to share it):
            # the event is where the force reaches it (_friction_modes takes that as a slip)
            bound = self.coordinates.friction_bound(np.zeros(len(f)))
            for i in stick:
                values[("joint stick", int(i))] = bound[i] - abs(float(f[i]))
        slide = np.flatnonzero(np.abs(self.fmode) == 1)
        if len(slide):
            rate = self._coordinate_rows(self.model.frames(q, v))[2] @ v
            for i in slide:
                along = float(self.fmode[i] * rate[i])
                if watched.get(("joint slide", int(i)), np.inf) <= self.velocity_tol:  # starts from rest
                    along = along / (t - t0) if t > t0 else self.velocity_tol
                values[("joint slide", int(i))] = along
        return values

    def _friction_modes(self, state: State, triggers: list) -> None:
        """The joint friction's modes after an event: a coordinate faster than velocity_tol slides
        along its rate; one at rest sticks while the force holding it is within the breakaway force
        F_s, else it slips, sliding opposite that force (in rounds: one coordinate's slip changes
        the others' forces; one whose force reached F_s, the event that got here, slips at F_s to
        round-off). The changes are recorded as stick and slip events."""
        frames = self.model.frames(state.q, state.v)
        rate = self._coordinate_rows(frames)[2] @ state.v
        old = self.fmode.copy()
        moving = np.abs(rate) > self.velocity_tol
        self.fmode = np.where(moving, np.sign(rate), 0.0)
        # resting on a closed stop, the stop holds the coordinate: the friction, then statically
        # indeterminate with the stop's force, is taken as 0 (its stick row would be the stop's row)
        closed = {-1 - int(key) for key in self.modes if key < 0}
        held = [i for i, stops in enumerate(self.coordinates.friction_stops) if closed.intersection(stops)]
        self.fmode[held] = HELD
        bound = self.coordinates.friction_bound(np.zeros(len(rate)))
        reached = np.zeros(len(rate), dtype=bool)
        reached[[i for kind, i in triggers if kind == "joint stick"]] = True
        onset = set()
        for _ in range(ONSET_ITERATIONS):
            f = self._solve(state.t, state.q, state.v).friction
            size = np.abs(f)
            over = (size > bound * (1.0 + 1e-9)) | (reached & (size >= bound * (1.0 - 1e-6)))
            over = np.flatnonzero((self.fmode == 0) & over)
            if len(over) == 0:
                break
            self.fmode[over] = -np.sign(f[over])  # the slip goes where the held force would push
            onset.update(int(i) for i in over)
        t = state.t
        changed = np.flatnonzero((self.fmode != old) & (self.fmode != HELD)) if self._friction_known else []
        for i in changed:
            name = self.coordinates.friction_name[i]
            if self.fmode[i] == 0:
                self.events.append((t, "stick", name))
            elif old[i] == 0 or int(i) in onset:
                self.events.append((t, "slip", name))

    # ------------------------------------------------------------------ the step

    MODE_KINDS = ("stick", "slide", "frictionless")

    def carried(self) -> dict[str, np.ndarray]:
        """The contact modes (closed contacts by feature key: kind, sliding direction, onset, contact
        entry), the impact times kept for accumulation, the joint friction's modes and whether the
        start's event was taken, besides the base method's: a run continued from the row goes on in
        the same modes instead of deciding them afresh (and projecting the state onto them) there."""
        keys = sorted(self.modes)
        direction = np.full((len(keys), self.d - 1), np.nan)
        for i, key in enumerate(keys):
            if self.modes[key].direction is not None:
                direction[i] = self.modes[key].direction
        impacts = [(key, t) for key, times in self._impacts.items() for t in times]
        return super().carried() | {
            "mode_key": np.array(keys, dtype=np.int64),
            "mode_kind": np.array([self.MODE_KINDS.index(self.modes[k].kind) for k in keys], dtype=np.int64),
            "mode_direction": direction,
            "mode_onset": np.array([self.modes[k].onset for k in keys], dtype=np.int64),
            "entry_key": np.array(list(self.entries), dtype=np.int64),
            "entry_value": np.array(list(self.entries.values()), dtype=np.int64),
            "impact_key": np.array([key for key, _ in impacts], dtype=np.int64),
            "impact_time": np.array([t for _, t in impacts], dtype=float),
            "friction_mode": self.fmode.copy(),
            "started": np.array([self._started, self._friction_known], dtype=np.int64),
        }

    def restore(self, carried: dict[str, np.ndarray]) -> None:
        super().restore(carried)
        if "mode_key" not in carried:
            return
        self.modes = {}
        for key, kind, direction, onset in zip(
            carried["mode_key"], carried["mode_kind"], carried["mode_direction"], carried["mode_onset"], strict=True
        ):
            slide = None if np.isnan(direction).any() else np.array(direction, dtype=float)
            self.modes[int(key)] = Mode(self.MODE_KINDS[int(kind)], slide, bool(onset))
        self.entries = {int(k): int(e) for k, e in zip(carried["entry_key"], carried["entry_value"], strict=True)}
        self._impacts = {}
        for key, t in zip(carried["impact_key"], carried["impact_time"], strict=True):
            self._impacts.setdefault(int(key), []).append(float(t))
        self.fmode[:] = carried["friction_mode"]
        self._started, self._friction_known = (bool(x) for x in carried["started"])

    def initial_state(self) -> State:
        state = State(0.0, self.model.q0.copy(), self.model.v0.copy(), 0.0)
        if self.coordinates.nfriction:  # the joint friction's modes of the start (its record), no events
            self._friction_modes(state, [])
        return state

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        m = self.model
        if not self._started:  # the modes of the start state (and an impact at t = 0)
            self._started = True
            state = self._event(state, [])
            self._friction_known = True  # the start's joint friction modes are no events
        y0 = np.concatenate((state.q, state.v, (state.work,)))
        t0 = state.t
        if self._adaptive is not None:
            t1, y1, h_next = self._adaptive.step(self, t0, y0, h)
            dense = self._adaptive.dense_output()
        else:
            y1 = self._fixed(self, t0, y0, h)
            t1, h_next = t0 + h, h
            dense = _hermite(t0, y0, self.derivative(t0, y0), t1, y1, self.derivative(t1, y1))
        self._dense = dense  # the step's dense output: output.interval's rows up to the step's end (interpolant)
        found = self._first_event(t0, y0, t1, dense, self._watch(t0, y0))
        events_before = len(self.events)
        if found is None:
            y_new, t_new = y1, t1
            triggers: list = []
        else:
            t_new, triggers = found
            y_new = dense(t_new)
        new = self._project(
            State(t_new, m.normalize(y_new[: self.nq]), y_new[self.nq : self.nq + self.nv], float(y_new[-1]))
        )
        if found is not None:
            new = self._event(new, triggers)
            self._guard(new.t)
        info = StepInfo(iterations=0, h=new.t - t0, event=len(self.events) > events_before)
        info.extra = {"events": float(len(self.events) - events_before)}
        return new, info, h_next

    @property
    def interpolates(self) -> bool:
        return True

    def interpolant(self):
        """The last step's dense output as states (the integrator's, a cubic Hermite one for the
        fixed-step integrators: the interpolant events are located on), up to the step's end: the
        event's time when the step ended at one (the state there before the event). Not projected:
        the projection's contact rows are those of the modes after the step's event, not of the
        states before it; the rows show the joints' violation of the integrator's tolerance."""
        return dense_states(self._dense, self.nq, self.nv, self.model.normalize)

    def _guard(self, t: float) -> None:
        last, count = self._at_once
        count = count + 1 if last is not None and t - last <= self.event_tol else 1
        self._at_once = (t, count)
        if count > MAX_EVENTS_AT_ONCE:
            raise SimulationError(
                f"{count} events within {self.event_tol:g} s and no progress (the contact modes do not settle); "
                "last events: " + ", ".join(f"{k} {c}" for _, k, c in self.events[-4:]),
                t=t,
            )

    def _first_event(self, t0, y0, t1, dense, watched):
        """(time, [event keys]) of the first event in (t0, t1], or None."""
        import scipy.optimize  # here: validate stays quick

        previous_t = t0
        for fraction in SAMPLES:
            t = t0 + fraction * (t1 - t0)
            values = self._event_values(t, dense(t), t0, watched)
            negative = [key for key, value in values.items() if value < 0.0]
            if not negative:
                previous_t = t
                continue
            roots = []
            for key in negative:

                def fun(x, key=key):
                    got = self._event_values(x, dense(x), t0, watched).get(key, 1.0)
                    return got

                a = previous_t
                if fun(a) <= 0.0:  # not positive at the start already (a missed event): it is there
                    roots.append((a, key))
                    continue
                roots.append((scipy.optimize.brentq(fun, a, t, xtol=self.event_tol, rtol=4 * np.finfo(float).eps), key))
            first = min(r for r, _ in roots)
            return first, [key for r, key in roots if r <= first + self.event_tol]
        return None

    # ------------------------------------------------------------------ events

    def _touching(self, state: State):
        """The contacts touching at a state: batch, J_N, J_T (k, d-1, nv), as dense arrays."""
        m, d = self.model, self.d
        frames = m.frames(state.q, state.v)
        batch = self._detect(frames)
        keep = np.nonzero(batch.gap <= self.contact_tol)[0]
        batch = _take(batch, keep)
        k = len(keep)
        if k == 0:
            return batch, np.zeros((0, m.nv)), np.zeros((0, d - 1, m.nv))
        J_N, J_T = self._contact_rows(frames, batch)
        J_N = J_N.toarray() if is_sparse(J_N) else np.asarray(J_N)
        J_T = (J_T.toarray() if is_sparse(J_T) else np.asarray(J_T)).reshape(d - 1, k, m.nv).transpose(1, 0, 2)
        return batch, J_N, J_T

    def _event(self, state: State, triggers: list) -> State:
        """Impacts, then the new modes, at an event (module docstring, steps 1-3)."""
        state = self._project(state, touching=True)
        batch, J_N, J_T = self._touching(state)
        t = state.t
        v = state.v
        work = state.work
        if len(batch.gap):
            rate = J_N @ v
            approaching = rate < -self.velocity_tol
            if np.any(approaching):
                v, work = self._impact(state, batch, J_N, J_T, rate, approaching)
        new_modes = self._modes(State(t, state.q, v, work), batch, J_N, J_T)
        old_modes, old_entries = self.modes, self.entries
        self.entries = {
            int(key): int(e) for key, e in zip(batch.feature, batch.entry, strict=True) if int(key) in new_modes
        }
        self.modes = self._settle(t, state.q, v, new_modes)
        self.modes, new_modes = old_modes, self.modes
        entries, self.entries = self.entries, old_entries
        self._record_mode_changes(t, new_modes, batch, triggers)
        self.modes, self.entries = new_modes, entries
        new = State(t, state.q, v, work)
        if self.coordinates.nfriction:
            self._friction_modes(new, triggers)
        return self._project(new, onset=True)

    def _settle(self, t: float, q: np.ndarray, v: np.ndarray, modes: dict[int, Mode]) -> dict[int, Mode]:
        """Modes the smooth phase can start from: the LCP's, unless the smooth solve's forces
        already stand at or past a limit (a contact that rolls with its friction at the cone, a
        force of a redundant set that the least-squares share makes negative): then slide (in the
        direction opposite its friction force) or open, so that no event function starts at or
        below zero and the same event is not found again at once."""
        for _ in range(5):
            self.modes = modes
            solve = self._solve(t, q, v)
            rows, f = solve.rows, solve.forces
            slack = FORCE_TOL * float(np.max(np.abs(f), initial=0.0))
            changed = False
            for c, key in enumerate(rows.keys):
                key = int(key)
                fn = float(f[rows.normal_row[c]])
                mode = modes[key]
                if fn + slack <= 0.0:
                    modes = {k: m for k, m in modes.items() if k != key}
                    changed = True
                elif mode.kind == "stick" and self.friction[self.entries[key]] > 0:
                    ft = f[rows.tangent_rows[c]]
                    size = float(np.linalg.norm(ft))
                    if self.friction[self.entries[key]] * fn - size + slack <= 0.0 and size > 0:
                        modes = {**modes, key: Mode("slide", -ft / size, onset=True)}
                        changed = True
            if not changed:
                break
        return modes

    def _impact(self, state, batch, J_N, J_T, rate, approaching):
        """The impact LCP of eq. (14) over the touching contacts; returns (v+, work)."""
        m, d = self.model, self.d
        t, v = state.t, state.v
        joints = self._joints(state)
        k = len(batch.gap)
        K = np.vstack((J_N, J_T.transpose(1, 0, 2).reshape(k * (d - 1), m.nv)))
        RK = self._response(joints, K.T)
        A = K @ RK
        e = np.where(approaching, self.restitution[batch.entry], 0.0)
        speed = -rate
        accumulating = inelastic(speed, self.accumulation_speed)
        for c in np.nonzero(approaching)[0]:
            key = int(batch.feature[c])
            times = self._impacts.setdefault(key, [])
            times.append(t)
            name = self.contact_names[batch.entry[c]]
            if accumulating[c]:
                self.events.append((self._accumulation_time(times), "accumulation", name))
                self._impacts.pop(key, None)
            else:  # a joint stop's impact is a `limit` event
                self.events.append((t, "limit" if batch.entry[c] >= self.ncontacts else "impact", name))
        b = K @ v
        b[:k] -= newton_target(speed, e, self.accumulation_speed)  # Newton's law, inelastic below accumulation_speed
        mu = self.friction[batch.entry]
        P, _, _ = contact_lcp(A, b, mu, d, self.lcp, self.pgs, t)
        v_new = v + RK @ P
        if m.nc:
            v_new = self._project_velocity_joints(state.q, v_new, t)
        work = state.work + kinetic_energy(m, v_new) - kinetic_energy(m, v)
        return v_new, work

    def _accumulation_time(self, times: list[float]) -> float:
        """The limit of a geometric sequence of flights ending at the last impact time."""
        if len(times) >= 3:
            d1, d0 = times[-1] - times[-2], times[-2] - times[-3]
            if d0 > 0 and 0 < d1 < d0:
                r = d1 / d0
                return times[-1] + d1 * r / (1.0 - r)
        return times[-1]

    def _modes(self, state: State, batch, J_N, J_T) -> dict[int, Mode]:
        """The acceleration-level LCP of the touching contacts at rest along their normal."""
        m, d = self.model, self.d
        k = len(batch.gap)
        if k == 0:
            return {}
        v = state.v
        rate = J_N @ v
        candidates = np.nonzero(np.abs(rate) <= self.velocity_tol)[0]
        if len(candidates) == 0:
            return {}
        sub = _take(batch, candidates)
        JN, JT = J_N[candidates], J_T[candidates]
        kc = len(candidates)
        vt = np.einsum("kan,n->ka", JT, v)
        speed_t = np.linalg.norm(vt, axis=1)
        mu = self.friction[sub.entry]
        sliding = (speed_t > 2.0 * self.velocity_tol) & (mu > 0)  # a stop event ends at velocity_tol
        W_N = JN.copy()
        for c in np.nonzero(sliding)[0]:
            W_N[c] = JN[c] - mu[c] * ((vt[c] / speed_t[c]) @ JT[c])
        K_T = JT.transpose(1, 0, 2).reshape(kc * (d - 1), m.nv)
        K = np.vstack((JN, K_T))
        W = np.vstack((W_N, K_T))
        joints = self._joints(state)
        frames = m.frames(state.q, v)
        Q = generalized_forces(m, self.data, frames, v, state.t, with_potential=False, nonsmooth=True).q_force
        cv = constraint_values(m, frames, state.t) if m.nc else None
        a0 = self._response(joints, Q[:, None])[:, 0]
        if joints is not None:
            a0 = a0 + joints.correction(cv.gamma)
        # gamma of all candidate rows, as if all were closed and sticking
        saved = self.modes
        self.modes = {int(key): Mode("stick") for key in sub.feature}
        rows_all = self._rows(frames, sub, v)
        gamma_rows = self._gamma(state.t, state.q, v, rows_all)
        self.modes = saved
        gamma = np.zeros(len(K))
        for c in range(kc):
            gamma[c] = gamma_rows[rows_all.normal_row[c]]
            for a, r in enumerate(rows_all.tangent_rows[c]):
                gamma[kc + a * kc + c] = gamma_rows[r]
        b = K @ a0 - gamma
        still = 1e-9 * (1.0 + float(np.max(np.abs(b), initial=0.0)))
        tangent = [kc + np.arange(d - 1) * kc + c for c in range(kc)]
        # the contact problem's friction is Coulomb's round cone (lcp active_set, pgs) or a pyramid
        # (lemke: Stewart-Trinkle, |f_t1| + |f_t2| <= mu f_N): where it slips (a_T != 0) or its
        # force leaves the round cone, the contact's own stick force (its rows held, the others'
        # forces as the solve has them) decides: inside the cone it sticks, else it slips. The sliding
        # direction s at onset (zero slip speed) is the one whose friction -mu f_N s leaves a
        # tangential acceleration along s (else the slip would reverse at once): _onset_direction,
        # started from the LCP's a_T (or -f_T). Rounds repeat while another contact's onset moves it.
        onset: dict[int, np.ndarray] = {}

        def solve(onset: dict[int, np.ndarray]):
            """The mode LCP with the contacts in ``onset`` sliding along their directions."""
            W_it = W.copy()
            for c, s in onset.items():
                W_it[c] = JN[c] - mu[c] * (s @ JT[c])
            A = K @ self._response(joints, W_it.T)
            mu_lcp = np.where(sliding | np.isin(np.arange(kc), list(onset)), 0.0, mu)
            f, _, _ = contact_lcp(A, b, mu_lcp, d, self.lcp, self.pgs, state.t)
            return A, f, A @ f + b

        for _ in range(ONSET_ITERATIONS):
            A, f, accel = solve(onset)
            changed = False
            for c in range(kc):
                if sliding[c] or mu[c] == 0 or accel[c] > still:
                    continue
                ft, at = f[tangent[c]], accel[tangent[c]]
                size = float(np.linalg.norm(at))
                if c in onset:
                    if size > 1e-12 and np.linalg.norm(at / size - onset[c]) > 1e-9:
                        onset[c], changed = self._onset_direction(c, onset, solve, tangent[c], at), True
                elif size > still or np.linalg.norm(ft) > mu[c] * f[c] * (1.0 + 1e-9):
                    own = np.array([c, *tangent[c]])
                    rest = np.setdiff1d(np.arange(len(b)), own)
                    rhs = -(b[own] + A[np.ix_(own, rest)] @ f[rest])
                    held = np.linalg.lstsq(A[np.ix_(own, own)], rhs, rcond=None)[0]
                    if held[0] > 0 and np.linalg.norm(held[1:]) <= mu[c] * held[0] * (1.0 + 1e-9):
                        continue  # Coulomb's cone holds it: it sticks
                    guess = at if size > 1e-12 else -held[1:]
                    onset[c] = self._onset_direction(c, onset, solve, tangent[c], guess)
                    changed = True
            if not changed:
                break
        else:  # the rounds ran out (a redundant set's corners turn each other's directions by round-off)
            A, f, accel = solve(onset)
        # Admissible onsets only (Pfeiffer & Glocker's stick-slip transition: the slip starts from
        # rest with a tangential acceleration along its direction, a_T . s > 0): a direction
        # whose acceleration does not point along it would be reversed by the first step and the
        # same onset found again at this instant. Such a contact is left sticking, and _settle
        # slides it opposite its stick force if that force leaves the cone.
        for c in [c for c, s in onset.items() if float(accel[tangent[c]] @ s) <= 0.0]:
            del onset[c]
        # closed: pressed (a normal force) or held at zero normal acceleration; a redundant set of
        # contacts (a box's corners on a floor) has many force distributions, and a corner the LCP
        # happens to leave without force stays closed: the smooth phase then shares the force
        # (least squares). Open: separating, a_N > 0.
        modes: dict[int, Mode] = {}
        for c in range(kc):
            if accel[c] > still:
                continue
            key = int(sub.feature[c])
            if sliding[c]:
                modes[key] = Mode("slide", vt[c] / speed_t[c])
                continue
            if mu[c] == 0:
                modes[key] = Mode("frictionless")
                continue
            modes[key] = Mode("slide", onset[c], onset=True) if c in onset else Mode("stick")
        return modes

    @staticmethod
    def _onset_direction(c: int, onset: dict, solve, rows: np.ndarray, guess: np.ndarray) -> np.ndarray:
        """The sliding direction s of contact ``c`` starting to slip: its tangential acceleration
        a_T(s) with friction -mu f_N s along s (a_T x s = 0, a_T . s > 0). In 3D the angle of s is
        sampled round the circle and the sign changes of a_T x s refined by Brent's method (the
        fixed-point iteration s = a_T / |a_T| can cycle); the root nearest ``guess`` is taken."""
        import scipy.optimize

        def accel(s):
            return solve({**onset, c: s})[2][rows]

        if len(rows) == 1:  # planar: s = +-1
            options = [np.array([1.0]), np.array([-1.0])]
            return max(options, key=lambda s: float(accel(s) @ s))

        def unit(theta):
            return np.array([np.cos(theta), np.sin(theta)])

        def cross(theta):
            a = accel(unit(theta))
            return float(a[0] * np.sin(theta) - a[1] * np.cos(theta))

        thetas = np.linspace(0.0, 2.0 * np.pi, ONSET_SAMPLES + 1)
        values = [cross(x) for x in thetas]
        roots = []
        for x0, x1, g0, g1 in zip(thetas[:-1], thetas[1:], values[:-1], values[1:], strict=True):
            if g0 == 0.0 or g0 * g1 < 0.0:
                x = x0 if g0 == 0.0 else scipy.optimize.brentq(cross, x0, x1, xtol=1e-14)
                if float(accel(unit(x)) @ unit(x)) > 0.0:
                    roots.append(unit(x))
        if not roots:  # no consistent direction found: the old guess (the run's events say the rest)
            n = float(np.linalg.norm(guess))
            return guess / n if n > 0 else np.array([1.0, 0.0])
        g = guess / max(float(np.linalg.norm(guess)), 1e-300)
        return max(roots, key=lambda s: float(s @ g))

    def _record_mode_changes(self, t, new_modes, batch, triggers) -> None:
        """detach, stick and slip events of the contacts that were closed (a contact that closes
        does so by an impact or an accumulation, recorded by _impact)."""
        names = {int(key): self.contact_names[int(e)] for key, e in zip(batch.feature, batch.entry, strict=True)}
        names.update({key: self.contact_names[e] for key, e in self.entries.items()})
        reversed_ = {key for kind, key in triggers if kind == "slide"}
        # a slide whose speed reached velocity_tol and that slides on from rest: a slip too, as when
        # its velocity along its direction reached zero first (which of the two is found first is
        # round-off when the slide stops head-on)
        stopped = {key for kind, key in triggers if kind == "stop"}
        for key, old in self.modes.items():
            new = new_modes.get(key)
            name = names.get(key, "?")
            if new is None:
                self.events.append((t, "detach", name))
            elif old.kind == "slide" and new.kind == "stick":
                self.events.append((t, "stick", name))
            elif new.kind == "slide" and (old.kind == "stick" or key in reversed_ or (key in stopped and new.onset)):
                self.events.append((t, "slip", name))  # from sticking, sliding on the other way, or from rest

    # ------------------------------------------------------------------ projection (§3)

    def _joints(self, state: State) -> MinNorm | None:
        m = self.model
        if not m.nc:
            return None
        cv = constraint_values(m, m.frames(state.q, np.zeros(m.nv)), state.t)
        return MinNorm(m, cv.jacobian, self.rank_tol)

    def _project_velocity_joints(self, q, v, t) -> np.ndarray:
        m = self.model
        cv = constraint_values(m, m.frames(q, v), t)
        return v - correction(m, cv.jacobian, cv.jacobian @ v + cv.phi_t, self.rank_tol, t, "velocity projection", True)

    def _project(self, state: State, touching: bool = False, onset: bool = False) -> State:
        """§3: positions onto the joints and the closed (or, at an event, all touching) contacts'
        gaps, then velocities onto the joints and the closed contacts (normal; tangent if sticking;
        with ``onset``, after an event, tangent too for a contact whose slip the modes start from
        rest (Mode.onset): its residual velocity below 2 velocity_tol, which may point the other
        way, would otherwise reverse the slip at once)."""
        m = self.model
        p = self.projection
        q, v, t = state.q, state.v, state.t
        if not (m.nc or self.modes or touching or np.any(self.fmode == 0)):
            return state
        if p.position:
            for _ in range(p.iterations):
                J, r = self._position_rows(q, t, touching)
                if len(r) == 0 or float(np.max(np.abs(r))) <= p.tol:
                    break
                q = m.normalize(m.retract(q, -correction(m, J, r, self.rank_tol, t, "position projection", True)))
        if p.velocity:
            J, r = self._velocity_rows(q, v, t, onset)
            if len(r):
                v = v - correction(m, J, r, self.rank_tol, t, "velocity projection", True)
        return State(t, q, v, state.work)

    def _position_rows(self, q, t, touching):
        m = self.model
        zeros = np.zeros(m.nv)
        frames = m.frames(q, zeros)
        Js, rs = [], []
        if m.nc:
            cv = constraint_values(m, frames, t)
            Js.append(cv.jacobian.toarray() if is_sparse(cv.jacobian) else np.asarray(cv.jacobian))
            rs.append(cv.phi)
        batch = self._detect(frames)
        keep = [
            i
            for i, key in enumerate(batch.feature)
            if int(key) in self.modes or (touching and batch.gap[i] <= self.contact_tol)
        ]
        if keep:
            sub = _take(batch, np.array(keep, dtype=np.int64))
            J_N, _ = self._contact_rows(frames, sub)
            Js.append(J_N.toarray() if is_sparse(J_N) else np.asarray(J_N))
            rs.append(sub.gap)
        if not Js:
            return np.zeros((0, m.nv)), np.zeros(0)
        return np.vstack(Js), np.concatenate(rs)

    def _velocity_rows(self, q, v, t, onset: bool = False):
        m = self.model
        frames = m.frames(q, v)
        Js, rs = [], []
        if m.nc:
            cv = constraint_values(m, frames, t)
            J = cv.jacobian.toarray() if is_sparse(cv.jacobian) else np.asarray(cv.jacobian)
            Js.append(J)
            rs.append(J @ v + cv.phi_t)
        if self.coordinates.nfriction and np.any(self.fmode == 0):  # sticking joint coordinates: qd = 0
            C = self._coordinate_rows(frames)[2][self.fmode == 0]
            Js.append(C)
            rs.append(C @ v)
        if self.modes:
            rows = self._rows(frames, self._detect(frames), v)
            if len(rows.keys):
                K = rows.K
                # sliding contacts that the mode LCP starts from rest (Mode.onset, the same set it
                # decided on, not a speed threshold again): their tangent rows too
                if onset:
                    extra = [rows.tangent[c] for c, key in enumerate(rows.keys) if self.modes[int(key)].onset]
                    if extra:
                        K = np.vstack([K, *extra])
                Js.append(K)
                rs.append(K @ v)
        if not Js:
            return np.zeros((0, m.nv)), np.zeros(0)
        return np.vstack(Js), np.concatenate(rs)

    # ------------------------------------------------------------------ recording

    def evaluate(self, state: State) -> Evaluation:
        m = self.model
        s = self._solve(state.t, state.q, state.v, potential=True)
        kinetic = kinetic_energy(m, state.v)
        batch = self._detect(s.frames)
        gap = batch.gap[batch.entry < self.ncontacts]  # the contacts' (not the joint stops')
        penetration = float(max(0.0, -np.min(gap))) if len(gap) else 0.0
        touching = int(np.sum(gap <= self.contact_tol))
        contacts = (touching, penetration)
        forces = self._coordinate_forces(s) if self.coordinates else None
        if m.nc == 0:
            empty = np.zeros(0)
            return Evaluation(
                empty, empty, empty, None, kinetic, s.potential, s.frames, contacts, coordinate_forces=forces
            )
        cv = s.cv
        return Evaluation(
            s.lam,
            cv.phi,
            cv.jacobian @ state.v + cv.phi_t,
            cv.jacobian,
            kinetic,
            s.potential,
            s.frames,
            contacts,
            coordinate_forces=forces,
        )

    def _coordinate_forces(self, s: Solve) -> tuple[np.ndarray, np.ndarray]:
        """The joint stops' and the joint friction's forces per coordinate at a solved state."""
        rows = s.rows
        stop_force = np.zeros(self.coordinates.nstop)
        for c, key in enumerate(rows.keys):
            if key < 0:  # a joint stop (_detect)
                stop_force[-1 - int(key)] = s.forces[rows.normal_row[c]]
        return self.coordinates.forces(stop_force, s.friction)

    def event_table(self) -> tuple[np.ndarray, list[str], list[str]]:
        """The events so far in time order: times, kinds, contact names; the points of one
        contact (a box's corners on the floor) that do the same at the same time are one event."""
        events = sorted(set(self.events), key=lambda e: (e[0], self.events.index(e)))
        return np.array([e[0] for e in events], dtype=float), [e[1] for e in events], [e[2] for e in events]


def _mass_times(model: Model, x: np.ndarray) -> np.ndarray:
    """M x (nv,), block by block."""
    nb, w = model.nbody, model.body_width
    return (model.mass_diag_blocks @ x.reshape(nb, w, 1)).reshape(-1)


def _take(batch: ContactBatch, index: np.ndarray) -> ContactBatch:
    """The rows ``index`` of a ContactBatch."""
    b = batch
    return ContactBatch(
        b.body_i[index], b.body_j[index], b.entry[index], b.point_i[index], b.point_j[index], b.normal[index],
        b.gap[index], b.feature[index],
    )  # fmt: skip


def _hermite(t0, y0, f0, t1, y1, f1):
    """Cubic Hermite interpolant of a fixed step (the dense output of the fixed-step integrators)."""
    h = t1 - t0

    def dense(t):
        s = (t - t0) / h
        h00 = (1 + 2 * s) * (1 - s) ** 2
        h10 = s * (1 - s) ** 2
        h01 = s * s * (3 - 2 * s)
        h11 = s * s * (s - 1)
        return h00 * y0 + h10 * h * f0 + h01 * y1 + h11 * h * f1

    return dense


def _refuse_stacks(model: Model, ctx: Context, pairs) -> None:
    """Rigid contacts of meshes are refused (see the message), and contacts between two moving
    bodies that both have only flat-sided shapes (box on box: a stack). Their face-face contact
    is a redundant set of clipped corner
    points whose names change as the faces tilt; the mode LCP of such a set has many solutions,
    Lemke's method meets degenerate bases and PGS stops short, so the closed set does not settle
    (a ten-box stack produced hundreds of detach events in 0.03 s). timestepping handles them."""

    # per body (mbsim.model.shapes' flags): flat-sided (it has shapes and none is rounded), and
    # whether a shape of it touches at many points
    def per_body(flags: np.ndarray) -> np.ndarray:
        return np.bincount(model.shape_body, weights=flags.astype(float), minlength=model.nbody + 1) > 0

    many = np.array([SHAPE_KINDS[c].many_contact_points for c in model.shape_type], dtype=bool)
    flat = per_body(np.ones(model.nshape, dtype=bool)) & ~per_body(model.shape_rounded)
    many_points = per_body(many)
    for entry in pairs.entries:
        for b in (*entry.bodies1, *entry.bodies2):  # meshes: tens of vertices touch a face at once
            if b < model.nbody and many_points[b]:
                raise ctx.error(
                    (*model.contacts[entry.index].path, "body2"),
                    f"event_driven does not take rigid contact of a mesh ('{model.body_names[b]}'): a mesh lying on "
                    "a face touches it at tens of vertices at once, whose least-squares force shares leave the "
                    "friction cone and whose modes do not settle; use solver.method 'timestepping', or a compliant "
                    "(SDF) contact",
                )
        for b1 in entry.bodies1:
            for b2 in entry.bodies2:
                if b1 != b2 and b1 < model.nbody and b2 < model.nbody and flat[b1] and flat[b2]:
                    a, b = model.body_names[b1], model.body_names[b2]
                    raise ctx.error(
                        (*model.contacts[entry.index].path, "body2"),
                        f"event_driven does not take contact between two moving flat-sided bodies ('{a}' and "
                        f"'{b}': box, mesh, cylinder or rectangle shapes only): face-face contact of a stack "
                        "has redundant corner sets whose modes do not settle; use solver.method 'timestepping', "
                        "or give one of them a round shape (sphere, capsule, circle, point)",
                    )


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    if got["margin"] == 0.0:  # timestepping's margin may be 0 (only touching contacts enter its LCP)
        raise ctx.error(
            ("solver", "margin"),
            "event_driven needs a positive margin: its gap functions follow every contact nearer than it, so that "
            "an impact is located before it happens (timestepping's margin 0 has no counterpart here); set "
            "solver.margin to 1e-3 (the default) or remove the key",
        )
    _refuse_stacks(model, ctx, ContactDetector(model).pairs)
    friction = rigid_friction(model, ctx)
    return Solver(model, got, solver_spec.integrator, solver_spec.rtol, solver_spec.atol, friction)
