"""The command line (CONTRACT §2) and the result file it writes (CONTRACT §3).

Runs are kept to a few dozen steps; only the SIGINT test starts a real process.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.usefixtures("in_tmp_path")

SCENES = Path(__file__).resolve().parents[2] / "scenes"
CHAIN = SCENES / "four_box_chain.yaml"
PENDULUM = SCENES / "pendulum_2d.yaml"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# a free disc driven by a torque that turns NaN once t passes 0.02 (rk4 samples t = 0.0225 in step 5)
BLOW_UP_2D = """\
mbsim: 1
name: blow up
dimension: 2
time: {end: 0.05, step: 0.005}
bodies:
  - {name: disc, mass: 1.0, inertia: 0.1, position: [0, 0]}
forces:
  - {type: torque, body: disc, value: "sqrt(0.02 - t)"}
"""

# a pendulum given by point1/point2 that do not coincide at t = 0: the bob sits 0.1 m too low
MISASSEMBLED_2D = """\
mbsim: 1
name: misassembled
dimension: 2
gravity: [0, -9.81]
time: {end: 0.02, step: 0.01}
bodies:
  - {name: bob, mass: 1.0, inertia: 0.01, position: [0, -1]}
joints:
  - {name: pivot, type: revolute, body1: ground, body2: bob, point1: [0, 0], point2: [0, 0.9]}
"""

# explicit Euler without projection drifts off the circle at once
DRIFTING_2D = """\
mbsim: 1
name: drifting pendulum
dimension: 2
gravity: [0, -9.81]
time: {end: 1.0, step: 0.05}
solver:
  method: lagrange
  integrator: euler
  max_violation: 1.0e-6
  projection: {position: false, velocity: false}
bodies:
  - {name: bob, mass: 1.0, inertia: 0.01, position: [1, 0]}
joints:
  - {name: pivot, type: revolute, body1: ground, body2: bob, point: [0, 0]}
"""


def attr(f: h5py.File, key: str):
    value = f.attrs[key]
    if isinstance(value, bytes):
        return value.decode()
    return value.item() if isinstance(value, np.generic) else value


def names(ds: h5py.Dataset) -> list[str]:
    return [n.decode() if isinstance(n, bytes) else str(n) for n in ds.attrs["names"]]


def check_partial_file(path: Path, message_part: str) -> np.ndarray:
    """A failed run's file: readable, status failed, a message, steps up to the failure."""
    with h5py.File(path, "r") as f:
        assert attr(f, "status") == "failed"
        assert message_part in attr(f, "message")
        t = f["time"][:]
        assert len(t) > 1
        assert np.all(np.diff(t) > 0)
        for name in ("q", "v", "diagnostics/energy/total", "diagnostics/constraints/position_violation"):
            assert len(f[name]) == len(t), name
            assert np.all(np.isfinite(f[name][:])), name
    return t


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory: pytest.TempPathFactory):
    """One short run of the four-box chain with --json (0.05 s = 25 steps, every 5th recorded)."""
    from click.testing import CliRunner

    from mbsim.cli.main import cli

    out = tmp_path_factory.mktemp("chain") / "chain.h5"
    result = CliRunner().invoke(cli, ["run", str(CHAIN), "-o", str(out), "--set", "time.end=0.05", "--json"])
    return result, out


# ----------------------------------------------------------------------------- run


def test_run_json_prints_one_summary_object(chain_run) -> None:
    result, out = chain_run
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)  # exactly one JSON value and nothing else on stdout
    assert isinstance(summary, dict)
    for key in ("status", "steps", "wall_time_s", "max_position_violation", "energy_drift", "file"):
        assert key in summary, key
    assert summary["status"] == "completed"
    assert summary["steps"] == 25
    assert summary["file"] == str(out)
    assert summary["wall_time_s"] > 0
    assert 0 <= summary["max_position_violation"] < 1e-10
    assert 0 <= summary["energy_drift"] < 1e-6
    assert "Traceback" not in result.stderr


def test_result_file_layout_3d(chain_run) -> None:
    _, out = chain_run
    with h5py.File(out, "r") as f:
        assert attr(f, "format") == "mbsim-result"
        assert attr(f, "format_version") == 1
        assert attr(f, "status") == "completed"
        assert attr(f, "message") == ""
        assert attr(f, "steps") == 25
        assert attr(f, "scene_name") == "four-box chain"
        assert attr(f, "method") == "lagrange"
        assert attr(f, "integrator") == "rk4"
        assert attr(f, "dimension") == 3
        assert attr(f, "wall_time_s") > 0
        assert isinstance(attr(f, "mbsim_version"), str)
        created = dt.datetime.fromisoformat(attr(f, "created"))
        assert abs(dt.datetime.now(dt.UTC) - created.astimezone(dt.UTC)) < dt.timedelta(hours=1)

        t = f["time"][:]
        n = len(t)
        np.testing.assert_allclose(t, np.linspace(0.0, 0.05, 6), rtol=0, atol=1e-12)  # every: 5
        assert t[-1] == pytest.approx(0.05, abs=1e-12)  # --set time.end=0.05
        assert f["q"].shape == (n, 28)  # 4 bodies x (position, quaternion)
        assert f["v"].shape == (n, 24)
        for ds in (f["q"], f["v"]):
            labels = names(ds)
            assert len(labels) == ds.shape[1] and len(set(labels)) == len(labels)
            assert all(any(b in label for b in ("box1", "box2", "box3", "box4")) for label in labels)

        h, s = 1.5, math.sqrt(0.5)
        for body in ("box1", "box2", "box3", "box4"):
            group = f["bodies"][body]
            assert group["position"].shape == (n, 3)
            assert group["orientation"].shape == (n, 4)
            assert group["velocity"].shape == (n, 3)
            assert group["angular_velocity"].shape == (n, 3)
            np.testing.assert_allclose(np.linalg.norm(group["orientation"][:], axis=1), 1.0, atol=1e-12)
            np.testing.assert_allclose(group["velocity"][0], 0.0, atol=1e-15)  # released at rest
        # centres of mass at t = 0 as the scene gives them (scenes/four_box_chain.yaml)
        np.testing.assert_allclose(f["bodies/box1/position"][0], [-h * 0.5, h * 0.5, -h * s], atol=1e-12)
        np.testing.assert_allclose(f["bodies/box3/position"][0], [-5 * h * 0.5, 5 * h * 0.5, -3 * h * s], atol=1e-12)
        # ZXZ (pi/4, pi/4, 0) = Rz(pi/4) Rx(pi/4): w = cos^2(pi/8); body z axis (0.5, -0.5, 0.7071) in world
        w, x, y, z = f["bodies/box1/orientation"][0]
        assert abs(w) == pytest.approx(math.cos(math.pi / 8) ** 2, rel=1e-12)
        body_z = [2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)]
        np.testing.assert_allclose(body_z, [0.5, -0.5, s], atol=1e-12)

        energy = f["diagnostics/energy"]
        for key in ("kinetic", "potential", "total", "work"):
            assert energy[key].shape == (n,), key
        kinetic, potential, total, work = (energy[k][:] for k in ("kinetic", "potential", "total", "work"))
        assert kinetic[0] == pytest.approx(0.0, abs=1e-12)
        assert np.all(kinetic[1:] > 0)  # the chain starts to fall
        np.testing.assert_allclose(total, kinetic + potential, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(work, 0.0, atol=1e-9)  # gravity only: nothing non-conservative
        # potential energy differences are those of gravity: m g (z - z0), summed over the boxes
        heights = np.stack([f["bodies"][b]["position"][:, 2] for b in ("box1", "box2", "box3", "box4")], axis=1)
        np.testing.assert_allclose(
            potential - potential[0], 12 * 9.8 * (heights - heights[0]).sum(axis=1), rtol=1e-9, atol=1e-9
        )
        np.testing.assert_allclose(total - work, total[0] - work[0], atol=1e-6 * abs(potential).max())

        constraints = f["diagnostics/constraints"]
        for key in ("position_violation", "velocity_violation", "quaternion_norm_error"):
            assert constraints[key].shape == (n,), key
            assert np.all(constraints[key][:] >= 0)
            assert constraints[key][:].max() < 1e-10, key

        for joint in ("hinge0", "hinge1", "hinge2", "hinge3"):
            reaction = f["joints"][joint]["reaction"]
            assert reaction.shape[0] == n and reaction.shape[1] >= 3
            assert np.all(np.isfinite(reaction[:]))

        scene = yaml.safe_load(f["scene"][()])
        assert scene["name"] == "four-box chain"
        assert scene["time"]["end"] == 0.05  # the YAML after --set
        assert scene["time"]["step"] == 0.002
        assert len(scene["bodies"]) == 4


def test_result_file_layout_2d(mbsim, tmp_path: Path) -> None:
    out = tmp_path / "pendulum.h5"
    result = mbsim("run", PENDULUM, "-o", out, "--set", "time.end=0.03", "--set", "parameters.theta0=1.0", "--quiet")
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as f:
        assert attr(f, "dimension") == 2
        t = f["time"][:]
        n = len(t)
        np.testing.assert_allclose(t, [0.0, 0.01, 0.02, 0.03], atol=1e-12)
        assert f["q"].shape == (n, 3) and f["v"].shape == (n, 3)
        bob = f["bodies/bob"]
        assert bob["position"].shape == (n, 2)
        assert bob["angle"].shape == (n,)
        assert bob["velocity"].shape == (n, 2)
        assert bob["angular_velocity"].shape == (n,)
        # the overridden parameter reached the initial state and the stored scene
        np.testing.assert_allclose(bob["position"][0], [math.sin(1.0), -math.cos(1.0)], atol=1e-12)
        assert bob["angle"][0] == pytest.approx(1.0, abs=1e-12)
        assert yaml.safe_load(f["scene"][()])["parameters"]["theta0"] == 1.0
        # the bob stays on the unit circle and swings back towards the bottom
        np.testing.assert_allclose(np.linalg.norm(bob["position"][:], axis=1), 1.0, atol=1e-9)
        assert np.all(np.diff(bob["angle"][:]) < 0)
        assert f["joints/pivot/reaction"].shape[0] == n
        assert f["diagnostics/constraints/position_violation"][:].max() < 1e-10


HANGING_3D = """\
mbsim: 1
name: hanging pair
gravity: [0, 0, -9.8]
time: {end: 0.01, step: 0.005}
bodies:
  - {name: upper, mass: 1.0, inertia: [1, 1, 1], position: [0, 0, -1]}
  - {name: lower, mass: 2.0, inertia: [2, 2, 2], position: [0, 0, -2]}
joints:
  - {name: top, type: spherical, body1: ground, body2: upper, point: [0, 0, 0]}
  - {name: middle, type: revolute, body1: upper, body2: lower, point: [0, 0, -1.5], axis: [1, 0, 0]}
"""


def test_joint_reactions_of_a_hanging_pair(mbsim, write_scene, tmp_path: Path) -> None:
    """At rest in equilibrium each joint carries the weight below it, vertically, with no torque."""
    out = tmp_path / "hanging.h5"
    result = mbsim("run", write_scene(HANGING_3D), "-o", out, "--quiet")
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as f:
        for joint, weight in (("top", 3.0 * 9.8), ("middle", 2.0 * 9.8)):
            reaction = f["joints"][joint]["reaction"][:]
            assert reaction.shape[0] == 3 and reaction.shape[1] in (3, 6)  # force (and torque), world frame
            np.testing.assert_allclose(np.abs(reaction[:, 2]), weight, rtol=1e-9)
            np.testing.assert_allclose(reaction[:, [0, 1]], 0.0, atol=1e-9)
            np.testing.assert_allclose(reaction[:, 3:], 0.0, atol=1e-9)
        np.testing.assert_allclose(f["bodies/lower/position"][:], [[0, 0, -2]] * 3, atol=1e-12)


def test_run_text_summary(mbsim, tmp_path: Path) -> None:
    out = tmp_path / "p.h5"
    result = mbsim("run", PENDULUM, "-o", out, "--set", "time.end=0.02")
    assert result.exit_code == 0, result.output
    assert "completed" in result.stdout
    assert "steps      2" in result.stdout
    assert str(out) in result.stdout
    assert out.is_file()


def test_run_default_output_is_under_outputs(mbsim, write_scene, tmp_path: Path) -> None:
    scene = write_scene(PENDULUM.read_text(), "swing.yaml")
    result = mbsim("run", scene, "--set", "time.end=0.02", "--quiet")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "outputs" / "swing.h5").is_file()  # relative to the current directory


def test_run_missing_scene_file(mbsim, tmp_path: Path) -> None:
    result = mbsim("run", tmp_path / "nope.yaml", "-o", tmp_path / "r.h5")
    assert result.exit_code == 2
    assert "nope.yaml" in result.stderr
    assert not (tmp_path / "r.h5").exists()


def test_command_line_usage_errors_exit_2(mbsim) -> None:
    assert mbsim("run").exit_code == 2
    assert mbsim("run", PENDULUM, "--no-such-option").exit_code == 2
    assert mbsim("frobnicate").exit_code == 2
    assert mbsim("--help").exit_code == 0


# ----------------------------------------------------------------------------- validate


def test_validate_text(mbsim, tmp_path: Path) -> None:
    result = mbsim("validate", CHAIN)
    assert result.exit_code == 0, result.output
    assert "ok" in result.stdout
    assert "12 degrees of freedom" in result.stdout  # 4 free bodies (24) - 4 spherical joints (12)
    assert list(tmp_path.iterdir()) == []  # nothing simulated, nothing written


def test_validate_json(mbsim, tmp_path: Path) -> None:
    result = mbsim("validate", SCENES / "slider_crank_2d.yaml", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "ok"
    assert report["dimension"] == 2
    assert report["bodies"] == 3
    assert report["joints"] == 4
    assert report["constraint_equations"] == 8  # 3 revolute x 2 + prismatic x 2
    assert report["degrees_of_freedom"] == 1  # 9 coordinates - 8 equations: the crank angle
    assert report["method"] == "lagrange"
    assert list(tmp_path.iterdir()) == []


def test_validate_applies_set(mbsim) -> None:
    result = mbsim("validate", CHAIN, "--json", "--set", "time.end=0.5", "--set", "time.step=1e-3")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["t_end"] == 0.5
    assert report["step"] == 1e-3


def test_an_integrator_the_method_ignores_is_said_and_refused_with_strict(mbsim, tmp_path: Path) -> None:
    """Issue 13: variational and timestepping step with their own schemes; a scene that names
    solver.integrator (the four-box chain: rk4) is not silently accepted: validate and run say it is
    not used, --strict refuses it (exit 2, naming the key's line), and a scene that names none is quiet."""
    result = mbsim("validate", CHAIN, "--set", "solver.method=variational", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["integrator"] == "discrete action (midpoint)"
    assert report["notes"] == [
        "method 'variational' steps with its own scheme and does not use solver.integrator 'rk4'"
    ]
    result = mbsim("validate", CHAIN, "--set", "solver.method=variational", "--strict")
    assert result.exit_code == 2
    assert "four_box_chain.yaml:" in result.output and "solver.integrator" in result.output
    assert "remove the key" in result.output
    result = mbsim(
        "run", CHAIN, "--set", "solver.method=variational", "--set", "time.end=0.01", "-o", tmp_path / "v.h5"
    )
    assert result.exit_code == 0 and "does not use solver.integrator 'rk4'" in result.stderr
    result = mbsim("validate", SCENES / "sliding_block.yaml", "--json", "--strict")  # timestepping, no integrator
    assert result.exit_code == 0 and json.loads(result.stdout)["notes"] == []
    result = mbsim("validate", CHAIN, "--json")  # lagrange uses it
    assert json.loads(result.stdout)["notes"] == []


# ----------------------------------------------------------------------------- info and plot


def test_info_text_and_json(chain_run, mbsim) -> None:
    _, out = chain_run
    text = mbsim("info", out)
    assert text.exit_code == 0, text.output
    assert "four-box chain" in text.stdout
    assert "completed" in text.stdout
    report = mbsim("info", out, "--json")
    assert report.exit_code == 0, report.output
    data = json.loads(report.stdout)
    assert data["status"] == "completed"
    assert data["scene_name"] == "four-box chain"
    assert data["steps"] == 25
    assert data["recorded"] == 6
    assert data["t_last"] == pytest.approx(0.05, abs=1e-12)
    assert data["bodies"] == ["box1", "box2", "box3", "box4"]
    assert data["joints"] == ["hinge0", "hinge1", "hinge2", "hinge3"]
    assert data["max_position_violation"] < 1e-10


def test_info_missing_or_foreign_file(mbsim, tmp_path: Path) -> None:
    missing = mbsim("info", tmp_path / "missing.h5")
    assert missing.exit_code == 2
    assert "missing.h5" in missing.stderr
    assert "Traceback" not in missing.output
    junk = tmp_path / "junk.h5"
    junk.write_text("not hdf5")
    result = mbsim("info", junk)
    assert result.exit_code == 2
    assert "junk.h5" in result.stderr
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = [1.0]
    assert mbsim("info", tmp_path / "other.h5").exit_code == 2


def test_plot_writes_png(chain_run, mbsim, tmp_path: Path) -> None:
    _, out = chain_run
    png = tmp_path / "x.png"
    result = mbsim("plot", out, "-o", png, "--what", "energy,violation,box1")
    assert result.exit_code == 0, result.output
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 5000
    more = tmp_path / "y.png"
    result = mbsim("plot", out, "-o", more, "--what", "quaternion,box2.orientation.w,hinge1.reaction,q:box1.x")
    assert result.exit_code == 0, result.output
    assert more.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize("what", ["energy,nonsense", "box9", "box1.acceleration", "box1.position.q", "q:nothing"])
def test_plot_bad_item_exits_2(what: str, chain_run, mbsim, tmp_path: Path) -> None:
    _, out = chain_run
    png = tmp_path / "bad.png"
    result = mbsim("plot", out, "-o", png, "--what", what)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert not png.exists()


def test_plot_missing_file(mbsim, tmp_path: Path) -> None:
    result = mbsim("plot", tmp_path / "missing.h5", "-o", tmp_path / "m.png")
    assert result.exit_code == 2
    assert not (tmp_path / "m.png").exists()


# ----------------------------------------------------------------------------- failures (exit 3)


def test_nan_fails_with_exit_3_and_keeps_the_steps(mbsim, write_scene, tmp_path: Path) -> None:
    out = tmp_path / "blow.h5"
    result = mbsim("run", write_scene(BLOW_UP_2D), "-o", out)
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    assert "failed" in result.stderr
    t = check_partial_file(out, "not finite")
    np.testing.assert_allclose(t, [0.0, 0.005, 0.01, 0.015, 0.02], atol=1e-12)  # every step before t = 0.0225
    with h5py.File(out, "r") as f:
        # the torque sqrt(0.02 - t) spun the disc up: w = (2/3) (0.02^1.5 - (0.02 - t)^1.5) / I
        w = f["bodies/disc/angular_velocity"][:]
        exact = (2 / 3) * (0.02**1.5 - (0.02 - t) ** 1.5) / 0.1
        np.testing.assert_allclose(w[:4], exact[:4], rtol=1e-4)
        assert w[4] == pytest.approx(exact[4], rel=1e-2)  # rk4 next to the square-root singularity
        assert attr(f, "steps") >= 4


def test_failure_with_json(mbsim, write_scene, tmp_path: Path) -> None:
    out = tmp_path / "blow.h5"
    result = mbsim("run", write_scene(BLOW_UP_2D), "-o", out, "--json")
    assert result.exit_code == 3
    summary = json.loads(result.stdout)
    assert summary["status"] == "failed"
    assert "not finite" in summary["message"]
    assert summary["file"] == str(out)


def test_violation_past_max_violation_fails_with_exit_3(mbsim, write_scene, tmp_path: Path) -> None:
    out = tmp_path / "drift.h5"
    result = mbsim("run", write_scene(DRIFTING_2D), "-o", out)
    assert result.exit_code == 3, result.output
    assert "max_violation" in result.stderr
    check_partial_file(out, "max_violation")
    with h5py.File(out, "r") as f:
        violation = f["diagnostics/constraints/position_violation"][:]
        assert violation[0] < 1e-12
        assert violation[-1] > 1e-6
    # the same scene with a generous bound runs to the end
    ok = mbsim(
        "run",
        write_scene(DRIFTING_2D),
        "-o",
        tmp_path / "ok.h5",
        "--set",
        "solver.max_violation=10",
        "--set",
        "time.end=0.2",
        "--json",
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["max_position_violation"] > 1e-6


# ----------------------------------------------------------------------------- initial assembly


def test_strict_refuses_an_inconsistent_start(mbsim, write_scene, tmp_path: Path) -> None:
    out = tmp_path / "strict.h5"
    result = mbsim("run", write_scene(MISASSEMBLED_2D), "-o", out, "--strict")
    assert result.exit_code == 2, result.output
    assert "--strict" in result.stderr
    assert "pivot" in result.stderr
    assert not out.exists()
    assert mbsim("validate", write_scene(MISASSEMBLED_2D), "--strict").exit_code == 2


def test_inconsistent_start_is_assembled(mbsim, write_scene, tmp_path: Path) -> None:
    out = tmp_path / "assembled.h5"
    result = mbsim("run", write_scene(MISASSEMBLED_2D), "-o", out)
    assert result.exit_code == 0, result.output
    assert "assembled" in result.stderr
    assert "bob" in result.stderr
    with h5py.File(out, "r") as f:
        # the only body moves up by 0.1 m so that its point (0, 0.9) lies on the pivot
        np.testing.assert_allclose(f["bodies/bob/position"][0], [0.0, -0.9], atol=1e-9)
        assert f["diagnostics/constraints/position_violation"][:].max() < 1e-10
    report = json.loads(mbsim("validate", write_scene(MISASSEMBLED_2D), "--json").stdout)
    (moved,) = report["assembly"]
    assert moved["body"] == "bob"
    assert moved["distance"] == pytest.approx(0.1, rel=1e-9)


# ----------------------------------------------------------------------------- SIGINT


def test_sigint_leaves_a_readable_failed_file(tmp_path: Path) -> None:
    out = tmp_path / "interrupted.h5"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mbsim", "run", str(CHAIN), "-o", str(out), "--set", "time.end=1000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        rows = 0
        while rows == 0:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no recorded steps within 30 s"
            time.sleep(0.1)
            try:  # the writer holds the file open; read without locking, tolerate half-written states
                with h5py.File(out, "r", locking=False) as f:
                    rows = len(f["time"]) if "time" in f else 0
            except (OSError, KeyError, RuntimeError):  # RuntimeError: a link lookup mid-flush (h5l)
                rows = 0
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr.decode()
    assert b"Traceback" not in stderr
    with h5py.File(out, "r") as f:
        assert attr(f, "status") == "failed"
        assert attr(f, "message") == "interrupted (SIGINT)"
        t = f["time"][:]
        assert len(t) >= rows
        assert np.all(np.diff(t) > 0)
        assert 0 < t[-1] < 1000
        assert len(f["q"]) == len(t)
        assert attr(f, "steps") >= 5 * (len(t) - 1)  # output.every = 5


# ----------------------------------------------------------------------------- issue 12's small items


def test_quiet_hides_the_notes_not_the_summary(mbsim, tmp_path: Path) -> None:
    """--quiet: no progress bar and no notes on stderr (its help); the summary stays on stdout."""
    result = mbsim("run", PENDULUM, "-o", tmp_path / "p.h5", "--set", "time.end=0.05", "--quiet")
    assert result.exit_code == 0, result.output
    assert "status     completed" in result.stdout and "energy drift" in result.stdout
    assert result.stderr == ""


def test_the_progress_bar_ends_at_100_percent(capsys) -> None:
    from mbsim.cli.run import ProgressBar

    bar = ProgressBar()
    bar.start -= 2.0  # shown once a run has taken a second
    bar(3.7, 10.0)
    bar.close((10.0, 10.0))
    err = capsys.readouterr().err
    assert " 37.0%" in err and err.rstrip().split("\r")[-1].count("100.0%") == 1
    assert err.endswith("\n")


def test_the_lazy_command_list_shows_each_commands_own_help() -> None:
    """mbsim --help lists the commands without importing them: the short help written in
    mbsim.cli.main must be the one of the command itself."""
    import importlib

    from mbsim.cli.main import COMMANDS

    for name, (module, attribute, short) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert command.name == name
        assert command.get_short_help_str(limit=len(short)) == short


def test_validate_reports_derived_mass_properties_and_the_file_stores_them(mbsim, write_scene, tmp_path) -> None:
    scene = write_scene(
        "mbsim: 1\nname: dense\ntime: {end: 0.01, step: 0.001}\n"
        "bodies:\n  - {name: box, density: 1000, position: [0, 0, 0], shapes: [{type: box, size: [0.1, 0.2, 0.3]}]}\n"
    )
    result = mbsim("validate", scene)
    assert result.exit_code == 0, result.output
    # 1 body, 1000 kg/m^3 * 6e-3 m^3 = 6 kg; Ixx = m (b^2 + c^2) / 12 = 0.065 kg m^2
    assert "1 body, 0 joints (0 equations), 6 degrees of freedom" in result.stdout
    assert "box: mass 6 kg and inertia [0.065, 0.05, 0.025] kg m^2" in result.stdout
    report = json.loads(mbsim("validate", scene, "--json").stdout)
    (item,) = report["mass_properties"]
    assert item["from_density"] is True and item["mass"] == pytest.approx(6.0)
    out = tmp_path / "dense.h5"
    assert mbsim("run", scene, "-o", out, "--quiet").exit_code == 0
    with h5py.File(out, "r") as f:
        assert f["bodies/box"].attrs["mass"] == pytest.approx(6.0)
        np.testing.assert_allclose(f["bodies/box"].attrs["inertia"], np.diag([0.065, 0.05, 0.025]), rtol=1e-12)
    result = mbsim("validate", PENDULUM)
    assert "1 body, 1 joint (2 equations), 1 degree of freedom" in result.stdout


def test_help_and_validate_import_only_what_they_use() -> None:
    """mbsim --help imports no command; validate of a scene without meshes loads no trimesh,
    scipy.optimize, scipy.integrate, scipy.sparse, scipy.spatial, h5py, Dask or matplotlib (issue 13:
    fast start-up)."""
    code = """
import sys
from mbsim.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="mbsim")
except SystemExit:
    pass
heavy = ("numpy", "trimesh", "scipy.optimize", "scipy.integrate", "scipy.sparse", "scipy.spatial", "h5py", "dask",
         "distributed", "matplotlib")
print("LOADED:" + ",".join(m for m in heavy if m in sys.modules))
"""

    def loaded(*args: str) -> tuple[str, str]:
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
        last = proc.stdout.strip().splitlines()[-1]
        assert last.startswith("LOADED:"), proc.stderr
        return proc.stdout, last.removeprefix("LOADED:")

    out, modules = loaded("--help")
    assert "Commands:" in out and modules == ""
    out, modules = loaded("validate", str(PENDULUM))
    assert "ok:" in out and modules == "numpy"
