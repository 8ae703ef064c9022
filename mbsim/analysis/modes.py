"""Linearisation of the constrained equations of motion about a state, and its modes.

Coordinates. mbsim's equations are ``M v_dot = Q(q, v, t) - J^T lambda`` in body coordinates
(mbsim.model.dynamics). About a state q0 the motions that keep the joints closed are those of a
basis N0 of the null space of J(q0), taken rank-robustly as the ``null_space`` method does
(mbsim.solvers.numerics.linalg.MinNorm: the SVD of J M^-1/2, singular values below ``rank_tol``
times the largest count as zero), so a redundant mechanism (a parallelogram with a third crank)
gets dof = nv - rank J, not nv - nc. N0 is M-orthonormal (N0^T M N0 = I): the independent
coordinates x are mass-normalised from the start.

Chart. ``q(x) = project(retract(q0, N0 x))``: the exponential-map step along N0, then the
mass-weighted Newton projection back onto Phi = 0 (mbsim.solvers.numerics.projection), so
dq/dx = N0 at x = 0. Along it the velocity basis is N(q) = P(q) N0, P(q) the M-orthogonal
projector onto the null space of J(q) (same rank as at q0): smooth, N(q0) = N0. Both the
projection and P use M^-1 J^T (J M^-1 J^T)^+ by the Schur complement's Cholesky (sparse LU for a
sparse model) where J has full row rank, by the SVD where it has not.

Reduced matrices (Lagrange's equations in x, linearised):

    M_r = N0^T M N0                                     (= I up to round-off)
    C_r = -N0^T dQ/dv N0                                (dampers, servos' kd, gyroscopic terms)
    K_r = -d/dx [ N(q(x))^T Q(q(x), N(q(x)) y0) ]       at x = 0, y0 = N0^T M v0

Differentiating the reduced force along the chart carries the geometric stiffness of the
reactions: at an equilibrium N0^T Q0 = 0, Q0 = J0^T lambda, and the derivative of N^T picks up
-(dJ N0)^T lambda. At a state at rest that is not an equilibrium (``force_residual`` =
|N0^T Q0| > 0) K_r depends on the chart (a frozen linearisation).

About a moving state (v0 != 0) the linearisation follows the reference motion instead
(:func:`_moving`): perturbations in world axes, or in a frame turning at Omega in which the
motion is steady (fitted to a = Omega x v and a_dot = Omega x a: a heavy top in steady
precession), the constrained accelerations (multipliers, convective and gyroscopic terms
included) differentiated along the tangent space of {Phi = 0, J v = 0}; exact for relative
equilibria (a sleeping top, Omega = 0: the Maxwell-Klein closed form to 1e-8; the precessing
top's nutation to 1e-8), the frozen linearisation of a time-varying system otherwise. At v0 = 0
it gives the same K_r as the chart (1e-12 at an equilibrium).

Derivatives. Central differences with one Richardson extrapolation, D = (4 D(h/2) - D(h)) / 3,
per reduced direction k with h_k = ``step`` / max|N0[:, k]| (so that no coordinate of q moves
by more than ``step``, 1e-4 m or rad): truncation error O(h^4) ~ 1e-16 and round-off about
eps |Q| / h ~ 1e-12 |Q|, relative to the force scale; the projection's residual (below 1e-14)
adds about 1e-10 at most. Measured: the UR5's eigenvalues of (K_r, M_r) match Pinocchio's CRBA and
gravity-torque derivative to 1e-11 relative (the test asks 1e-8).

Modes. The quadratic eigenproblem (lambda^2 M_r + lambda C_r + K_r) phi = 0: without damping
(C_r below 1e-12 of the scale) and with a symmetric K_r, the generalized symmetric eigenproblem
K_r phi = omega^2 M_r phi (lambda = i omega; omega^2 < 0 gives the real lambda = sqrt(-omega^2):
unstable); otherwise the first-order companion form [[0, I], [-K_r, -C_r]] vs diag(I, M_r)
(scipy.linalg.eig), one eigenvalue per mode: of a complex-conjugate pair the one with Im > 0, of
a rigid-body mode's two zeros one, of an unstable mode its positive one, of an overdamped mode
(two negative reals) the slower one, so that there are k = dof modes. |lambda|^2 below 1e-8 of
the largest |eig(M_r^-1 K_r)| counts as zero (the differences' noise would give a rigid-body mode
~1e-5 rad/s). Frequencies f = |Im lambda| / 2 pi, damping ratios -Re lambda / |lambda|
(0 for lambda = 0), sorted by frequency (then |lambda|). Shapes: N0 phi per body, translation of
the centre of mass (world) then rotation (world axes; planar: the angle), mass-normalised
(phi^H M_r phi = 1; a complex shape is turned so that its largest component is real, and its
real part kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbsim.model.constraints import constraint_values
from mbsim.model.data import new_data
from mbsim.model.dynamics import applied_forces, generalized_forces, update_coordinate_references
from mbsim.model.model import Model
from mbsim.model.sparse import is_sparse
from mbsim.model.spatial import skew
from mbsim.solvers.numerics.linalg import RankDeficient, Schur, inverse_sqrt_mass

STEP = 1e-4  # the largest change of a coordinate of q (m or rad) in the difference quotients
RANK_TOL = 1e-8  # singular values of J M^-1/2 below this times the largest count as zero
STEADY_TOL = 1e-6  # a motion with max |a - Omega x v| below this times max |a| is steady in a frame at Omega


@dataclass
class Linearization:
    """The constrained equations reduced to independent coordinates x (M-orthonormal) about a state.

    Attributes:
        q, v: (nq,), (nv,) the linearisation point (body coordinates); t: its time, s.
        basis: (nv, dof) N0, an M-orthonormal basis of the null space of J(q0): v = N0 x_dot.
        mass, damping, stiffness: (dof, dof) M_r, C_r, K_r (M_r = I up to round-off).
        rank: numerical rank of the constraint Jacobian; dof = nv - rank.
        force_residual: max |N0^T Q| at the point, N (or N m) per sqrt(kg): 0 at an equilibrium.
        force_scale: the residual's scale, the larger of sqrt(Q^T M^-1 Q) (|N0^T Q| <= it: N0 is
            M-orthonormal) and the weight's sqrt(sum m) |g| (Q itself is ~0 at the equilibrium of
            a free body held by forces, such as a ball resting on a compliant floor).
        model: the compiled model.
        frame_rate: (3,) Omega, rad/s (world): about a motion, the rate of the frame the
            perturbations are seen from (0: world axes; planar: about z only).
        steady_residual: about a motion, max |a - Omega x v| / max |a| of the reference (0: steady
            in that frame, the linearisation exact); 0 at rest.
    """

    q: np.ndarray
    v: np.ndarray
    t: float
    basis: np.ndarray
    mass: np.ndarray
    damping: np.ndarray
    stiffness: np.ndarray
    rank: int
    force_residual: float
    force_scale: float
    model: Model = field(repr=False)
    frame_rate: np.ndarray = field(default_factory=lambda: np.zeros(3))
    steady_residual: float = 0.0

    @property
    def steady(self) -> bool:
        """At rest, or moving steadily in the frame rotating at ``frame_rate`` (a relative
        equilibrium, to ``STEADY_TOL``): the linearisation is then time-invariant."""
        return self.steady_residual <= STEADY_TOL

    @property
    def dof(self) -> int:
        return self.basis.shape[1]

    @property
    def equilibrium(self) -> bool:
        """At rest with the reduced forces balanced to 1e-8 of their scale: K_r is then the unique
        tangent stiffness (elsewhere a frozen linearisation that depends on the coordinates)."""
        at_rest = float(np.max(np.abs(self.v), initial=0.0)) <= 1e-12
        return at_rest and self.force_residual <= 1e-8 * max(self.force_scale, 1e-300)

    def state_matrix(self) -> np.ndarray:
        """A (2 dof, 2 dof) of z_dot = A z, z = (x, x_dot)."""
        n = self.dof
        Minv = np.linalg.inv(self.mass)
        A = np.zeros((2 * n, 2 * n))
        A[:n, n:] = np.eye(n)
        A[n:, :n] = -Minv @ self.stiffness
        A[n:, n:] = -Minv @ self.damping
        return A


@dataclass
class Modes:
    """Eigenvalues and mode shapes, sorted by frequency (k = dof).

    Attributes:
        frequency_hz: (k,) |Im lambda| / 2 pi, Hz.
        damping_ratio: (k,) -Re lambda / |lambda| (0 for lambda = 0; negative: unstable).
        eigenvalue: (k, 2) lambda (real, imaginary), 1/s.
        coordinates: (k, dof) the shapes in the reduced coordinates x (mass-normalised).
        shape: (k, nbody, w) body displacement per mode: translation of the centre of mass (m),
            rotation (rad; world axes; planar: the angle), w = 6 (3D) or 3 (planar).
        body_names: names of the bodies of ``shape``.
    """

    frequency_hz: np.ndarray
    damping_ratio: np.ndarray
    eigenvalue: np.ndarray
    coordinates: np.ndarray
    shape: np.ndarray
    body_names: tuple[str, ...]


class _Forces:
    """Q(q, v) of one model at a time t, with the joint coordinates unwrapped about q0."""

    def __init__(self, model: Model, q0: np.ndarray, t: float) -> None:
        self.model, self.t = model, t
        self.data = new_data(model)
        update_coordinate_references(model, self.data, q0, t)

    def __call__(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        frames = self.model.frames(q, v)
        applied = applied_forces(self.model, self.data, frames, v, self.t, with_potential=False)
        return generalized_forces(self.model, self.data, frames, v, self.t, False, applied).q_force


def _jacobian(model: Model, q: np.ndarray, t: float) -> np.ndarray:
    J = constraint_values(model, model.frames(q, np.zeros(model.nv)), t).jacobian
    return J.toarray() if is_sparse(J) else np.asarray(J)


def _null_basis(model: Model, q: np.ndarray, t: float, rank_tol: float) -> tuple[np.ndarray, int]:
    """(V_n (nv, dof): orthonormal null space of J M^-1/2, the rank of J)."""
    if model.nc == 0:
        return np.eye(model.nv), 0
    s_vt = np.linalg.svd(_jacobian(model, q, t) @ inverse_sqrt_mass(model), full_matrices=True)
    s, Vt = s_vt[1], s_vt[2]
    rank = int(np.sum(s > rank_tol * s[0])) if len(s) and s[0] > 0 else 0
    return Vt[rank:].T, rank


def _corrector(model: Model, J, rank: int):
    """R -> M^-1 J^T (J M^-1 J^T)^+ R, for R (nc,) or (nc, k): by the Schur complement's Cholesky
    (sparse LU for a sparse model) where J has full row rank, else by the SVD of J M^-1/2 with the
    rank of the linearisation point (redundant joints)."""
    if rank == model.nc:
        try:
            schur = Schur(model, J, 1e-14)
            return lambda R: schur.minv_jt @ schur.solve(R)
        except RankDeficient:
            pass
    w = inverse_sqrt_mass(model)
    dense = J.toarray() if is_sparse(J) else np.asarray(J)
    U, s, Vt = np.linalg.svd(dense @ w, full_matrices=False)
    U, s, Vr = U[:, :rank], s[:rank], Vt[:rank].T

    def correct(R: np.ndarray) -> np.ndarray:
        coefficients = U.T @ R
        coefficients = coefficients / (s[:, None] if coefficients.ndim == 2 else s)
        return w @ (Vr @ coefficients)

    return correct


def _tangent_basis(model: Model, q: np.ndarray, t: float, N0: np.ndarray, rank: int) -> np.ndarray:
    """N(q) = P(q) N0 = N0 - M^-1 J^T (J M^-1 J^T)^+ J N0: N0 projected M-orthogonally onto the
    null space of J(q), whose rank is taken as at q0 (the chart stays near q0)."""
    if model.nc == 0:
        return N0
    J = constraint_values(model, model.frames(q, np.zeros(model.nv)), t).jacobian
    return N0 - _corrector(model, J, rank)(J @ N0)


def project(model: Model, q: np.ndarray, t: float, rank: int) -> np.ndarray:
    """q moved onto Phi(q, t) = 0 by mass-weighted Newton steps (pseudo-inverse of the given rank:
    redundant joints), until max |Phi| stops falling (round-off) or is below 1e-15."""
    zeros = np.zeros(model.nv)
    last = np.inf
    for _ in range(30):
        if model.nc == 0:
            break
        cv = constraint_values(model, model.frames(q, zeros), t)
        violation = float(np.max(np.abs(cv.phi)))
        # quadratic convergence ends at round-off: stop where a step gains less than half
        if violation <= 1e-15 or violation > 0.5 * last:
            break
        last = violation
        q = model.retract(q, -_corrector(model, cv.jacobian, rank)(cv.phi))
    return q


def _chart(model: Model, q0: np.ndarray, N0: np.ndarray, t: float, rank: int):
    """x -> q(x) = project(retract(q0, N0 x)) (mass-weighted Newton projection onto Phi = 0)."""

    def q_of(x: np.ndarray) -> np.ndarray:
        return project(model, model.retract(q0, N0 @ x), t, rank)

    return q_of


def _derivative(f, n: int, steps: np.ndarray) -> np.ndarray:
    """df/dx at x = 0, (m, n): central differences with one Richardson extrapolation."""
    columns = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = 1.0

        def central(h: float, e: np.ndarray = e) -> np.ndarray:
            return (f(h * e) - f(-h * e)) / (2 * h)

        h = steps[k]
        columns.append((4 * central(h / 2) - central(h)) / 3)
    if not columns:  # no direction: (rows of f, 0)
        return np.zeros((len(np.atleast_1d(f(np.zeros(0)))), 0))
    return np.array(columns).T


def _world_blocks(model: Model, q: np.ndarray) -> np.ndarray:
    """E (nv, nv): body velocities to world ones (translation unchanged, rotation R per body)."""
    E = np.eye(model.nv)
    if model.dimension == 3:
        rot = model.frames(q, np.zeros(model.nv)).rot[: model.nbody]
        for b in range(model.nbody):
            E[6 * b + 3 : 6 * b + 6, 6 * b + 3 : 6 * b + 6] = rot[b]
    return E


def _rotation_rows(model: Model, vw: np.ndarray) -> np.ndarray:
    """G with Omega x v = G Omega stacked over every world velocity block of vw (3D: translation
    and rotation; planar: the translation, Omega about z, the angle unaffected)."""
    width = 6 if model.dimension == 3 else 3
    rows = []
    for b in range(model.nbody):
        v_b = vw[width * b : width * b + width]
        if model.dimension == 3:  # Omega x v = -[v x] Omega
            rows += [-skew(v_b[:3]), -skew(v_b[3:])]
        else:  # Omega e_z x (vx, vy) = Omega (-vy, vx)
            rows.append(np.array([[0.0, 0.0, -v_b[1]], [0.0, 0.0, v_b[0]], [0.0, 0.0, 0.0]]))
    return np.vstack(rows)


@dataclass
class _Reference:
    """The reference motion's world velocities vw, accelerations aw and their rate jerk (nv,), and
    the sizes below which an acceleration and a jerk count as zero (1e-6 of the free
    accelerations M^-1 Q, and of those times the largest speed: the differences' noise is ~1e-12
    of them)."""

    vw: np.ndarray
    aw: np.ndarray
    jerk: np.ndarray
    accel_floor: float
    jerk_floor: float


def _relative(error: np.ndarray, floor: float, *scales: np.ndarray) -> float:
    """max |error| over the largest of max |scale| and floor (0 / 0 = 0)."""
    top = max([floor] + [float(np.max(np.abs(x), initial=0.0)) for x in scales])
    size = float(np.max(np.abs(error), initial=0.0))
    return size / top if top > 0.0 else (0.0 if size == 0.0 else 1.0)


def _steady_residual(model: Model, ref: _Reference, rate: np.ndarray) -> float:
    """How far the motion is from steady in the frame rotating at Omega: in such a motion every
    world block turns with the frame, a = Omega x v and a_dot = Omega x a. The larger of the two
    relative misfits (0: steady). The second is what tells a relative equilibrium from a state
    whose accelerations happen to fit a frame for an instant (a top released off its precession)."""
    first = _relative(_rotation_rows(model, ref.vw) @ rate - ref.aw, ref.accel_floor, ref.aw)
    turned = _rotation_rows(model, ref.aw) @ rate
    return max(first, _relative(turned - ref.jerk, ref.jerk_floor, ref.jerk, turned))


def _frame_rate(model: Model, ref: _Reference) -> tuple[np.ndarray, float]:
    """(Omega (3,), residual): the rate of the frame in which the motion is steady, the least
    squares fit of a = Omega x v, and its :func:`_steady_residual`. Without acceleration (none
    above 1e-6 of its floor) Omega = 0: steady in world axes. A fit that is not unique (the velocities leave a
    direction of Omega free, e.g. one rotating body and no translation) is refused: (0, 1)."""
    rate = np.zeros(3)
    if float(np.max(np.abs(ref.aw), initial=0.0)) > STEADY_TOL * ref.accel_floor:
        G = _rotation_rows(model, ref.vw)
        columns = [0, 1, 2] if model.dimension == 3 else [2]
        sing = np.linalg.svd(G[:, columns], compute_uv=False)
        if sing[-1] <= 1e-8 * sing[0]:
            return rate, 1.0
        rate[columns] = np.linalg.lstsq(G[:, columns], ref.aw, rcond=None)[0]
    return rate, _steady_residual(model, ref, rate)


def _moving(
    model: Model, q0, v0, t: float, N0, rank: int, forces: _Forces, steps, frame_rate
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(C_r, K_r, Omega, residual) about a moving state, linearised along its trajectory in a frame
    rotating at Omega (world, rad/s).

    Perturbations of the state relative to the reference motion, seen from that frame: positions
    phi (translation, rotation vector in world axes: q = retract_world(q_ref(t), phi), turned back
    by the frame's rotation), velocities w (world translational and angular velocities minus the
    reference's, turned alike). Along the reference phi_dot = w + W phi, W = [(omega_ref - Omega) x]
    on each rotation and -[Omega x] on each translation (phi_dot = w + omega x phi - Omega x phi),
    and w_dot = the derivative of the world accelerations a_w(q, v_w) of the constrained equations
    (multipliers included: the convective and reaction terms) minus [Omega x] w. The tangent space
    of {Phi = 0, J v = 0} is spanned by T = [[N_w, 0], [D, N_w]], N_w = E N0 and D the M-smallest
    velocity correction keeping J v = 0 to first order; A_r = T^+ A T, and with A_r's top right
    block I (N0 is M-orthonormal) x_ddot = (A11 + A22) x_dot + (A21 - A22 A11) x gives C_r, K_r.

    Omega: ``frame_rate`` if given, else fitted to a_w = Omega x v_w (:func:`_frame_rate`; 0 for a
    motion steady in world axes). Exact when the reference is steady in that frame (a relative
    equilibrium: a sleeping top with Omega = 0, a heavy top in steady precession with Omega its
    precession) and the forces are invariant under the frame's rotation (gravity along Omega,
    joints to the ground on its axis); the frozen linearisation of a time-varying system otherwise.
    """
    nv, dof = model.nv, N0.shape[1]
    E0 = _world_blocks(model, q0)
    vw0 = E0 @ v0
    Nw = E0 @ N0
    M = model.mass_matrix
    P = N0.T @ (M @ E0.T)  # world increments -> reduced coordinates (N_w^T M_w)

    def state_at(phi: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = model.retract(q0, E0.T @ phi)  # exp(phi) R_ref = R_ref exp(R_ref^T phi)
        return q, _world_blocks(model, q).T @ (vw0 + w)

    def acceleration(q: np.ndarray, v: np.ndarray) -> np.ndarray:
        Q = forces(q, v)
        cv = constraint_values(model, model.frames(q, v), t)
        minv_q = model.inv_mass_matrix @ Q
        return minv_q - _corrector(model, cv.jacobian, rank)(cv.jacobian @ minv_q - cv.gamma) if model.nc else minv_q

    def world_acceleration(phi: np.ndarray, w: np.ndarray) -> np.ndarray:
        q, v = state_at(phi, w)
        return _world_blocks(model, q) @ acceleration(q, v)

    def along_motion(s: float) -> np.ndarray:  # the world accelerations s seconds along the reference
        q = model.retract(q0, s * v0 + 0.5 * s * s * accel0)
        v = v0 + s * accel0
        return _world_blocks(model, q) @ acceleration(q, v)

    def velocity_residual(phi: np.ndarray) -> np.ndarray:
        q, v = state_at(phi, np.zeros(nv))
        return constraint_values(model, model.frames(q, v), t).jacobian @ v

    accel0 = acceleration(q0, v0)
    aw0 = E0 @ accel0
    # a_dot along the reference, central differences with one Richardson step; no coordinate moves more than STEP
    h = STEP / float(np.max(np.abs(v0)))
    jerk = _derivative(lambda s: along_motion(float(s[0])), 1, np.array([h]))[:, 0]
    free = float(np.max(np.abs(E0 @ (model.inv_mass_matrix @ forces(q0, v0)))))
    floor = 1e-6 * max(free, float(np.max(np.abs(aw0))))
    ref = _Reference(vw0, aw0, jerk, floor, floor * float(np.max(np.abs(v0))))
    if frame_rate is None:
        rate, residual = _frame_rate(model, ref)
        if residual > STEADY_TOL:  # steady in no rotating frame: the frozen linearisation in world axes
            rate = np.zeros(3)
            residual = _steady_residual(model, ref, rate)
    else:
        rate = np.zeros(3)
        rate[:] = frame_rate
        if model.dimension == 2:  # a planar frame turns about z
            rate[:2] = 0.0
        residual = _steady_residual(model, ref, rate)
    # W (position increments) and V (velocity increments) of the frame's rotation, per world block
    W = np.zeros((nv, nv))
    V = np.zeros((nv, nv))
    spin = skew(rate)
    if model.dimension == 3:
        for b in range(model.nbody):
            W[6 * b : 6 * b + 3, 6 * b : 6 * b + 3] = -spin
            W[6 * b + 3 : 6 * b + 6, 6 * b + 3 : 6 * b + 6] = skew(vw0[6 * b + 3 : 6 * b + 6]) - spin
            V[6 * b : 6 * b + 3, 6 * b : 6 * b + 3] = spin
            V[6 * b + 3 : 6 * b + 6, 6 * b + 3 : 6 * b + 6] = spin
    else:
        for b in range(model.nbody):
            W[3 * b : 3 * b + 2, 3 * b : 3 * b + 2] = -spin[:2, :2]
            V[3 * b : 3 * b + 2, 3 * b : 3 * b + 2] = spin[:2, :2]

    # D: the velocity change that keeps J v = 0 when the positions move along N_w (M-smallest)
    if model.nc:
        H = _derivative(lambda x: velocity_residual(Nw @ x), dof, steps)
        J0 = constraint_values(model, model.frames(q0, v0), t).jacobian
        D = -E0 @ _corrector(model, J0, rank)(H)
    else:
        D = np.zeros((nv, dof))
    # A applied to T's columns: (phi_dot, w_dot) along each tangent direction
    A_pos = _derivative(lambda x: world_acceleration(Nw @ x, D @ x), dof, steps) - V @ D
    A_vel = _derivative(lambda y: world_acceleration(np.zeros(nv), Nw @ y), dof, steps) - V @ Nw
    A11 = P @ (D + W @ Nw)
    A12 = P @ Nw
    A21 = P @ (A_pos - D @ A11)
    A22 = P @ (A_vel - D @ A12)
    # with A12 = I: x_ddot = (A11 + A22) x_dot + (A21 - A22 A11) x
    A12_inv = np.linalg.inv(A12)
    C = -(A11 + A12 @ A22 @ A12_inv)
    K = -(A12 @ A21 - A12 @ A22 @ A12_inv @ A11)
    return C, K, rate, residual


def linearize(
    model: Model,
    q: np.ndarray,
    v: np.ndarray | None = None,
    t: float = 0.0,
    rank_tol: float = RANK_TOL,
    step: float = STEP,
    frame_rate: np.ndarray | None = None,
) -> Linearization:
    """The constrained equations of motion about (q, v, t), reduced to independent coordinates.

    Args:
        model: a compiled (and assembled) model (mbsim.simulate.prepare).
        q: (nq,) body coordinates; projected onto the joints first if they are open.
        v: (nv,) velocities (default 0); their part across the joints is dropped.
        t: time, s (time-dependent forces and drives are frozen at t).
        rank_tol: relative cut of the singular values of J M^-1/2 (redundant constraints).
        step: the largest coordinate change of the difference quotients, m or rad.
        frame_rate: (3,) rad/s, world: about a motion, the rate of the frame in which it is steady
            (a heavy top's precession); None fits it to the state's accelerations (:func:`_moving`).

    Returns:
        M_r, C_r, K_r and the basis (see the module docstring); dof = nv - rank J.
    """
    q0 = np.array(q, dtype=float)
    if model.nc:  # onto the joints, with the rank of the point given
        q0 = project(model, q0, t, _null_basis(model, q0, t, rank_tol)[1])
    Vn0, rank = _null_basis(model, q0, t, rank_tol)
    w = inverse_sqrt_mass(model)
    N0 = w @ Vn0
    dof = N0.shape[1]
    M = model.mass_matrix  # dense or sparse: only products with it
    v_in = np.zeros(model.nv) if v is None else np.asarray(v, dtype=float)
    y0 = N0.T @ (M @ v_in)
    v0 = N0 @ y0
    forces = _Forces(model, q0, t)
    Q0 = forces(q0, v0)
    # per reduced direction: no coordinate of q moves by more than `step`
    scale = np.max(np.abs(N0), axis=0) if dof else np.ones(0)
    steps = step / np.maximum(scale, 1e-300)
    q_of = _chart(model, q0, N0, t, rank)

    def reduced_force(x: np.ndarray) -> np.ndarray:
        qx = q_of(x)
        N = _tangent_basis(model, qx, t, N0, rank)
        return N.T @ forces(qx, N @ y0)

    def velocity_force(y: np.ndarray) -> np.ndarray:
        return N0.T @ forces(q0, v0 + N0 @ y)

    rate, residual = np.zeros(3), 0.0
    if float(np.max(np.abs(v0), initial=0.0)) > 0.0:  # about a motion: along the trajectory
        C, K, rate, residual = _moving(model, q0, v0, t, N0, rank, forces, steps, frame_rate)
    else:
        K = -_derivative(reduced_force, dof, steps)
        # velocities: forces linear in v (dampers) are exact; gyroscopic terms quadratic: h of 1e-4 m/s
        C = -_derivative(velocity_force, dof, steps)
    return Linearization(
        q=q0,
        v=v0,
        t=t,
        basis=N0,
        mass=N0.T @ (M @ N0),
        damping=C,
        stiffness=K,
        rank=rank,
        force_residual=float(np.max(np.abs(N0.T @ Q0))) if dof else 0.0,
        force_scale=max(
            float(np.sqrt(Q0 @ (w @ (w @ Q0)))),
            float(np.sqrt(np.sum(model.body_mass)) * np.linalg.norm(model.gravity)),
        ),
        model=model,
        frame_rate=rate,
        steady_residual=residual,
    )


def _eigen(lin: Linearization) -> tuple[np.ndarray, np.ndarray]:
    """(lambda (k,) complex, phi (dof, k) complex): one eigenvalue per mode."""
    import scipy.linalg

    Mr, Cr, Kr = lin.mass, lin.damping, lin.stiffness
    n = lin.dof
    if n == 0:
        return np.zeros(0, dtype=complex), np.zeros((0, 0), dtype=complex)
    # |lambda|^2 below 1e-8 of the largest |eig(M^-1 K)|: a rigid-body mode (the differences' noise)
    spread = float(np.max(np.abs(np.linalg.eigvals(np.linalg.solve(Mr, Kr)))))
    zero = 1e-8 * spread if spread > 0 else 0.0
    kscale = max(float(np.max(np.abs(Kr))), float(np.max(np.abs(Mr))))
    undamped = float(np.max(np.abs(Cr))) <= 1e-12 * kscale
    symmetric = float(np.max(np.abs(Kr - Kr.T))) <= 1e-6 * max(float(np.max(np.abs(Kr))), 1e-300)
    if undamped and symmetric:
        # the symmetric generalized eigenproblem: real shapes, exact zero modes
        omega2, phi = scipy.linalg.eigh(0.5 * (Kr + Kr.T), 0.5 * (Mr + Mr.T))
        omega2[np.abs(omega2) <= zero] = 0.0
        lam = np.where(omega2 >= 0, 1j * np.sqrt(np.abs(omega2)), np.sqrt(np.abs(omega2)) + 0j)
        return lam, phi.astype(complex)
    # first-order companion form: [[0, I], [-K, -C]] z = lambda diag(I, M) z, z = (phi, lambda phi)
    A = np.block([[np.zeros((n, n)), np.eye(n)], [-Kr, -Cr]])
    B = np.block([[np.eye(n), np.zeros((n, n))], [np.zeros((n, n)), Mr]])
    values, vectors = scipy.linalg.eig(A, B)
    values[np.abs(values) ** 2 <= zero] = 0.0
    size = np.abs(values)
    oscillating = np.flatnonzero(values.imag > 1e-9 * size)
    real = np.flatnonzero(np.abs(values.imag) <= 1e-9 * size)
    # a rigid-body mode has two zero eigenvalues, an unstable one a positive one, an overdamped
    # one two negative: zeros by pairs, then the positive ones, then the slowest negative ones
    zeros = real[values[real].real == 0.0]
    rest = real[values[real].real != 0.0]
    rest = rest[np.lexsort((np.abs(values[rest].real), values[rest].real < 0))]
    zeros = zeros[: (len(zeros) + 1) // 2]
    pick = np.concatenate([oscillating, zeros, rest])[:n]
    lam = values[pick]
    real_picked = np.isin(pick, real)
    lam[real_picked] = lam[real_picked].real
    return lam, vectors[:n, pick]


def modes(lin: Linearization) -> Modes:
    """The modes of a linearisation: frequencies, damping ratios, eigenvalues and shapes (k = dof)."""
    model = lin.model
    lam, phi = _eigen(lin)
    magnitude = np.abs(lam)
    order = np.lexsort((magnitude, np.round(np.abs(lam.imag), 12)))
    lam, phi = lam[order], phi[:, order]
    # mass-normalised, the largest component real
    for k in range(phi.shape[1]):
        p = phi[:, k]
        big = p[np.argmax(np.abs(p))]
        p = p * (np.conj(big) / abs(big)) if abs(big) > 0 else p
        norm = np.sqrt(abs(np.vdot(p, lin.mass @ p)))
        phi[:, k] = p / norm if norm > 0 else p
    coordinates = phi.real.T.copy()
    nb, w = model.nbody, model.body_width
    body = (lin.basis @ coordinates.T).T.reshape(-1, nb, w)
    if model.dimension == 3:  # body-axes rotations to world axes
        rot = model.frames(lin.q, np.zeros(model.nv)).rot[:nb]
        body[:, :, 3:] = np.einsum("bij,kbj->kbi", rot, body[:, :, 3:])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(magnitude[order] > 0, -lam.real / np.maximum(magnitude[order], 1e-300), 0.0) + 0.0
    return Modes(
        frequency_hz=np.abs(lam.imag) / (2 * np.pi),
        damping_ratio=ratio,
        eigenvalue=np.stack([lam.real, lam.imag], axis=1) if len(lam) else np.zeros((0, 2)),
        coordinates=coordinates,
        shape=body,
        body_names=tuple(model.body_names),
    )


@dataclass
class StateSpace:
    """z_dot = A z + B u, y = C z + D u about the linearisation point.

    z = (x, x_dot) (2 dof): the reduced coordinates of the Linearization and their rates (body
    motion N0 x); u (nu,): increments of the actuators' forces f (N or N m, before forcerange),
    in the order of the scene; y (ny,): increments of the scene's outputs (CONTRACT §8).

    Attributes:
        A (2 dof, 2 dof), B (2 dof, nu), C (ny, 2 dof), D (ny, nu); states, inputs, outputs: names.
    """

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    states: list[str]
    inputs: list[str]
    outputs: list[str]


def _coordinate_jacobian(model: Model, q: np.ndarray, t: float, forces: _Forces) -> np.ndarray:
    """(ncoord, nv): the joint coordinates' Jacobian in body coordinates."""
    table = model.joint_coordinates[0]
    frames = model.frames(q, np.zeros(model.nv))
    _, blocks = table.values(model, frames, t, forces.data.coordinate_reference[0])
    nb, w = model.nbody, model.body_width
    out = np.zeros((table.ncoord, model.nv))
    for bi, bj, row, nrow in zip(table.item_bi, table.item_bj, table.item_row, table.item_nrow, strict=True):
        rows = slice(row, row + nrow)
        for k, body in enumerate((bi, bj)):
            if body < nb:  # the ground carries no coordinates
                out[rows, body * w : (body + 1) * w] += blocks[rows, k * w : (k + 1) * w]
    return out


def state_space(lin: Linearization, step: float = STEP) -> StateSpace:
    """A, B, C, D with the actuators as inputs and the scene's outputs as outputs (see StateSpace)."""
    from mbsim.model import step_kernels
    from mbsim.model.flat import rows_form

    model, n = lin.model, lin.dof
    N0 = lin.basis
    Minv = np.linalg.inv(lin.mass)
    forces = _Forces(model, lin.q, lin.t)
    nu = len(model.actuators)
    B = np.zeros((2 * n, nu))
    if nu:
        form = rows_form(model)
        Jc = _coordinate_jacobian(model, lin.q, lin.t, forces)
        # generalized force of a unit actuator force: gear times the coordinate's Jacobian row (virtual work)
        directions = Jc[np.asarray(form.flat.act_row)].T * np.asarray(form.flat.act_gear)
        B[n:] = Minv @ (N0.T @ directions)
    names = [name for name, _ in model.outputs]
    C = np.zeros((len(names), 2 * n))
    if names:
        form = rows_form(model)
        # the chart of linearize: q(x), v = N(q(x)) (y0 + x_dot)
        q_of = _chart(model, lin.q, N0, lin.t, lin.rank)
        y0 = N0.T @ (model.mass_matrix @ lin.v)

        def outputs(z: np.ndarray) -> np.ndarray:
            qx = q_of(z[:n])
            N = _tangent_basis(model, qx, lin.t, N0, lin.rank)
            forces(qx, N @ (y0 + z[n:]))  # the outputs read the state the force evaluation left
            return np.array(step_kernels.output_values(form.flat, form.data, lin.t), dtype=float)

        scale = np.max(np.abs(N0), axis=0) if n else np.ones(0)
        steps = step / np.maximum(scale, 1e-300)
        C = _derivative(outputs, 2 * n, np.concatenate([steps, steps]))
    states = [f"x{k + 1}" for k in range(n)] + [f"x{k + 1}_dot" for k in range(n)]
    return StateSpace(
        A=lin.state_matrix(),
        B=B,
        C=C,
        D=np.zeros((len(names), nu)),
        states=states,
        inputs=[a.name for a in model.actuators],
        outputs=names,
    )
