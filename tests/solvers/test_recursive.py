"""Method ``recursive`` (spatial operator algebra in joint coordinates) against what it did not produce:
``lagrange`` in body coordinates (scipy:DOP853, tolerance 1e-12) on chains and trees with every joint type,
walked either way, with drives (the hybrid problem), springs and applied loads; its inverse dynamics against
its forward dynamics, finite differences of the potential and the kinetic energy; the loop refusal; the
creeping robot of papers/creeping-robot-spatial-operator-algebra.txt.

Measured numbers are quoted next to each bound (CPython 3.11, numpy 2.4, scipy 1.17, numba 0.68).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from mbsim.model.model import State
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare

SCENES = Path(__file__).resolve().parents[2] / "scenes"
TIGHT_DOP853 = ["solver.integrator=scipy:DOP853", "solver.rtol=1e-12", "solver.atol=1e-12"]


# ----------------------------------------------------------------------------- scene builders


def _rot(rotvec) -> np.ndarray:
    return Rotation.from_rotvec(rotvec).as_matrix()


def _vec(x) -> list[float]:
    return [float(v) for v in x]


def _body(name, pos, R, m=1.0, size=(0.05, 0.05, 0.5), vel=None, omega=None) -> dict:
    a, b, c = size
    x, y, z, w = Rotation.from_matrix(R).as_quat()
    body = {
        "name": name,
        "mass": m,
        "inertia": [m * (b * b + c * c) / 12, m * (a * a + c * c) / 12, m * (a * a + b * b) / 12],
        "position": _vec(pos),
        "orientation": {"quaternion": _vec([w, x, y, z])},
    }
    if vel is not None:
        body["velocity"] = _vec(vel)
    if omega is not None:
        body["angular_velocity"] = _vec(omega)
    return body


def _scene(name, bodies, joints, forces=None, t_end=2.0) -> dict:
    scene = {
        "mbsim": 1,
        "name": name,
        "gravity": [0, 0, -9.81],
        "time": {"end": t_end, "step": 1e-3},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "output": {"every": 1000},
        "bodies": bodies,
        "joints": joints,
    }
    if forces:
        scene["forces"] = forces
    return scene


def chain(n: int = 12, seed: int = 1) -> dict:
    """n links on revolute joints with alternating axes (x, then y of the link above), zig-zagged."""
    rng = np.random.default_rng(seed)
    h, R, p = 0.25, np.eye(3), np.zeros(3)
    bodies, joints, parent = [], [], "ground"
    for k in range(n):
        axis = np.eye(3)[k % 2]
        world_axis = R @ axis
        R = R @ _rot(rng.uniform(-0.6, 0.6) * axis)
        bodies.append(_body(f"link{k + 1}", p + R @ [0, 0, -h], R))
        joints.append({"name": f"hinge{k + 1}", "type": "revolute", "body1": parent, "body2": f"link{k + 1}",
                       "point": _vec(p), "axis": _vec(world_axis)})  # fmt: skip
        p, parent = p + R @ [0, 0, -2 * h], f"link{k + 1}"
    return _scene(f"{n}-link chain", bodies, joints)


def tree() -> dict:
    """A trunk on a universal joint with two branches: revolute-revolute (+ a welded weight) and
    cylindrical (sprung)-spherical; two joints are written child first."""
    h = 0.25
    Rt = _rot([0.3, 0.2, 0.1])
    bodies = [_body("trunk", Rt @ [0, 0, -h], Rt, m=2.0)]
    joints = [{"name": "hip", "type": "universal", "body1": "ground", "body2": "trunk", "point": [0, 0, 0],
               "axes": [_vec(Rt @ [1, 0, 0]), _vec(Rt @ [0, 1, 0])]}]  # fmt: skip
    end = Rt @ [0, 0, -2 * h]
    Ra = Rt @ _rot([0, 0.8, 0])
    bodies.append(_body("a1", end + Ra @ [0, 0, -h], Ra))
    joints.append({"name": "a_knee", "type": "revolute", "body1": "a1", "body2": "trunk", "point": _vec(end),
                   "axis": _vec(Rt @ [0, 1, 0])})  # fmt: skip
    ea = end + Ra @ [0, 0, -2 * h]
    Ra2 = Ra @ _rot([0.5, 0, 0])
    bodies.append(_body("a2", ea + Ra2 @ [0, 0, -h], Ra2, m=0.7))
    joints.append({"name": "a_ankle", "type": "revolute", "body1": "a1", "body2": "a2", "point": _vec(ea),
                   "axis": _vec(Ra @ [1, 0, 0])})  # fmt: skip
    bodies.append(_body("weight", ea + Ra2 @ [0.1, 0, -2 * h], Ra2, m=0.3, size=(0.1, 0.1, 0.1)))
    joints.append({"name": "weld", "type": "fixed", "body1": "weight", "body2": "a2",
                   "point": _vec(ea + Ra2 @ [0.05, 0, -2 * h])})  # fmt: skip
    Rb = Rt @ _rot([-0.7, 0, 0.3])
    bodies.append(_body("b1", end + Rb @ [0, 0, -h], Rb, m=1.5))
    spring = {"stiffness": 40.0, "damping": 0.5, "rest": 0.05}
    joints.append({"name": "b_slide", "type": "cylindrical", "body1": "trunk", "body2": "b1", "point": _vec(end),
                   "axis": _vec(Rb @ [0, 0, 1]), "spring": spring})  # fmt: skip
    eb = end + Rb @ [0, 0, -2 * h]
    Rb2 = Rb @ _rot([0.4, -0.3, 0.2])
    bodies.append(_body("b2", eb + Rb2 @ [0, 0, -h], Rb2, omega=[0.5, -1.0, 2.0]))
    joints.append({"name": "b_ball", "type": "spherical", "body1": "b2", "body2": "b1", "point": _vec(eb)})
    return _scene("tree", bodies, joints)


def prismatic_spherical() -> dict:
    """Revolute arm, a sprung and damped slider along it, a spinning bob on a ball joint."""
    h = 0.3
    R1 = _rot([0.4, 0, 0])
    ps = R1 @ [0, 0, -2 * h]
    R3 = R1 @ _rot([0.3, 0.5, 0])
    bodies = [
        _body("arm", R1 @ [0, 0, -h], R1, m=2.0),
        _body("slider", ps, R1, m=0.5, size=(0.1, 0.1, 0.1)),
        _body("bob", ps + R3 @ [0, 0, -h], R3, omega=[0, 0, 3.0]),
    ]
    joints = [
        {"name": "shoulder", "type": "revolute", "body1": "ground", "body2": "arm", "point": [0, 0, 0],
         "axis": [1, 0, 0]},
        {"name": "slide", "type": "prismatic", "body1": "arm", "body2": "slider", "point": _vec(ps),
         "axis": _vec(R1 @ [0, 0, 1]), "spring": {"stiffness": 200.0, "damping": 1.0, "rest": -0.1}},
        {"name": "ball", "type": "spherical", "body1": "slider", "body2": "bob", "point": _vec(ps)},
    ]  # fmt: skip
    return _scene("prismatic and spherical", bodies, joints)


def floating() -> dict:
    """A free-flying, spinning base (no joint to the ground) carrying revolute, universal and spherical links."""
    h = 0.25
    R0 = _rot([0.1, 0.2, 0.3])
    p = np.array([0, 0, 1.0]) + R0 @ [0.2, 0, 0]
    R1 = R0 @ _rot([0, 1.2, 0])
    p2 = p + R1 @ [0, 0, -2 * h]
    R2 = R1 @ _rot([0.3, 0, 0])
    p3 = p2 + R2 @ [0, 0, -2 * h]
    R3 = R2 @ _rot([0, 0.4, 0.4])
    bodies = [
        _body("base", [0, 0, 1.0], R0, m=5.0, size=(0.4, 0.3, 0.2), vel=[0.3, -0.2, 1.0], omega=[0.5, 1.0, -0.7]),
        _body("l1", p + R1 @ [0, 0, -h], R1),
        _body("l2", p2 + R2 @ [0, 0, -h], R2),
        _body("l3", p3 + R3 @ [0, 0, -h], R3, omega=[1, 2, 3]),
    ]
    joints = [
        {"name": "j1", "type": "revolute", "body1": "base", "body2": "l1", "point": _vec(p),
         "axis": _vec(R0 @ [1, 0, 0])},
        {"name": "j2", "type": "universal", "body1": "l1", "body2": "l2", "point": _vec(p2),
         "axes": [_vec(R1 @ [1, 0, 0]), _vec(R2 @ [0, 1, 0])]},
        {"name": "j3", "type": "spherical", "body1": "l3", "body2": "l2", "point": _vec(p3)},
    ]  # fmt: skip
    return _scene("floating base", bodies, joints)


def driven() -> dict:
    """Hybrid: a free shoulder, a driven elbow (written child first), a driven slider and a free ball joint,
    loaded by state-dependent forces, a torque and a spring-damper to the ground."""
    h = 0.3
    R1 = _rot([0.4, 0, 0])
    p1 = R1 @ [0, 0, -2 * h]
    R2 = R1 @ _rot([0, 0.5, 0])
    p2 = p1 + R2 @ [0, 0, -2 * h]
    R3 = R2 @ _rot([0.3, 0.5, 0])
    bodies = [
        _body("arm", R1 @ [0, 0, -h], R1, m=2.0),
        _body("fore", p1 + R2 @ [0, 0, -h], R2),
        _body("slider", p2, R2, m=0.5, size=(0.1, 0.1, 0.1)),
        _body("bob", p2 + R3 @ [0, 0, -h], R3, omega=[0, 0, 3.0]),
    ]
    joints = [
        {
            "name": "shoulder",
            "type": "revolute",
            "body1": "ground",
            "body2": "arm",
            "point": [0, 0, 0],
            "axis": [1, 0, 0],
        },
        {
            "name": "elbow",
            "type": "revolute",
            "body1": "fore",
            "body2": "arm",
            "point": _vec(p1),
            "axis": _vec(R1 @ [0, 1, 0]),
            "drive": {"position": "0.8*sin(3*t)"},
        },
        {
            "name": "slide",
            "type": "prismatic",
            "body1": "fore",
            "body2": "slider",
            "point": _vec(p2),
            "axis": _vec(R2 @ [0, 0, 1]),
            "drive": {"position": "0.1*(1 - cos(2*t))"},
        },
        {"name": "ball", "type": "spherical", "body1": "slider", "body2": "bob", "point": _vec(p2)},
    ]
    forces = [
        {"type": "force", "body": "bob", "value": ["-0.5*vx", "0.3*sin(t)", "-0.2*vz"]},
        {"type": "torque", "body": "arm", "value": ["-0.1*wx", 0, "0.05"]},
        {"type": "spring_damper", "body1": "ground", "body2": "bob", "point1": [0.2, 0.3, 0.1],
         "point2": _vec(p2 + R3 @ [0, 0, -2 * h]), "stiffness": 20, "damping": 0.3},
    ]  # fmt: skip
    return _scene("driven", bodies, joints, forces)


def flipped(scene: dict) -> dict:
    """Every joint written the other way round (body1 <-> body2; a universal joint's axes swap too)."""
    out = dict(scene, name=scene["name"] + " (joints flipped)")
    joints = []
    for j in scene["joints"]:
        j = dict(j, body1=j["body2"], body2=j["body1"])
        if j["type"] == "universal":
            j["axes"] = [j["axes"][1], j["axes"][0]]
        joints.append(j)
    out["joints"] = joints
    return out


def planar() -> dict:
    """2D: a free-flying plate (a planar free root) carrying a hinged bar and a slider."""
    return {
        "mbsim": 1,
        "name": "planar floating",
        "dimension": 2,
        "gravity": [0, -9.81],
        "time": {"end": 2.0, "step": 1e-3},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "output": {"every": 1000},
        "bodies": [
            {"name": "plate", "mass": 3.0, "inertia": 0.2, "position": [0, 0], "orientation": 7.0,
             "velocity": [0.5, 2.0], "angular_velocity": 1.5},
            {"name": "bar", "mass": 1.0, "inertia": 0.08, "position": [0.5, -0.5], "orientation": 0.3},
            {"name": "block", "mass": 0.5, "inertia": 0.01, "position": [0.9, -0.9], "orientation": 0.3},
        ],
        "joints": [
            {"name": "hinge", "type": "revolute", "body1": "plate", "body2": "bar", "point": [0.3, -0.3]},
            {"name": "rail", "type": "prismatic", "body1": "block", "body2": "bar", "point": [0.9, -0.9],
             "axis": [1, -1], "spring": {"stiffness": 30, "damping": 0.2}},
        ],
    }  # fmt: skip


CASES = {
    "chain12": chain,
    "tree": tree,
    "prismatic_spherical": prismatic_spherical,
    "floating": floating,
    "driven": driven,
    "tree_flipped": lambda: flipped(tree()),
    "floating_flipped": lambda: flipped(floating()),
    "planar": planar,
}


# ----------------------------------------------------------------------------- against lagrange


@pytest.fixture(scope="module")
def runs(simulate, tmp_path_factory):
    """Every case run by both methods (DOP853, tolerance 1e-12) over its time span, once per module."""
    directory = tmp_path_factory.mktemp("recursive")
    out = {}
    for name, build in CASES.items():
        scene = build()
        both = {}
        for method in ("recursive", "lagrange"):
            both[method] = simulate(
                scene, [f"solver.method={method}", *TIGHT_DOP853], directory, stem=f"{name}-{method}"
            )
        out[name] = both
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_recursive_agrees_with_lagrange(runs, case):
    """Body positions, orientations and velocities after 2 s, the joint reactions and the drive forces
    agree with the body-coordinate method. Measured: positions within 5e-13 m, velocities 5e-12 m/s,
    reactions 6e-11 N of tens of N, drive forces 4e-11."""
    (s_rec, rec), (_, lag) = runs[case]["recursive"], runs[case]["lagrange"]
    assert rec.time[-1] == pytest.approx(lag.time[-1]) == pytest.approx(2.0)
    assert rec.attrs["method"] == "recursive"
    bodies = [k.split("/")[1] for k in rec.data if k.startswith("bodies/") and k.endswith("/position")]
    assert bodies
    planar = rec.attrs["dimension"] == 2
    for body in bodies:
        for quantity, bound in (("position", 1e-7), ("velocity", 1e-6), ("angular_velocity", 1e-6)):
            got, want = rec[f"bodies/{body}/{quantity}"][-1], lag[f"bodies/{body}/{quantity}"][-1]
            assert np.max(np.abs(got - want)) < bound, (body, quantity, got, want)
        if planar:
            assert abs(rec[f"bodies/{body}/angle"][-1] - lag[f"bodies/{body}/angle"][-1]) < 1e-7
        else:  # same rotation (either sign of the quaternion); the recursion's are continuous in time
            got, want = rec[f"bodies/{body}/orientation"][-1], lag[f"bodies/{body}/orientation"][-1]
            assert min(np.max(np.abs(got - want)), np.max(np.abs(got + want))) < 1e-7
    joints = [k.split("/")[1] for k in rec.data if k.startswith("joints/") and k.endswith("/reaction")]
    for joint in joints:
        got, want = rec[f"joints/{joint}/reaction"][-1], lag[f"joints/{joint}/reaction"][-1]
        assert np.max(np.abs(got - want)) < 1e-6 * max(1.0, np.max(np.abs(want))), joint
        if f"joints/{joint}/drive_force" in lag.data:
            drive, ref = rec[f"joints/{joint}/drive_force"], lag[f"joints/{joint}/drive_force"]
            assert abs(drive[-1] - ref[-1]) < 1e-6 * max(1.0, np.max(np.abs(ref))), joint
            assert abs(drive[0] - ref[0]) < 1e-6 * max(1.0, np.max(np.abs(ref))), joint
    # the recursion's body states meet the scene's joints; total - work is conserved (springs,
    # dampers, drives and loads included): measured drift 2e-13
    assert s_rec.max_position_violation < 1e-12
    assert s_rec.max_velocity_violation < 1e-10
    assert s_rec.energy_drift < 1e-8
    e_rec = rec["diagnostics/energy/total"] - rec["diagnostics/energy/work"]
    e_lag = lag["diagnostics/energy/total"] - lag["diagnostics/energy/work"]
    assert abs(e_rec[-1] - e_lag[-1]) < 1e-7 * max(1.0, abs(e_lag[0]))


def _names(file: str, which: str) -> list[str]:
    with h5py.File(file, "r") as f:
        return [n.decode() if isinstance(n, bytes) else str(n) for n in f[which].attrs["names"]]


def test_joint_coordinates_in_the_result_file(runs):
    summary, rec = runs["tree"]["recursive"]
    q_names, v_names = _names(summary.file, "q"), _names(summary.file, "v")
    # tree order from the ground; the universal's two angles, the cylinder's position then angle, a
    # quaternion for the ball joint, nothing for the weld
    assert q_names[:2] == ["hip.angle1", "hip.angle2"]
    assert set(q_names) == {"hip.angle1", "hip.angle2", "a_knee.angle", "b_slide.position", "b_slide.angle",
                            "a_ankle.angle", "b_ball.qw", "b_ball.qx", "b_ball.qy", "b_ball.qz"}  # fmt: skip
    assert "b_ball.wz" in v_names and len(v_names) == 9
    assert rec["q"].shape[1] == 10 and rec["v"].shape[1] == 9
    assert rec["joints/weld/reaction_body"].shape[1] == 6
    _, floating_run = runs["floating"]["recursive"]
    assert floating_run["q"].shape[1] == 7 + 1 + 2 + 4  # the free root's 7, then the joints
    assert np.max(np.abs(floating_run["diagnostics/constraints/quaternion_norm_error"])) < 1e-14


# ----------------------------------------------------------------------------- inverse dynamics


def _prepared(scene: dict, tmp_path: Path):
    import yaml

    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(scene, sort_keys=False), encoding="utf-8")
    model, solver = prepare(load_scene(str(path), ["solver.method=recursive"]))
    return model, solver


def _random_state(solver, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random joint coordinates (unit quaternions) and velocities."""
    s = solver.space
    q = rng.uniform(-1.0, 1.0, solver.nq)
    if len(s.quat_q):
        p = rng.normal(size=(len(s.quat_q), 4))
        q[s.quat_q] = p / np.linalg.norm(p, axis=1, keepdims=True)
    return q, rng.uniform(-2.0, 2.0, solver.nv)


@pytest.mark.parametrize("case", ["tree", "floating", "driven", "tree_flipped", "planar"])
def test_inverse_dynamics_fed_back_gives_the_accelerations(case, tmp_path):
    """tau = inverse_dynamics(q, v, qdd); forward_dynamics(q, v, tau) = qdd at random states (every
    coordinate free). Measured: 3e-13 relative."""
    _, solver = _prepared(CASES[case](), tmp_path)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q, v = _random_state(solver, rng)
        qdd = rng.uniform(-10.0, 10.0, solver.nv)
        tau, _ = solver.inverse_dynamics(0.3, q, v, qdd)
        back = solver.forward_dynamics(0.3, q, v, tau=tau, drives=False).qdd
        assert np.max(np.abs(back - qdd)) < 1e-9 * max(1.0, np.max(np.abs(qdd)))


def test_hybrid_solution_needs_no_force_on_the_free_joints(tmp_path):
    """Forward dynamics with the drives (the hybrid problem) and inverse dynamics of its accelerations:
    zero on the free coordinates, the drive forces on the driven ones. Measured: 4e-14 N."""
    _, solver = _prepared(driven(), tmp_path)
    rng = np.random.default_rng(3)
    driven_dofs = solver._driven_v
    for t in (0.0, 0.7, 1.9):
        q, v = _random_state(solver, rng)
        dyn = solver.forward_dynamics(t, q, v)
        # the driven coordinates follow their drives
        assert dyn.q[solver._driven_q] == pytest.approx([0.8 * np.sin(3 * t), 0.1 * (1 - np.cos(2 * t))], abs=1e-15)
        assert dyn.qdd[driven_dofs] == pytest.approx([-7.2 * np.sin(3 * t), 0.4 * np.cos(2 * t)], abs=1e-12)
        tau, _ = solver.inverse_dynamics(t, dyn.q, dyn.v, dyn.qdd)
        free = np.setdiff1d(np.arange(solver.nv), driven_dofs)
        assert np.max(np.abs(tau[free])) < 1e-9
        np.testing.assert_allclose(tau[driven_dofs], dyn.drive_force, rtol=1e-10, atol=1e-10)


def test_inverse_dynamics_is_the_gradient_of_the_potential_at_rest(tmp_path):
    """At rest with no acceleration the joint forces hold the tree against gravity and springs:
    tau = dV/dq, checked by central differences of the recorded potential (scalar coordinates).
    Measured: 3e-9 relative (the differences' error)."""
    _, solver = _prepared(tree(), tmp_path)
    rng = np.random.default_rng(11)
    q, _ = _random_state(solver, rng)
    zero = np.zeros(solver.nv)
    tau, _ = solver.inverse_dynamics(0.0, q, zero, zero)
    s = solver.space
    for qi, vi in zip(s.scalar_q, s.scalar_v, strict=True):
        eps = 1e-6
        up, down = q.copy(), q.copy()
        up[qi] += eps
        down[qi] -= eps
        potential = [solver.forward_dynamics(0.0, x, zero, with_potential=True).potential for x in (up, down)]
        assert tau[vi] == pytest.approx((potential[0] - potential[1]) / (2 * eps), rel=1e-6, abs=1e-7)


def test_mass_matrix_of_the_recursion_gives_the_kinetic_energy(tmp_path):
    """M(q) built column by column from inverse dynamics (v = 0: M e_i + gravity terms) is symmetric
    positive definite and 1/2 v^T M v equals the kinetic energy from the body velocities. Measured 1e-15."""
    for build in (tree, floating, planar):
        _, solver = _prepared(build(), tmp_path)
        rng = np.random.default_rng(5)
        q, v = _random_state(solver, rng)
        zero = np.zeros(solver.nv)
        bias, _ = solver.inverse_dynamics(0.0, q, zero, zero)
        M = np.column_stack([solver.inverse_dynamics(0.0, q, zero, e)[0] - bias for e in np.eye(solver.nv)])
        assert np.max(np.abs(M - M.T)) < 1e-12 * np.max(np.abs(M))
        assert np.min(np.linalg.eigvalsh(M)) > 0
        kinetic = solver.kinetic_energy(solver.kinematics(q, v))
        assert 0.5 * v @ M @ v == pytest.approx(kinetic, rel=1e-12)


def test_joint_coordinates_round_trip(tmp_path):
    """Body coordinates of a random state and back give the same joint coordinates (every joint type,
    both orientations)."""
    for build in (tree, lambda: flipped(tree()), floating, planar):
        _, solver = _prepared(build(), tmp_path)
        rng = np.random.default_rng(2)
        for _ in range(3):
            q, v = _random_state(solver, rng)
            q[solver.space.quat_q[:, 0]] = np.abs(q[solver.space.quat_q[:, 0]])  # w >= 0 as extracted
            qb, vb = solver.body_coordinates(State(0.0, q, v))
            q2, v2 = solver.joint_coordinates(qb, vb)
            np.testing.assert_allclose(q2, q, atol=1e-12)
            np.testing.assert_allclose(v2, v, atol=1e-12)


# ----------------------------------------------------------------------------- refusals, structure


def test_a_loop_is_refused_naming_the_joint(mbsim, tmp_path):
    scene = SCENES / "slider_crank_2d.yaml"
    out = tmp_path / "unused.h5"
    result = mbsim("run", scene, "--set", "solver.method=recursive", "-o", out)
    assert result.exit_code == 2
    assert not out.exists()  # refused before the run: the file it claimed is gone again
    assert "joints[3]" in result.stderr and "'slide' closes a kinematic loop" in result.stderr


def test_a_welded_body_has_no_coordinates(run_scene):
    """Only fixed joints: no coordinates at all; the weld carries the weight (reaction = -m g)."""
    scene = {
        "mbsim": 1,
        "name": "welded",
        "gravity": [0, 0, -9.81],
        "time": {"end": 0.01, "step": 1e-3},
        "solver": {"method": "recursive", "integrator": "rk4"},
        "bodies": [{"name": "b", "mass": 2.0, "inertia": [1, 1, 1], "position": [0.3, 0, 0]}],
        "joints": [{"name": "w", "type": "fixed", "body1": "ground", "body2": "b", "point": [0, 0, 0]}],
    }
    summary, res = run_scene(scene)
    assert res["q"].shape[1] == 0
    np.testing.assert_allclose(res["bodies/b/position"][-1], [0.3, 0, 0], atol=1e-15)
    np.testing.assert_allclose(res["joints/w/reaction"][-1], [0, 0, 2 * 9.81, 0, -0.3 * 2 * 9.81, 0], atol=1e-12)


# ----------------------------------------------------------------------------- the creeping robot


@pytest.mark.slow
def test_creeping_robot_creeps_with_friction_control(run_scene):
    """scenes/creeping_robot.yaml over two strokes: the anchored unit holds while the other slides
    (the actuator unit in the first half of each stroke, the front unit in the second), the robot
    advances by about a stroke per cycle, the actuator pushes against the flow while extending,
    and the energy balance (friction, flow and drives as work) holds."""
    summary, res = run_scene(SCENES / "creeping_robot.yaml", ["time.end=2"])
    t = res.time
    actuator = res["bodies/actuator_unit/velocity"]
    front = res["bodies/front_unit/velocity"]
    speed_a = np.linalg.norm(actuator, axis=1)
    speed_f = np.linalg.norm(front, axis=1)
    phase = np.mod(t, 1.0)
    extending = (phase > 0.05) & (phase < 0.45)
    contracting = (phase > 0.55) & (phase < 0.95)
    # anchored: creeps at most a few tenths of a mm/s; sliding: the stroke speed 0.4 L = 12 mm/s
    assert np.max(speed_a[extending]) < 1e-3 and np.median(speed_f[extending]) > 8e-3
    assert np.max(speed_f[contracting]) < 1e-3 and np.median(speed_a[contracting]) > 8e-3
    x = res["bodies/actuator_unit/position"][:, 0]
    assert x[-1] - x[0] > 0.8 * 0.2 * 0.03 * 2  # two strokes of 6 mm
    stroke = res["joints/stroke/drive_force"]
    assert np.median(stroke[extending]) > 0.03  # pushes the front unit against the flow (N)
    # the actuator's force along its body x is the drive force (no friction in the slide)
    np.testing.assert_allclose(res["joints/stroke/reaction_body"][:, 0], stroke, atol=1e-12)
    # the steering joint follows pi/6 rad/s
    angle = res["q"][:, _names(summary.file, "q").index("steer.angle")]
    np.testing.assert_allclose(angle, np.pi / 6 * (0.5 - np.abs(phase - 0.5)), atol=1e-12)
    assert summary.energy_drift < 1e-3  # measured 1e-4 (the regularised friction is stiff)


# ----------------------------------------------------------------------------- the compiled step


def loaded() -> dict:
    """``driven`` without its drives: every joint free, the state-dependent loads, the torque and the
    spring-damper kept (the compiled step's force elements)."""
    scene = driven()
    scene["joints"] = [{k: v for k, v in j.items() if k != "drive"} for j in scene["joints"]]
    return dict(scene, name="loaded")


def planar_loaded() -> dict:
    scene = planar()
    scene["forces"] = [
        {"type": "force", "body": "bar", "value": ["-0.4*vx + 0.2*sin(3*t)", "-0.1*vy"]},
        {"type": "torque", "body": "plate", "value": "-0.3*w"},
        {"type": "spring_damper", "body1": "ground", "body2": "block", "point1": [0.5, 0.5], "point2": [0.9, -0.9],
         "stiffness": 15, "damping": 0.4},
    ]  # fmt: skip
    return scene


COMPILED_CASES = {
    "chain12": chain,
    "tree_flipped": lambda: flipped(tree()),
    "floating": floating,
    "loaded": loaded,
    "planar_loaded": planar_loaded,
    "prismatic_spherical": prismatic_spherical,
}


@pytest.mark.parametrize("integrator", ["rk4", "euler", "semi_implicit_euler"])
@pytest.mark.parametrize("case", list(COMPILED_CASES))
def test_compiled_steps_equal_the_python_steps(case, integrator, tmp_path):
    """The compiled right-hand side (mbsim.solvers.recursive.recursive_kernels) and the Python one
    (Solver.forward_dynamics, kept for the driven joints) under the same integrator
    (mbsim.solvers.ode.integrate): joint coordinates, velocities and work after 150 steps agree to
    round-off (measured: bit-equal without force elements, but for the last step, shortened by
    round-off to land on t_end; with them 2.5e-16 rad, 1e-14 rad/s, 7e-18 J: their sums run in
    another order)."""
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(COMPILED_CASES[case](), sort_keys=False))
    spec = load_scene(path, ["solver.method=recursive", f"solver.integrator={integrator}"])
    model, solver = prepare(spec)
    assert solver.block_stepping, solver.compiled_reason
    solver.load_compiled()
    h, n = 1e-3, 150
    start = solver.initial_state()
    block = solver.advance(start, h, 0, n, 10**9, n * h, np.inf)  # ends on the row at t_end
    assert block.steps == n and block.status == "ok" and len(block.rows) == 1 and block.rows[0, -1] == n
    python = start
    for _ in range(n):
        python, info, _ = solver.step(python, h)
    assert block.state.t == pytest.approx(python.t, abs=1e-15)
    scale = 1.0 + np.max(np.abs(python.v))
    np.testing.assert_allclose(block.state.q, python.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(block.state.v, python.v, rtol=0, atol=1e-13 * scale)
    assert block.state.work == pytest.approx(python.work, rel=1e-12, abs=1e-13)
    assert block.info.h == pytest.approx(info.h)


@pytest.mark.parametrize("every", [1, 7])
@pytest.mark.parametrize("case", ["tree_flipped", "loaded", "planar_loaded", "floating"])
def test_compiled_rows_match_the_python_records(case, every, tmp_path, monkeypatch):
    """A whole run, a row every ``every`` steps: every dataset of the result file (joint coordinates, body
    data, energies, the joint equations' violations, reactions in world and body axes) as the Python path
    records it, to round-off (measured: 4e-15 relative, the reactions of the walked-back joints included)."""
    from mbsim.simulate import run
    from mbsim.solvers.recursive import Solver

    scene = COMPILED_CASES[case]()
    scene["output"] = {"every": every}
    scene["time"] = {"end": 0.3, "step": 1e-3}
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(scene, sort_keys=False))
    overrides = ["solver.method=recursive"]
    compiled = run(load_scene(path, overrides), tmp_path / "compiled.h5")
    with monkeypatch.context() as patch:
        patch.setattr(Solver, "block_stepping", property(lambda self: False))
        python = run(load_scene(path, overrides), tmp_path / "python.h5")
    assert compiled.status == python.status == "completed"
    assert compiled.steps == python.steps == 300 and compiled.recorded == python.recorded
    with h5py.File(tmp_path / "compiled.h5") as a, h5py.File(tmp_path / "python.h5") as b:
        names = []
        b.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        names.remove("scene")
        assert [n for n in names if n not in a] == []
        assert any("reaction_body" in n for n in names)
        for name in names:
            if name.startswith("diagnostics/timing") or b[name].dtype.kind not in "fiu":
                continue
            x, y = a[name][()], b[name][()]
            assert x.shape == y.shape, name
            scale = max(1.0, float(np.max(np.abs(y)))) if y.size else 1.0
            assert np.max(np.abs(x - y), initial=0.0) <= 1e-11 * scale, name


def test_drives_and_implicit_integrators_step_through_python(tmp_path):
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(driven(), sort_keys=False))
    _, solver = prepare(load_scene(path, ["solver.method=recursive"]))
    assert not solver.block_stepping and "drives" in solver.compiled_reason
    path.write_text(yaml.safe_dump(chain(3), sort_keys=False))
    _, solver = prepare(load_scene(path, ["solver.method=recursive", "solver.integrator=scipy:Radau"]))
    assert not solver.block_stepping and "scipy:Radau" in solver.compiled_reason
    _, solver = prepare(load_scene(path, ["solver.method=recursive", "solver.integrator=scipy:RK45"]))
    assert solver.block_stepping and not solver.compiled_reason


def _scipy_steps(solver, method: str, start, t_end: float, h: float, rtol: float, atol: float):
    """scipy's own RK45 / DOP853 object over the Python right-hand side (Solver.derivative), stepped
    as the method steps: the quaternions rescaled after each step, and the solver continued from
    the rescaled state with its derivative recomputed there. Accepted times and the last state."""
    import scipy.integrate

    ref = getattr(scipy.integrate, method)(
        solver.derivative, 0.0, np.concatenate((start.q, start.v, (start.work,))), t_end, first_step=h, rtol=rtol,
        atol=atol,
    )  # fmt: skip
    times = [0.0]
    while ref.t < t_end:
        assert ref.step() is None
        y = ref.y.copy()
        y[: solver.nq] = solver.normalize(y[: solver.nq])
        if not np.array_equal(y, ref.y):
            ref.y, ref.f = y, solver.derivative(ref.t, y)
        times.append(ref.t)
    return np.array(times), ref.y


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
@pytest.mark.parametrize("case", ["chain12", "floating"])
def test_compiled_embedded_pairs_take_scipys_steps(case, method, tmp_path, monkeypatch):
    """recursive under scipy:RK45 / scipy:DOP853 at a moderate tolerance (1e-5) steps in compiled
    blocks (the pair of mbsim.solvers.ode.integrate over the compiled right-hand side, carried across
    blocks); its Python path steps the same pair over the Python right-hand side. Both take the
    steps of scipy's own solver on the Python right-hand side (an independent integrator), with the
    quaternions rescaled between steps (``floating``): the same accepted times and states to
    round-off of the step control (measured: 5e-12 relative in t, floating under DOP853 4e-9, alike
    for both paths: the error estimate's cancellation amplifies the summation order, a loop against
    numpy's BLAS; with a first step of 0.02 instead of 0.1, 1.5e-7: test_integrate says more)."""
    scene = COMPILED_CASES[case]()
    scene["time"] = {"end": 1.0, "step": 0.1}  # the first step: not one whose error estimate is all round-off
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(scene, sort_keys=False))
    rtol, atol = 1e-5, 1e-7
    spec = load_scene(path, ["solver.method=recursive", f"solver.integrator=scipy:{method}", f"solver.rtol={rtol}",
                             f"solver.atol={atol}"])  # fmt: skip
    model, solver = prepare(spec)
    assert solver.block_stepping and solver.adaptive, solver.compiled_reason
    solver.load_compiled()
    start, t_end = solver.initial_state(), model.t_end
    times, y_ref = _scipy_steps(solver, method, start, t_end, model.step, rtol, atol)
    assert len(times) > 6
    # compiled blocks, a row every step (blocks of at most ROWS_PER_BLOCK rows)
    state, done, compiled = start, 0, [0.0]
    while state.t < t_end:
        block = solver.advance(state, model.step, done, 1, 10**9, t_end, np.inf)
        assert block.status == "ok" and block.steps > 0
        compiled += list(block.rows[:, 0])
        state, done = block.state, done + block.steps
    # the Python path: one step at a time (the compiled pair over Solver.derivative)
    python, h, stepped = start, model.step, [0.0]
    while python.t < t_end:
        python, _, h = solver.step(python, h)
        stepped.append(python.t)
    scale = 1.0 + np.max(np.abs(y_ref))
    for got, last in ((compiled, state), (stepped, python)):
        assert len(got) == len(times)
        np.testing.assert_allclose(got, times, rtol=1e-8, atol=0)
        y = np.concatenate((last.q, last.v, (last.work,)))
        np.testing.assert_allclose(y, y_ref, rtol=0, atol=1e-8 * scale)
