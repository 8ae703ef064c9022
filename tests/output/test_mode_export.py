"""``mbsim export --mode K``: one period of a mode of an ``mbsim modes`` file, looped.

References, independent of the exporter: the modes file's own /modes/shape and /bodies (read with
h5py), the pose formula p + a sin(2 pi s) u, exp(a sin(2 pi s) [phi]) R (scipy's rotations), and
the default amplitude's definition (10 % of the bounding-box diagonal of the drawn bodies, read
back from the .glb's meshes, or 0.3 rad).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from export_scenes import Glb, rotate
from scipy.spatial.transform import Rotation

SCENES = Path(__file__).resolve().parents[2] / "scenes"
KEYS = 49  # 48 frames over the 2 s period, the last key repeating the first
QUARTER = 12  # the key at s = 1/4 (t = 0.5 s)


def chain(n: int = 3, mass: float = 1.0, stiffness: float = 4.0) -> dict:
    """N masses on prismatic joints along x (2D, no gravity), springs to neighbours and walls."""
    bodies = [{"name": f"m{i}", "mass": mass, "inertia": 0.01, "position": [float(i), 0.0]} for i in range(1, n + 1)]
    joints = [
        {"name": f"s{i}", "type": "prismatic", "body1": "ground", "body2": f"m{i}", "point": [float(i), 0.0],
         "axis": [1.0, 0.0]}
        for i in range(1, n + 1)
    ]  # fmt: skip
    ends = ["ground", *[f"m{i}" for i in range(1, n + 1)], "ground"]
    forces = [
        {"type": "spring_damper", "body1": ends[i], "body2": ends[i + 1], "point1": [float(i), 0.0],
         "point2": [float(i + 1), 0.0], "stiffness": stiffness}
        for i in range(n + 1)
    ]  # fmt: skip
    return {
        "mbsim": 1,
        "name": "spring chain",
        "dimension": 2,
        "gravity": [0.0, 0.0],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": bodies,
        "joints": joints,
        "forces": forces,
    }


def spherical_pendulum() -> dict:
    """A sphere on a spherical joint, principal axes turned 0.5 rad about z (3D rotations)."""
    return {
        "mbsim": 1,
        "name": "spherical pendulum",
        "dimension": 3,
        "gravity": [0.0, 0.0, -9.81],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "bob", "mass": 2.0, "inertia": [0.3, 0.5, 0.25], "position": [0.0, 0.0, -0.8],
                    "orientation": {"axis_angle": {"axis": [0, 0, 1], "angle": 0.5}},
                    "shapes": [{"type": "sphere", "radius": 0.2}]}],
        "joints": [{"name": "ball", "type": "spherical", "body1": "ground", "body2": "bob", "point": [0, 0, 0]}],
    }  # fmt: skip


def modes_file(mbsim, tmp_path: Path, scene: dict | Path, *sets: str) -> Path:
    if isinstance(scene, dict):
        path = tmp_path / "scene.yaml"
        path.write_text(yaml.safe_dump(scene))
    else:
        path = scene
    out = tmp_path / "scene.modes.h5"
    args = [x for s in sets for x in ("--set", s)]
    r = mbsim("modes", path, *args, "-o", out, "--json")
    assert r.exit_code == 0, r.output
    return out


def rest_and_shape(path: Path, mode: int) -> tuple[float, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """(frequency Hz, body -> (p (3,), rest rotation x y z w, shape row)) read from the file."""
    with h5py.File(path, "r") as f:
        dim = int(f.attrs["dimension"])
        out = {}
        for name, g in f["bodies"].items():
            p = np.zeros(3)
            p[:dim] = g["position"][0]
            if dim == 3:
                q = g["orientation"][0][[1, 2, 3, 0]]
            else:
                q = np.array([0.0, 0.0, np.sin(g["angle"][0] / 2), np.cos(g["angle"][0] / 2)])
            out[name] = (p, q, f["modes/shape"][name][mode - 1])
        return float(f["modes/frequency_hz"][mode - 1]), out


def export(mbsim, path: Path, out: Path, *args: object) -> Glb | str:
    r = mbsim("export", path, "-o", out, *args)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == str(out)
    return Glb(out) if out.suffix == ".glb" else out.read_text(encoding="utf-8")


def same_rotation(q: np.ndarray, expected: np.ndarray, tol: float) -> None:
    assert min(np.abs(q - expected).max(), np.abs(q + expected).max()) < tol, (q, expected)


def test_chain_mode_glb_keys_and_quarter_period(mbsim, tmp_path) -> None:
    """Mode 2 of the 3-mass chain at amplitude 0.5: 49 keys over 2 s, the rest pose at s = 0 and
    s = 1, p + a u at the quarter period and p - a u at three quarters (u from /modes/shape)."""
    path = modes_file(mbsim, tmp_path, chain())
    _, bodies = rest_and_shape(path, 2)
    glb = export(mbsim, path, tmp_path / "mode2.glb", "--mode", 2, "--amplitude", 0.5)
    assert len(glb.doc.animations) == 1
    a = 0.5
    for name, (p, q, shape) in bodies.items():
        u = np.array([shape[0], shape[1], 0.0])
        assert abs(shape[2]) < 1e-12  # the chain's masses slide without turning
        channels = glb.channels(glb.node(name))
        times, moves, _ = channels["translation"]
        _, turns, _ = channels["rotation"]
        assert len(times) == KEYS == len(moves) == len(turns)
        np.testing.assert_allclose(times, np.arange(KEYS) / 48 * 2.0, atol=1e-6)
        np.testing.assert_allclose(moves[0], p, atol=1e-6)
        np.testing.assert_allclose(moves[-1], p, atol=1e-6)
        np.testing.assert_allclose(moves[QUARTER], p + a * u, atol=1e-6)
        np.testing.assert_allclose(moves[3 * QUARTER], p - a * u, atol=1e-6)
        for row in turns:
            same_rotation(row, q, 1e-6)
    # the middle mass stands still in mode 2 of three equal masses (shape sin(2 j pi / 4))
    assert np.allclose(bodies["m2"][2], 0.0, atol=1e-8)


def default_amplitude(glb: Glb, bodies: dict) -> float:
    """The amplitude the user guide promises, from the .glb's meshes at rest and the file's
    shapes: the largest |u + phi x r| over the drawn points is 10 % of the diagonal of their box
    (planar: in the plane; the drawn depth is a display choice),
    and no |phi| exceeds 0.3 rad (the smaller of the two)."""
    lo, hi, largest, turn = np.full(3, np.inf), np.full(3, -np.inf), 0.0, 0.0
    for name, (_, _, shape) in bodies.items():
        u, phi = (shape[:3], shape[3:]) if len(shape) == 6 else (np.r_[shape[:2], 0.0], np.r_[0.0, 0.0, shape[2]])
        node = glb.node(name)
        channels = glb.channels(node)
        p, q = channels["translation"][1][0].astype(float), channels["rotation"][1][0].astype(float)
        turn = max(turn, float(np.linalg.norm(phi)))
        largest = max(largest, float(np.linalg.norm(u)))
        for vertices, _, _ in glb.primitives(node):
            arms = np.array([rotate(q, v) for v in vertices.astype(float)])
            lo, hi = np.minimum(lo, (arms + p).min(axis=0)), np.maximum(hi, (arms + p).max(axis=0))
            largest = max(largest, float(np.linalg.norm(u + np.cross(phi, arms), axis=1).max()))
    size = float(np.linalg.norm((hi - lo)[: 3 if len(shape) == 6 else 2]))  # planar: in the plane
    return min(0.1 * size / largest, 0.3 / turn if turn else np.inf)


def exported_amplitude(glb: Glb, bodies: dict) -> float:
    """a from the quarter-period key: |p(s = 1/4) - p| / |u| of the body that moves most."""
    name = max(bodies, key=lambda n: np.linalg.norm(bodies[n][2][: 3 if len(bodies[n][2]) == 6 else 2]))
    moves = glb.channels(glb.node(name))["translation"][1]
    u = bodies[name][2][: 3 if len(bodies[name][2]) == 6 else 2]
    return float(np.linalg.norm(moves[QUARTER] - moves[0]) / np.linalg.norm(u))


def test_chain_default_amplitude_is_a_tenth_of_the_size(mbsim, tmp_path) -> None:
    """Without --amplitude, no rotation: the largest displacement equals 10 % of the diagonal of
    the box around the drawn bodies at rest (their meshes, read back from the .glb)."""
    path = modes_file(mbsim, tmp_path, chain())
    _, bodies = rest_and_shape(path, 1)
    glb = export(mbsim, path, tmp_path / "mode1.glb", "--mode", 1)
    assert exported_amplitude(glb, bodies) == pytest.approx(default_amplitude(glb, bodies), rel=1e-5)


def test_rigid_spin_mode_default_amplitude_turns_0_3_rad(mbsim, tmp_path) -> None:
    """Mode 1 of a sphere on a ball joint is the 0 Hz spin about the vertical: no centre motion,
    the rotation limit binds (a sphere's points move |phi| r, its box diagonal is 2 sqrt(3) r, so
    10 % of the size would allow 0.35 rad): at the quarter period the sphere has turned 0.3 rad."""
    path = modes_file(mbsim, tmp_path, spherical_pendulum())
    frequency, bodies = rest_and_shape(path, 1)
    assert frequency == 0.0
    glb = export(mbsim, path, tmp_path / "spin.glb", "--mode", 1)
    _, q, shape = bodies["bob"]
    np.testing.assert_allclose(shape[:3], 0.0, atol=1e-8)
    quarter = glb.channels(glb.node("bob"))["rotation"][1][QUARTER]
    turned = (Rotation.from_quat(quarter) * Rotation.from_quat(q).inv()).as_rotvec()
    np.testing.assert_allclose(turned, 0.3 * shape[3:] / np.linalg.norm(shape[3:]), atol=1e-6)
    assert default_amplitude(glb, bodies) == pytest.approx(0.3 / np.linalg.norm(shape[3:]), rel=1e-9)


def test_spherical_pendulum_world_axes_rotation(mbsim, tmp_path) -> None:
    """3D: mode 2 (a swing) at amplitude 0.4: at the quarter period the sphere is at p + a u and
    turned by exp(a [phi]) R (scipy), at three quarters by exp(-a [phi]) R."""
    path = modes_file(mbsim, tmp_path, spherical_pendulum())
    _, bodies = rest_and_shape(path, 2)
    glb = export(mbsim, path, tmp_path / "swing.glb", "--mode", 2, "--amplitude", 0.4)
    p, q, shape = bodies["bob"]
    u, phi = shape[:3], shape[3:]
    assert np.linalg.norm(phi) > 0.1  # a real swing, not the rigid spin
    channels = glb.channels(glb.node("bob"))
    moves, turns = channels["translation"][1], channels["rotation"][1]
    rest = Rotation.from_quat(q)
    for key, a in ((QUARTER, 0.4), (3 * QUARTER, -0.4), (0, 0.0)):
        np.testing.assert_allclose(moves[key], p + a * u, atol=1e-6)
        same_rotation(turns[key], (Rotation.from_rotvec(a * phi) * rest).as_quat(), 1e-6)


def test_double_pendulum_angles_and_the_rotation_limit(mbsim, tmp_path) -> None:
    """Planar rotations: the bars' angles at the quarter period are theta0 + a phi; by default the
    amplitude is the smaller of the size and the rotation limits."""
    sets = ("parameters.th1=0.2", "parameters.th2=-0.1")
    path = modes_file(mbsim, tmp_path, SCENES / "double_pendulum_2d.yaml", *sets)
    _, bodies = rest_and_shape(path, 1)
    glb = export(mbsim, path, tmp_path / "dp.glb", "--mode", 1, "--amplitude", 0.25)
    for name, (p, q, shape) in bodies.items():
        channels = glb.channels(glb.node(name))
        angle = 2 * np.arctan2(q[2], q[3]) + 0.25 * shape[2]
        same_rotation(channels["rotation"][1][QUARTER], np.array([0, 0, np.sin(angle / 2), np.cos(angle / 2)]), 1e-6)
        np.testing.assert_allclose(channels["translation"][1][QUARTER], p + 0.25 * np.r_[shape[:2], 0.0], atol=1e-6)
    glb = export(mbsim, path, tmp_path / "dp_default.glb", "--mode", 1)
    assert exported_amplitude(glb, bodies) == pytest.approx(default_amplitude(glb, bodies), rel=1e-5)


def test_page_carries_the_mode_label(mbsim, tmp_path) -> None:
    path = modes_file(mbsim, tmp_path, chain())
    frequency, _ = rest_and_shape(path, 3)
    text = export(mbsim, path, tmp_path / "mode3.html", "--mode", 3)
    assert f"mode 3: {frequency:.6g} Hz" in text
    assert abs(frequency - 2 * np.sqrt(4.0) * np.sin(3 * np.pi / 8) / (2 * np.pi)) < 1e-8  # the chain's closed form


def test_default_name_and_fps(mbsim, tmp_path) -> None:
    path = modes_file(mbsim, tmp_path, chain())
    r = mbsim("export", path, "--mode", 2, "--fps", 10)
    assert r.exit_code == 0, r.output
    out = tmp_path / "scene.modes.mode2.glb"
    assert r.stdout.strip() == str(out)
    times = Glb(out).channels(Glb(out).node("m1"))["translation"][0]
    np.testing.assert_allclose(times, np.arange(21) / 10, atol=1e-6)  # 20 frames over 2 s, looped


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("--mode", 0), "--mode"),
        (("--mode", 4), "--mode"),
        (("--mode", 1, "--from", 0.0), "--mode"),
        (("--mode", 1, "--to", 1.0), "--mode"),
        (("--amplitude", 1.0), "--amplitude"),
        (("--mode", 1, "--amplitude", -1.0), "--amplitude"),
        (("--mode", 1, "--fps", 0.5), "--fps"),
    ],
)
def test_wrong_mode_options_exit_2(mbsim, tmp_path, args, names) -> None:
    path = modes_file(mbsim, tmp_path, chain())
    out = tmp_path / "x.glb"
    r = mbsim("export", path, "-o", out, *args)
    assert r.exit_code == 2, r.output
    assert names in r.stderr
    assert not out.exists()


def test_mode_of_a_file_without_modes_exit_2(mbsim, tmp_path) -> None:
    scene = tmp_path / "chain.yaml"
    scene.write_text(yaml.safe_dump(chain()))
    rest = tmp_path / "rest.h5"
    assert mbsim("equilibrium", scene, "-o", rest).exit_code == 0
    out = tmp_path / "x.glb"
    r = mbsim("export", rest, "-o", out, "--mode", 1)
    assert r.exit_code == 2, r.output
    assert "/modes" in r.stderr and str(rest) in r.stderr
    assert not out.exists()
