"""Static equilibrium of a constrained mechanism: :func:`solve_equilibrium`.

Sought: a position q with Phi(q, 0) = 0 at which, at rest (v = 0, t = 0), the applied
generalized forces Q(q) -- gravity, force elements, joint springs, the actuators' forces at
t = 0 and loads, as mbsim.model.dynamics.applied_forces computes them -- are balanced by the
joints' reactions: Q - J^T lambda = 0. Drives hold their coordinates at their t = 0 values.

Minimal coordinates. At a point q of the manifold, with J_hat = J M^-1/2 = U S V^T and the
singular values below ``rank_tol`` times the largest counted as zero (the null_space method's
rank-robust basis, mbsim.solvers.numerics.linalg.MinNorm), the columns of H = M^-1/2 V_n span
the motions the joints allow, mass-normalised (H^T M H = I). About q, the coordinates z map to
q(z) = P(retract(q, H z)), with P the mass-weighted projection back onto the manifold that
the initial assembly uses (mbsim.solvers.numerics.projection.project_positions).

Reduced force. u = Q - J^T lambda, lambda the minimum-norm solution of J M^-1 J^T lambda =
J M^-1 Q, is the force the reactions leave unbalanced, u = M^1/2 V_n V_n^T M^-1/2 Q (M times
the acceleration from rest), zero exactly at an equilibrium whatever the rank of J;
``residual`` = max |u| (N, N m). The reduced force about q is r(z) = H^T u(q(z)) =
V_n^T V_n(z) V_n(z)^T M^-1/2 Q(q(z)), and |r(0)| = |V_n^T M^-1/2 Q| is the same for every
basis of the null space: the line search's measure.

Newton. K dz = r(0) with the reduced stiffness K = -dr/dz; a backtracking line search halves
the step until |r| falls (Armijo, 1e-4). Singular values of K below its difference error
count as zero. Where r has no part in K's range (a pendulum started level: K = 0 there) or
no Newton step lowers |r|, the step goes along r instead -- the potential's steepest descent,
a body moving by 0.25 rad or 0.25 L at first, halved as needed; when that cannot lower |r|
either (a free body under gravity: r does not change with z) there is no equilibrium, and the
reason says why.

Stiffness by central differences, K[:, j] = -(r(h_j e_j) - r(-h_j e_j)) / (2 h_j), h_j
moving the mechanism by at most 1e-5 rad or 1e-5 L (L its size: the largest distance of a
joint point from its body's centre, or between the centres): truncation O(h^2), round-off
O(eps |Q| / h); both are estimated by Richardson's comparison with steps 2 h_j,
``stiffness_error`` = max |K_2h - K_h| / 3. At an equilibrium K is the Hessian of the potential
in z (symmetric for conservative loads, the reactions' geometric stiffness
-H^T (d J^T / dz) lambda included), and, z being mass-normalised, its eigenvalues are the
squared angular frequencies of the small oscillations about it (s^-2). ``stable``: the
symmetric part of K is positive definite, its smallest eigenvalue above ten times the
difference error (a negative one: the potential has no minimum there; about zero: neutral).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbsim import interrupts
from mbsim.errors import SimulationError
from mbsim.model.constraints import constraint_values
from mbsim.model.data import new_data
from mbsim.model.dynamics import applied_forces, update_coordinate_references
from mbsim.model.model import Model
from mbsim.solvers.numerics.linalg import MinNorm
from mbsim.solvers.numerics.projection import project_positions

STEP = 1e-5  # the differences' step: rad, or a fraction of the mechanism's size
ARMIJO = 1e-4  # sufficient decrease of |r| per unit of the Newton step
HALVINGS = 30  # line-search halvings at most
ROUNDOFF = 1e-13  # a residual this small relative to max |Q| is Q's round-off: converged whatever tol
DESCENT = 0.25  # the first step along the unbalanced force: rad, or a fraction of the size
PROJECTION_TOL = 1e-13  # max |Phi| the projection iterates to (m, rad)
PROJECTION_ACCEPT = 1e-10  # max |Phi| of a point the search accepts


@dataclass
class Equilibrium:
    """The outcome of :func:`solve_equilibrium`.

    Attributes:
        q: (nq,) the model's body coordinates at the equilibrium (the last iterate when none).
        residual: max |Q - J^T lambda| there, N and N m: the force the reactions leave unbalanced.
        iterations: steps taken (Newton, or along the unbalanced force where Newton has none).
        stable: the reduced stiffness is positive definite (a minimum of the potential).
        reason: why no equilibrium was found; "" when one was.
        stiffness: (f, f) reduced stiffness K in the mass-normalised coordinates of ``basis``, s^-2.
        stiffness_error: estimated error of its entries (central differences), s^-2.
        smallest_eigenvalue: of K's symmetric part, s^-2 (NaN for a mechanism that cannot move).
        basis: (nv, f) H, the motions the joints allow (H^T M H = I).
    """

    q: np.ndarray
    residual: float
    iterations: int
    stable: bool
    reason: str = ""
    stiffness: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    stiffness_error: float = 0.0
    smallest_eigenvalue: float = float("nan")
    basis: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    @property
    def converged(self) -> bool:
        return not self.reason


class _Point:
    """The quantities at one point q of the manifold: Q, the null-space basis, r and u."""

    def __init__(self, problem: _Problem, q: np.ndarray) -> None:
        model = problem.model
        self.q = q
        zeros = np.zeros(model.nv)
        frames = model.frames(q, zeros)
        forces = applied_forces(model, problem.data, frames, zeros, 0.0, with_potential=False)
        self.force = forces.conservative + forces.nonconservative
        jacobian = constraint_values(model, frames, 0.0).jacobian if model.nc else np.zeros((0, model.nv))
        mn = MinNorm(model, jacobian, problem.rank_tol)
        self.null = mn.null  # V_n (nv, f), scaled coordinates
        self.scaled_force = mn.w @ self.force  # M^-1/2 Q
        self.reduced = self.null.T @ self.scaled_force  # r = H^T Q
        unbalanced = self.force - jacobian.T @ mn.multipliers(self.scaled_force) if mn.rank else self.force
        self.residual = float(np.max(np.abs(unbalanced))) if len(unbalanced) else 0.0
        self.basis = mn.w @ self.null  # H = M^-1/2 V_n


class _Problem:
    def __init__(self, model: Model, rank_tol: float) -> None:
        self.model = model
        self.rank_tol = rank_tol
        self.data = new_data(model)  # the joint coordinates' unwrapping references, contact counters
        self.size = _size(model)

    def project(self, q: np.ndarray) -> np.ndarray | None:
        """q projected onto Phi(q, 0) = 0, or None when the projection does not get there."""
        if self.model.nc == 0:
            return q
        try:
            q, _, violation, _ = project_positions(
                self.model, q, 0.0, iterations=50, tol=PROJECTION_TOL, rank_tol=1e-10, robust=True
            )
        except SimulationError:
            return None
        return q if violation <= PROJECTION_ACCEPT and np.all(np.isfinite(q)) else None

    def move(self, point: _Point, dz: np.ndarray) -> np.ndarray | None:
        """q(dz) about ``point``: along H dz, then back onto the manifold."""
        return self.project(self.model.retract(point.q, point.basis @ dz))

    def steps(self, point: _Point) -> np.ndarray:
        """h_j per coordinate: H e_j h_j moves a body by at most STEP rad or STEP times the size."""
        model = self.model
        d, w = model.dimension, model.body_width
        columns = np.abs(point.basis).reshape(model.nbody, w, -1)
        motion = np.maximum(columns[:, :d].max(axis=(0, 1)) / self.size, columns[:, d:].max(axis=(0, 1)))
        return STEP / np.maximum(motion, 1e-300)

    def along_force(self, point: _Point) -> np.ndarray:
        """dz along r (minus the potential's gradient in z), moving a body by at most DESCENT rad
        or DESCENT times the size."""
        motion = np.abs(point.basis @ point.reduced).reshape(self.model.nbody, self.model.body_width)
        d = self.model.dimension
        largest = max(float(motion[:, :d].max()) / self.size, float(motion[:, d:].max()), 1e-300)
        return point.reduced * (DESCENT / largest)

    def stiffness(self, point: _Point) -> tuple[np.ndarray, float]:
        """K = -dr/dz by central differences at steps h and 2 h, and the error estimate."""
        h = self.steps(point)
        f = len(h)
        out = []
        for scale in (1.0, 2.0):
            K = np.zeros((f, f))
            for j in range(f):
                sides = []
                for sign in (1.0, -1.0):
                    dz = np.zeros(f)
                    dz[j] = sign * scale * h[j]
                    q = self.move(point, dz)
                    if q is None:
                        raise _Failed("the projection onto the joints failed within a difference step")
                    other = _Point(self, q)
                    sides.append(point.null.T @ (other.null @ (other.null.T @ other.scaled_force)))
                K[:, j] = -(sides[0] - sides[1]) / (2 * scale * h[j])
            out.append(K)
        return out[0], float(np.max(np.abs(out[1] - out[0]))) / 3.0 if f else 0.0


class _Failed(Exception):
    pass


def _size(model: Model) -> float:
    """The mechanism's length scale, m: its largest joint-point distance from a body's centre, or
    between the bodies' centres (at least 1 mm)."""
    size = 1e-3
    for joint in model.joints:
        size = max(size, float(np.linalg.norm(joint.point2_local)))
    centres = model.q0.reshape(model.nbody, model.body_qwidth)[:, : model.dimension]
    if model.nbody > 1:
        size = max(size, float(np.max(np.ptp(centres, axis=0))))
    return size


def require_equilibrium(model: Model, asked_by: str) -> Equilibrium:
    """:func:`solve_equilibrium` where a caller cannot go on without one (``initial:
    equilibrium``, ``--at equilibrium``, the API's ``modes("equilibrium")``).

    Raises:
        SimulationError: (exit 3) there is none, or Newton did not find it: the reason, and
            ``asked_by`` (what asked for it).
    """
    found = solve_equilibrium(model)
    if not found.converged:
        raise SimulationError(f"no static equilibrium found ({asked_by}): {found.reason}")
    return found


def solve_equilibrium(
    model: Model,
    q0: np.ndarray | None = None,
    tol: float = 1e-10,
    max_iterations: int = 100,
    rank_tol: float = 1e-8,
) -> Equilibrium:
    """The static equilibrium of ``model`` near ``q0`` (default its assembled start): Newton on
    the constraint manifold in the minimal coordinates of the null space (see the module's notes).

    Args:
        model: a compiled, assembled model (mbsim.simulate.prepare); it is not written.
        q0: (nq,) start, body coordinates; projected onto the joints first.
        tol: the residual to reach, max |Q - J^T lambda|, N and N m (or 1e-13 max |Q|, the forces'
            round-off, when that is larger).
        max_iterations: Newton steps at most.
        rank_tol: singular values of J M^-1/2 below this times the largest count as zero.

    Returns:
        The Equilibrium; ``reason`` non-empty (and ``converged`` False) when none was found.
    """
    problem = _Problem(model, rank_tol)
    start = np.array(model.q0 if q0 is None else q0, dtype=float)
    q = problem.project(model.normalize(start))
    if q is None:
        return Equilibrium(start, float("nan"), 0, False, "the start cannot be projected onto the joints")
    update_coordinate_references(model, problem.data, q, 0.0)
    point = _Point(problem, q)
    iterations = 0
    try:
        while point.residual > max(tol, ROUNDOFF * float(np.max(np.abs(point.force), initial=0.0))):
            interrupts.check()
            if iterations >= max_iterations:
                raise _Failed(
                    f"Newton did not converge in {max_iterations} iterations (the unbalanced force is still "
                    f"{point.residual:.3g} N or N m, tolerance {tol:g})"
                )
            K, error = problem.stiffness(point)
            try:
                point = _line_search(problem, point, _newton_step(K, error, point))
            except _Failed as newton:
                # K singular along r (a pendulum started level) or no Newton step that helps: the
                # potential's steepest descent, along the unbalanced force; a free body finds none
                try:
                    point = _line_search(problem, point, problem.along_force(point))
                except _Failed:
                    raise newton from None
            update_coordinate_references(model, problem.data, point.q, 0.0)
            iterations += 1
        K, error = problem.stiffness(point)
    except _Failed as exc:
        reason = str(exc)
        rigid = [c.name for c in model.contacts if c.values.get("enabled", True) and c.values.get("type") == "rigid"]
        if rigid:  # the LCP methods' contacts are no forces of the model: nothing here stands on them
            reason += f" (rigid contacts, here {', '.join(rigid[:3])}, hold nothing in a static equilibrium)"
        return Equilibrium(point.q, point.residual, iterations, False, reason, basis=point.basis)
    if len(K):
        smallest = float(np.linalg.eigvalsh(0.5 * (K + K.T))[0])
        stable = smallest > max(10.0 * error, 1e-12 * float(np.max(np.abs(K))))
    else:  # a mechanism that cannot move is held where it is
        smallest, stable = float("nan"), True
    return Equilibrium(point.q, point.residual, iterations, bool(stable), "", K, error, smallest, point.basis)


def _newton_step(K: np.ndarray, error: float, point: _Point) -> np.ndarray:
    """dz with K dz = r in the least-squares sense, K's singular values below its difference
    error cut; no equilibrium when r has no part in K's range."""
    r = point.reduced
    U, s, Vt = np.linalg.svd(K)
    cut = max(10.0 * error, 1e-10 * (s[0] if len(s) else 0.0), 1e-300)
    keep = s > cut
    dz = Vt[keep].T @ ((U[:, keep].T @ r) / s[keep])
    left = np.linalg.norm(r - K @ dz)
    if left > 0.5 * np.linalg.norm(r):
        free = int(np.sum(~keep))
        raise _Failed(
            f"the unbalanced force ({point.residual:.3g} N or N m) does not change with the position along {free} "
            f"of the mechanism's {len(s)} degrees of freedom (the reduced stiffness is singular there): it falls "
            "or drifts without end, e.g. a body that nothing holds against gravity"
        )
    return dz


def _line_search(problem: _Problem, point: _Point, dz: np.ndarray) -> _Point:
    """The first of the steps dz, dz / 2, dz / 4, ... whose point has a smaller |r|."""
    merit = float(np.linalg.norm(point.reduced))
    alpha = 1.0
    for _ in range(HALVINGS):
        q = problem.move(point, alpha * dz)
        if q is not None:
            trial = _Point(problem, q)
            if np.linalg.norm(trial.reduced) <= (1.0 - ARMIJO * alpha) * merit:
                return trial
        alpha *= 0.5
    raise _Failed(
        f"the line search found no position with a smaller unbalanced force than {point.residual:.3g} N or N m "
        f"(Newton step halved {HALVINGS} times): no equilibrium nearby, or the forces are not smooth here"
    )
