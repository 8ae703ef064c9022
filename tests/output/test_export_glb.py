"""``mbsim export`` to .glb (CONTRACT §7), checked on the file as any glTF reader sees it.

References: the result file's own /time and /bodies (the glb must carry them, float32-rounded),
the scene's shape dimensions (the meshes must have them), an independent slerp (scipy) for
--fps, and Khronos' glTF validator where .ci/run installed it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
from export_scenes import SHAPES_2D, Glb, rotate, run_scene, validator

F32 = np.float32


def validate(validator_package: Path, glb: Path) -> dict:
    """Khronos' glTF validator's report on ``glb`` (its ``issues``: counts and messages)."""
    script = (
        f"const v = require({json.dumps(str(validator_package))}); const fs = require('fs');"
        f"v.validateBytes(new Uint8Array(fs.readFileSync({json.dumps(str(glb))})))"
        ".then(r => console.log(JSON.stringify(r.issues)), e => { console.error(e); process.exit(1); });"
    )
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


def export(mbsim, result: Path, out: Path, *args: object) -> Path:
    r = mbsim("export", result, "-o", out, *args)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == str(out)
    return out


@pytest.fixture(scope="module")
def glb_3d(result_3d: Path, tmp_path_factory) -> tuple[Glb, Path]:
    from click.testing import CliRunner

    from mbsim.cli.main import cli

    out = tmp_path_factory.mktemp("glb") / "every_shape.glb"
    r = CliRunner().invoke(cli, ["export", str(result_3d), "-o", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return Glb(out), out


def recorded(result: Path):
    """(time, {body: (position (n, 3), quaternion x y z w (n, 4))}) from the result file."""
    with h5py.File(result, "r") as f:
        time = f["time"][:]
        dim = int(f.attrs["dimension"])
        bodies = {}
        for name, g in f["bodies"].items():
            pos = np.zeros((len(time), 3))
            pos[:, :dim] = g["position"][:]
            if dim == 3:
                quat = g["orientation"][:][:, [1, 2, 3, 0]]
            else:
                a = g["angle"][:]
                quat = np.column_stack([0 * a, 0 * a, np.sin(a / 2), np.cos(a / 2)])
            bodies[name] = (pos, quat)
    return time, bodies


def test_a_node_per_body_under_one_root_and_a_ground(glb_3d, result_3d) -> None:
    glb, _ = glb_3d
    _, bodies = recorded(result_3d)
    doc = glb.doc
    assert doc.scenes[doc.scene].nodes == [0]
    root = doc.nodes[0]
    assert root.translation in (None, [0, 0, 0]) and root.scale in (None, [1, 1, 1])
    named = {doc.nodes[i].name: i for i in root.children}
    assert set(named) == set(bodies) | {"ground"}
    assert len(root.children) == len(bodies) + 1  # exactly one node per body
    # up (gravity -z) turns into glTF's +Y
    np.testing.assert_allclose(rotate(np.array(root.rotation), np.array([0, 0, 1.0])), [0, 1, 0], atol=1e-7)


def test_key_times_and_transforms_equal_the_result_file(glb_3d, result_3d) -> None:
    glb, _ = glb_3d
    time, bodies = recorded(result_3d)
    assert len(glb.doc.animations) == 1
    for name, (pos, quat) in bodies.items():
        node = glb.node(name, 0)
        channels = glb.channels(node)
        assert set(channels) == {"translation", "rotation"}
        for path, reference in (("translation", pos), ("rotation", quat)):
            keys, values, interpolation = channels[path]
            assert interpolation == "LINEAR"
            np.testing.assert_array_equal(keys, time.astype(F32))  # every recorded row, float32
            # the stored float32 values are the recorded float64 ones rounded, to 1e-9
            assert np.max(np.abs(values - reference.astype(F32))) <= 1e-9
            assert np.max(np.abs(values - reference)) <= 1e-6 * max(1.0, np.abs(reference).max())
        # the node's own transform is the first key (what a viewer without animation shows)
        n = glb.doc.nodes[node]
        np.testing.assert_array_equal(n.translation, pos[0].astype(F32))
        np.testing.assert_array_equal(n.rotation, quat[0].astype(F32))


def _body_frame(glb: Glb, name: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    return glb.primitives(glb.node(name, 0))


def test_shapes_become_meshes_of_their_size(glb_3d) -> None:
    glb, _ = glb_3d
    brick = _body_frame(glb, "brick")
    assert len(brick) == 3  # box, sphere, point
    box, sphere, point = brick
    # the box: posed by (axis [1,1,0], 0.7 rad) at (0.1, 0.05, 0), 0.5 x 0.3 x 0.2
    axis = np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    q = np.r_[axis * np.sin(0.35), np.cos(0.35)]
    qinv = np.r_[-q[:3], q[3]]
    # the body frame is the centre of mass: brick has mass and inertia given, so shapes stay put
    local = np.array([rotate(qinv, v - [0.1, 0.05, 0.0]) for v in box[0].astype(float)])
    np.testing.assert_allclose(local.max(axis=0) - local.min(axis=0), [0.5, 0.3, 0.2], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(sphere[0] - [-0.3, 0, 0.1], axis=1), 0.12, atol=1e-6)
    assert np.linalg.norm(point[0].mean(axis=0) - [0.2, 0.2, 0.2]) < 1e-6
    for vertices, normals, indices in brick:
        np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0, atol=1e-5)
        assert indices.max() < len(vertices) and len(indices) % 3 == 0
    # roller (density): cylinder r 0.1, l 0.4 and a capsule r 0.05, l 0.3 above it; the body
    # frame sits at their joint centre of mass, so compare shapes relative to each other
    cylinder, capsule = _body_frame(glb, "roller")
    c0 = 0.5 * (cylinder[0].min(axis=0) + cylinder[0].max(axis=0))
    np.testing.assert_allclose(cylinder[0].max(axis=0) - cylinder[0].min(axis=0), [0.2, 0.2, 0.4], atol=1e-6)
    np.testing.assert_allclose(capsule[0].max(axis=0) - capsule[0].min(axis=0), [0.1, 0.1, 0.4], atol=1e-6)
    c1 = 0.5 * (capsule[0].min(axis=0) + capsule[0].max(axis=0))
    np.testing.assert_allclose(c1 - c0, [0, 0, 0.35], atol=1e-6)
    # the mesh file (a 0.3 x 0.2 x 0.1 box, scale 0.5) without its scene folder
    (part,) = _body_frame(glb, "part")
    np.testing.assert_allclose(part[0].max(axis=0) - part[0].min(axis=0), [0.15, 0.1, 0.05], atol=1e-6)
    # a body without shapes: its inertia box, a_i = sqrt(6 (I_j + I_k - I_i) / m)
    (bare,) = _body_frame(glb, "bare")
    edges = np.sqrt(6 * np.array([0.03 + 0.04 - 0.02, 0.02 + 0.04 - 0.03, 0.02 + 0.03 - 0.04]))
    np.testing.assert_allclose(bare[0].max(axis=0) - bare[0].min(axis=0), edges, atol=1e-6)


def test_ground_plane_is_a_patch_under_the_motion(glb_3d, result_3d) -> None:
    glb, _ = glb_3d
    _, bodies = recorded(result_3d)
    plane, box = glb.primitives(glb.node("ground", 0))
    top = plane[0][:, 2].max()
    assert abs(top - (-2.0)) < 1e-6  # its top face in the plane z = -2
    assert plane[0][:, 2].min() < -2.0  # a slab below it
    everywhere = np.concatenate([p for p, _ in bodies.values()])
    assert plane[0][:, 0].min() < everywhere[:, 0].min() and plane[0][:, 0].max() > everywhere[:, 0].max()
    assert plane[0][:, 1].min() < everywhere[:, 1].min() and plane[0][:, 1].max() > everywhere[:, 1].max()
    # it covers the ground's box too (at x = 3)
    assert plane[0][:, 0].max() > box[0][:, 0].max()
    np.testing.assert_allclose(box[0][:, 2].min(), -2.0, atol=1e-6)


def test_the_glb_is_valid_gltf(glb_3d) -> None:
    found = validator()
    if found is None:
        if os.environ.get("MBSIM_REQUIRE_TOOLS"):
            pytest.fail("Khronos' gltf-validator is missing; .ci/run installs it")
        pytest.skip("Khronos' gltf-validator is not installed (.ci/run installs it with npm)")
    _, path = glb_3d
    issues = validate(found, path)
    assert issues["numErrors"] == 0 and issues["numWarnings"] == 0, issues["messages"][:10]
    assert issues["numInfos"] == 0 or all(m["code"] == "NODE_EMPTY" for m in issues["messages"])


def test_planar_scene(mbsim, result_2d, tmp_path) -> None:
    glb = Glb(export(mbsim, result_2d, tmp_path / "planar.glb"))
    time, bodies = recorded(result_2d)
    root = glb.doc.nodes[0]
    np.testing.assert_allclose(rotate(np.array(root.rotation), np.array([0, 1.0, 0])), [0, 1, 0], atol=1e-7)
    for name, (pos, quat) in bodies.items():
        channels = glb.channels(glb.node(name, 0))
        keys, moved, _ = channels["translation"]
        _, turned, _ = channels["rotation"]
        np.testing.assert_array_equal(keys, time.astype(F32))
        assert np.all(moved[:, 2] == 0)
        assert np.max(np.abs(moved - pos.astype(F32))) <= 1e-9
        assert np.max(np.abs(turned - quat.astype(F32))) <= 1e-9
        assert np.all(turned[:, :2] == 0)  # turns about z only
    arm, pin_point = glb.primitives(glb.node("arm", 0))
    # the rectangle 1.0 x 0.1 turned 0.2 rad in the plane, extruded along z, centred on z = 0
    c, s = np.cos(-0.2), np.sin(-0.2)
    local = arm[0][:, :2] @ np.array([[c, -s], [s, c]]).T
    np.testing.assert_allclose(local.max(axis=0) - local.min(axis=0), [1.0, 0.1], atol=1e-6)
    assert abs(arm[0][:, 2].max() + arm[0][:, 2].min()) < 1e-6 and arm[0][:, 2].max() > 0
    (disc,) = glb.primitives(glb.node("disc", 0))
    np.testing.assert_allclose(np.linalg.norm(disc[0][:, :2] - [0.05, 0], axis=1).max(), 0.2, atol=1e-6)
    # the ground line y = -1 (normal +y) as a slab with its top face in the line
    (line,) = glb.primitives(glb.node("ground", 0))
    assert abs(line[0][:, 1].max() + 1.0) < 1e-6 and line[0][:, 1].min() < -1.0


def test_up_follows_gravity(mbsim, tmp_path) -> None:
    """Gravity along +x in 2D: up is -x, turned into +Y; no gravity in 3D: +z is up."""
    sideways = SHAPES_2D.replace("gravity: [0, -9.81]", "gravity: [9.81, 0]")
    glb = Glb(export(mbsim, run_scene(tmp_path / "a", sideways), tmp_path / "a.glb"))
    np.testing.assert_allclose(
        rotate(np.array(glb.doc.nodes[0].rotation), np.array([-1.0, 0, 0])), [0, 1, 0], atol=1e-7
    )
    free = (
        "mbsim: 1\nname: free\ngravity: [0, 0, 0]\ntime: {end: 0.01, step: 0.001}\n"
        "bodies:\n  - {name: b, mass: 1, inertia: [1, 1, 1], position: [0, 0, 0], angular_velocity: [1, 2, 3]}\n"
    )
    glb = Glb(export(mbsim, run_scene(tmp_path / "b", free), tmp_path / "b.glb"))
    np.testing.assert_allclose(rotate(np.array(glb.doc.nodes[0].rotation), np.array([0, 0, 1.0])), [0, 1, 0], atol=1e-7)


def test_rotation_keys_follow_a_free_spin(mbsim, tmp_path) -> None:
    """A body with isotropic inertia spins about its fixed angular velocity w: its orientation at
    t is the quaternion (w/|w| sin(|w| t / 2), cos(|w| t / 2)), x y z w (analytic reference)."""
    free = (
        "mbsim: 1\nname: free\ngravity: [0, 0, 0]\ntime: {end: 1.0, step: 0.001}\noutput: {every: 10}\n"
        "bodies:\n  - {name: b, mass: 1, inertia: [1, 1, 1], position: [0, 0, 0], angular_velocity: [1, 2, 3]}\n"
    )
    glb = Glb(export(mbsim, run_scene(tmp_path, free), tmp_path / "spin.glb"))
    keys, turned, _ = glb.channels(glb.node("b", 0))["rotation"]
    w = np.array([1.0, 2.0, 3.0])
    angle = np.linalg.norm(w) * keys.astype(float)
    expected = np.column_stack([np.outer(np.sin(angle / 2), w / np.linalg.norm(w)), np.cos(angle / 2)])
    np.testing.assert_allclose(turned, expected, atol=1e-6)


def test_rows_glTF_cannot_hold_are_left_out_and_said(mbsim, result_2d, tmp_path) -> None:
    """Key times must increase in float32 and values be finite: of two rows 1e-12 s apart the
    later is kept; a row with NaN is dropped; stderr says both."""
    import shutil

    copy = tmp_path / "edited.h5"
    shutil.copy(result_2d, copy)
    with h5py.File(copy, "r+") as f:
        time = f["time"][:]
        f["time"][5] = time[4] + 1e-12
        f["bodies/disc/position"][9] = [np.nan, 0.0]
        disc = f["bodies/disc/position"][:]
    r = mbsim("export", copy, "-o", tmp_path / "edited.glb")
    assert r.exit_code == 0, r.output
    assert "1 rows with non-finite values left out" in r.stderr
    assert "1 rows at a time equal (in float32) to the next row's left out" in r.stderr
    glb = Glb(tmp_path / "edited.glb")
    keys, moved, _ = glb.channels(glb.node("disc", 0))["translation"]
    kept = [k for k in range(len(time)) if k not in (4, 9)]
    assert np.all(np.diff(keys) > 0) and len(keys) == len(time) - 2
    np.testing.assert_array_equal(moved[:, :2], disc[kept].astype(F32))


def test_fps_resamples_linearly_and_by_slerp(mbsim, result_3d, tmp_path) -> None:
    from scipy.spatial.transform import Rotation, Slerp

    glb = Glb(export(mbsim, result_3d, tmp_path / "fps.glb", "--fps", 60, "--from", 0.05, "--to", 0.25))
    time, bodies = recorded(result_3d)
    expected_keys = 0.05 + np.arange(13) / 60.0  # 0.05 .. 0.25 at 60 frames per second
    for name, (pos, quat) in bodies.items():
        channels = glb.channels(glb.node(name, 0))
        keys, moved, _ = channels["translation"]
        _, turned, _ = channels["rotation"]
        np.testing.assert_allclose(keys, expected_keys.astype(F32), rtol=0, atol=0)
        reference = np.column_stack([np.interp(expected_keys, time, pos[:, i]) for i in range(3)])
        np.testing.assert_allclose(moved, reference, atol=2e-6)
        slerp = Slerp(time, Rotation.from_quat(quat))(expected_keys).as_quat()
        # the same rotation (q and -q alike)
        dots = np.abs(np.sum(turned * slerp, axis=1))
        np.testing.assert_allclose(dots, 1.0, atol=1e-6)


def test_from_to_keep_the_recorded_times_inside(mbsim, result_3d, tmp_path) -> None:
    glb = Glb(export(mbsim, result_3d, tmp_path / "cut.glb", "--from", 0.1, "--to", 0.2))
    time, bodies = recorded(result_3d)
    inside = (time >= 0.1) & (time <= 0.2)
    keys, moved, _ = glb.channels(glb.node("brick", 0))["translation"]
    np.testing.assert_array_equal(keys, time[inside].astype(F32))
    np.testing.assert_array_equal(moved, bodies["brick"][0][inside].astype(F32))


def test_default_output_is_the_result_with_suffix_glb(mbsim, result_2d, tmp_path) -> None:
    import shutil

    copy = tmp_path / "copy.h5"
    shutil.copy(result_2d, copy)
    r = mbsim("export", copy)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "copy.glb").read_bytes()[:4] == b"glTF"


@pytest.mark.parametrize(
    ("make", "args", "words"),
    [
        (None, ("missing.h5",), "result file not found"),
        ("text", ("notes.h5",), "not a readable HDF5 file"),
        ("hdf5", ("other.h5",), "not an mbsim result file"),
        ("result", ("r.h5", "-o", "r.obj"), "expected a name ending in .glb"),
        ("result", ("r.h5", "-o", "r"), "suffix-less"),
        ("result", ("r.h5", "--fps", "0"), "expected a positive number of frames per second"),
        ("result", ("r.h5", "--fps", "-5"), "expected a positive number of frames per second"),
        ("result", ("r.h5", "--fps", "nan"), "expected a positive number of frames per second"),
        ("result", ("r.h5", "--from", "0.4", "--to", "0.1"), "is after --to"),
        ("result", ("r.h5", "--from", "7", "--to", "9"), "has no recorded time in"),
        ("result", ("r.h5", "--fps", "1e9"), "at most"),
        (
            "result",
            ("r.h5", "--fps", "5e7", "--from", "0.4999", "--to", "0.5"),
            "finer than glTF's float32 key times resolve",
        ),
        ("result", ("r.h5", "-o", "scene.glb"), "not an mbsim glb export"),
        ("result", ("r.h5", "-o", "blender.glb"), "not an mbsim glb export"),
    ],
)
def test_bad_input_exits_2_naming_it(mbsim, result_2d, tmp_path, monkeypatch, make, args, words) -> None:
    import shutil

    monkeypatch.chdir(tmp_path)
    if make == "text":
        Path("notes.h5").write_text("not hdf5")
    elif make == "hdf5":
        with h5py.File("other.h5", "w") as f:
            f["x"] = [1, 2]
    elif make == "result":
        shutil.copy(result_2d, "r.h5")
    Path("scene.glb").write_text("someone else's file")
    other = b'{"asset":{"version":"2.0","generator":"Blender"}}  '
    foreign = b"glTF" + (2).to_bytes(4, "little") + (20 + len(other)).to_bytes(4, "little")
    Path("blender.glb").write_bytes(foreign + len(other).to_bytes(4, "little") + b"JSON" + other)
    r = mbsim("export", *args)
    assert r.exit_code == 2, r.output
    assert words in r.stderr, r.stderr
    named = args[2] if len(args) > 2 and args[1] == "-o" else args[0]
    if words.startswith(("expected a positive", "is after", "at most", "finer")):
        named = "--from" if "after" in words else "--fps"
    assert named in r.stderr
    assert "Traceback" not in r.output
    assert Path("scene.glb").read_text() == "someone else's file"
    assert Path("blender.glb").read_bytes()[:4] == b"glTF" and b"Blender" in Path("blender.glb").read_bytes()


def test_an_export_of_a_result_without_rows_exits_2(mbsim, tmp_path) -> None:
    from mbsim.output.hdf5 import write_stub
    from mbsim.output.safety import claim_result

    write_stub(claim_result(tmp_path / "empty.h5"), "", {}, "failed", "interrupted (SIGTERM)")
    r = mbsim("export", tmp_path / "empty.h5")
    assert r.exit_code == 2 and "no recorded rows" in r.stderr


def test_an_earlier_export_is_replaced(mbsim, result_2d, tmp_path) -> None:
    out = tmp_path / "again.glb"
    export(mbsim, result_2d, out)
    first = out.read_bytes()
    export(mbsim, result_2d, out, "--fps", 10)
    assert out.read_bytes() != first and Glb(out).doc.animations
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".again")]  # no temporary left


def test_run_and_compare_export(mbsim, write_scene, tmp_path) -> None:
    """run --export writes at the end; compare --export puts one copy per solver side by side."""
    scene = write_scene(SHAPES_2D)
    r = mbsim("run", scene, "-o", tmp_path / "run.h5", "--export", tmp_path / "run.glb")
    assert r.exit_code == 0, r.output
    assert "export     " in r.stdout and Glb(tmp_path / "run.glb").doc.animations
    r = mbsim(
        "compare",
        scene,
        "--solvers",
        "lagrange,null_space",
        "-o",
        tmp_path / "cmp",
        "--export",
        tmp_path / "both.glb",
    )
    assert r.exit_code == 0, r.output
    glb = Glb(tmp_path / "both.glb")
    copies = [glb.doc.nodes[i] for i in glb.doc.nodes[0].children]
    assert [c.name for c in copies] == ["lagrange", "null_space"]
    assert copies[0].translation == [0, 0, 0] and copies[1].translation[0] > 2.0  # beside, along x
    for copy, file in zip(copies, ("lagrange.h5", "null_space.h5"), strict=True):
        index = glb.doc.nodes.index(copy)
        time, bodies = recorded(tmp_path / "cmp" / file)
        for name, (pos, _) in bodies.items():
            keys, moved, _ = glb.channels(glb.node(name, index))["translation"]
            np.testing.assert_array_equal(keys, time.astype(F32))
            assert np.max(np.abs(moved - pos.astype(F32))) <= 1e-9
    r = mbsim("run", scene, "-o", tmp_path / "x.h5", "--export", tmp_path / "x.png")
    assert r.exit_code == 2 and "expected a name ending in .glb" in r.stderr
    assert not (tmp_path / "x.h5").exists()  # refused before the run


def test_a_failed_run_exports_its_motion_up_to_the_failure(mbsim, write_scene, tmp_path) -> None:
    # a force that is not finite from t = 0.1 s: the state stops being finite, exit 3
    diverging = SHAPES_2D.replace(
        "bodies:", "forces:\n  - {type: force, body: disc, value: ['log(0.1 - t)', 0]}\nbodies:"
    )
    r = mbsim("run", write_scene(diverging), "-o", tmp_path / "d.h5", "--export", tmp_path / "d.glb")
    assert r.exit_code == 3, r.output
    time, bodies = recorded(tmp_path / "d.h5")
    glb = Glb(tmp_path / "d.glb")
    keys, moved, _ = glb.channels(glb.node("disc", 0))["translation"]
    assert len(time) > 5 and time[-1] < 0.1
    np.testing.assert_array_equal(keys, time.astype(F32))
    assert np.max(np.abs(moved - bodies["disc"][0].astype(F32))) <= 1e-9


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda f: f["geometry/brick/0"].attrs.__setitem__("type", "blob"), "unknown shape type 'blob'"),
        (lambda f: f["geometry/brick/0"].attrs.__delitem__("size"), "a box without 'size'"),
        (lambda f: f["geometry/brick/1"].attrs.__setitem__("radius", np.nan), "/geometry/brick/1/radius"),
        (lambda f: f["geometry/part/0/faces"].__setitem__((0, 0), 99), "faces outside the vertex list"),
        (lambda f: f["geometry/ground/0"].attrs.__setitem__("normal", [0.0, 0.0, 0.0]), "a zero normal"),
        (lambda f: f["geometry"].attrs.__setitem__("up", [0.0, 0.0]), "'up' must be 3 finite numbers"),
        (lambda f: f["bodies/brick"].__delitem__("orientation"), "not a well-formed mbsim result"),
        (lambda f: f.attrs.__setitem__("dimension", 7), "dimension must be 2 or 3"),
    ],
)
def test_an_edited_result_file_exits_2_naming_what_is_wrong(mbsim, result_3d, tmp_path, edit, words) -> None:
    import shutil

    copy = tmp_path / "edited.h5"
    shutil.copy(result_3d, copy)
    with h5py.File(copy, "r+") as f:
        edit(f)
    for suffix in ("glb", "html"):
        r = mbsim("export", copy, "-o", tmp_path / f"out.{suffix}")
        assert r.exit_code == 2, r.output
        assert words in r.stderr and "edited.h5" in r.stderr


SHIPPED = sorted((Path(__file__).resolve().parents[2] / "scenes").glob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("scene", SHIPPED, ids=[s.stem for s in SHIPPED])
def test_every_shipped_scene_exports(mbsim, tmp_path, scene) -> None:
    """A few steps of every shipped scene (robots from URDF and MJCF, meshes, contacts, 2D and
    3D): the .glb has a node per body whose first key is the first recorded pose, a primitive per
    shape, finite values; Khronos' validator (where installed) finds no error."""
    r = mbsim("run", scene, "-o", tmp_path / "r.h5", "-q", "--set", "output.every=1", "--set", "time.end=0.01")
    assert r.exit_code == 0, r.output
    out = export(mbsim, tmp_path / "r.h5", tmp_path / "r.glb")
    glb = Glb(out)
    time, bodies = recorded(tmp_path / "r.h5")
    with h5py.File(tmp_path / "r.h5", "r") as f:
        shapes = {name: len(group) for name, group in f["geometry"].items()}
    for name, (pos, quat) in bodies.items():
        node = glb.node(name, 0)
        channels = glb.channels(node)
        keys, moved, _ = channels["translation"]
        np.testing.assert_array_equal(keys, time.astype(F32))
        assert np.max(np.abs(moved - pos.astype(F32))) <= 1e-9
        assert np.max(np.abs(channels["rotation"][1] - quat.astype(F32))) <= 1e-9
        assert len(glb.primitives(node)) == max(shapes[name], 1)
        for vertices, normals, _ in glb.primitives(node):
            assert np.all(np.isfinite(vertices)) and np.all(np.isfinite(normals))
    found = validator()
    if found is not None:
        issues = validate(found, out)
        assert issues["numErrors"] == 0 and issues["numWarnings"] == 0, issues["messages"][:10]
