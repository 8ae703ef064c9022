"""CONTRACT §4, exit codes hold everywhere: a numerical failure during a run exits 3 with its
partial file, never 1. Reproduces issue 12's item 7 (a NaN force under lagrange or
timestepping: "internal error: SVD did not converge"; a NaN meeting scipy:BDF's LU: "array must
not contain infs or NaNs")."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from cli_process import PENDULUM, STIFF_SPRING, run_mbsim
from quick_loop import quick

NAN_FORCE = """\
mbsim: 1
name: nan force
dimension: 2
gravity: [0, -9.81]
time: {end: 0.05, step: 0.001}
solver: {method: lagrange}
bodies:
  - {name: bob, mass: 1, inertia: 0.01, position: [1, 0]}
joints:
  - {name: pivot, type: revolute, body1: ground, body2: bob, point: [0, 0]}
forces:
  - {type: force, body: bob, value: ["where(t > 0.01, sqrt(-1), 0)", 0]}
"""
# the same in 3D: two boxes on spherical joints (quaternions, the SVD and KKT solves of 3D rows;
# issue 29 saw exit 1 here under null_space: "CPUDispatcher(<function advance ...>) returned a
# result with an exception")
NAN_FORCE_3D = """\
mbsim: 1
name: nan force 3d
dimension: 3
gravity: [0, 0, -9.8]
time: {end: 0.05, step: 0.001}
solver: {method: lagrange}
bodies:
  - {name: a, mass: 12, inertia: [9.25, 10.0, 1.25], position: [0.5, 0, -1]}
  - {name: b, mass: 12, inertia: [9.25, 10.0, 1.25], position: [1.5, 0, -2]}
joints:
  - {name: top, type: spherical, body1: ground, body2: a, point: [0, 0, 0]}
  - {name: mid, type: spherical, body1: a, body2: b, point: [1, 0, -1.5]}
forces:
  - {type: force, body: b, value: [0, "where(t > 0.01, log(-1), 0)", 0]}
"""
METHODS = [
    "lagrange", "timestepping", "null_space", "gauss", "augmented_lagrangian", "variational", "recursive",
    "event_driven",
]  # fmt: skip


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("text", quick([NAN_FORCE, NAN_FORCE_3D], keep="2d", ids=["2d", "3d"]))
def test_a_nan_force_fails_with_exit_3_under_every_method(tmp_path: Path, method: str, text: str) -> None:
    scene = tmp_path / "nan.yaml"
    scene.write_text(text)
    out = tmp_path / "nan.h5"
    code, stdout, stderr = run_mbsim("run", scene, "-o", out, "--json", "--set", f"solver.method={method}")
    assert code == 3, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    summary = json.loads(stdout)
    assert summary["status"] == "failed" and "step " in summary["message"]
    with h5py.File(out, "r") as f:  # the partial file: the rows before the force went NaN
        assert f.attrs["status"] == "failed"
        t = f["time"][:]
        # event_driven's DOP853 reaches past t = 0.01 within a stage of an early, long step
        assert len(t) >= (2 if method == "event_driven" else 10) and t[-1] <= 0.012


def test_a_nan_inside_an_implicit_integrator_fails_with_exit_3(tmp_path: Path) -> None:
    """scipy's BDF meets the NaN force in a stage and its LU refuses it with ValueError: a failed
    simulation (exit 3) with its partial file, not an internal error."""
    scene = tmp_path / "nan.yaml"
    scene.write_text(
        NAN_FORCE.replace("solver: {method: lagrange}", 'solver: {method: lagrange, integrator: "scipy:BDF"}')
    )
    code, stdout, stderr = run_mbsim("run", scene, "-o", tmp_path / "n.h5", "--json")
    assert code == 3, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    summary = json.loads(stdout)
    assert summary["status"] == "failed" and "non-finite" in summary["message"]


@pytest.mark.slow
def test_a_stiff_free_spring_runs_under_bdf(tmp_path: Path) -> None:
    """Issue 12 found this scene failing under scipy:BDF with NaNs near t = 8.4 s, then taken for a
    scipy limit: scipy's own Jacobian estimate multiplies its step by 10 at every Jacobian in a
    column f does not depend on (a free body's position, the work entry) until the step is
    infinite. With mbsim's Jacobian (integrators.jacobian_by_differences) the run completes; BDF's
    numerical damping of the 424 rad/s spring shows as an energy drift (measured 1.2e-3)."""
    scene = tmp_path / "spring.yaml"
    scene.write_text(STIFF_SPRING.replace("integrator: rk4", 'integrator: "scipy:BDF"'))
    code, stdout, stderr = run_mbsim("run", scene, "-o", tmp_path / "s.h5", "--json", timeout=300)
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["status"] == "completed" and summary["t_end"] == pytest.approx(10.0)
    assert summary["energy_drift"] < 1e-2


@pytest.mark.parametrize(
    ("error", "numerical"),
    [
        (np.linalg.LinAlgError("SVD did not converge"), True),
        (ValueError("array must not contain infs or NaNs"), True),
        (FloatingPointError("overflow encountered"), True),
        (ValueError("operands could not be broadcast together"), False),  # a defect of mbsim: exit 1
        (KeyError("box1"), False),
    ],
)
def test_which_exceptions_are_numerical_failures(error: Exception, numerical: bool) -> None:
    from mbsim.errors import SimulationError
    from mbsim.simulate import numerical_failure

    found = numerical_failure(error)
    assert isinstance(found, SimulationError) if numerical else found is None


def test_an_adaptive_run_that_passes_max_steps_fails_with_exit_3(tmp_path: Path) -> None:
    """solver.max_steps is checked at load as time.end / time.step; an adaptive integrator whose
    steps shrink is stopped at run time (exit 3, its file kept)."""
    out = tmp_path / "ms.h5"
    code, stdout, stderr = run_mbsim(
        "run", PENDULUM, "-o", out, "--json", "--set", "solver.integrator=scipy:RK45", "--set", "time.step=1",
        "--set", "solver.max_steps=50",
    )  # fmt: skip
    assert code == 3, stderr
    summary = json.loads(stdout)
    assert "more than solver.max_steps = 50" in summary["message"] and summary["steps"] == 51
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "failed" and len(f["time"]) == 51  # the start and 50 steps
