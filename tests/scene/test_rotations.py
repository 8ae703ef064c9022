"""The scene's orientation forms against scipy's Rotation (the convention they document)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mbsim.scene.rotations import quat_from_axis_angle, quat_from_euler

SEQUENCES = ["".join(s) for s in itertools.product("XYZ", repeat=3) if s[0] != s[1] and s[1] != s[2]]


@pytest.mark.parametrize("sequence", SEQUENCES + [s.lower() for s in SEQUENCES])
def test_euler_angles_are_scipys_including_the_sign(sequence):
    rng = np.random.default_rng(sum(map(ord, sequence)))  # a seed per case, the same in every process
    for _ in range(40):
        angles = rng.uniform(-7.0, 7.0, 3)
        x, y, z, w = Rotation.from_euler(sequence, angles).as_quat()
        np.testing.assert_allclose(quat_from_euler(sequence, angles), [w, x, y, z], rtol=0, atol=1e-15)


def test_axis_angle_is_scipys_rotation_vector():
    rng = np.random.default_rng(3)
    for _ in range(200):
        axis = rng.standard_normal(3)
        axis /= np.linalg.norm(axis)
        angle = rng.uniform(-10.0, 10.0)
        x, y, z, w = Rotation.from_rotvec(axis * angle).as_quat()
        np.testing.assert_allclose(quat_from_axis_angle(axis, angle), [w, x, y, z], rtol=0, atol=4e-15)
