"""Batched rotation algebra on arrays of shape (..., 4) and (..., 3).

Conventions, stated once for all of mbsim:
- quaternions are (w, x, y, z), scalar first (CONTRACT §1);
- ``quat_to_matrix(q)`` is the rotation matrix R with ``x_world = R @ x_body``;
- body angular velocity ``omega_body`` is expressed in body axes, so that the quaternion
  rate is ``q_dot = 1/2 q ⊗ (0, omega_body)`` and ``omega_world = R @ omega_body``.

This module imports nothing from mbsim.
"""

from __future__ import annotations

import numpy as np


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product over the last axis, (..., 3) x (..., 3) -> (..., 3)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrix: ``skew(v) @ x == cross(v, x)``; (..., 3) -> (..., 3, 3)."""
    out = np.zeros(v.shape[:-1] + (3, 3))
    out[..., 0, 1] = -v[..., 2]
    out[..., 0, 2] = v[..., 1]
    out[..., 1, 0] = v[..., 2]
    out[..., 1, 2] = -v[..., 0]
    out[..., 2, 0] = -v[..., 1]
    out[..., 2, 1] = v[..., 0]
    return out


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices of (not necessarily unit) quaternions, normalised first; (..., 4) -> (..., 3, 3)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    rows = (
        1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy),
        2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx),
        2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy),
    )  # fmt: skip
    return np.stack(rows, axis=-1).reshape(q.shape[:-1] + (3, 3))


def quat_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hamilton product p ⊗ q over the last axis."""
    pw, px, py, pz = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    qw, qx, qy, qz = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        (
            pw * qw - px * qx - py * qy - pz * qz,
            pw * qx + px * qw + py * qz - pz * qy,
            pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw,
        ),
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def omega_to_quat_rate(q: np.ndarray, omega_body: np.ndarray) -> np.ndarray:
    """q_dot = 1/2 q ⊗ (0, omega_body); (..., 4), (..., 3) -> (..., 4)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    ox, oy, oz = omega_body[..., 0], omega_body[..., 1], omega_body[..., 2]
    return 0.5 * np.stack(
        (
            -x * ox - y * oy - z * oz,
            w * ox + y * oz - z * oy,
            w * oy - x * oz + z * ox,
            w * oz + x * oy - y * ox,
        ),
        axis=-1,
    )


def rotvec_to_quat(r: np.ndarray) -> np.ndarray:
    """Exponential map: rotation vector (angle * axis) -> unit quaternion; (..., 3) -> (..., 4)."""
    angle = np.linalg.norm(r, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(half)/angle with its series near zero (exact to round-off for |r| < 1e-4)
    small = angle < 1e-4
    safe = np.where(small, 1.0, angle)
    factor = np.where(small, 0.5 - angle**2 / 48.0, np.sin(half) / safe)
    return np.concatenate((np.cos(half), factor * r), axis=-1)


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """Logarithm map of unit quaternions (shortest rotation); (..., 4) -> (..., 3)."""
    q = np.where(q[..., :1] < 0, -q, q)
    vec = q[..., 1:]
    s = np.linalg.norm(vec, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    small = s < 1e-12
    factor = np.where(small, 2.0, angle / np.where(small, 1.0, s))
    return factor * vec


def quat_integrate_body(q: np.ndarray, delta_body: np.ndarray) -> np.ndarray:
    """q ⊗ exp(delta_body): turn by the body-frame rotation vector delta_body."""
    return quat_mul(q, rotvec_to_quat(delta_body))


def planar_rotation(angle: np.ndarray) -> np.ndarray:
    """2x2 rotation matrices; (...,) -> (..., 2, 2)."""
    c, s = np.cos(angle), np.sin(angle)
    return np.stack((c, -s, s, c), axis=-1).reshape(np.shape(angle) + (2, 2))


def perp(v: np.ndarray) -> np.ndarray:
    """Planar vector turned by +90 degrees: (x, y) -> (-y, x)."""
    return np.stack((-v[..., 1], v[..., 0]), axis=-1)


def matrix_to_quat(m: np.ndarray) -> np.ndarray:
    """Rotation matrix -> unit quaternion (w >= 0); (3, 3) -> (4,)."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(m).as_quat()
    out = np.array([w, x, y, z])
    return -out if w < 0 else out


def orthonormal_basis(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors b1, b2 with (axis, b1, b2) right-handed and orthonormal; (3,) -> (3,), (3,)."""
    a = axis / np.linalg.norm(axis)
    helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    b1 = np.cross(a, helper)
    b1 /= np.linalg.norm(b1)
    b2 = np.cross(a, b1)
    return b1, b2
