"""Physics identities on recorded results (STYLE §3.9): the kinetic energy of the result file equals
sum_b 1/2 m |v_com|^2 + 1/2 w^T (R I R^T) w computed from the world-frame body data, the recorded
generalized velocities are the world data in body axes, and on a damped scene the power balance
d(total)/dt = d(work)/dt holds, with d(work)/dt the dissipation computed here from the motion.

Scenes with random inertias (full 3x3), orientations and velocities come from a seeded generator.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from mbsim.scene.spec import load_scene
from mbsim.simulate import run

SCENES = Path(__file__).resolve().parents[1] / "scenes"


def simulate(tmp_path: Path, scene: dict | Path, overrides=()) -> dict[str, np.ndarray]:
    """Run a scene (dict or file) and return every dataset of its result file."""
    if isinstance(scene, dict):
        path = tmp_path / "scene.yaml"
        path.write_text(yaml.safe_dump(scene, sort_keys=False), encoding="utf-8")
    else:
        path = scene
    out = tmp_path / "result.h5"
    summary = run(load_scene(str(path), list(overrides)), output=out)
    assert summary.status == "completed", summary.message
    data: dict[str, np.ndarray] = {}
    with h5py.File(out, "r") as f:
        f.visititems(lambda name, obj: data.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return data


def random_inertia(rng: np.random.Generator) -> np.ndarray:
    """A full symmetric positive definite inertia matrix (principal values that satisfy the triangle
    inequality, turned by a random rotation)."""
    principal = rng.uniform(0.5, 1.0, 3)
    R = Rotation.random(random_state=rng).as_matrix()
    return 0.1 * R @ np.diag(principal) @ R.T


def random_chain(seed: int, nbody: int = 3) -> tuple[dict, list[tuple[str, float, np.ndarray]]]:
    """A hanging chain of ``nbody`` random bodies: spherical, universal and revolute joints in turn,
    random orientations and velocities (the start velocities are assembled onto the joints).
    Returns the scene and (name, mass, inertia in body axes) per body."""
    rng = np.random.default_rng(seed)
    bodies, joints, props = [], [], []
    joint_point = np.zeros(3)
    kinds = ["spherical", "universal", "revolute"]
    for k in range(nbody):
        name = f"link{k}"
        mass = float(rng.uniform(0.5, 2.0))
        inertia = random_inertia(rng)
        quat = Rotation.random(random_state=rng).as_quat()  # x, y, z, w
        com = joint_point + rng.normal(size=3) * 0.2 + np.array([0.0, 0.0, -0.4])
        bodies.append(
            {
                "name": name,
                "mass": mass,
                "inertia": inertia.tolist(),
                "position": com.tolist(),
                "orientation": {"quaternion": [float(quat[3]), float(quat[0]), float(quat[1]), float(quat[2])]},
                "velocity": rng.normal(size=3).tolist(),
                "angular_velocity": rng.normal(size=3).tolist(),
            }
        )
        props.append((name, mass, inertia))
        kind = kinds[k % 3]
        joint = {
            "name": f"j{k}",
            "type": kind,
            "body1": "ground" if k == 0 else f"link{k - 1}",
            "body2": name,
            "point": joint_point.tolist(),
        }
        if kind == "revolute":
            joint["axis"] = rng.normal(size=3).tolist()
        elif kind == "universal":
            a = rng.normal(size=3)
            b = np.cross(a, rng.normal(size=3))
            joint["axes"] = [a.tolist(), b.tolist()]
        joints.append(joint)
        joint_point = com + (com - joint_point)  # the next joint opposite this one
    scene = {
        "mbsim": 1,
        "name": f"random chain {seed}",
        "gravity": [0.0, 0.0, -9.81],
        "time": {"end": 0.3, "step": 1e-3},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": bodies,
        "joints": joints,
    }
    return scene, props


def world_kinetic_energy(data, props) -> np.ndarray:
    """sum_b 1/2 m |v|^2 + 1/2 w^T (R I R^T) w from /bodies/*/velocity, angular_velocity, orientation."""
    total = 0.0
    for name, mass, inertia in props:
        v = data[f"bodies/{name}/velocity"]
        w = data[f"bodies/{name}/angular_velocity"]
        R = Rotation.from_quat(data[f"bodies/{name}/orientation"][:, [1, 2, 3, 0]]).as_matrix()
        inertia_world = R @ inertia @ np.swapaxes(R, 1, 2)
        total = total + 0.5 * mass * np.einsum("ni,ni->n", v, v) + 0.5 * np.einsum("ni,nij,nj->n", w, inertia_world, w)
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kinetic_energy_from_world_data_on_random_chains(tmp_path, seed):
    scene, props = random_chain(seed)
    data = simulate(tmp_path, scene)
    rows = np.random.default_rng(seed).choice(len(data["time"]), size=20, replace=False)
    recorded = data["diagnostics/energy/kinetic"][rows]
    expected = world_kinetic_energy(data, props)[rows]
    assert np.min(expected) > 0.1  # the chain really moves
    np.testing.assert_allclose(recorded, expected, rtol=1e-12)  # measured 8e-16 relative
    # the generalized velocities are the same motion: v_com world, then omega in body axes
    for b, (name, _, _) in enumerate(props):
        R = Rotation.from_quat(data[f"bodies/{name}/orientation"][:, [1, 2, 3, 0]])
        v = data["v"][:, 6 * b : 6 * b + 6]
        np.testing.assert_allclose(v[:, :3], data[f"bodies/{name}/velocity"], atol=1e-12)
        np.testing.assert_allclose(v[:, 3:], R.inv().apply(data[f"bodies/{name}/angular_velocity"]), atol=1e-12)
        np.testing.assert_allclose(data["q"][:, 7 * b : 7 * b + 3], data[f"bodies/{name}/position"], atol=0)
    # potential energy of gravity: -sum m g . p
    potential = -sum(mass * data[f"bodies/{name}/position"] @ np.array([0, 0, -9.81]) for name, mass, _ in props)
    np.testing.assert_allclose(data["diagnostics/energy/potential"], potential, rtol=1e-12, atol=1e-12)
    # nothing but gravity works: total energy constant (rk4, h = 1e-3; measured < 1e-9 relative over 2 s)
    total = data["diagnostics/energy/total"]
    assert np.max(np.abs(total - total[0])) < 1e-8 * np.max(data["diagnostics/energy/kinetic"])


def test_kinetic_energy_from_world_data_on_the_four_box_chain(tmp_path):
    data = simulate(tmp_path, SCENES / "four_box_chain.yaml", ["time.end=1", "output.every=10"])
    props = [(f"box{k}", 12.0, np.diag([9.25, 10.0, 1.25])) for k in range(1, 5)]
    expected = world_kinetic_energy(data, props)
    assert expected[-1] > 100.0
    np.testing.assert_allclose(data["diagnostics/energy/kinetic"], expected, rtol=1e-12, atol=1e-12)


def test_kinetic_energy_from_world_data_in_2d(tmp_path):
    data = simulate(tmp_path, SCENES / "double_pendulum_2d.yaml", ["time.end=1"])
    expected = sum(
        0.5 * np.einsum("ni,ni->n", data[f"bodies/{b}/velocity"], data[f"bodies/{b}/velocity"])
        + 0.5 / 12 * data[f"bodies/{b}/angular_velocity"] ** 2
        for b in ("bar1", "bar2")
    )
    assert expected[-1] > 1.0
    np.testing.assert_allclose(data["diagnostics/energy/kinetic"], expected, rtol=1e-12, atol=1e-14)


DAMPED = {
    "mbsim": 1,
    "name": "damped arm",
    "parameters": {"b": 0.3},
    "gravity": [0.0, 0.0, -9.81],
    "time": {"end": 2.0, "step": 1e-3},
    "solver": {"method": "lagrange", "integrator": "rk4"},
    "bodies": [
        {
            "name": "arm",
            "mass": 1.0,
            "inertia": [0.05, 0.06, 0.02],
            "position": [0.3, 0.0, 0.0],
            "angular_velocity": [0.0, 0.0, 2.0],
        },
        {
            "name": "bob",
            "mass": 0.5,
            "inertia": [0.01, 0.01, 0.01],
            "position": [0.6, 0.0, -0.3],
            "velocity": [0.0, 0.5, 0.2],
        },
    ],
    "joints": [
        {
            "name": "hinge",
            "type": "revolute",
            "body1": "ground",
            "body2": "arm",
            "point": [0.0, 0.0, 0.0],
            "axis": [0.0, 0.3, 1.0],
            "spring": {"stiffness": 2.0, "damping": 0.4},
        },
        {"name": "ball", "type": "spherical", "body1": "arm", "body2": "bob", "point": [0.6, 0.0, 0.0]},
    ],
    "forces": [
        {
            "type": "spring_damper",
            "body1": "ground",
            "body2": "bob",
            "point1": [0.6, 0.5, -0.3],
            "point2": [0.6, 0.0, -0.3],
            "stiffness": 20.0,
            "damping": 1.5,
            "rest_length": 0.4,
        },
        {"type": "force", "body": "bob", "value": ["-b*vx", "-b*vy", "-b*vz"]},
    ],
}


def test_power_balance_on_a_damped_scene(tmp_path):
    """d(total)/dt = d(work)/dt (differences of the recorded series), and d(work)/dt equals the dissipation
    computed here from the recorded motion: joint damper c_j (w_arm . n)^2, spring-damper c (u . v_bob)^2,
    drag b |v_bob|^2."""
    data = simulate(tmp_path, DAMPED)
    t = data["time"]
    h = t[1] - t[0]
    total, work = data["diagnostics/energy/total"], data["diagnostics/energy/work"]

    def rate(f):  # fourth-order central difference, error ~h^4 f^(5)/30
        return (-f[4:] + 8 * f[3:-1] - 8 * f[1:-3] + f[:-4]) / (12 * h)

    d_total, d_work = rate(total), rate(work)
    scale = np.max(np.abs(d_work))
    assert scale > 0.1  # the dampers really work: measured max 1.59 W, 0.58 J over 2 s
    assert np.all(np.diff(work) <= 1e-15)  # dissipation only
    assert np.max(np.abs(d_total - d_work)) < 1e-8 * scale  # measured 2e-10 (second-order differences too)
    # the dissipation from the motion
    n = np.array([0.0, 0.3, 1.0]) / np.linalg.norm([0.0, 0.3, 1.0])
    w_arm = data["bodies/arm/angular_velocity"]
    v_bob = data["bodies/bob/velocity"]
    d = data["bodies/bob/position"] - np.array([0.6, 0.5, -0.3])
    u = d / np.linalg.norm(d, axis=1)[:, None]
    power = -(
        0.4 * (w_arm @ n) ** 2 + 1.5 * np.einsum("ni,ni->n", u, v_bob) ** 2 + 0.3 * np.einsum("ni,ni->n", v_bob, v_bob)
    )
    assert np.max(np.abs(d_work - power[2:-2])) < 1e-8 * scale  # measured 3.4e-10
    assert np.max(np.abs(d_total - power[2:-2])) < 1e-8 * scale  # measured 5.0e-10
    # and total - work is conserved: measured 9e-12 relative
    balance = total - work
    assert np.max(np.abs(balance - balance[0])) < 1e-9 * np.max(np.abs(total))
