"""``mbsim run SCENE --from OUT.h5 [--time T] [--to T_END]``: a run continued from a recorded row.

The reference is the uninterrupted run of the same scene: a fixed-step method continued from a
row takes the same steps from the same state (/restart keeps the step counter and the method's
carried state), so /q and /v of the overlapping rows are equal to the last bit; an adaptive
integrator restarts its step control and agrees to its tolerance. The energy bookkeeping goes on
from the original start (checked against the file's own energies).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("in_tmp_path")

SCENES = Path(__file__).resolve().parents[2] / "scenes"
CHAIN = SCENES / "four_box_chain.yaml"
BALL = SCENES / "bouncing_ball.yaml"
STACK = SCENES / "box_stack.yaml"
SLIDING = SCENES / "sliding_block.yaml"
PENDULUM = SCENES / "pendulum_2d.yaml"
DOP853 = ("--set", "solver.integrator=scipy:DOP853", "--set", "solver.rtol=1e-10", "--set", "solver.atol=1e-12")


def run_ok(mbsim, *args: object) -> None:
    result = mbsim("run", *args, "--quiet")
    assert result.exit_code == 0, result.output + result.stderr


def overlap(full: str, part: str) -> tuple[h5py.File, h5py.File, int]:
    """The two files and the row of ``full`` where ``part`` starts (the same step)."""
    f, p = h5py.File(full, "r"), h5py.File(part, "r")
    i0 = int(np.argmin(np.abs(f["time"][()] - p["time"][0])))
    assert abs(f["time"][i0] - p["time"][0]) < 1e-9
    assert len(f["time"]) - i0 == len(p["time"])
    return f, p, i0


def test_rk4_chain_continued_at_4_s_equals_the_uninterrupted_run_bit_for_bit(mbsim) -> None:
    run_ok(mbsim, CHAIN, "-o", "full.h5")
    run_ok(mbsim, CHAIN, "--set", "time.end=4", "-o", "first.h5")
    rest = mbsim("run", CHAIN, "--from", "first.h5", "-o", "rest.h5", "--json")
    assert rest.exit_code == 0, rest.output + rest.stderr
    summary = json.loads(rest.stdout)
    assert summary["continued_from"] == "first.h5" and summary["continued_at"] == 4.0
    f, p, i0 = overlap("full.h5", "rest.h5")
    with f, p:
        assert p["time"][0] == 4.0 and p["time"][-1] == 10.0
        for key in ("q", "v", "diagnostics/energy/work", "diagnostics/energy/total"):
            assert np.array_equal(f[key][i0:], p[key][()]), key
        assert np.array_equal(f["time"][i0 + 1 :], p["time"][1:])
        assert p.attrs["continued_from"] == "first.h5" and p.attrs["continued_at"] == 4.0
        assert p.attrs["status"] == "completed"
        # the energy bookkeeping goes on from the original start: E - W - (E0 - W0) of the first file's
        # first row, over the continued rows, relative to the start's energy scale
        with h5py.File("first.h5", "r") as first:
            e0 = first["diagnostics/energy/total"][0] - first["diagnostics/energy/work"][0]
            scale = first.attrs["energy_scale"]
        error = np.abs(p["diagnostics/energy/total"][()] - p["diagnostics/energy/work"][()] - e0)
        drift = p.attrs["energy_drift"]
    assert drift == pytest.approx(error.max() / scale, rel=1e-12)
    assert 0 < drift < 1e-6  # rk4 at 2 ms: a real drift, not one reset at 4 s
    info = mbsim("info", "rest.h5", "--json")  # mbsim info measures it from the original start too
    assert info.exit_code == 0 and json.loads(info.stdout)["energy_drift"] == pytest.approx(drift, rel=1e-9)


def test_rk4_continued_from_an_earlier_row_with_another_end(mbsim) -> None:
    """--time picks a row before the last (no carried state needed by rk4), --to a new end."""
    run_ok(mbsim, CHAIN, "--set", "time.end=3", "-o", "full.h5")
    run_ok(mbsim, CHAIN, "--set", "time.end=2", "-o", "first.h5")
    run_ok(mbsim, CHAIN, "--from", "first.h5", "--time", "1.0", "--to", "3", "-o", "rest.h5")
    f, p, i0 = overlap("full.h5", "rest.h5")
    with f, p:
        assert p.attrs["continued_at"] == pytest.approx(1.0, abs=1e-12)
        assert np.array_equal(f["q"][i0:], p["q"][()]) and np.array_equal(f["v"][i0:], p["v"][()])


def test_dop853_continued_agrees_within_its_tolerance(mbsim) -> None:
    """DOP853 (rtol 1e-10) restarts its step control at 4 s: the state at 10 s agrees to 1e-7."""
    run_ok(mbsim, CHAIN, *DOP853, "-o", "full.h5")
    run_ok(mbsim, CHAIN, *DOP853, "--set", "time.end=4", "-o", "first.h5")
    run_ok(mbsim, CHAIN, *DOP853, "--from", "first.h5", "-o", "rest.h5")
    with h5py.File("full.h5", "r") as f, h5py.File("rest.h5", "r") as p:
        assert f["time"][-1] == p["time"][-1] == 10.0
        dq, dv = np.abs(f["q"][-1] - p["q"][-1]).max(), np.abs(f["v"][-1] - p["v"][-1]).max()
        moved = np.abs(f["q"][-1] - f["q"][0]).max()
    assert moved > 0.1  # the chain swung: the comparison is not of a resting state
    assert dq < 1e-7 and dv < 1e-7


@pytest.mark.parametrize(
    ("scene", "end", "split"),
    [pytest.param(BALL, 2.0, 0.8, id="bouncing_ball"), pytest.param(STACK, 2.0, 1.0, id="box_stack")],
)
def test_timestepping_contact_continued_equals_uninterrupted(mbsim, scene: Path, end: float, split: float) -> None:
    """The warm-start impulses are carried (/restart/carry): equal to the last bit."""
    run_ok(mbsim, scene, "--set", f"time.end={end}", "-o", "full.h5")
    run_ok(mbsim, scene, "--set", f"time.end={split}", "-o", "first.h5")
    with h5py.File("first.h5", "r") as first:
        assert "warm_keys" in first["restart/carry"]  # in contact at the split: a carried state to restore
    run_ok(mbsim, scene, "--from", "first.h5", "--to", end, "-o", "rest.h5")
    f, p, i0 = overlap("full.h5", "rest.h5")
    with f, p:
        assert np.array_equal(f["q"][i0:], p["q"][()]) and np.array_equal(f["v"][i0:], p["v"][()])


def test_variational_continued_from_its_node_equals_uninterrupted(mbsim) -> None:
    """The variational integrator's node (discrete momentum, multipliers) is carried: bit for bit."""
    scene, method = SCENES / "double_pendulum_2d.yaml", ("--set", "solver.method=variational")
    run_ok(mbsim, scene, *method, "--set", "time.end=1", "-o", "full.h5")
    run_ok(mbsim, scene, *method, "--set", "time.end=0.5", "-o", "first.h5")
    run_ok(mbsim, scene, *method, "--from", "first.h5", "--to", "1", "-o", "rest.h5")
    f, p, i0 = overlap("full.h5", "rest.h5")
    with f, p:
        assert np.array_equal(f["q"][i0:], p["q"][()]) and np.array_equal(f["v"][i0:], p["v"][()])


@pytest.mark.slow
def test_event_driven_fixed_step_continued_in_its_modes_bit_for_bit(mbsim) -> None:
    """event_driven with rk4: the sliding block continued at 0.3 s (four corners closed, sliding)
    goes on in the modes the file carries: the same states as the uninterrupted run to the last
    bit, the same stop (the slide-to-stick events after the row) and its distance v^2 / (2 mu g)
    (1e-4 at h = 2 ms: the stop event located to its tolerance)."""
    method = ("--set", "solver.method=event_driven", "--set", "solver.integrator=rk4", "--set", "time.step=0.002")
    run_ok(mbsim, SLIDING, *method, "--set", "time.end=0.76", "-o", "full.h5")
    run_ok(mbsim, SLIDING, *method, "--set", "time.end=0.3", "-o", "first.h5")
    with h5py.File("first.h5", "r") as f:
        assert len(f["restart/carry/mode_key"]) == 4 and np.all(f["restart/carry/mode_kind"][()] == 1)
    run_ok(mbsim, SLIDING, *method, "--set", "time.end=0.76", "--from", "first.h5", "-o", "rest.h5")
    f, p, i0 = overlap("full.h5", "rest.h5")
    with f, p:
        assert np.array_equal(f["q"][i0:], p["q"][()]) and np.array_equal(f["v"][i0:], p["v"][()])
        full, rest = f["events/time"][()], p["events/time"][()]
        assert len(rest) >= 1 and np.array_equal(full[full > 0.3], rest)
        assert p["bodies/block/position"][-1, 0] == pytest.approx(2.0**2 / (2 * 0.3 * 9.81), rel=1e-4)


def test_event_driven_continued_meets_the_same_impacts(mbsim) -> None:
    """event_driven (DOP853) restarts its integrator and contact modes at 0.9 s, between impacts:
    the impacts after it at the same times (1e-9 s) and the state at 2 s within 1e-9."""
    method = ("--set", "solver.method=event_driven")
    run_ok(mbsim, BALL, *method, "--set", "time.end=2", "-o", "full.h5")
    run_ok(mbsim, BALL, *method, "--set", "time.end=0.9", "-o", "first.h5")
    run_ok(mbsim, BALL, *method, "--from", "first.h5", "--to", "2", "-o", "rest.h5")
    with h5py.File("full.h5", "r") as f, h5py.File("rest.h5", "r") as p:
        full, rest = f["events/time"][()], p["events/time"][()]
        assert len(rest) >= 1 and np.all(rest > 0.9)
        assert np.allclose(full[full > 0.9], rest, rtol=0, atol=1e-9)
        assert np.abs(f["q"][-1] - p["q"][-1]).max() < 1e-9 and np.abs(f["v"][-1] - p["v"][-1]).max() < 1e-9


@pytest.mark.slow
def test_a_failed_file_of_a_signal_is_continued(tmp_path: Path) -> None:
    """A run ended by SIGTERM (status failed, its partial file) continues from its last row."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    cmd = [sys.executable, "-m", "mbsim", "run", str(CHAIN), "--quiet"]
    proc = subprocess.Popen([*cmd, "--set", "time.end=100000", "-o", "first.h5"], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until rows are on disk
        time.sleep(0.5)
        try:
            with h5py.File("first.h5", "r", locking=False) as f:
                if len(f["time"]) > 10:
                    break
        except (OSError, KeyError):
            pass
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 143
    with h5py.File("first.h5", "r") as f:
        assert f.attrs["status"] == "failed" and "SIGTERM" in f.attrs["message"]
        t_last = float(f["time"][-1])
    end = f"{t_last + 0.5!r}"
    done = subprocess.run([*cmd, "--from", "first.h5", "--to", end, "-o", "rest.h5"], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*cmd, "--set", f"time.end={end}", "-o", "full.h5"], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    f, p, i0 = overlap("full.h5", "rest.h5")
    with f, p:
        assert len(p["time"]) > 10
        assert np.array_equal(f["q"][i0:], p["q"][()]) and np.array_equal(f["v"][i0:], p["v"][()])


BLOW_UP_2D = """\
mbsim: 1
name: blow up
dimension: 2
time: {end: 0.05, step: 0.005}
solver: {method: lagrange, integrator: rk4}
bodies:
  - {name: disc, mass: 1.0, inertia: 0.1, position: [0, 0]}
forces:
  - {type: torque, body: disc, value: "sqrt(0.02 - t)"}
"""


def test_a_run_the_simulation_failed_continues_only_from_before_its_failure(mbsim, write_scene) -> None:
    """A run that fails by itself (the torque sqrt(0.02 - t) is NaN past t = 0.02: exit 3, failure
    = simulation): its last row, where it failed, is refused with exit 2 naming the failure and
    writing nothing; an earlier row continues, the same steps as the failed run's to the last bit."""
    scene = write_scene(BLOW_UP_2D)
    assert mbsim("run", scene, "-o", "failed.h5", "--quiet").exit_code == 3
    with h5py.File("failed.h5", "r") as f:
        assert f.attrs["status"] == "failed" and f.attrs["failure"] == "simulation"
        t_last = float(f["time"][-1])
    refused = mbsim("run", scene, "--from", "failed.h5", "-o", "again.h5")
    assert refused.exit_code == 2
    assert "not finite" in refused.stderr and "the state the method failed at" in refused.stderr
    assert "--time" in refused.stderr and not Path("again.h5").exists()
    last = mbsim("run", scene, "--from", "failed.h5", "--time", t_last, "-o", "again.h5")
    assert last.exit_code == 2 and not Path("again.h5").exists()
    run_ok(mbsim, scene, "--from", "failed.h5", "--time", "0.01", "--to", "0.02", "-o", "rest.h5")
    with h5py.File("failed.h5", "r") as f, h5py.File("rest.h5", "r") as p:
        assert p.attrs["status"] == "completed" and "failure" not in p.attrs
        np.testing.assert_array_equal(p["time"][()], [0.01, 0.015, 0.02])
        assert np.array_equal(p["v"][:2], f["v"][2:4])


WINDING = """\
mbsim: 1
name: winding wheel
time: {end: 2.0, step: 0.001}
solver: {method: lagrange, integrator: rk4}
output: {every: 10}
bodies:
  - {name: wheel, mass: 1.0, inertia: [1.0, 1.0, 0.5], position: [0, 0, 0], angular_velocity: [0, 0, 45.0]}
joints:
  - {name: axle, type: revolute, body1: ground, body2: wheel, point: [0, 0, 0], axis: [0, 0, 1],
     spring: {stiffness: 12.5, rest: 0.0}}
"""


def test_a_wound_joint_spring_continued_from_an_earlier_row(mbsim, write_scene) -> None:
    """A wheel on a torsion spring winding 1.4 turns (theta = (45 / 5) sin(5 t), I = 0.5, k = 12.5):
    continued from a row past one turn, its spring goes on from the recorded coordinate, not the
    nearest turn of the start, and the run equals the uninterrupted one and the closed form."""
    scene = write_scene(WINDING)
    run_ok(mbsim, scene, "-o", "full.h5")
    with h5py.File("full.h5", "r") as f:
        t, theta = f["time"][()], f["joints/axle/position"][()]
        np.testing.assert_allclose(theta, 9.0 * np.sin(5.0 * t), atol=1e-6)  # rk4 at h = 1 ms
        row = int(np.argmax(theta))  # 9 rad, past a turn, near t = pi / 10
        at = float(t[row])
    run_ok(mbsim, scene, "--from", "full.h5", "--time", at, "-o", "rest.h5")
    f, p, i0 = overlap("full.h5", "rest.h5")
    with f, p:
        assert i0 == row
        np.testing.assert_allclose(p["joints/axle/position"][()], f["joints/axle/position"][i0:], atol=1e-12)
        np.testing.assert_allclose(p["v"][()], f["v"][i0:], atol=1e-12)


def test_refusals_exit_2_naming_the_problem_and_write_nothing(mbsim) -> None:
    run_ok(mbsim, CHAIN, "--set", "time.end=0.1", "-o", "first.h5")
    run_ok(mbsim, PENDULUM, "--set", "time.end=0.1", "-o", "pendulum.h5")
    with h5py.File("foreign.h5", "w") as f:
        f["x"] = np.zeros(3)
    Path("notes.txt").write_text("not a result\n")
    # a crafted result file whose /scene is a YAML alias bomb: refused by the scene loader's limits
    Path("bomb.h5").write_bytes(Path("first.h5").read_bytes())
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with h5py.File("bomb.h5", "r+") as f:
        del f["scene"]
        f.create_dataset("scene", data=bomb, dtype=h5py.string_dtype())
    cases = [
        (("--from", "foreign.h5"), "not an mbsim result file"),
        (("--from", "notes.txt"), "not an mbsim result file"),
        (("--from", "missing.h5"), "no such file"),
        (("--from", "pendulum.h5"), "another scene"),
        (("--from", "first.h5", "--time", "0.0513"), "not a recorded row"),
        (("--from", "first.h5", "--time", "7"), "past the file's end"),
        (("--from", "first.h5", "--to", "0.05"), "not after the row's time"),
        (("--from", "first.h5", "--set", "solver.integrator=euler"), "solver.integrator"),
        (("--time", "0.05"), "need --from"),
        (("--from", "bomb.h5"), "bomb.h5:/scene"),
    ]
    for args, expected in cases:
        result = mbsim("run", CHAIN, *args, "-o", "out.h5")
        assert result.exit_code == 2, (args, result.output)
        assert expected in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert not Path("out.h5").exists(), args
    # the scene's own output path is the source: refused, the source untouched
    before = Path("first.h5").read_bytes()
    result = mbsim("run", CHAIN, "--from", "first.h5", "--to", "0.2", "-o", "first.h5")
    assert result.exit_code == 2 and "would be overwritten" in result.stderr
    assert Path("first.h5").read_bytes() == before


def test_a_running_file_whose_run_died_is_refused(mbsim) -> None:
    run_ok(mbsim, CHAIN, "--set", "time.end=0.1", "-o", "first.h5")
    with h5py.File("first.h5", "r+") as f:
        f.attrs["status"] = "running"  # as SIGKILL leaves it
    result = mbsim("run", CHAIN, "--from", "first.h5", "--to", "0.2", "-o", "out.h5")
    assert result.exit_code == 2 and "the run died" in result.stderr
    assert not Path("out.h5").exists()
