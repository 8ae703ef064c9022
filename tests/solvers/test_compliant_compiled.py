"""Compliant contacts in the compiled step (compliant_kernels.compliant_forces_into over the
FlatModel's cc_* arrays): no Python force group is left in the run, and the compiled run of an
undamped Hertz impact follows the one-coordinate Hertz solution m d'' = -k d^1.5 (solved here by
scipy at tight tolerance), keeps the energy with the contact's elastic potential k d^2.5/2.5 in it,
and records the per-pair diagnostics of its compiled rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from scipy.integrate import solve_ivp

from mbsim.model.contact.compliant import CompliantContacts

M, V0, K, R, GAP = 1.0, 0.1, 1.0e9, 0.05, 2.0e-5


def _hertz_scene(method: str, classes: bool = False) -> dict:
    """A mesh icosphere with one vertex pointing down falls at V0 onto the ground's box (the
    master, its face at z = 0) without gravity: one sample point in contact."""
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=R)
    vertex = sphere.vertices[0] / np.linalg.norm(sphere.vertices[0])
    axis = np.cross(vertex, [0, 0, -1.0])
    angle = np.arccos(np.clip(-vertex[2], -1, 1))
    contact = {"name": "hit", "type": "compliant", "body1": "ground", "body2": "ball", "stiffness": K,
               "exponent": 1.5, "sdf": {"cell": 0.004, "padding": 0.01}}  # fmt: skip
    if classes:
        contact["penetration_classes"] = [1e-5, 3e-5]
    return {
        "mbsim": 1,
        "name": "hertz sphere compiled",
        "time": {"end": 2.0e-3, "step": 1e-5},
        "solver": {"method": method, "integrator": "rk4"},
        "output": {"every": 1},
        "ground": {"shapes": [{"type": "box", "size": [0.2, 0.2, 0.1], "pose": {"position": [0, 0, -0.05]}}]},
        "bodies": [
            {
                "name": "ball",
                "mass": M,
                "inertia": [0.4 * M * R * R] * 3,
                "position": [0, 0, R + GAP],
                "orientation": {"axis_angle": {"axis": axis.tolist(), "angle": float(angle)}},
                "velocity": [0, 0, -V0],
                "shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": sphere.vertices.tolist()}}],
            },
        ],  # fmt: skip
        "contacts": [contact],
    }


def _hertz_height(t: np.ndarray) -> np.ndarray:
    """The ball's height by the one-coordinate Hertz model z'' = k/m max(R - z, 0)^1.5 (scipy,
    tolerance 1e-13; steps of at most 1 us through the kinks at the contact's start and end)."""

    def rhs(_, y):
        return [y[1], K / M * max(R - y[0], 0.0) ** 1.5]

    sol = solve_ivp(rhs, (0.0, t[-1]), [R + GAP, -V0], method="DOP853", rtol=1e-13, atol=1e-15, t_eval=t, max_step=1e-6)
    return sol.y[0]


@pytest.mark.parametrize("method", ["lagrange", "recursive"])
def test_compiled_hertz_impact_follows_the_closed_form(method, run_scene, tmp_path, monkeypatch):
    from mbsim.model.flat import model_form, python_reason
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    # the Python evaluation is not the run's: it would fail the run if called
    def python_path(*args, **kwargs):
        raise AssertionError("CompliantContacts.evaluate called: the Python force path was taken")

    monkeypatch.setattr(CompliantContacts, "evaluate", python_path)
    scene = _hertz_scene(method, classes=True)
    path = tmp_path / "hertz.yaml"
    import yaml

    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    model, solver = prepare(load_scene(str(path)))
    assert python_reason(model) == "" and model_form(model).ncc == 1
    assert solver.block_stepping and not getattr(solver, "_python_forces", [])
    _, res = run_scene(scene)
    t, z = res.time, res["bodies/ball/position"][:, 2]
    # against the Hertz solution: the height at every row (5e-8 m is 0.04 % of V0 times the
    # 1.29 ms contact time), the rebound at V0
    assert np.max(np.abs(z - _hertz_height(t))) < 5e-8
    assert res["bodies/ball/velocity"][-1, 2] == pytest.approx(V0, rel=1e-4)
    delta = (5 * M * V0**2 / (4 * K)) ** 0.4
    assert res["diagnostics/contacts/max_penetration"].max() == pytest.approx(delta, rel=1e-3)
    # energy: kinetic + the contact's elastic potential k d^2.5 / 2.5 is constant (undamped); without
    # the potential it would drop by all of M V0^2 / 2 at the deepest point
    total = res["diagnostics/energy/total"]
    assert np.max(np.abs(total - 0.5 * M * V0**2)) < 1e-5 * 0.5 * M * V0**2  # measured 6e-7
    assert res["diagnostics/energy/potential"].max() == pytest.approx(0.5 * M * V0**2, rel=1e-3)
    # the per-pair columns of the compiled rows: the one point, its penetration class
    count = res["diagnostics/contacts/count"]
    assert count.max() == 1
    np.testing.assert_array_equal(res["diagnostics/contacts/hit/count"], count)
    np.testing.assert_array_equal(res["diagnostics/contacts/hit/max_penetration"],
                                  res["diagnostics/contacts/max_penetration"])  # fmt: skip
    pen = res["diagnostics/contacts/hit/max_penetration"]
    expected = np.stack([(count > 0) & (pen < 1e-5), (pen >= 1e-5) & (pen < 3e-5), pen >= 3e-5], axis=1)
    np.testing.assert_array_equal(res["diagnostics/contacts/hit/class_counts"], expected.astype(float))


def test_compiled_step_control_agrees_with_the_box_test(tmp_path):
    """time.contact_step's test (``near``: the boxes overlap now or may within h) in compiled code
    (compliant_kernels.near, mbsim.model.flat.contacts_near) against the Python one on random states
    of the icosphere over the ground's box: the same answer at every state, both answers occurring."""
    import yaml

    from mbsim.model.flat import contacts_near
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    scene = _hertz_scene("lagrange")
    scene["time"]["contact_step"] = 1e-6
    path = tmp_path / "near.yaml"
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    model, _ = prepare(load_scene(str(path)))
    cc = model.compliant
    rng = np.random.default_rng(0)
    answers = []
    for _ in range(500):
        q, v = model.q0.copy(), model.v0 + rng.normal(0, 2.0, model.nv)
        q[:3] += rng.normal(0, 0.05, 3)
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        h = 10 ** rng.uniform(-4, -1)
        python = cc.near(model.frames(q, v), h)
        assert contacts_near(model, q, v, h) == python
        answers.append(python)
    assert 0 < sum(answers) < len(answers)


def test_step_control_inside_the_compiled_blocks(tmp_path):
    """time.contact_step under lagrange + rk4 runs in compiled blocks (the step control in
    ode_kernels' fixed steps) and takes the steps Python's loop takes: large ones while the
    blocks are apart, the small one from just before the impact on (the same step sizes and
    recorded times), with the elastic outcome +3 m/s (momentum and energy conservation)."""
    import h5py

    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare, run
    from mbsim.solvers.ode import ode_kernels

    scenes = Path(__file__).resolve().parents[2] / "scenes"
    overrides = ["time.step=1e-3", "time.contact_step=1e-5", "time.end=0.03", "output.every=1"]
    rows = {}
    for loop in ("compiled", "python"):
        spec = load_scene(str(scenes / "blocks_elastic.yaml"), overrides)
        model, solver = prepare(spec)
        assert solver.contact_step_blocks
        if loop == "python":  # Python's loop: one step at a time, its own test of the boxes
            solver._params[ode_kernels.CONTACT_STEP] = 0.0
            assert not solver.contact_step_blocks
        summary = run(spec, tmp_path / f"{loop}.h5", prepared=(model, solver))
        assert summary.status == "completed", summary.message
        with h5py.File(tmp_path / f"{loop}.h5", "r") as f:
            rows[loop] = (f["time"][...], f["diagnostics/solver/step_size"][...], f["bodies/block1/velocity"][-1, 0])
    (t, h, v1), (t_py, h_py, _) = rows["compiled"], rows["python"]
    np.testing.assert_array_equal(h, h_py)
    np.testing.assert_allclose(t, t_py, rtol=0, atol=1e-15)
    assert h.max() == pytest.approx(1e-3) and np.min(h[1:]) == pytest.approx(1e-5)
    assert v1 == pytest.approx(3.0, rel=5e-3)


V_SLIDE, MU_SLIDE, R_BALL, G = 2.0, 0.3, 0.05, 9.81


def _thin_floor_scene(sdf: dict | None = None) -> dict:
    """A ball (0.05 m) sliding at V_SLIDE on a long thin floor: a 40 x 1 x 0.04 m box whose size
    (40 m) alone would give a 0.63 m cell, 16 times its thickness."""
    contact = {"name": "floor", "type": "compliant", "body1": "ground", "body2": "ball", "stiffness": 1.0e6,
               "exponent": 1.5, "damping": 1.0e4, "damping_exponent": 1.5, "friction": MU_SLIDE}  # fmt: skip
    if sdf is not None:
        contact["sdf"] = sdf
    return {
        "mbsim": 1,
        "name": "ball on a thin floor",
        "gravity": [0, 0, -G],
        "time": {"end": 0.4, "step": 1e-3},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "output": {"every": 10},
        "ground": {"shapes": [{"type": "box", "size": [40, 1, 0.04], "pose": {"position": [15, 0, -0.02]}}]},
        "bodies": [
            {
                "name": "ball",
                "density": 1000,
                "position": [0, 0, R_BALL - 1e-5],
                "velocity": [V_SLIDE, 0, 0],
                "shapes": [{"type": "sphere", "radius": R_BALL}],
            }
        ],  # fmt: skip
        "contacts": [contact],
    }


def test_thin_floor_holds_the_ball_and_it_rolls_at_five_sevenths(run_scene):
    """The automatic cell follows the master's thickness (at most half of it): the ball stays on
    the 4 cm floor (it fell through it, 0 contacts, when the cell came from the 40 m size alone)
    and its slide turns to rolling as a solid ball's does: at 5/7 V_SLIDE after
    t_s = 2 V_SLIDE / (7 mu g), the centre at x(t_s) + 5/7 V_SLIDE (t - t_s)."""
    _, res = run_scene(_thin_floor_scene())
    z = res["bodies/ball/position"][:, 2]
    # (it hops on the stiff contact, 0.3 mm: the hysteresis damping chi g^1.5 is tiny at g ~ 3e-4 m)
    assert z.min() > R_BALL - 1e-3 and res["diagnostics/contacts/count"].max() > 0
    t_s = 2 * V_SLIDE / (7 * MU_SLIDE * G)
    t = res.time[-1]
    assert t > 1.5 * t_s
    x = V_SLIDE * t_s - 0.5 * MU_SLIDE * G * t_s**2 + 5 / 7 * V_SLIDE * (t - t_s)
    assert res["bodies/ball/velocity"][-1, 0] == pytest.approx(5 / 7 * V_SLIDE, rel=2e-3)
    assert res["bodies/ball/position"][-1, 0] == pytest.approx(x, abs=1e-3)


def test_a_cell_coarser_than_half_the_thickness_is_refused(tmp_path):
    """An explicit sdf.cell that could straddle the thin floor: exit 2 naming the contact, the key
    and a cell that works (half the 0.04 m thickness)."""
    import subprocess
    import sys

    import yaml

    path = tmp_path / "thin.yaml"
    path.write_text(yaml.safe_dump(_thin_floor_scene({"cell": 0.05})), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "mbsim", "validate", str(path)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "contacts[0].sdf.cell" in proc.stderr and "'floor'" in proc.stderr
    assert "sdf.cell <= 0.02" in proc.stderr


def test_the_cache_of_candidate_points_finds_what_looking_up_every_point_finds(tmp_path):
    """The compiled local detection looks only at a pair's cached candidates (the points whose
    value was below the cache's margin w where it was made) while sqrt(3) times the slave's largest
    point displacement since then stays below w. Along a random walk of the ball over the thin
    floor's face and long edge (steps from 1e-5 to 3e-2 m and rad), it finds the points, distances
    and gradients that looking up every point finds, to the last bit; the cache is both reused
    and made again along the walk."""
    import yaml
    from scipy.spatial.transform import Rotation

    from mbsim.model.contact.compliant_kernels import cached_contact_points, penetrating_points
    from mbsim.model.flat import rows_form
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    path = tmp_path / "floor.yaml"
    path.write_text(yaml.safe_dump(_thin_floor_scene()), encoding="utf-8")
    model, _ = prepare(load_scene(str(path)))
    form = rows_form(model)
    pair = model.compliant.pairs[0]
    n = len(pair.points)
    buffers = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros((n, 3))
    rng = np.random.default_rng(7)
    R, t = np.eye(3), np.array([1.0, 0.47, R_BALL - 2e-3])  # the ball over the floor's edge at y = 0.5
    remade = found = 0
    for _ in range(3000):
        step = 10 ** rng.uniform(-5, np.log10(3e-2))
        t = t + rng.normal(scale=step, size=3)
        t = np.clip(t, [0.5, 0.35, R_BALL - 5e-3], [1.5, 0.6, R_BALL + 2e-3])  # keep it touching
        R = np.ascontiguousarray(R @ Rotation.from_rotvec(rng.normal(scale=step, size=3)).as_matrix())
        idx, d, grad, again = cached_contact_points(form.flat, form.data, 0, R, t)
        count = penetrating_points(
            pair.points, pair.tree.point_order, pair.tree.node_centre, pair.tree.node_radius,
            pair.tree.node_child_start, pair.tree.node_child_count, pair.tree.node_point_start,
            pair.tree.node_point_count, False, R, t, pair.field.values, pair.field_origin, pair.field.cell,
            pair.mesh_lo, pair.mesh_hi, pair.field.cell, *buffers,
        )  # fmt: skip
        np.testing.assert_array_equal(idx, buffers[0][:count])
        np.testing.assert_array_equal(d, buffers[1][:count])
        np.testing.assert_array_equal(grad, buffers[2][:count])
        remade += again
        found += count
    assert found > 20_000  # the walk does touch
    assert 100 < remade < 2500, remade
