"""Issue 30 acceptance: an imported arm stays within its limits under every method.

The SO-100 arm (scenes/robots/so_arm_description, its URDF's <limit lower upper> carried over as
`limits`) is released under gravity from a pose that leans on its stops. The smooth methods' compliant
stop lets a joint past its limit by about its approach speed over the stop's natural frequency
(wn = 2 pi / 0.02 s for the joint's effective inertia at t = 0): below a tenth of a radian for the
speeds gravity gives this arm in a second (its light jaw is flung at up to 80 rad/s); the max
excursion is reported in the message. The stops are stiff: two of them closing at once on the
folded arm (shoulder and elbow, inertias coupled) need h = 2e-4 s under rk4 (at 1e-3 s that pair
diverges: docs/driven.md, stiff stops). timestepping keeps within half a step at the fastest rate
(0.023 rad measured), event_driven within its event location (0 measured).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from quick_loop import quick

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "scenes" / "robots" / "so_arm_description" / "urdf" / "so100.urdf"
SMOOTH = ["lagrange", "null_space", "augmented_lagrangian", "gauss", "recursive", "variational"]
METHODS = [*SMOOTH, "timestepping", "event_driven"]

SCENE = f"""
mbsim: 1
name: so100 on its stops
gravity: [0, 0, -9.81]
time: {{end: 1.0, step: {{step}}}}
solver: {{method: {{method}}, integrator: rk4}}
models:
  - file: {URDF}
    joint_positions: {{shoulder_pan: 1.9, shoulder_lift: 3.3, elbow_flex: -0.2, wrist_flex: 1.0}}
    joint_velocities: {{shoulder_lift: 2.0, elbow_flex: 1.5}}
"""


@pytest.mark.parametrize("method", quick(METHODS, keep="recursive"))
def test_the_arm_stays_within_its_limits(write_scene, mbsim, tmp_path, method) -> None:
    # the LCP methods hold the stops as unilateral rows: no stiff stop to resolve, their own step
    step = 2e-4 if method in SMOOTH else 1e-3
    scene = write_scene(SCENE.replace("{method}", method).replace("{step}", str(step)))
    out = tmp_path / "arm.h5"
    result = mbsim("run", scene, "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    excursion, stopped, speed = {}, [], 0.0
    with h5py.File(out, "r") as f:
        limited = [name for name in f["joints"] if "limit_force" in f["joints"][name]]
        assert len(limited) == 6
        for name in limited:
            q = f["joints"][name]["position"][:]
            lower, upper = LIMITS[name]
            excursion[name] = float(max(np.max(lower - q), np.max(q - upper), 0.0))
            speed = max(speed, float(np.max(np.abs(f["joints"][name]["velocity"][:]))))
            if np.any(f["joints"][name]["limit_force"][:] != 0.0):
                stopped.append(name)
    worst = max(excursion.values())
    # the compliant stop's excursion; timestepping's half a step at the fastest rate (its midpoint
    # detection); event_driven's impacts located to the integrator's tolerance
    bound = {"timestepping": 0.5 * step * speed, "event_driven": 1e-9}.get(method, 0.12)
    assert len(stopped) >= 2, f"{method}: the arm hit no stop ({excursion})"
    assert worst <= bound, f"{method}: max excursion past a limit {worst:.3g} rad > {bound:.3g} ({excursion})"


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
