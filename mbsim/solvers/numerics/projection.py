"""Mass-weighted projection of positions, then velocities, onto the constraint manifold.

papers/unilateral-constraints-lcp-projection-correction.txt §3, eqs. (15)-(18): the
position correction solves min ||dq||_M subject to Phi(q + dq) = 0 by Newton steps on

    [M    J^T] [dq ]   [  0 ]
    [J     0 ] [eta] = [-Phi]     =>   dq = -M^-1 J^T (J M^-1 J^T)^-1 Phi,

(the paper's sign of the right side is garbled in the OCR; this is the sign that makes
Phi(q + dq) = 0 to first order), then the velocity correction solves the same system with
the velocity residual J v + Phi_t. In 3D, dq is a velocity-space increment (translation
and body-frame rotation vector) applied through the exponential map, so quaternions stay
unit; mbsim also rescales quaternions to unit norm after every integrator step (the
closest unit quaternion; it changes nothing that the projection does not change anyway).

Initial assembly (CONTRACT §1) is the same projection, iterated to convergence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.errors import AssemblyError, SimulationError
from mbsim.model.constraints import ConstraintValues, constraint_values
from mbsim.model.model import Model
from mbsim.model.spatial import quat_conj, quat_mul, quat_to_rotvec
from mbsim.scene.fields import MAX_ITERATIONS, Boolean, Field, Number
from mbsim.solvers.numerics.linalg import correction, correction_multipliers

PROJECTION_FIELDS = {
    "position": Field(Boolean(), "project positions onto Phi(q, t) = 0 after each step", True),
    "velocity": Field(Boolean(), "then project velocities onto J v + Phi_t = 0", True),
    "iterations": Field(
        Number(minimum=1, maximum=MAX_ITERATIONS, integer=True),
        "Newton iterations of the position projection at most",
        2,
    ),
    "tol": Field(Number(positive=True), "stop iterating once max |Phi| is below this", 1e-13),
}


@dataclass(frozen=True)
class ProjectionOptions:
    position: bool = True
    velocity: bool = True
    iterations: int = 2
    tol: float = 1e-13


def project_positions(
    model: Model,
    q: np.ndarray,
    t: float,
    iterations: int,
    tol: float,
    rank_tol: float = 1e-12,
    robust: bool = False,
) -> tuple[np.ndarray, int, float, ConstraintValues]:
    """Newton steps of the mass-weighted position projection, at most ``iterations``.

    ``robust``: pseudo-inverse steps (redundant constraints, singular positions) instead of
    failing on a rank loss.

    Returns:
        (q, Newton steps taken, max |Phi| at the returned q, the constraint values there --
        with velocity-independent Jacobian and Phi_t, ready for the velocity projection).
    """
    zeros = np.zeros(model.nv)
    used = 0
    while True:
        cv = constraint_values(model, model.frames(q, zeros), t)
        violation = float(np.max(np.abs(cv.phi)))
        if violation <= tol or used >= iterations:
            return q, used, violation, cv
        dx = correction(model, cv.jacobian, cv.phi, rank_tol, t, "position projection", robust)
        q = model.retract(q, -dx)
        used += 1


def project_velocities(
    model: Model,
    q: np.ndarray,
    v: np.ndarray,
    t: float,
    rank_tol: float = 1e-12,
    values: ConstraintValues | None = None,
    robust: bool = False,
) -> np.ndarray:
    """v - M^-1 J^T (J M^-1 J^T)^-1 (J v + Phi_t): the closest consistent velocity in the M-norm.

    ``values``: constraint values already computed at (q, t), reused if given.
    """
    if model.nc == 0:
        return v
    return velocity_projection(model, q, v, t, rank_tol, values, robust)[0]


def velocity_projection(
    model: Model,
    q: np.ndarray,
    v: np.ndarray,
    t: float,
    rank_tol: float = 1e-12,
    values: ConstraintValues | None = None,
    robust: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`project_velocities` and its multipliers: (v - M^-1 J^T lambda, lambda) with lambda =
    (J M^-1 J^T)^-1 (J v + Phi_t) (``robust``: the minimum-norm one); -lambda is the impulse along
    J^T that the projection applies (model.nc > 0)."""
    cv = values if values is not None else constraint_values(model, model.frames(q, v), t)
    residual = cv.jacobian @ v + cv.phi_t
    dx, lam = correction_multipliers(model, cv.jacobian, residual, rank_tol, t, "velocity projection", robust)
    return v - dx, lam


def _joint_of_row(model: Model, row: int) -> str:
    return model.joints[int(model.row_joint[row])].name


def assemble(model: Model, strict: bool = False, threshold: float = 1e-9) -> list[dict]:
    """Initial assembly: project q0 then v0 onto the constraints (in place on the model).

    Returns:
        one entry per body that moved: name, distance (m), rotation (rad), velocity change (m/s).

    Raises:
        AssemblyError: with ``strict`` when the start is inconsistent, or when assembly fails.
    """
    if model.nc == 0:
        return []
    t = 0.0
    cv = constraint_values(model, model.frames(model.q0, model.v0), t)
    pos_violation = float(np.max(np.abs(cv.phi)))
    vel_violation = float(np.max(np.abs(cv.jacobian @ model.v0 + cv.phi_t)))
    if pos_violation <= threshold and vel_violation <= threshold:
        return []
    if strict:
        worst = (
            int(np.argmax(np.abs(cv.phi)))
            if pos_violation > threshold
            else int(np.argmax(np.abs(cv.jacobian @ model.v0 + cv.phi_t)))
        )
        raise AssemblyError(
            f"the initial state violates the joint (position {pos_violation:.3g}, velocity {vel_violation:.3g}; "
            f"worst equation: {model.row_labels[worst]}) and --strict forbids assembling it",
            joint=_joint_of_row(model, worst),
        )
    q, v = model.q0.copy(), model.v0.copy()
    try:
        # robust steps: a redundant but consistent set of joints must assemble too
        q, _, _, _ = project_positions(model, q, t, iterations=100, tol=1e-13, rank_tol=1e-10, robust=True)
        cv = constraint_values(model, model.frames(q, v), t)
        residual = float(np.max(np.abs(cv.phi)))
        if residual > 1e-10:
            worst = int(np.argmax(np.abs(cv.phi)))
            raise AssemblyError(
                f"initial assembly did not converge: position violation still {residual:.3g} "
                f"after 100 Newton steps (worst equation: {model.row_labels[worst]}); can the joints be met at all?",
                joint=_joint_of_row(model, worst),
            )
        v = project_velocities(model, q, v, t, rank_tol=1e-10, robust=True)
    except SimulationError as exc:
        raise AssemblyError(f"initial assembly failed: {exc.reason}") from None
    report = []
    w, qw = model.body_width, model.body_qwidth
    for b, name in enumerate(model.body_names):
        old, new = model.q0[b * qw : (b + 1) * qw], q[b * qw : (b + 1) * qw]
        d = model.dimension
        distance = float(np.linalg.norm(new[:d] - old[:d]))
        if d == 3:
            rotation = float(np.linalg.norm(quat_to_rotvec(quat_mul(quat_conj(old[3:]), new[3:]))))
        else:
            rotation = abs(float(new[2] - old[2]))
        dv = float(np.linalg.norm(v[b * w : (b + 1) * w] - model.v0[b * w : (b + 1) * w]))
        if distance > 0 or rotation > 0 or dv > 0:
            report.append({"body": name, "distance": distance, "rotation": rotation, "velocity_change": dv})
    model.q0, model.v0 = q, v
    model.assembly_report = report
    return report
