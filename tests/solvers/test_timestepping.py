"""Method ``timestepping``: impacts, friction, resting contact and joints with contacts, against
Newton's restitution law, Coulomb's law, conservation laws and the paper's four-bar
(papers/unilateral-constraints-lcp-projection-correction.txt)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from quick_loop import quick

SCENES = Path(__file__).resolve().parents[2] / "scenes"


def _apexes(z: np.ndarray, vz: np.ndarray) -> np.ndarray:
    idx = np.nonzero((vz[:-1] > 0) & (vz[1:] <= 0))[0]
    return np.array([max(z[i], z[i + 1]) for i in idx])


@pytest.mark.parametrize("lcp", quick(["pgs", "lemke"], keep="pgs"))
def test_bouncing_ball_apex_heights_follow_restitution(run_scene, lcp):
    """Drop from 1 m, e = 0.8: the k-th apex is 0.8^(2k) m (measured within 0.15 %); three
    bounces (the third apex comes at t = 1.98 s)."""
    summary, res = run_scene(SCENES / "bouncing_ball.yaml", [f"solver.lcp={lcp}", "time.end=2.2"])
    z = res["bodies/ball/position"][:, 2] - 0.1
    apex = _apexes(z, res["bodies/ball/velocity"][:, 2])
    assert len(apex) == 3
    expected = 0.8 ** (2 * np.arange(1, 4))
    np.testing.assert_allclose(apex, expected, rtol=0.01)
    # the impacts' losses are booked as work: total - work is conserved
    conserved = res["diagnostics/energy/total"] - res["diagnostics/energy/work"]
    assert np.max(np.abs(conserved - conserved[0])) < 1e-8 * abs(res["diagnostics/energy/total"][0])
    assert np.max(res["diagnostics/contacts/max_penetration"]) < 1e-4


def test_sliding_block_stops_where_coulomb_says(run_scene):
    """v = 2 m/s, mu = 0.3: stops after v^2/(2 mu g) = 0.680 m at t = v/(mu g) = 0.680 s."""
    _, res = run_scene(SCENES / "sliding_block.yaml", ["time.end=0.75"])  # at rest from 0.68 s on
    t, x, vx = res.time, res["bodies/block/position"][:, 0], res["bodies/block/velocity"][:, 0]
    stop = int(np.argmax(np.abs(vx) < 1e-9))
    g, mu, v0 = 9.81, 0.3, 2.0
    assert t[stop] == pytest.approx(v0 / (mu * g), rel=0.02)
    assert x[-1] == pytest.approx(v0**2 / (2 * mu * g), rel=0.02)  # measured: 6e-7 relative
    assert np.max(np.abs(res["bodies/block/position"][:, 2] - 0.1)) < 1e-4  # no sinking, no hopping
    assert np.max(np.abs(res["bodies/block/angular_velocity"])) < 1e-6  # no tipping


@pytest.mark.slow
def test_box_stack_rests_without_jitter_or_sinking(run_scene):
    """Ten boxes at rest for 5 s: penetration < 1e-4 m, the top box moves < 1e-4 m
    (measured: 6e-7 m and 9e-6 m)."""
    _, res = run_scene(SCENES / "box_stack.yaml")
    assert np.max(res["diagnostics/contacts/max_penetration"]) < 1e-4
    top = res["bodies/box10/position"]
    assert np.max(np.linalg.norm(top - top[0], axis=1)) < 1e-4
    for k in range(1, 11):  # nobody moved
        p = res[f"bodies/box{k}/position"]
        assert np.max(np.linalg.norm(p - p[0], axis=1)) < 1e-4


def test_four_bar_hits_the_wall_and_comes_to_rest(run_scene):
    """The paper's §4: repeated impacts of decreasing strength, then at rest on the wall; with
    the projection correction the joints hold to 1e-10 at every step (measured 1e-13)."""
    summary, res = run_scene(SCENES / "four_bar_wall_2d.yaml")
    assert summary.max_position_violation < 1e-10
    angle = res["bodies/bar1/angle"]
    x_a = 0.2 * np.cos(angle)  # point a, the top of bar 1 (pivot at the origin)
    assert np.min(x_a) > -0.06 - 1e-3  # the wall at x = -0.06 holds (penetration below 1 mm)
    impulses = res["diagnostics/contacts/normal_impulse"]
    hits = impulses[impulses > 1e-9]
    assert len(hits) > 5  # repeated impacts
    assert hits[0] > 2 * hits[-1]  # getting weaker ...
    w = np.abs(res["bodies/bar1/angular_velocity"])
    t = res.time
    assert w[-1] < 1e-4 and w[t > 0.9].max() < 0.1 * w[(t > 0.2) & (t < 0.3)].max()  # ... it settles on the wall
    assert x_a[-1] == pytest.approx(-0.06, abs=1e-3)


def test_four_bar_without_projection_drifts(run_scene):
    """The same without the paper's correction: the joints drift (reported, here a few mm)."""
    summary, _ = run_scene(
        SCENES / "four_bar_wall_2d.yaml",
        ["solver.projection.position=false", "solver.projection.velocity=false", "solver.max_violation=1"],
    )
    assert summary.max_position_violation > 1e-4  # measured 2.4e-3


@pytest.mark.slow  # ~2 s; the cradle under event_driven stays in the quick loop
def test_newtons_cradle_conserves_momentum_and_energy(run_scene):
    """Simultaneous impacts of a touching row, e = 1. The textbook cradle ends with (0, 0, 0, 0, 1)
    m/s; the time-stepping LCP, which resolves all touching contacts in one impulse problem,
    gives (-0.6, 0.4, 0.4, 0.4, 0.4): the same momentum and energy, another distribution (for
    the textbook outcome the impacts must travel through the row one after the other)."""
    _, res = run_scene(SCENES / "newtons_cradle.yaml")
    v = np.stack([res[f"bodies/ball{k}/velocity"][:, 0] for k in range(1, 6)], axis=1)
    assert np.max(np.abs(v.sum(axis=1) - 1.0)) < 1e-10  # momentum, every recorded step
    assert 0.5 * np.sum(v[-1] ** 2) == pytest.approx(0.5, rel=1e-9)  # energy, e = 1
    np.testing.assert_allclose(v[-1], [-0.6, 0.4, 0.4, 0.4, 0.4], atol=1e-6)


def test_lemke_and_pgs_agree_on_the_four_bar(run_scene):
    _, pgs = run_scene(SCENES / "four_bar_wall_2d.yaml", ["solver.lcp=pgs", "time.end=0.3"])
    _, lemke = run_scene(SCENES / "four_bar_wall_2d.yaml", ["solver.lcp=lemke", "time.end=0.3"])
    np.testing.assert_allclose(pgs["q"], lemke["q"], atol=1e-8)


def test_circle_bouncing_on_a_line_in_2d(run_scene):
    scene = {
        "mbsim": 1,
        "name": "disc",
        "dimension": 2,
        "gravity": [0, -9.81],
        "time": {"end": 0.6, "step": 2e-4},  # the first apex comes at t = 0.48 s
        "solver": {"method": "timestepping"},
        "ground": {"shapes": [{"type": "line", "point": [0, 0], "normal": [0, 1]}]},
        "bodies": [{"name": "disc", "mass": 1.0, "inertia": 0.005, "position": [0, 0.6],
                    "shapes": [{"type": "circle", "radius": 0.1}]}],
        "contacts": [{"type": "rigid", "body1": "ground", "body2": "disc", "restitution": 0.5}],
    }  # fmt: skip
    _, res = run_scene(scene)
    y = res["bodies/disc/position"][:, 1] - 0.1
    apex = _apexes(y, res["bodies/disc/velocity"][:, 1])
    assert apex[0] == pytest.approx(0.5 * 0.25, rel=0.01)  # 0.5 m drop, e^2 = 0.25


def test_rigid_contacts_need_timestepping(run_scene, tmp_path):
    from click.testing import CliRunner

    from mbsim.cli.main import cli

    result = CliRunner().invoke(cli, ["validate", str(SCENES / "bouncing_ball.yaml"), "--set", "solver.method=gauss"])
    assert result.exit_code == 2
    assert "'rigid' needs solver.method 'timestepping' or 'event_driven'" in result.output


def _compiled(scene: dict, tmp_path) -> bool:
    """Whether method timestepping takes the compiled step of free bodies for ``scene``."""
    from conftest import write_yaml_scene

    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    _, solver = prepare(load_scene(str(write_yaml_scene(scene, tmp_path / "compiled.yaml"))))
    return solver.compiled


def test_free_bodies_take_the_compiled_step_and_meet_closed_forms(run_scene, tmp_path):
    """Free bodies with compiled shapes step through mbsim.solvers.timestepping.step_kernels: a box
    sliding at 2 m/s at 0.4 rad to the tangent basis with mu = 0.5 stops after v^2 / (2 mu g) along
    its initial direction (to 0.5 %; nothing sideways), and a solid sphere on a 0.3 rad incline with
    mu = 0.5 rolls: its centre travels 1/2 (5/7 g sin(theta)) t^2 (to 1e-9 relative)."""
    g, v, angle, theta = 9.81, 2.0, 0.4, 0.3
    slide = {
        "mbsim": 1, "name": "slide", "gravity": [0, 0, -g], "time": {"end": 0.45, "step": 1e-3},
        "solver": {"method": "timestepping"},
        "ground": {"shapes": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}]},
        "bodies": [{"name": "box", "density": 500, "position": [0, 0, 0.05],
                    "velocity": [v * float(np.cos(angle)), v * float(np.sin(angle)), 0.0],
                    "shapes": [{"type": "box", "size": [0.2, 0.2, 0.1]}]}],
        "contacts": [{"type": "rigid", "body1": "ground", "body2": "box", "friction": 0.5}],
    }  # fmt: skip
    normal = [float(-np.sin(theta)), 0.0, float(np.cos(theta))]
    incline = {
        "mbsim": 1, "name": "incline", "gravity": [0, 0, -g], "time": {"end": 0.5, "step": 1e-3},
        "solver": {"method": "timestepping"},
        "ground": {"shapes": [{"type": "plane", "point": [0, 0, 0], "normal": normal}]},
        "bodies": [{"name": "ball", "density": 1000, "position": [0.1 * n for n in normal],
                    "shapes": [{"type": "sphere", "radius": 0.1}]}],
        "contacts": [{"type": "rigid", "body1": "ground", "body2": "ball", "friction": 0.5}],
    }  # fmt: skip
    assert _compiled(slide, tmp_path) and _compiled(incline, tmp_path)
    _, res = run_scene(slide)
    p = res["bodies/box/position"][-1]
    direction = np.array([np.cos(angle), np.sin(angle)])
    assert p[:2] @ direction == pytest.approx(v**2 / (2 * 0.5 * g), rel=5e-3)
    assert abs(p[:2] @ np.array([-direction[1], direction[0]])) < 1e-9
    assert np.linalg.norm(res["bodies/box/velocity"][-1]) < 1e-9
    _, res = run_scene(incline)
    t, p = res.time, res["bodies/ball/position"]
    down = np.array([-np.cos(theta), 0.0, -np.sin(theta)])
    np.testing.assert_allclose((p - p[0]) @ down, 0.5 * 5 / 7 * g * np.sin(theta) * t**2, rtol=1e-9, atol=1e-12)


def test_recorded_contacts_of_the_compiled_step_meet_the_geometry(tmp_path):
    """The recorded contact count and penetration of the compiled step (FreeStep.contacts): a 0.2 m
    cube tilted 0.3 rad about x, its lowest edge 1e-4 m below the floor, touches at that edge's two
    corners with penetration 1e-4 m (the box's geometry); raised 1e-3 m above the floor, none; a
    cube resting flat 2e-5 m deep, its four corners, 2e-5 m."""
    a, tilt = 0.1, 0.3
    low = a * float(np.cos(tilt) + np.sin(tilt))  # the centre's height above its lowest edge
    turn = {"axis_angle": {"axis": [1, 0, 0], "angle": tilt}}

    def contacts(z: float, orientation: dict) -> tuple[int, float]:
        scene = {
            "mbsim": 1, "name": "tilted", "gravity": [0, 0, -9.81], "time": {"end": 0.01, "step": 1e-3},
            "solver": {"method": "timestepping"},
            "ground": {"shapes": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}]},
            "bodies": [{"name": "box", "density": 500, "position": [0, 0, z], "orientation": orientation,
                        "shapes": [{"type": "box", "size": [2 * a, 2 * a, 2 * a]}]}],
            "contacts": [{"type": "rigid", "body1": "ground", "body2": "box", "friction": 0.5}],
        }  # fmt: skip
        solver = _solver(scene, tmp_path)
        assert solver.compiled
        return solver.evaluate(solver.initial_state()).contacts

    touching, depth = contacts(low - 1e-4, turn)
    assert touching == 2 and depth == pytest.approx(1e-4, rel=1e-9)
    assert contacts(low + 1e-3, turn) == (0, 0.0)
    touching, depth = contacts(a - 2e-5, {"quaternion": [1, 0, 0, 0]})
    assert touching == 4 and depth == pytest.approx(2e-5, rel=1e-9)


def _pendulum_at_a_wall(e: float, end: float) -> dict:
    """A 1 kg bob (sphere, radius 0.1) on a weightless 1 m hinge about y, released horizontal; at the
    bottom it touches the wall x = 0 moving straight into it."""
    return {
        "mbsim": 1, "name": "pendulum at a wall", "gravity": [0, 0, -9.81], "time": {"end": end, "step": 1e-3},
        "solver": {"method": "timestepping"},
        "ground": {"shapes": [{"type": "plane", "point": [0, 0, 0], "normal": [1, 0, 0]}]},
        "bodies": [{"name": "bob", "mass": 1.0, "inertia": [1e-3, 1e-3, 1e-3], "position": [1.1, 0, 1.0],
                    "shapes": [{"type": "sphere", "radius": 0.1}]}],
        "joints": [{"name": "hinge", "type": "revolute", "body1": "ground", "body2": "bob", "point": [0.1, 0, 1.0],
                    "axis": [0, 1, 0]}],
        "contacts": [{"type": "rigid", "body1": "ground", "body2": "bob", "restitution": e}],
    }  # fmt: skip


def _chain_on_a_floor(end: float) -> dict:
    """Two 0.5 m bars on revolute joints about y, released horizontal, swinging onto a floor with
    restitution 0.3 and friction 0.5 (the lower bar then slides on it)."""
    bar = {"density": 500, "shapes": [{"type": "box", "size": [0.5, 0.05, 0.05]}]}
    return {
        "mbsim": 1, "name": "chain on a floor", "gravity": [0, 0, -9.81], "time": {"end": end, "step": 1e-3},
        "solver": {"method": "timestepping"},
        "ground": {"shapes": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}]},
        "bodies": [{"name": "l1", "position": [0.25, 0, 0.6], **bar},
                   {"name": "l2", "position": [0.75, 0, 0.6], **bar}],
        "joints": [{"name": "j1", "type": "revolute", "body1": "ground", "body2": "l1", "point": [0, 0, 0.6],
                    "axis": [0, 1, 0]},
                   {"name": "j2", "type": "revolute", "body1": "l1", "body2": "l2", "point": [0.5, 0, 0.6],
                    "axis": [0, 1, 0]}],
        "contacts": [{"type": "rigid", "body1": "ground", "body2": "l*", "restitution": 0.3, "friction": 0.5}],
    }  # fmt: skip


def _solver(scene, tmp_path):
    """The prepared timestepping solver of ``scene`` (a file, or a dict written to tmp_path)."""
    import yaml

    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    path = scene
    if not isinstance(scene, Path):
        path = tmp_path / "scene.yaml"
        path.write_text(yaml.safe_dump(scene, sort_keys=False), encoding="utf-8")
    return prepare(load_scene(str(path)))[1]


def test_joints_take_the_compiled_step_and_meet_restitution(tmp_path):
    """A pendulum whose bob hits a wall at the bottom of its swing steps compiled (joint rows and
    contact in step_kernels, no step handed back): it arrives at sqrt(2 g L) (to 0.5 %: the scheme's
    first-order energy error), leaves at e times its arrival speed (Newton's law, to 1e-6) and rises
    to e^2 L (energy, to 1 %); the hinge holds (|bob - hinge| = L to 1e-9)."""
    g, L, e = 9.81, 1.0, 0.5
    solver = _solver(_pendulum_at_a_wall(e, 1.3), tmp_path)
    assert solver.compiled
    state = solver.initial_state()
    before = after = None
    height = []
    hinge = np.array([0.1, 0.0, 1.0])
    while state.t < 1.3 - 1e-9:
        new, info, _ = solver.step(state, 1e-3)
        if info.extra["contacts/normal_impulse"] > 0.0:
            assert before is None  # one impact
            before, after = state.v[:3], new.v[:3]
        elif after is not None:
            height.append(new.q[2])
        assert abs(np.linalg.norm(new.q[:3] - hinge) - L) < 1e-9
        state = new
    assert solver.python_steps == 0
    assert np.linalg.norm(before) == pytest.approx(np.sqrt(2 * g * L), rel=5e-3)
    assert after[0] / before[0] == pytest.approx(-e, rel=1e-6)
    assert max(height) == pytest.approx(e**2 * L, rel=1e-2)


def _joint_case(name: str):
    """(scene, step, steps) of test_compiled_joint_step_is_the_python_step's case ``name``."""
    import yaml

    if name == "four_bar":
        return SCENES / "four_bar_wall_2d.yaml", 0.01, 100
    if name == "chain":
        return _chain_on_a_floor(0.7), 1e-3, 700
    if name == "door":
        door = yaml.safe_load((SCENES / "door_stop.yaml").read_text())
        door["solver"] = {"method": "timestepping"}
        door["joints"][0]["friction"] = {"coulomb": 2.0}
        return door, 1e-3, 2000
    redundant = yaml.safe_load((SCENES / "parallelogram_redundant_2d.yaml").read_text())
    redundant["solver"] = {"method": "timestepping"}
    redundant["ground"] = {"shapes": [{"type": "line", "point": [0, -0.9], "normal": [0, 1]}]}
    redundant["contacts"] = [{"type": "rigid", "body1": "ground", "body2": "coupler", "restitution": 0.5}]
    return redundant, 2e-3, 20


@pytest.mark.parametrize("case", quick(["four_bar", "chain", "door", "redundant"], keep="four_bar"))
def test_compiled_joint_step_is_the_python_step(tmp_path, case):
    """The compiled step with joints and the Python path give the same states step by step (to
    round-off, 1e-10): the paper's four-bar at its wall (2D, eight joint rows, repeated impacts), a
    two-bar chain sliding with friction on a floor (3D, ten rows) and the door of door_stop.yaml with
    Coulomb friction in its hinge (2 N m) hitting its stop (a stop row and a friction row, whose
    recorded forces agree too), and so do the recorded joint impulses where no contact shares them (to
    1e-7 N). A model with redundant joints (the parallelogram with a third crank) hands every step
    back to Python, whose SVD cuts the rank."""
    scene, h, steps = _joint_case(case)
    compiled, python = _solver(scene, tmp_path), _solver(scene, tmp_path)
    python._free = None  # the Python path
    a, b = compiled.initial_state(), python.initial_state()
    hits = 0
    for _ in range(steps):
        (a, info, _), (b, _, _) = compiled.step(a, h), python.step(b, h)
        hits += info.extra["contacts/normal_impulse"] > 0.0
        np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-10)
        np.testing.assert_allclose(a.v, b.v, rtol=0, atol=1e-10)
        assert a.work == pytest.approx(b.work, rel=1e-9, abs=1e-12)
        # the recorded joint impulses over h (P_E and the velocity projection's; physics in
        # test_recorded_pendulum_reaction_is_the_rods_pull), on the steps without contact impulses: a bar
        # lying on the floor shares its tilting torque between its contact corners and its hinge's rows,
        # not uniquely (the chain's differ there by 2e-3 N m, its velocities by 2e-14 m/s)
        if info.extra["contacts/normal_impulse"] == 0.0:
            np.testing.assert_allclose(compiled._last_joint_impulse[1], python._last_joint_impulse[1],
                                       rtol=0, atol=1e-7)  # fmt: skip
        if case == "door":  # the stop's and the friction's forces of the step
            hits += compiled._last_coordinate_forces[1][0][0] != 0.0
            np.testing.assert_allclose(compiled._last_coordinate_forces[1], python._last_coordinate_forces[1],
                                       rtol=0, atol=1e-9)  # fmt: skip
    assert compiled.python_steps == (steps if case == "redundant" else 0)
    assert hits > 0 or case == "redundant"


def _pull_error(result, body: str, joint: str, mass: float, gravity: np.ndarray, scale: float) -> float:
    """The largest |recorded reaction force on ``body`` - the exact one| over the rows after the start,
    over ``scale``: the exact force of a point-like bob on a weightless rod to a pivot at the origin is
    the rod's pull -T p/L, T = m |v|^2 / L + m g.p/L (the radial balance on the sphere |p| = L), from
    the recorded position p and velocity v of the same row."""
    p, v = result[f"bodies/{body}/position"][1:], result[f"bodies/{body}/velocity"][1:]
    force = result[f"joints/{joint}/reaction"][1:, : len(gravity)]
    length = np.linalg.norm(p, axis=1)
    unit = p / length[:, None]
    pull = mass * np.sum(v * v, axis=1) / length + mass * (unit @ gravity)
    return float(np.max(np.linalg.norm(force + pull[:, None] * unit, axis=1)) / scale)


@pytest.mark.parametrize(
    "h, velocity, bound",
    [(0.01, True, 2.5e-2), (0.001, True, 2.5e-3), (0.001, False, 4e-3)],
    ids=["h0.01", "h0.001", "no-velocity-projection"],
)
def test_recorded_pendulum_reaction_is_the_rods_pull(run_scene, h, velocity, bound):
    """The recorded pivot reaction of pendulum_2d.yaml (1 kg, 1 m, released at 2.5 rad) under
    timestepping, over its first 1.5 s (through the bottom at 45 N): the rod's pull m v^2/L + m g cos
    theta along the rod from each row's own state, to 2.5 % of the largest pull at h = 0.01 and 0.25 %
    at h = 0.001 (measured 1.8 % and 0.18 %: first order, the step's mean force recorded at its end).
    The joints' impulse is the step's P_E plus the velocity projection's (which turns v+, tangent at
    the midpoint, tangent at the end: half the centripetal turning); without it the record was 39 %
    off at either h. Without the velocity projection P_E alone is the whole impulse (nothing added:
    0.30 % at h = 0.001, bound 0.4 %; adding the position projection's (2/h) "impulse" doubles the
    centripetal part there)."""
    overrides = ["solver.method=timestepping", "solver.integrator=null", f"time.step={h}", "time.end=1.5"]
    if not velocity:
        overrides.append("solver.projection.velocity=false")
    _, result = run_scene(SCENES / "pendulum_2d.yaml", overrides)
    g = np.array([0.0, -9.81])
    largest = 9.81 * (3.0 - 2.0 * np.cos(2.5))  # the pull at the bottom: m g (3 - 2 cos theta0)
    assert _pull_error(result, "bob", "pivot", 1.0, g, largest) < bound


@pytest.mark.parametrize("h, bound", [(0.01, 1.6e-2), (0.001, 1.6e-3)], ids=["h0.01", "h0.001"])
def test_recorded_conical_pendulum_reaction_is_its_pull(run_scene, h, bound):
    """A 2 kg bob on a spherical joint 1 m above it in conical motion at 60 degrees (omega^2 = g / (L
    cos alpha)): the recorded reaction is the rod's pull, T = m g / cos alpha = 2 m g in steady motion
    (here from each row's state: m |v|^2/L + m g.p/L), to 1.6 % of 2 m g at h = 0.01 and 0.16 % at
    h = 0.001 (measured 1.2 % and 0.12 %; the old record, P_E alone, was 37 % off), and no torque."""
    g, L, alpha, m = 9.81, 1.0, np.pi / 3, 2.0
    omega = float(np.sqrt(g / (L * np.cos(alpha))))
    r = float(L * np.sin(alpha))
    scene = {
        "mbsim": 1, "name": "conical pendulum", "gravity": [0, 0, -g], "time": {"end": 1.0, "step": h},
        "solver": {"method": "timestepping"},
        "bodies": [{"name": "bob", "mass": m, "inertia": [1e-6, 1e-6, 1e-6],
                    "position": [r, 0.0, float(-L * np.cos(alpha))], "velocity": [0.0, omega * r, 0.0],
                    "angular_velocity": [0.0, 0.0, omega]}],
        "joints": [{"name": "pivot", "type": "spherical", "body1": "ground", "body2": "bob", "point": [0, 0, 0]}],
    }  # fmt: skip
    _, result = run_scene(scene)
    assert _pull_error(result, "bob", "pivot", m, np.array([0.0, 0.0, -g]), 2 * m * g) < bound
    assert np.max(np.abs(result["joints/pivot/reaction"][:, 3:])) < 1e-9
