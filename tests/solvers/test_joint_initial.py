"""The joint key ``initial`` (the coordinate at t = 0): drives, springs and recursive's /q count
from it, so a joint imported at the file's coordinate 0.7 is driven to 0.7 + ..., not to 0 + ....
Checked against the closed form of a driven pendulum and a sprung one (small oscillation about
the spring's rest, which is given in the same coordinate)."""

from __future__ import annotations

import numpy as np
import pytest


def pendulum(method: str, joint: dict) -> dict:
    return {
        "mbsim": 1, "name": "pendulum", "gravity": [0, 0, 0], "time": {"end": 1.0, "step": 1e-3},
        "solver": {"method": method, "integrator": "rk4"},
        "bodies": [{"name": "rod", "mass": 1.0, "inertia": [1e-3, 1.0 / 12.0, 1.0 / 12.0], "position": [0.5, 0, 0]}],
        "joints": [{"name": "hinge", "type": "revolute", "body1": "ground", "body2": "rod", "point": [0, 0, 0],
                    "axis": [0, 0, 1], "initial": 0.7, **joint}],
    }  # fmt: skip


@pytest.mark.parametrize("method", ["lagrange", "recursive"])
def test_a_drive_counts_from_the_joints_initial_coordinate(run_scene, method):
    """drive 0.7 + 0.2 sin(3t) on a joint whose coordinate is 0.7 at t = 0: the rod turns by
    0.2 sin(3t) from where it starts (not by -0.7 at once); recursive's /q is the drive itself."""
    summary, res = run_scene(pendulum(method, {"drive": {"position": "0.7 + 0.2*sin(3*t)"}}))
    t = res.time
    centre = res["bodies/rod/position"]
    angle = np.arctan2(centre[:, 1], centre[:, 0])
    np.testing.assert_allclose(angle, 0.2 * np.sin(3 * t), atol=1e-9)
    if method == "recursive":
        np.testing.assert_allclose(res["q"][:, 0], 0.7 + 0.2 * np.sin(3 * t), atol=1e-12)


@pytest.mark.parametrize("method", ["lagrange", "recursive"])
def test_a_springs_rest_is_in_the_same_coordinate(run_scene, method):
    """A torsion spring k = 3 N m/rad at rest 0.9 on a joint that starts at 0.7: the rod (inertia
    1/3 about the hinge) swings about +0.2 rad from its start, theta = 0.2 (1 - cos(w t)), w^2 = 9."""
    summary, res = run_scene(pendulum(method, {"spring": {"stiffness": 3.0, "rest": 0.9}}))
    t = res.time
    centre = res["bodies/rod/position"]
    angle = np.arctan2(centre[:, 1], centre[:, 0])
    np.testing.assert_allclose(angle, 0.2 * (1 - np.cos(3 * t)), atol=1e-9)
