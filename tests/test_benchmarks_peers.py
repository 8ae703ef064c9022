"""benchmarks/peers.py (mbsim against MuJoCo, Pinocchio, Exudyn): the four-box chain built in
MuJoCo from mbsim's model follows mbsim's motion, and a one-case run renders. Nothing here looks
at a time. Skipped without mujoco (the optional `bench` extra)."""

from __future__ import annotations

import numpy as np
import pytest

from mbsim.scene.spec import load_scene

CHECK_STEPS = 100  # 0.2 s at the scene's step of 0.002


def test_mujoco_four_box_follows_mbsim(benchmark_module, tmp_path):
    pytest.importorskip("mujoco")
    peers = benchmark_module("peers")
    spec = load_scene(str(peers.FOUR_BOX_SCENE))
    system = peers.system_of(spec)
    assert [b.mass for b in system.bodies] == [12.0] * 4
    assert np.allclose(system.bodies[0].inertia, np.diag([9.25, 10.0, 1.25]))

    sim = peers.MujocoSim(peers.mjcf_tree(system), system)
    assert "RK4" in sim.xml and 'type="ball"' in sim.xml and 'contype="0"' in sim.xml
    assert sim.model.opt.timestep == pytest.approx(0.002)
    wall, steps = sim.run(10)
    assert steps == 10 and wall >= 0.0
    mujoco_box4 = sim.com(sim.simulate(CHECK_STEPS), "box4")

    run = peers.MbsimRun(peers.FOUR_BOX_SCENE, (), tmp_path, "four_box")
    t, mbsim_box4 = peers._h5_position(run.simulate(CHECK_STEPS), "box4")
    assert t == pytest.approx(0.2)
    # the chain has moved, and both codes agree on where box4's centre of mass went
    assert np.linalg.norm(mbsim_box4 - system.bodies[3].pos) > 0.05
    assert np.linalg.norm(mujoco_box4 - mbsim_box4) < 1e-3


def test_peer_rows_and_markdown(benchmark_module):
    pytest.importorskip("mujoco")
    peers = benchmark_module("peers")
    plan = dict(peers.QUICK, repeats=1, four_box_steps=20)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        case = peers.case_four_box(plan, Path(tmp))
        case.contenders = [c for c in case.contenders if c.column in ("mbsim", "mujoco")][-2:]  # recursive, MuJoCo
        peers.time_case(case, log=lambda _: None)
        rows = peers.rows_of(case)
    assert len(rows) == 1
    row = rows[0]
    assert row["mujoco_us"] is not None and row["mbsim_us"] is not None
    assert row["best_peer"] == "mujoco" and row["ratio"] == pytest.approx(row["mbsim_us"] / row["mujoco_us"])
    text = peers.markdown(rows)
    assert text.startswith("## Peers: µs per step, same session")
    assert "| four-box chain" in text and "MuJoCo" in text and "Versions:" in text


def test_arm7_case_peers_follow_the_imported_arm(benchmark_module, tmp_path):
    """Issue 16's speed case: the Panda arm imported from its URDF; MuJoCo and Pinocchio built
    from mbsim's model of it end where mbsim's recursive run ends (0.2 s), the check says so."""
    pytest.importorskip("mujoco")
    pytest.importorskip("pinocchio")
    peers = benchmark_module("peers")
    plan = dict(peers.QUICK, repeats=1, chain10_steps=200)
    case = peers.case_arm7(plan, tmp_path)
    assert [c.column for c in case.contenders][:3] == ["mbsim"] * 3
    results = case.check()
    assert len(results) == 2 and all(r["ok"] and r["distance"] < 1e-6 for r in results), results


@pytest.mark.parametrize("key", ["sphere_floor", "sphere_mesh"])
def test_rolling_cases_roll_at_five_sevenths_in_both_codes(benchmark_module, tmp_path, key):
    """Issue 31's rolling cases: the ball on the compliant floor box and on the flat ground mesh
    (STL, MuJoCo's mesh geom of the same file) ends, in mbsim and in MuJoCo, where a solid ball
    sliding onto rolling must (x and 5/7 v0 at 1 s, closed form); a short timed run renders."""
    pytest.importorskip("mujoco")
    peers = benchmark_module("peers")
    plan = dict(peers.QUICK, repeats=1, rolling_steps=20)
    case = peers.case_rolling(key, plan, tmp_path)
    assert [c.column for c in case.contenders][:2] == ["mbsim", "mujoco"]
    assert all(c.run is not None for c in case.contenders[:2]), [c.note for c in case.contenders]
    if key == "sphere_mesh":
        assert (tmp_path / "rolling_floor.stl").is_file() and 'type="mesh"' in case.contenders[1].run.__self__.xml
    peers.time_case(case, log=lambda _: None)
    rows = case.check()
    assert [r["peer"] for r in rows] == ["closed form", "mujoco"]
    assert all(r["ok"] for r in rows), rows
    x, v = rows[0]["value"]
    assert v == pytest.approx(5 / 7 * peers.ROLL_V0) and rows[0]["mbsim"][1] == pytest.approx(v, rel=2e-3)
    assert any("per simulated second" in n for n in case.notes)
    assert peers.markdown(peers.rows_of(case)).count("| sphere rolling on") == 1


def test_arm7_floor_case_hand_box_and_free_fall_agree_with_mujoco(benchmark_module, tmp_path):
    """Issue 31's Panda target: the hand's collision box (URDF <collision> on panda_hand, welded
    into panda_link7) sits where MuJoCo's kinematics of the same arm puts its box geom, and before
    the hand touches the floor (0.1 s) MuJoCo's RK4 with the same joint dampers follows mbsim's
    implicit-contact run; the case times and renders its three mbsim runs against MuJoCo."""
    pytest.importorskip("mujoco")
    peers = benchmark_module("peers")
    plan = dict(peers.QUICK, repeats=1, armfloor_steps=150)
    case = peers.case_arm7_floor(plan, tmp_path)
    assert [c.column for c in case.contenders][:4] == ["mbsim"] * 3 + ["mujoco"]
    mj = case.contenders[3].run.__self__
    assert 'damping="1.0"' in mj.xml and mj.model.opt.timestep == pytest.approx(1e-3)
    system = peers.system_of(load_scene(str(tmp_path / "arm7_floor.yaml")))
    link7 = system.bodies[system.index("panda_link7")]
    box = link7.shapes[0]
    assert box["type"] == "box" and np.allclose(box["size"], [0.08, 0.2, 0.1])
    data = mj.fresh()
    (geom,) = np.nonzero(mj.model.geom_bodyid == mj.model.body("panda_link7").id)[0]
    assert np.allclose(data.geom_xpos[geom], link7.pos + link7.rot @ box["pose"]["position"], atol=1e-12)
    peers.time_case(case, log=lambda _: None)
    rows = case.check()
    free = rows[0]
    assert free["peer"] == "mujoco" and free["ok"] and free["distance"] < 1e-6, free
    # it fell: panda_link7 is 5 cm lower at 0.1 s than at the start
    assert link7.pos[2] - free["mbsim"][2] > 0.04
    assert all("error" not in r for r in rows), rows
    assert any("per simulated second" in n for n in case.notes)
    assert peers.markdown(peers.rows_of(case)).count("| Panda hand falling onto a floor") == 3
