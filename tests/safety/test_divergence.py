"""CONTRACT §4, divergence is a failure: a blow-up ends the run with exit 3, status failed and a
message saying it diverged (step and time), its partial file kept; the summary's energy_drift is
measured against a scale fixed by the initial state, so a blow-up reads as the large number it
is. Reproduces issue 12's item 4 (exit 0, 'completed', energy drift 1.000e+00 while the energy
went from 12.5 J to 2.8e13 J)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from cli_process import BLOCKS, ROOT, STIFF_SPRING, root_attrs, run_mbsim


def test_a_contact_blow_up_fails_with_exit_3_and_keeps_its_file(tmp_path: Path) -> None:
    out = tmp_path / "blow.h5"
    args = ("run", BLOCKS, "-o", out, "--set", "contacts[0].stiffness=1e14", "--set", "time.step=1e-4", "--json")
    code, stdout, stderr = run_mbsim(*args)
    assert code == 3, stderr
    summary = json.loads(stdout)
    assert summary["status"] == "failed"
    assert "diverged" in summary["message"] and "step " in summary["message"] and "t = " in summary["message"]
    assert "solver.divergence" in summary["message"]
    assert summary["energy_drift"] > 1e6  # 2.2e12: the energy error over the initial 12.5 J
    attrs = root_attrs(out)
    assert attrs["status"] == "failed" and "diverged" in attrs["message"]
    assert attrs["energy_scale"] == pytest.approx(12.5, rel=1e-12)  # 1/2 * 1 kg * (5 m/s)^2, the initial kinetic energy
    with h5py.File(out, "r") as f:
        assert len(f["time"]) >= 2  # the partial file has the rows up to the failure
        assert f["diagnostics/energy/kinetic"][-1] > 1e9


def test_the_drift_of_a_blow_up_is_not_capped_near_one(tmp_path: Path) -> None:
    """With the check switched off (a huge solver.divergence) the run completes and its drift is
    the blow-up's true size, not ~1 as with a scale that grew with the kinetic energy."""
    out = tmp_path / "blow.h5"
    code, stdout, stderr = run_mbsim(
        "run", BLOCKS, "-o", out, "--json", "--set", "contacts[0].stiffness=1e14", "--set", "time.step=1e-4",
        "--set", "solver.divergence=1e300",
    )  # fmt: skip
    assert code == 0, stderr
    assert json.loads(stdout)["energy_drift"] > 1e10
    code, stdout, _ = run_mbsim("info", out, "--json")
    assert json.loads(stdout)["energy_drift"] > 1e10  # info measures it the same way


def test_a_stiff_free_spring_under_rk4_diverges(tmp_path: Path) -> None:
    scene = tmp_path / "spring.yaml"
    scene.write_text(STIFF_SPRING)
    code, stdout, stderr = run_mbsim("run", scene, "-o", tmp_path / "s.h5", "--json")
    assert code == 3, stderr
    assert "diverged" in json.loads(stdout)["message"]
    # the same spring with a step that resolves it (period 2.1e-2 s) is accurate and passes
    code, stdout, stderr = run_mbsim("run", scene, "-o", tmp_path / "s.h5", "--json", "--set", "time.step=1e-4",
                                     "--set", "time.end=0.5")  # fmt: skip
    assert code == 0, stderr
    assert json.loads(stdout)["energy_drift"] < 1e-6


def test_the_energy_scale_is_the_initial_states() -> None:
    """The pendulum of pendulum_2d (1 kg, 1 m, released at rest from 2.5 rad): T0 = 0 and
    V0 = m g L cos(0.64) = 7.86 J, so the scale is gravity's m g l = 9.81 J over the mechanism's
    extent l (pivot to bob), whatever the potential's zero; the run's kinetic energy stays below
    V0 - V_min = 17.7 J, within a factor 2 of it."""
    from mbsim.diagnostics import RunStats, energy_scale, free_fall_supply
    from mbsim.model.compile import compile_model
    from mbsim.scene.spec import load_scene

    model = compile_model(load_scene(str(ROOT / "scenes" / "pendulum_2d.yaml")))
    frames = model.frames(model.q0, model.v0)
    scale = energy_scale(model, frames, 0.0, 0.0)
    assert np.linalg.norm(frames.pos[0]) == pytest.approx(1.0)  # the pivot is at the origin
    assert scale == pytest.approx(1.0 * 9.81 * 1.0, rel=1e-12)
    stats = RunStats(scale=scale, fall=free_fall_supply(model, frames), energy0=0.0)
    zero = np.zeros(3)
    t, kinetic = np.array([0.5, 1.0, 1.5]), np.array([scale, 1e9 * scale, scale])
    # rows at rest energy-wise except the kinetic energy: kinetic + potential - work = T = error
    taken = stats.add(t, kinetic, -kinetic, zero, zero, zero, zero, divergence=1e6)
    assert taken == 2  # up to and including the first row past the limit, not the one after it
    assert stats.last_ratio > 1e6 and stats.max_kinetic == 1e9 * scale
    fresh = RunStats(scale=scale, fall=free_fall_supply(model, frames), energy0=0.0)
    fresh.add(t[:1], kinetic[:1], -kinetic[:1], zero[:1], zero[:1], zero[:1], zero[:1])
    assert fresh.last_ratio <= 1.0
