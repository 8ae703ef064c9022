"""Rotation algebra against scipy's Rotation and against its own definitions."""

import numpy as np
from scipy.spatial.transform import Rotation

from mbsim.model.kernels import frames3, retract3
from mbsim.model.spatial import (
    cross,
    omega_to_quat_rate,
    orthonormal_basis,
    quat_conj,
    quat_mul,
    quat_to_matrix,
    quat_to_rotvec,
)

RNG = np.random.default_rng(0)


def _unit_quats(n):
    q = RNG.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _scipy(q):  # (w, x, y, z) -> scipy's scalar-last Rotation
    return Rotation.from_quat(q[:, [1, 2, 3, 0]])


def test_quat_to_matrix_matches_scipy_and_ignores_the_norm():
    q = _unit_quats(20)
    np.testing.assert_allclose(quat_to_matrix(q), _scipy(q).as_matrix(), atol=1e-15)
    np.testing.assert_allclose(quat_to_matrix(3.7 * q), _scipy(q).as_matrix(), atol=1e-15)


def test_quat_mul_composes_rotations_and_conj_inverts():
    p, q = _unit_quats(10), _unit_quats(10)
    np.testing.assert_allclose(quat_to_matrix(quat_mul(p, q)), quat_to_matrix(p) @ quat_to_matrix(q), atol=1e-14)
    np.testing.assert_allclose(quat_mul(q, quat_conj(q)), np.tile([1.0, 0, 0, 0], (10, 1)), atol=1e-15)


def test_cross_and_basis():
    a, b = RNG.normal(size=(8, 3)), RNG.normal(size=(8, 3))
    np.testing.assert_allclose(cross(a, b), np.cross(a, b), atol=1e-14)
    for axis in RNG.normal(size=(8, 3)):
        b1, b2 = orthonormal_basis(axis)
        frame = np.array([axis / np.linalg.norm(axis), b1, b2])
        np.testing.assert_allclose(frame @ frame.T, np.eye(3), atol=1e-14)
        assert np.linalg.det(frame) > 0


def test_quaternion_rate_is_the_body_angular_velocity():
    """R(q + h q_dot) = R(q) exp(h [omega_body]x) to first order."""
    q = _unit_quats(5)
    omega = RNG.normal(size=(5, 3))
    h = 1e-7
    dR = quat_to_matrix(q + h * omega_to_quat_rate(q, omega)) - quat_to_matrix(q - h * omega_to_quat_rate(q, omega))
    x, y, z = omega.T
    zero = np.zeros(5)
    skew = np.stack([zero, -z, y, z, zero, -x, -y, x, zero], axis=1).reshape(5, 3, 3)  # [omega]x
    np.testing.assert_allclose(dR / (2 * h), quat_to_matrix(q) @ skew, atol=1e-7)


def test_retraction_is_the_exponential_map_and_rotvec_its_inverse():
    q = _unit_quats(6)
    dx = RNG.normal(size=(6, 6))
    dx[0, 3:] = 1e-9  # the small-angle branch
    out = retract3(np.concatenate([np.r_[np.zeros(3), qq] for qq in q]), dx.ravel(), 6).reshape(6, 7)
    expected = _scipy(q) * Rotation.from_rotvec(dx[:, 3:])
    np.testing.assert_allclose(quat_to_matrix(out[:, 3:]), expected.as_matrix(), atol=1e-14)
    np.testing.assert_allclose(out[:, :3], dx[:, :3], atol=1e-15)
    rel = quat_mul(quat_conj(q), out[:, 3:])
    np.testing.assert_allclose(quat_to_rotvec(rel), dx[:, 3:], atol=1e-12)


def test_compiled_frames_match_the_numpy_definitions():
    q = _unit_quats(4)
    x = RNG.normal(size=(4, 3))
    v = RNG.normal(size=(4, 6))
    pos, rot, vel, omega_body, omega = frames3(np.hstack([x, 2.0 * q]).ravel(), v.ravel(), 4)
    np.testing.assert_allclose(rot[:4], quat_to_matrix(q), atol=1e-15)
    np.testing.assert_allclose(rot[4], np.eye(3))
    np.testing.assert_allclose(pos[:4], x)
    np.testing.assert_allclose(omega[:4], np.einsum("nij,nj->ni", quat_to_matrix(q), v[:, 3:]), atol=1e-14)
    np.testing.assert_allclose(omega_body[:4], v[:, 3:])
    np.testing.assert_allclose(vel[:4], v[:, :3])
