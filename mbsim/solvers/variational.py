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

Compiled: steps and recorded rows run in mbsim.solvers.variational_kernels (the same formulas,
the same LAPACK routines); a step it cannot finish is taken again here, which raises the error.
"""

from __future__ import annotations

import numpy as np

from mbsim.diagnostics import row_columns, row_width
from mbsim.errors import SimulationError
from mbsim.model.constraints import constraint_values
from mbsim.model.data import new_run_data
from mbsim.model.dynamics import applied_forces, generalized_forces, kinetic_energy
from mbsim.model.flat import FlatModel, dense_reason, flatten, make_data
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.model.sparse import is_sparse
from mbsim.scene.fields import MAX_ITERATIONS, Context, Field, Number, Raw
from mbsim.solvers import variational_kernels as vk
from mbsim.solvers.base import Block, SolverBase, read_options
from mbsim.solvers.linalg import MinNorm
from mbsim.solvers.ode import BLOCK_STEPS, ROWS_PER_BLOCK

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


def g_matrix(p: np.ndarray) -> np.ndarray:
    """G(p) for (..., 4) quaternions -> (..., 3, 4)."""
    return np.einsum("...i,ijk->...jk", p, GT)


def b_matrix(c: np.ndarray) -> np.ndarray:
    """B(c) (..., 4, 4) with columns G(e_i)^T c, so that G(a)^T c = B(c) a."""
    return np.einsum("ijk,...j->...ki", GT, c)


class Solver(SolverBase):
    """Discrete-action integrator (see the module docstring)."""

    EXTRA_DIAGNOSTICS = {"newton_residual": "last"}
    integrator_label = "discrete action (midpoint)"  # solver.integrator is not used

    def __init__(self, model: Model, tol: float, max_iter: int, rank_tol: float) -> None:
        self.model = model
        self.data = new_run_data(model)  # what this run changes (the model is never written)
        self.tol, self.max_iter, self.rank_tol = tol, max_iter, rank_tol
        self.nb, self.dim = model.nbody, model.dimension
        self.n = model.nq
        self.nquat = self.nb if self.dim == 3 else 0
        self.m = self.nquat + model.nc
        self.mass = model.body_mass
        self.inertia = model.body_inertia  # (nb, 3, 3) 3D, (nb, 1, 1) 2D
        self.forces_vary = bool(model.forces or model.springs)
        # momentum residual -> position-equivalent error h R / (mass scale), per coordinate
        if self.dim == 3:
            rot = 4.0 * np.max(np.linalg.eigvalsh(self.inertia), axis=1)
            self.mass_scale = np.concatenate((np.repeat(self.mass[:, None], 3, 1), np.repeat(rot[:, None], 4, 1)), 1)
        else:
            self.mass_scale = np.stack([self.mass, self.mass, self.inertia[:, 0, 0]], axis=1)
        self.mass_scale = self.mass_scale.reshape(-1)
        self._node: dict | None = None

        # scatter indices of the per-body (w x w) blocks into an (n, n) matrix
        w = 7 if self.dim == 3 else 3
        base = np.arange(self.nb)[:, None, None] * w
        self._block_rows = np.broadcast_to(base + np.arange(w)[None, :, None], (self.nb, w, w))
        self._block_cols = np.broadcast_to(base + np.arange(w)[None, None, :], (self.nb, w, w))
        self._quat_rows = np.repeat(np.arange(self.nquat), 4)
        self._quat_cols = (np.arange(self.nquat)[:, None] * 7 + 3 + np.arange(4)[None, :]).reshape(-1)
        self._gravity_u: np.ndarray | None = None
        self._compiled = self._compile()

    def _compile(self):
        """The compiled step's model, buffers and rows (variational_kernels), or None (sparse)."""
        m = self.model
        flat = dense_reason(m, 0) or flatten(m)  # its Newton solves are dense: no sparse model
        if not isinstance(flat, FlatModel):
            self.compiled_reason = flat
            return None
        self.compiled_reason = ""
        inertia = np.zeros((self.nb, 3, 3))
        k = self.inertia.shape[1]
        inertia[:, :k, :k] = self.inertia
        model = vk.VarModel(
            n=self.n, nquat=self.nquat, m=self.m, GT=GT, mass=np.asarray(self.mass, dtype=float), inertia=inertia,
            mass_scale=self.mass_scale, forces_vary=int(self.forces_vary), tol=self.tol, max_iter=self.max_iter,
            rank_tol=self.rank_tol,
        )  # fmt: skip
        data = make_data(flat, robust=True)  # robust: the reactions of a row are minimum-norm (evaluate)
        work = vk.make_var_data(self.n, self.m, m.nv, np.intc)  # LAPACK's C int (cython_lapack)
        rows = np.zeros((ROWS_PER_BLOCK, row_width(self.row_columns()) + 1))  # + the step number
        return flat, data, model, work, rows, np.zeros(9)

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
        flat, data, model, work, rows, out = self._compiled
        q, v = self.model.q0.copy(), self.model.v0.copy()
        vk.advance(flat, data, model, work, 0.0, q, v, 0.0, 0.0, 0.0, 1, 0, 0, 0, 0, 0.0, rows, out)

    def advance(
        self, state: State, h: float, done: int, every: int, max_steps: int, t_end: float, max_violation: float
    ) -> Block:
        """Compiled steps and rows (variational_kernels.advance) from the node of ``state``."""
        flat, data, model, work, rows, out = self._compiled
        node = self._start(state)
        work.p[:], work.rate[:], work.lam[:] = node["p"], node["rate"], node["lam"]
        work.h[0] = node["h"] or 0.0
        if self.model.springs:  # the references may have moved in Python steps
            data.spr_ref[:] = self.data.spring_reference[0]
        q, v = state.q.copy(), state.v.copy()
        code = vk.advance(
            flat, data, model, work, state.t, q, v, state.work, h, t_end, every, done, max_steps, len(rows),
            BLOCK_STEPS, max_violation, rows, out,
        )  # fmt: skip
        if self.model.springs:
            self.data.spring_reference[0] = data.spr_ref.copy()
        steps = int(out[2])
        new = state
        if steps:
            new = State(float(out[0]), q, v, float(out[1]))
            self._node = {"t": new.t, "u": q.copy(), "p": work.p.copy(), "rate": work.rate.copy(),
                          "lam": work.lam.copy(), "h": float(work.h[0]), "constraints": None}  # fmt: skip
        info = StepInfo(iterations=int(out[5]), h=float(out[7]), position_violation=float(out[6]))
        info.extra = {"newton_residual": float(out[8])}
        status = {vk.OK: "ok", vk.VIOLATION: "violation", vk.RECORD_FAILED: "record"}.get(code, "python")
        return Block(new, steps, rows[: int(out[3])], info, float(out[4]), status)

    def _block_diag(self, blocks: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n, self.n))
        out[self._block_rows, self._block_cols] = blocks
        return out

    @property
    def extra_diagnostics(self) -> tuple[str, ...]:
        return tuple(self.EXTRA_DIAGNOSTICS)

    # ------------------------------------------------------------------ coordinates

    def _v_to_u_rows(self, X: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Rows over velocity coordinates (k, nv) -> over u (k, nq): J_u = [J_r, 2 J_omega G(p) / |p|^2]."""
        if self.dim == 2:
            return X
        k = X.shape[0]
        Xb = X.reshape(k, self.nb, 6)
        scale = 2.0 / np.einsum("bi,bi->b", p, p)
        rot = np.einsum("rbj,bjk->rbk", Xb[:, :, 3:], g_matrix(p)) * scale[None, :, None]
        return np.concatenate((Xb[:, :, :3], rot), axis=2).reshape(k, self.n)

    def _quats(self, u: np.ndarray) -> np.ndarray:
        return u.reshape(self.nb, 7)[:, 3:]

    def _u_rate_to_v(self, u: np.ndarray, ud: np.ndarray) -> np.ndarray:
        """(r', p') -> (v, omega_body = 2 G(p) p' / |p|^2)."""
        if self.dim == 2:
            return ud
        ub = ud.reshape(self.nb, 7)
        p = self._quats(u)
        omega = 2.0 * np.einsum("bjk,bk->bj", g_matrix(p), ub[:, 3:]) / np.einsum("bi,bi->b", p, p)[:, None]
        return np.concatenate((ub[:, :3], omega), axis=1).reshape(-1)

    def _v_to_u_rate(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """(v, omega_body) -> (r', p' = 1/2 p (0, omega))."""
        return self.model.q_rate(u, v)

    # ------------------------------------------------------------------ the discrete Lagrangian

    def _kinetic(self, a: np.ndarray, b: np.ndarray, h: float, jacobian: bool):
        """Kinetic parts of D1 L_d, D2 L_d (n,) and dD1/db (n, n) (block diagonal)."""
        if self.dim == 2:
            M = np.stack([self.mass, self.mass, self.inertia[:, 0, 0]], axis=1).reshape(-1)
            t_ud = M * (b - a) / h
            dD1 = np.diag(-M / h) if jacobian else None
            return -t_ud, t_ud, dD1
        nb = self.nb
        A, B = a.reshape(nb, 7), b.reshape(nb, 7)
        rd = (B[:, :3] - A[:, :3]) / h
        pm = 0.5 * (A[:, 3:] + B[:, 3:])
        pd = (B[:, 3:] - A[:, 3:]) / h
        Gm, Gd = g_matrix(pm), g_matrix(pd)
        w = np.einsum("bjk,bk->bj", Gm, pd)
        Jw = np.einsum("bij,bj->bi", self.inertia, w)
        t_ud = np.concatenate((self.mass[:, None] * rd, 4.0 * np.einsum("bjk,bj->bk", Gm, Jw)), axis=1)
        t_u = np.concatenate((np.zeros((nb, 3)), -4.0 * np.einsum("bjk,bj->bk", Gd, Jw)), axis=1)
        D1 = (0.5 * h * t_u - t_ud).reshape(-1)
        D2 = (0.5 * h * t_u + t_ud).reshape(-1)
        dD1 = None
        if jacobian:
            JGm = self.inertia @ Gm
            JGd = self.inertia @ Gd
            GdT, GmT = Gd.transpose(0, 2, 1), Gm.transpose(0, 2, 1)
            rot = h * GdT @ JGd - 4.0 * b_matrix(Jw) - 2.0 * GdT @ JGm + 2.0 * GmT @ JGd - (4.0 / h) * GmT @ JGm
            blocks = np.zeros((nb, 7, 7))
            idx = np.arange(3)
            blocks[:, idx, idx] = -(self.mass / h)[:, None]
            blocks[:, 3:, 3:] = rot
            dD1 = self._block_diag(blocks)
        return D1, D2, dD1

    def _forces(self, a: np.ndarray, b: np.ndarray, h: float, t_mid: float) -> tuple[np.ndarray, np.ndarray]:
        """Applied forces at the midpoint in u coordinates: (total = conservative + non-conservative,
        non-conservative) (n,) each."""
        m = self.model
        if not self.forces_vary:  # gravity alone: constant, no rotational part
            if self._gravity_u is None:
                g = np.zeros((self.nb, 7 if self.dim == 3 else 3))
                g[:, : self.dim] = m.weight
                self._gravity_u = g.reshape(-1)
            return self._gravity_u, np.zeros(self.n)
        um, ud = 0.5 * (a + b), (b - a) / h
        v = self._u_rate_to_v(um, ud)
        f = applied_forces(m, self.data, m.frames(um, v), v, t_mid, with_potential=False)
        total = np.stack((f.conservative + f.nonconservative, f.nonconservative))
        if self.dim == 3:
            total = self._v_to_u_rows(total, self._quats(um))
        return total[0], total[1]

    def _constraints(self, u: np.ndarray, t: float, jacobian: bool = True):
        """C (m,), C_u (m, n) and C_t (m,): unit quaternions first, then the joints."""
        m = self.model
        C = np.zeros(self.m)
        Ct = np.zeros(self.m)
        Cu = np.zeros((self.m, self.n)) if jacobian else None
        if self.dim == 3:
            p = self._quats(u)
            C[: self.nb] = np.einsum("bi,bi->b", p, p) - 1.0
            if jacobian:
                Cu[self._quat_rows, self._quat_cols] = 2.0 * p.reshape(-1)
        if m.nc:
            cv = constraint_values(m, m.frames(u, np.zeros(m.nv)), t)
            C[self.nquat :] = cv.phi
            Ct[self.nquat :] = cv.phi_t
            if jacobian:
                J = cv.jacobian.toarray() if is_sparse(cv.jacobian) else np.asarray(cv.jacobian)
                p = self._quats(u) if self.dim == 3 else None
                Cu[self.nquat :] = self._v_to_u_rows(J, p)
        return C, Cu, Ct

    def _momentum_to_rate(self, u: np.ndarray, p: np.ndarray, Cu: np.ndarray, Ct: np.ndarray) -> np.ndarray:
        """Constrained inverse Legendre transform: u' with M(u) u' + C_u^T nu = p, C_u u' = -C_t."""
        if self.dim == 2:
            M = np.diag(np.stack([self.mass, self.mass, self.inertia[:, 0, 0]], axis=1).reshape(-1))
        else:
            G = g_matrix(self._quats(u))
            blocks = np.zeros((self.nb, 7, 7))
            idx = np.arange(3)
            blocks[:, idx, idx] = self.mass[:, None]
            blocks[:, 3:, 3:] = 4.0 * G.transpose(0, 2, 1) @ self.inertia @ G
            M = self._block_diag(blocks)
        K = np.zeros((self.n + self.m, self.n + self.m))
        K[: self.n, : self.n] = M
        K[: self.n, self.n :] = Cu.T
        K[self.n :, : self.n] = Cu
        rhs = np.concatenate((p, -Ct))
        try:
            sol = np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:  # redundant constraints: the least-squares velocity
            sol = np.linalg.lstsq(K, rhs, rcond=1e-13)[0]
        return sol[: self.n]

    def _legendre(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """p = dT/du' at (u, u'(v)), eq. (37)."""
        ud = self._v_to_u_rate(u, v)
        D1, D2, _ = self._kinetic(u - 0.5 * ud, u + 0.5 * ud, 1.0, False)
        return 0.5 * (D2 - D1)  # = T_ud at the node (T_u terms cancel)

    # ------------------------------------------------------------------ stepping

    def _start(self, state: State) -> dict:
        node = self._node
        if node is not None and node["t"] == state.t and np.array_equal(node["u"], state.q):
            return node
        ud = self._v_to_u_rate(state.q, state.v)
        return {"t": state.t, "u": state.q.copy(), "p": self._legendre(state.q, state.v), "rate": ud,
                "lam": np.zeros(self.m), "h": None, "constraints": None}  # fmt: skip

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        node = self._start(state)
        a, p_minus, t0, t1 = node["u"], node["p"], state.t, state.t + h
        if node.get("constraints") is None:
            node["constraints"] = self._constraints(a, t0)
        _, Ca, Ct_a = node["constraints"]
        b = a + h * node["rate"]  # predictor
        lam = node["lam"] * (h / node["h"] if node["h"] else 1.0)
        residual = np.inf
        K = np.zeros((self.n + self.m, self.n + self.m))
        K[: self.n, self.n :] = -Ca.T
        for iteration in range(1, self.max_iter + 1):  # noqa: B007 - the count is reported
            D1, D2, dD1 = self._kinetic(a, b, h, True)
            F_total, F_nc = self._forces(a, b, h, 0.5 * (t0 + t1))
            constraints_b = self._constraints(b, t1)
            Cb, Cu_b, _ = constraints_b
            R1 = D1 + 0.5 * h * F_total + p_minus - Ca.T @ lam
            # the momentum residual as the position error it would make, relative to max(1, |u|); the
            # constraints to a hundredth of that, so that the nodes meet them to round-off
            size = max(1.0, float(np.max(np.abs(b))))
            momentum = float(np.max(np.abs(h * R1 / self.mass_scale))) / size
            violation = float(np.max(np.abs(Cb), initial=0.0)) / size
            residual = max(momentum, 100.0 * violation)
            if residual <= self.tol:
                break
            K11 = dD1
            if self.forces_vary:
                K11 = K11 + 0.5 * h * self._force_jacobian(a, b, h, 0.5 * (t0 + t1), F_total)
            K[: self.n, : self.n] = K11
            K[self.n :, : self.n] = Cu_b
            try:
                delta = np.linalg.solve(K, -np.concatenate((R1, Cb)))
            except np.linalg.LinAlgError:
                raise SimulationError(
                    "the Newton matrix of the discrete Euler-Lagrange equations is singular "
                    "(redundant constraints or a singular position)",
                    t=t0,
                ) from None
            b = b + delta[: self.n]
            lam = lam + delta[self.n :]
        else:
            raise SimulationError(
                f"Newton's method on the discrete Euler-Lagrange equations did not converge in {self.max_iter} "
                f"iterations (residual {residual:.3g}, tol {self.tol:g})",
                t=t0,
            )
        p_plus = D2 + 0.5 * h * F_total
        # work: non-conservative forces (midpoint rule) and drives (impulse times node velocity)
        work = state.work + float(F_nc @ (b - a)) + float(lam[self.nquat :] @ Ct_a[self.nquat :])
        rate = self._momentum_to_rate(b, p_plus, constraints_b[1], constraints_b[2])
        new = State(t1, b, self._u_rate_to_v(b, rate), work)
        self._node = {"t": t1, "u": b, "p": p_plus, "rate": (b - a) / h, "lam": lam, "h": h,
                      "constraints": constraints_b}  # fmt: skip
        joints = Cb[self.nquat :]
        info = StepInfo(iterations=iteration, h=h, position_violation=float(np.max(np.abs(joints), initial=0.0)))
        info.extra = {"newton_residual": residual}
        return new, info, h

    def _force_jacobian(self, a, b, h, t_mid, F0) -> np.ndarray:
        """d F_total(u_m(b), u_d(b)) / db by forward differences (forces beside gravity only)."""
        out = np.empty((self.n, self.n))
        eps = 1e-7 * max(1.0, float(np.max(np.abs(b))))
        for k in range(self.n):
            bk = b.copy()
            bk[k] += eps
            out[:, k] = (self._forces(a, bk, h, t_mid)[0] - F0) / eps
        return out

    def evaluate(self, state: State) -> Evaluation:
        m = self.model
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
