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

   the joint rows are eliminated exactly (Schur complement), the contact rows go to the LCP
   solver (option ``lcp``: ``pgs`` with the friction box |P_t1|, |P_t2| <= mu P_N -- a
   four-sided pyramid whose faces are normal to the tangents, which allows up to sqrt(2) mu
   along a diagonal -- or ``lemke`` with the Stewart-Trinkle polyhedral cone spanned by the
   directions +-t1, +-t2, i.e. |P_t1| + |P_t2| <= mu P_N, which allows mu along a tangent and
   mu/sqrt(2) along a diagonal; both are exact for sliding along a tangent, and in 2D they are
   the same; Lemke's answer is checked, and degenerate LCPs are retried with a diagonal shift);
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
would otherwise end in penetration. Contacts are searched within ``margin`` plus the distance
the bodies can travel in the step, (|v| + |omega| R) h, with v the larger of the step's start
velocity and the velocity the forces alone would give.

Recorded diagnostics: contact count (touching points: gap <= 0 or a positive impulse), the
largest penetration at the recorded state, /diagnostics/contacts/normal_impulse (sum of the
step's normal impulses) and LCP iterations (PGS sweeps or Lemke pivots). The work of contact
impulses and non-conservative forces, P . (v + v+)/2, goes to the energy bookkeeping.
Joint reactions at a recorded state are the step's joint impulses divided by h.
"""

from __future__ import annotations

import numpy as np

from mbsim.errors import SimulationError
from mbsim.model.constraints import constraint_values
from mbsim.model.contact import ContactDetector
from mbsim.model.data import new_run_data
from mbsim.model.dynamics import applied_forces, generalized_forces, kinetic_energy
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.model.sparse import is_sparse
from mbsim.scene.fields import Boolean, Choice, Context, Field, Number, Sub
from mbsim.solvers.base import SolverBase, read_options
from mbsim.solvers.lcp import LCPError, complementarity_error, lemke, pgs
from mbsim.solvers.linalg import MinNorm, inverse_mass_times
from mbsim.solvers.ode import COMMON_OPTION_FIELDS, projection_options
from mbsim.solvers.projection import project_positions, project_velocities

NAME = "timestepping"
CAPABILITIES = {"rigid_contacts": True, "integrators": False}

PGS_FIELDS = {
    "iterations": Field(Number(minimum=1, integer=True), "sweeps at most per step", 500),
    "tol": Field(Number(positive=True), "largest change of an impulse in a sweep that ends it (relative)", 1e-10),
    "omega": Field(Number(positive=True, maximum=1.99), "over-relaxation factor", 1.0),
    "warm_start": Field(Boolean(), "start from the previous step's impulses of the same contact features", True),
}
OPTION_FIELDS = {
    "projection": COMMON_OPTION_FIELDS["projection"],
    "lcp": Field(Choice(("pgs", "lemke")), "LCP solver of the contact impulses", "pgs"),
    "pgs": Field(
        Sub(PGS_FIELDS, "pgs"),
        "projected Gauss-Seidel settings",
        {"iterations": 500, "tol": 1e-10, "omega": 1.0, "warm_start": True},
    ),  # fmt: skip
    "margin": Field(Number(minimum=0), "contacts closer than this (m) enter the LCP before they touch", 1e-3),
    "stabilization": Field(Number(minimum=0, maximum=1), "fraction of a penetration removed per step", 0.2),
    "restitution_threshold": Field(Number(minimum=0), "approach speed (m/s) below which an impact is inelastic", 1e-3),
    "rank_tol": Field(Number(positive=True), "rank tolerance of the joint rows (pseudo-inverse)", 1e-10),
}


class Solver(SolverBase):
    """Velocity-impulse time-stepping (see the module docstring)."""

    EXTRA_DIAGNOSTICS = {"contacts/normal_impulse": "last"}
    integrator_label = "Moreau-Jean midpoint"  # solver.integrator is not used

    def __init__(self, model: Model, options: dict, friction: list[float]) -> None:
        self.model = model
        self.data = new_run_data(model)  # what this run changes (the model is never written)
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
        self.body_radius = _bounding_radii(model)
        self._last_joint_impulse: tuple[float, np.ndarray] | None = None

    @property
    def extra_diagnostics(self) -> tuple[str, ...]:
        return tuple(self.EXTRA_DIAGNOSTICS)

    # ------------------------------------------------------------------ contact Jacobians

    def _contact_rows(self, frames, batch):
        """Normal and tangent rows (J_N (k, nv), J_T (k (d-1), nv)), dense or sparse, and the tangents."""
        m, d, w = self.model, self.d, self.w
        k = len(batch.gap)
        n = batch.normal
        if d == 3:  # tangents: n x (a helper axis not along n), then n x t1
            helper = np.where(np.abs(n[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
            t1 = np.cross(n, helper)
            t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
            t2 = np.cross(n, t1)
            directions = [n, t1, t2]
        else:
            directions = [n, np.stack((-n[:, 1], n[:, 0]), axis=1)]
        ri = batch.point_i - frames.pos[batch.body_i]
        rj = batch.point_j - frames.pos[batch.body_j]
        blocks_i, blocks_j = [], []
        for u in directions:
            if d == 3:
                rot_i = np.einsum("kji,kj->ki", frames.rot[batch.body_i], np.cross(ri, u))
                rot_j = np.einsum("kji,kj->ki", frames.rot[batch.body_j], np.cross(rj, u))
            else:
                rot_i = (ri[:, 0] * u[:, 1] - ri[:, 1] * u[:, 0])[:, None]
                rot_j = (rj[:, 0] * u[:, 1] - rj[:, 1] * u[:, 0])[:, None]
            blocks_i.append(-np.concatenate((u, rot_i), axis=1))
            blocks_j.append(np.concatenate((u, rot_j), axis=1))
        nrows = k * len(directions)
        bi = np.tile(batch.body_i, len(directions))
        bj = np.tile(batch.body_j, len(directions))
        Bi, Bj = np.concatenate(blocks_i), np.concatenate(blocks_j)
        rows = np.arange(nrows)
        data, r_idx, c_idx = [], [], []
        for body, block in ((bi, Bi), (bj, Bj)):
            keep = body < m.nbody
            cols = body[keep][:, None] * w + np.arange(w)
            data.append(block[keep].ravel())
            r_idx.append(np.repeat(rows[keep], w))
            c_idx.append(cols.ravel())
        import scipy.sparse as sp  # here, not at the top: mbsim.model.sparse

        J = sp.csr_matrix((np.concatenate(data), (np.concatenate(r_idx), np.concatenate(c_idx))), shape=(nrows, m.nv))
        if not m.sparse:
            J = J.toarray()
        return J[:k], J[k:]

    # ------------------------------------------------------------------ the step

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        m = self.model
        q, v = state.q, state.v
        t_mid = state.t + 0.5 * h
        q_mid = m.normalize(m.retract(q, 0.5 * h * v))
        frames = m.frames(q_mid, v)
        applied = applied_forces(m, self.data, frames, v, t_mid, with_potential=False)
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
        iterations = 0
        if k:
            J_N, J_T = self._contact_rows(frames, batch)
            J_C = np.vstack((J_N, J_T)) if not is_sparse(J_N) else _sparse_vstack(J_N, J_T)
            r_N = self._target(J_N @ v, J_N @ v_free, batch, h)
            b_C = J_C @ v_free
            b_C[:k] -= r_N
            A = _schur_product(m, J_C)
            if m.nc:
                A, b_C, eliminate = self._eliminate(J_E, J_C, A, b_C, v_free, phi_t)
            P_C, iterations = self._solve_lcp(A, b_C, batch, k, state.t)
            if m.nc:
                P_E = eliminate(P_C)
            impulse = (J_C.T @ P_C) + (J_E.T @ P_E if m.nc else 0.0)
        elif m.nc:
            P_E = self._joint_impulses(J_E, v_free, phi_t)
            impulse = J_E.T @ P_E
        else:
            impulse = np.zeros(m.nv)
        v_new = v_free + inverse_mass_times(m, impulse)
        q_new = m.normalize(m.retract(q_mid, 0.5 * h * v_new))
        # §3: the drift of the joints is projected out before the next step's LCP (and so before
        # this state is recorded): positions, then velocities, in the mass-matrix norm
        violation = None
        p = self.projection
        if m.nc and p.position:
            q_new, _, violation, values = project_positions(
                m, q_new, state.t + h, p.iterations, p.tol, self.rank_tol, True
            )
            if p.velocity:
                v_new = project_velocities(m, q_new, v_new, state.t + h, self.rank_tol, values, True)
        elif m.nc and p.velocity:
            v_new = project_velocities(m, q_new, v_new, state.t + h, self.rank_tol, None, True)
        mean = 0.5 * (v + v_new)
        work = state.work + h * float(applied.nonconservative @ mean) + float(impulse @ mean)
        self._last_joint_impulse = (state.t + h, P_E / h)
        normal_total = float(np.sum(P_C[:k])) if k else 0.0
        info = StepInfo(iterations=iterations, h=h, position_violation=violation)
        info.extra = {"contacts/normal_impulse": normal_total}
        return State(state.t + h, q_new, v_new, work), info, h

    def _reach(self, v: np.ndarray) -> float:
        """Largest speed of any point of any body: max over bodies of |v_com| + |omega| R."""
        nb, d, w = self.model.nbody, self.d, self.w
        vb = v.reshape(nb, w)
        omega = np.linalg.norm(vb[:, d:], axis=1)
        return float(np.max(np.linalg.norm(vb[:, :d], axis=1) + omega * self.body_radius, initial=0.0))

    def _target(self, approach: np.ndarray, approach_free: np.ndarray, batch, h: float) -> np.ndarray:
        """Target normal velocities r_N (see the module docstring); approach_free is J_N of the
        velocity the forces alone would give at the end of the step."""
        speed = -approach  # approach speed, positive when closing
        e = np.where(speed > self.threshold, self.restitution[batch.entry], 0.0)
        bounce = e * np.maximum(speed, 0.0)
        closed = batch.gap <= 0.0
        correction = self.beta * np.maximum(-batch.gap, 0.0) / h
        # open, but it closes before the step ends: an impact within the step (restitution as if
        # now; the position is then off by at most the gap), or for e = 0 a landing on the surface
        closes = batch.gap <= 0.5 * h * np.maximum(speed, -approach_free)
        land = -batch.gap / (0.5 * h)
        open_target = np.where(closes & (e > 0.0), bounce, land)
        return np.where(closed, np.maximum(bounce, correction), open_target)

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

    def _solve_lcp(self, A, b, batch, k, t):
        d = self.d
        nt = k * (d - 1)
        mu = self.friction[batch.entry]
        if self.lcp == "lemke":
            return self._lemke(A, b, mu, k, nt, t)
        lo = np.concatenate((np.zeros(k), np.zeros(nt)))
        hi = np.concatenate((np.full(k, np.inf), np.zeros(nt)))
        friction_normal = np.concatenate((np.full(k, -1), np.tile(np.arange(k), d - 1)))
        mu_rows = np.concatenate((np.zeros(k), np.tile(mu, d - 1)))
        x0 = None
        keys = batch.feature
        if self.pgs["warm_start"] and self._warm_keys is not None and len(self._warm_keys):
            # previous impulses of the same contact features (sorted keys, searchsorted)
            where = np.minimum(np.searchsorted(self._warm_keys, keys), len(self._warm_keys) - 1)
            hit = self._warm_keys[where] == keys
            start = np.zeros((k, d))
            start[hit] = self._warm_values[where[hit]]
            x0 = start.T.ravel()
        A_lcp = A.tocsr() if is_sparse(A) else np.asarray(A)
        # rows that impulses cannot move (a direction the joints lock) and friction rows with
        # mu = 0 stay out of the LCP with zero impulse
        diag = A_lcp.diagonal()
        active = diag > 1e-12 * max(float(diag.max(initial=0.0)), 1e-300)
        active[k:] &= mu_rows[k:] > 0.0
        active[k:] &= active[friction_normal[k:]]
        index = np.cumsum(active) - 1
        sub = np.nonzero(active)[0]
        fn = friction_normal[sub]
        fn = np.where(fn >= 0, index[np.maximum(fn, 0)], -1)
        A_sub = A_lcp if len(sub) == len(active) else A_lcp[sub][:, sub]
        result = pgs(A_sub, b[sub], lo[sub], hi[sub], None if x0 is None else x0[sub], friction_normal=fn,
                     mu=mu_rows[sub], iterations=int(self.pgs["iterations"]), tol=self.pgs["tol"],
                     omega=self.pgs["omega"], unique_entries=True)  # fmt: skip
        x = np.zeros(k + nt)
        x[sub] = result.x
        order = np.argsort(keys, kind="stable")
        self._warm_keys, self._warm_values = keys[order], x.reshape(d, k).T[order]
        return x, int(result.iterations)

    def _lemke(self, A, b, mu, k, nt, t):
        """Stewart-Trinkle LCP with the polyhedral cone (directions +-t of every contact with
        friction): z = (P_N, beta, lambda), P_T = beta+ - beta-; contacts with mu = 0 have only
        their normal row."""
        A = A.toarray() if is_sparse(A) else np.asarray(A)
        d = self.d
        rough = np.nonzero(mu > 0.0)[0]
        f = len(rough)
        ndir = 2 * (d - 1)  # +t1, -t1 (, +t2, -t2)
        nb_dir = f * ndir
        # D (nt, nb_dir) maps direction weights to tangent impulses; E (nb_dir, f) groups them by contact
        D = np.zeros((nt, nb_dir))
        E = np.zeros((nb_dir, f))
        for a in range(d - 1):
            for slot, c in enumerate(rough):
                D[a * k + c, (2 * a) * f + slot] = 1.0
                D[a * k + c, (2 * a + 1) * f + slot] = -1.0
        for s_ in range(ndir):
            E[s_ * f : (s_ + 1) * f, :] = np.eye(f)
        A_NN, A_NT, A_TT = A[:k, :k], A[:k, k:], A[k:, k:]
        size = k + nb_dir + f
        M = np.zeros((size, size))
        M[:k, :k] = A_NN
        M[:k, k : k + nb_dir] = A_NT @ D
        M[k : k + nb_dir, :k] = D.T @ A_NT.T
        M[k : k + nb_dir, k : k + nb_dir] = D.T @ A_TT @ D
        M[k : k + nb_dir, k + nb_dir :] = E
        M[k + nb_dir :, :k] = np.eye(k)[rough] * mu[rough][:, None]
        M[k + nb_dir :, k : k + nb_dir] = -E.T
        qv = np.concatenate((b[:k], D.T @ b[k:], np.zeros(f)))
        z, pivots = _lemke_checked(M, qv, t)
        return np.concatenate((z[:k], D @ z[k : k + nb_dir])), pivots

    # ------------------------------------------------------------------ recording

    def evaluate(self, state: State) -> Evaluation:
        m = self.model
        frames = m.frames(state.q, state.v)
        forces = generalized_forces(m, self.data, frames, state.v, state.t)
        kinetic = kinetic_energy(m, state.v)
        batch = self.detector.detect(frames, 0.0)
        penetration = float(max(0.0, -np.min(batch.gap))) if len(batch.gap) else 0.0
        touching = int(np.sum(batch.gap <= 1e-9))  # resting contact sits at gap ~ +1e-15
        contacts = (touching, penetration)
        if m.nc == 0:
            empty = np.zeros(0)
            return Evaluation(empty, empty, empty, None, kinetic, forces.potential, frames, contacts)
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
            lam, cv.phi, cv.jacobian @ state.v + cv.phi_t, cv.jacobian, kinetic, forces.potential, frames, contacts
        )


def _lemke_checked(M: np.ndarray, q: np.ndarray, t: float) -> tuple[np.ndarray, int]:
    """Lemke's method with its answer checked (natural residual below 1e-7, relative);
    degenerate contact LCPs (redundant face points give a rank-deficient normal block, and the
    pivoting can end on a wrong basis) are retried with a small diagonal shift, M + delta I,
    delta up to 1e-8 (relative), which picks one of their many solutions. Returns (z, pivots)."""
    scale = max(1.0, float(np.max(np.abs(M))), float(np.max(np.abs(q), initial=0.0)))
    last = "no attempt"
    pivots = 0
    for delta in (0.0, 1e-12, 1e-10, 1e-8):
        try:
            result = lemke(M + delta * scale * np.eye(len(q)), q)
        except LCPError as exc:
            last = str(exc)
            continue
        pivots += int(result.iterations)
        error = complementarity_error(M, q, result.x)
        if error <= 1e-7 * scale:
            return result.x, pivots
        last = f"the answer's complementarity error is {error:.3g}"
    raise SimulationError(f"Lemke's method failed on the contact LCP: {last}", t=t)


def _bounding_radii(model: Model) -> np.ndarray:
    """Per body, a radius around the centre of mass that holds all its shapes (m)."""
    out = np.zeros(model.nbody)
    for b, name in enumerate(model.body_names):
        for shape in model.shapes.get(name, []):
            pose = shape.get("pose")
            centre = float(np.linalg.norm(pose["position"])) if pose else 0.0
            kind = shape["type"]
            if kind in ("sphere", "circle"):
                size = shape["radius"]
            elif kind in ("box", "rectangle"):
                size = 0.5 * float(np.linalg.norm(shape["size"]))
            elif kind == "capsule":
                size = shape["radius"] + 0.5 * shape["length"]
            elif kind == "cylinder":
                size = float(np.hypot(shape["radius"], 0.5 * shape["length"]))
            elif kind == "point":
                centre, size = float(np.linalg.norm(shape["position"])), 0.0
            else:  # meshes and anything else: their own extent is unknown here, be generous
                size = 1.0
            out[b] = max(out[b], centre + size)
    return out


def _schur_product(model: Model, J):
    """J M^-1 J^T, dense or sparse like J."""
    if is_sparse(J):
        return (J @ model.inv_mass_matrix @ J.T).tocsr()
    return J @ inverse_mass_times(model, J.T)


def create(model: Model, ctx: Context, solver_spec) -> Solver:
    got = read_options(ctx, ("solver",), solver_spec.options, OPTION_FIELDS)
    friction = []
    for item in model.contacts:  # a rigid contact's friction is one Coulomb coefficient
        value = item.values.get("friction")
        if item.values.get("type") == "rigid" and value is not None:
            friction.append(Number(minimum=0).read(ctx, (*item.path, "friction"), value))
        else:
            friction.append(0.0)
    return Solver(model, got, friction)


def _sparse_vstack(top, bottom):
    import scipy.sparse as sp  # here, not at the top: mbsim.model.sparse

    return sp.vstack((top, bottom)).tocsr()
