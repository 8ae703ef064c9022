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

# Levi-Civita symbol: cross(a, b)_i = EPS_ijk a_j b_k. Constant tensors turn the small
# per-body products below into one einsum call each (far fewer numpy calls per step).
EPS = np.zeros((3, 3, 3))
EPS[0, 1, 2] = EPS[1, 2, 0] = EPS[2, 0, 1] = 1.0
EPS[0, 2, 1] = EPS[2, 1, 0] = EPS[1, 0, 2] = -1.0


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product over the last axis, (..., 3) x (..., 3) -> (..., 3), broadcasting; written
    out, because np.cross's axis handling costs more than the product for a force element's
    few rows."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def skew(w: np.ndarray) -> np.ndarray:
    """[w x] (3, 3): skew(w) @ b = w x b."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _quat_product_tensor() -> np.ndarray:
    """H with (p ⊗ q)_i = H_ijk p_j q_k (Hamilton product, scalar first)."""
    H = np.zeros((4, 4, 4))
    table = {  # (j, k) -> (i, sign) for basis 1, i, j, k
        (0, 0): (0, 1), (0, 1): (1, 1), (0, 2): (2, 1), (0, 3): (3, 1),
        (1, 0): (1, 1), (1, 1): (0, -1), (1, 2): (3, 1), (1, 3): (2, -1),
        (2, 0): (2, 1), (2, 1): (3, -1), (2, 2): (0, -1), (2, 3): (1, 1),
        (3, 0): (3, 1), (3, 1): (2, 1), (3, 2): (1, -1), (3, 3): (0, -1),
    }  # fmt: skip
    for (j, k), (i, sign) in table.items():
        H[i, j, k] = sign
    return H


QUAT_PRODUCT = _quat_product_tensor()


def _rotation_tensor() -> np.ndarray:
    def matrix(q):
        w, x, y, z = q
        return np.array(
            [
                [w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z],
            ]
        )

    T = np.zeros((3, 3, 4, 4))
    basis = np.eye(4)
    for k in range(4):
        for m in range(4):
            T[:, :, k, m] = 0.5 * (matrix(basis[k] + basis[m]) - matrix(basis[k]) - matrix(basis[m]))
        T[:, :, k, k] = matrix(basis[k])
    return T


# rotation matrix as a quadratic form of the quaternion: R_ij = ROT_ijkl q_k q_l for |q| = 1
ROT = _rotation_tensor()
# quaternion rate: q_dot_i = RATE_ijk q_j omega_k = 1/2 (q ⊗ (0, omega))_i
RATE = 0.5 * QUAT_PRODUCT[:, :, 1:]


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices of (not necessarily unit) quaternions, normalised first; (..., 4) -> (..., 3, 3)."""
    R = np.einsum("ijkl,...k,...l->...ij", ROT, q, q)
    return R / np.einsum("...i,...i->...", q, q)[..., None, None]


def quat_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hamilton product p ⊗ q over the last axis."""
    return np.einsum("ijk,...j,...k->...i", QUAT_PRODUCT, p, q)


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def omega_to_quat_rate(q: np.ndarray, omega_body: np.ndarray) -> np.ndarray:
    """q_dot = 1/2 q ⊗ (0, omega_body); (..., 4), (..., 3) -> (..., 4)."""
    return np.einsum("ijk,...j,...k->...i", RATE, q, omega_body)


def rotvec_to_quat(phi: np.ndarray) -> np.ndarray:
    """Exponential map: the unit quaternions (w, x, y, z) of rotation vectors; (..., 3) -> (..., 4)."""
    angle = np.linalg.norm(phi, axis=-1, keepdims=True)
    # sin(angle / 2) / angle -> 1/2 as angle -> 0
    half = np.where(angle > 1e-12, np.sin(0.5 * angle) / np.where(angle > 0, angle, 1.0), 0.5)
    return np.concatenate([np.cos(0.5 * angle), half * phi], axis=-1)


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """Logarithm map of unit quaternions (shortest rotation); (..., 4) -> (..., 3)."""
    q = np.where(q[..., :1] < 0, -q, q)
    vec = q[..., 1:]
    s = np.linalg.norm(vec, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    small = s < 1e-12
    factor = np.where(small, 2.0, angle / np.where(small, 1.0, s))
    return factor * vec


def planar_rotation(angle: np.ndarray) -> np.ndarray:
    """2x2 rotation matrices; (...,) -> (..., 2, 2)."""
    c, s = np.cos(angle), np.sin(angle)
    return np.stack((c, -s, s, c), axis=-1).reshape(np.shape(angle) + (2, 2))


def perp(v: np.ndarray) -> np.ndarray:
    """Planar vector turned by +90 degrees: (x, y) -> (-y, x)."""
    return np.stack((-v[..., 1], v[..., 0]), axis=-1)


def orthonormal_basis(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors b1, b2 with (axis, b1, b2) right-handed and orthonormal; (3,) -> (3,), (3,)."""
    a = axis / np.linalg.norm(axis)
    helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    b1 = np.cross(a, helper)
    b1 /= np.linalg.norm(b1)
    b2 = np.cross(a, b1)
    return b1, b2
