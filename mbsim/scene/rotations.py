"""Orientations of the scene's ``axis_angle`` and ``euler`` forms as unit quaternions (w, x, y, z).

Small and exact here rather than scipy's Rotation: importing scipy.spatial costs about 0.3 s of
every command's start-up (``mbsim validate`` included). The conventions and the quaternion's
sign are scipy's (tests/scene/test_rotations.py checks them against it).
"""

from __future__ import annotations

import numpy as np

_AXES = {"x": 0, "y": 1, "z": 2}


def quat_product(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hamilton product p ⊗ q of two quaternions (w, x, y, z)."""
    pw, pv, qw, qv = p[0], p[1:], q[0], q[1:]
    return np.concatenate(([pw * qw - pv @ qv], pw * qv + qw * pv + np.cross(pv, qv)))


def quat_from_axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    """The rotation by ``angle`` about the unit ``axis``."""
    return np.concatenate(([np.cos(0.5 * angle)], np.sin(0.5 * angle) * np.asarray(axis, dtype=float)))


def quat_from_euler(sequence: str, angles: np.ndarray) -> np.ndarray:
    """Three elementary rotations in scipy's convention (Rotation.from_euler): upper-case axes
    are intrinsic (about the rotating axes, R = R1 R2 R3), lower-case extrinsic (about the fixed
    axes, R = R3 R2 R1); composed as quaternions in that order, as scipy does."""
    intrinsic = sequence.isupper()
    q = np.array([1.0, 0.0, 0.0, 0.0])
    for k, (letter, angle) in enumerate(zip(sequence.lower(), angles, strict=True)):
        axis = np.zeros(3)
        axis[_AXES[letter]] = 1.0
        e = quat_from_axis_angle(axis, float(angle))
        q = e if k == 0 else (quat_product(q, e) if intrinsic else quat_product(e, q))
    return q
