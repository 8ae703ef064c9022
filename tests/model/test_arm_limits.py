"""Issue 30 acceptance: an imported arm stays within its limits under every method.

The SO-100 arm (scenes/robots/so_arm_description, its URDF's <limit lower upper> carried over as
`limits`) is released under gravity from a pose that leans on its stops. The smooth methods' compliant
stop lets a joint past its limit by about its approach speed over the stop's natural frequency
(wn = 2 pi / 0.02 s for the joint's effective inertia at t = 0): below a tenth of a radian for the
speeds gravity gives this arm in a second (its light jaw is flung at up to 80 rad/s); the max
excursion is reported in the message. The stops are stiff: two of them closing at once on the
folded arm (shoulder and elbow, inertias coupled) need h = 2e-4 s under rk4 (at 1e-3 s that pair
diverges: docs/driven.md, stiff stops).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from quick_loop import quick

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "scenes" / "robots" / "so_arm_description" / "urdf" / "so100.urdf"
METHODS = ["lagrange", "null_space", "augmented_lagrangian", "gauss", "recursive", "variational"]

SCENE = f"""
mbsim: 1
name: so100 on its stops
gravity: [0, 0, -9.81]
time: {{end: 1.0, step: 0.0002}}
solver: {{method: {{method}}, integrator: rk4}}
models:
  - file: {URDF}
    joint_positions: {{shoulder_pan: 1.9, shoulder_lift: 3.3, elbow_flex: -0.2, wrist_flex: 1.0}}
    joint_velocities: {{shoulder_lift: 2.0, elbow_flex: 1.5}}
"""


@pytest.mark.parametrize("method", quick(METHODS, keep="recursive"))
def test_the_arm_stays_within_its_limits(write_scene, mbsim, tmp_path, method) -> None:
    scene = write_scene(SCENE.replace("{method}", method))
    out = tmp_path / "arm.h5"
    result = mbsim("run", scene, "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    excursion, stopped = {}, []
    with h5py.File(out, "r") as f:
        limited = [name for name in f["joints"] if "limit_force" in f["joints"][name]]
        assert len(limited) == 6
        for name in limited:
            q = f["joints"][name]["position"][:]
            lower, upper = LIMITS[name]
            excursion[name] = float(max(np.max(lower - q), np.max(q - upper), 0.0))
            if np.any(f["joints"][name]["limit_force"][:] != 0.0):
                stopped.append(name)
    worst = max(excursion.values())
    assert len(stopped) >= 2, f"{method}: the arm hit no stop ({excursion})"
    assert worst < 0.12, f"{method}: max excursion past a limit {worst:.3g} rad ({excursion})"


def _urdf_limits() -> dict[str, tuple[float, float]]:
    """The file's <limit lower upper> of each revolute joint, read here with the standard library."""
    import xml.etree.ElementTree as ET

    out = {}
    for joint in ET.parse(URDF).getroot().iter("joint"):
        limit = joint.find("limit")
        if joint.get("type") == "revolute" and limit is not None:
            out[joint.get("name")] = (float(limit.get("lower")), float(limit.get("upper")))
    return out


LIMITS = _urdf_limits()
