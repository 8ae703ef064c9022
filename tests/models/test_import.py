"""Models from URDF and MJCF (CONTRACT §5, mbsim.models) against independent libraries: Pinocchio's
ABA on real robot files (the UR5 arm, the Solo12 quadruped on a floating base) and MuJoCo's own
compiler and integrator on an MJCF model; `mbsim import` against the `models:` run; malformed
files exit 2 naming the file and the element."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from quick_loop import quick
from scipy.integrate import solve_ivp

from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare

ROOT = Path(__file__).resolve().parents[2]
UR5 = ROOT / "scenes" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf"
SOLO12 = ROOT / "scenes" / "robots" / "solo_description" / "robots" / "solo12.urdf"
SO100 = ROOT / "scenes" / "robots" / "so_arm_description" / "urdf" / "so100.urdf"  # an arm with a gripper jaw
PENDULUM_MJCF = ROOT / "tests" / "data" / "robots" / "double_pendulum_slider.xml"

pin = pytest.importorskip("pinocchio")


def pin_model(urdf: Path, free: bool):
    return pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer()) if free else pin.buildModelFromUrdf(str(urdf))


def random_state(model, rng, free: bool):
    """Pinocchio's (q, v) with every 1-dof joint random, and the same by joint name for the scene."""
    q, v = pin.neutral(model), np.zeros(model.nv)
    qj, vj = {}, {}
    for j in range(1, model.njoints):
        joint = model.joints[j]
        if joint.nq == 1:
            qj[model.names[j]], vj[model.names[j]] = float(rng.uniform(-1.5, 1.5)), float(rng.uniform(-2, 2))
            q[joint.idx_q], v[joint.idx_v] = qj[model.names[j]], vj[model.names[j]]
    base = {}
    if free:  # a free base at a general pose and twist (Pinocchio's velocity is in the base frame)
        R = pin.rpy.rpyToMatrix(*rng.uniform(-0.5, 0.5, 3))
        q[:3], q[3:7] = rng.uniform(-1, 1, 3), pin.Quaternion(R).coeffs()
        v[:3], v[3:6] = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
        w, x, y, z = q[6], q[3], q[4], q[5]
        base = {"base": "free", "position": q[:3].tolist(),
                "orientation": {"quaternion": [float(w), float(x), float(y), float(z)]},
                "base_velocity": (R @ v[:3]).tolist(), "base_angular_velocity": (R @ v[3:6]).tolist()}  # fmt: skip
    return q, v, {"joint_positions": qj, "joint_velocities": vj, **base}


def write_scene(tmp_path: Path, model_file: Path, method: str, entry: dict, name: str = "robot.yaml") -> Path:
    scene = {
        "mbsim": 1, "name": "imported", "gravity": [0, 0, -9.81], "time": {"end": 1.0, "step": 1e-3},
        "solver": {"method": method, "integrator": "scipy:DOP853", "rtol": 1e-10, "atol": 1e-10},
        "models": [{"file": str(model_file), **entry}],
    }  # fmt: skip
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    return path


def unlimited(scene: Path, joints: list[str]) -> Path:
    """The scene with the file's limits taken off the imported ``joints`` (amended with ``limits: null``):
    Pinocchio's dynamics, the reference, know no limits."""
    data = yaml.safe_load(scene.read_text())
    data["joints"] = [{"name": name, "limits": None} for name in joints]
    scene.write_text(yaml.safe_dump(data))
    return scene


def coordinate_joints(model) -> list[str]:
    """Pinocchio's names of the joints with one coordinate."""
    return [model.names[j] for j in range(1, model.njoints) if model.joints[j].nq == 1]


def com_of_joints(model, data, q):
    """World centre of mass of each joint's body (links on fixed joints merged, as mbsim's)."""
    pin.forwardKinematics(model, data, q)
    out = {}
    for j in range(1, model.njoints):
        frame = next(f for f in model.frames if f.parentJoint == j and f.type == pin.FrameType.BODY)
        out[frame.name] = data.oMi[j].act(model.inertias[j].lever)
    return out


def com_accelerations(model, data, q, v, a):
    """World classical acceleration of each joint body's centre of mass."""
    pin.forwardKinematics(model, data, q, v, a)
    out = {}
    for j in range(1, model.njoints):
        frame = next(f for f in model.frames if f.parentJoint == j and f.type == pin.FrameType.BODY)
        c = model.inertias[j].lever
        vel, acc = data.v[j], data.a[j]
        local = acc.linear + np.cross(acc.angular, c) + np.cross(vel.angular, vel.linear + np.cross(vel.angular, c))
        out[frame.name] = data.oMi[j].rotation @ local
    return out


def mujoco_rk4(xml: Path, qpos, qvel, seconds: float = 1.0):
    """MuJoCo's own run of an MJCF file, the reference of the MJCF tests: (model, data) after
    ``seconds`` of RK4 at 1e-4 s from (qpos, qvel), contacts off (the geoms give mass only)."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(xml))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    m.opt.timestep, m.opt.integrator = 1e-4, mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    for _ in range(round(seconds / 1e-4)):
        mujoco.mj_step(m, d)
    return m, d


@pytest.mark.parametrize(
    ("urdf", "free"), quick([(UR5, False), (SO100, False), (SOLO12, True)], keep="ur5", ids=["ur5", "so100", "solo12"])
)
def test_joint_accelerations_match_pinocchio_aba(tmp_path, urdf, free):
    """recursive's joint accelerations (its coordinates are the joints') at 20 random states equal
    Pinocchio's ABA to 1e-9 relative; lagrange's centre-of-mass accelerations (body coordinates)
    equal Pinocchio's to the same (the files' joint limits taken off: the states pass them, and
    Pinocchio's ABA knows none). Measured: ~1e-13."""
    model = pin_model(urdf, free)
    data = model.createData()
    rng = np.random.default_rng(7)
    for _ in range(20):
        q, v, entry = random_state(model, rng, free)
        a_ref = pin.aba(model, data, q, v, np.zeros(model.nv))
        spec = load_scene(str(unlimited(write_scene(tmp_path, urdf, "recursive", entry), coordinate_joints(model))))
        _, solver = prepare(spec)
        state = solver.initial_state()
        qdd, _ = solver.acceleration(0.0, state.q, state.v)
        names = solver.coordinate_names()[1]
        for j in range(1, model.njoints):
            if model.joints[j].nv == 1:
                got = qdd[names.index(f"{model.names[j]}.angle_rate")]
                want = a_ref[model.joints[j].idx_v]
                assert abs(got - want) <= 1e-9 * max(1.0, np.max(np.abs(a_ref)))
        spec = load_scene(str(unlimited(write_scene(tmp_path, urdf, "lagrange", entry), coordinate_joints(model))))
        m, solver = prepare(spec)
        vdot, _ = solver.acceleration(0.0, m.q0, m.v0)
        want = com_accelerations(model, data, q, v, a_ref)
        scale = max(1.0, max(np.max(np.abs(x)) for x in want.values()))
        for b, name in enumerate(spec.body_names):
            assert np.max(np.abs(vdot[6 * b : 6 * b + 3] - want[name])) <= 1e-9 * scale


def pinocchio_trajectory(model, q0, v0, times, free: bool):
    """Pinocchio's ABA integrated by scipy's DOP853 at 1e-12 (quaternion of a free base by its
    kinematic equation); the centres of mass at ``times``."""
    data = model.createData()

    def rate(q, v):
        out = np.zeros(model.nq)
        out[7 if free else 0 :] = v[6 if free else 0 :]
        if free:
            x, y, z, w = q[3:7]
            R = pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
            out[:3] = R @ v[:3]
            wx, wy, wz = v[3:6]  # q_dot = q (x) (0, w) / 2 in (x, y, z, w) order
            out[3:6] = 0.5 * np.array([w * wx + y * wz - z * wy, w * wy + z * wx - x * wz, w * wz + x * wy - y * wx])
            out[6] = -0.5 * (x * wx + y * wy + z * wz)
        return out

    def f(_, y):
        q, v = y[: model.nq].copy(), y[model.nq :]
        if free:
            q[3:7] /= np.linalg.norm(q[3:7])
        return np.concatenate((rate(q, v), pin.aba(model, data, q, v, np.zeros(model.nv))))

    sol = solve_ivp(f, (0, times[-1]), np.concatenate((q0, v0)), method="DOP853", rtol=1e-12, atol=1e-12,
                    dense_output=True)  # fmt: skip
    out = []
    for t in times:
        q = sol.sol(t)[: model.nq].copy()
        if free:
            q[3:7] /= np.linalg.norm(q[3:7])
        out.append((q, com_of_joints(model, data, q)))
    return out


@pytest.mark.parametrize("method", ["recursive", "lagrange"])
@pytest.mark.parametrize(
    ("urdf", "free"), quick([(UR5, False), (SO100, False), (SOLO12, True)], keep="ur5", ids=["ur5", "so100", "solo12"])
)
def test_one_second_trajectories_match_pinocchio(tmp_path, mbsim, urdf, free, method):
    """1 s under scipy:DOP853 at 1e-10 from a random state: every link's centre of mass within
    1e-6 m of Pinocchio's ABA integrated at 1e-12, and recursive's /q (named by the file's joints,
    counted as the file counts them) within 1e-6 rad of Pinocchio's q (limits taken off, as
    above). Measured: 2e-11 m (UR5),
    8e-12 m (Solo12)."""
    model = pin_model(urdf, free)
    q, v, entry = random_state(model, np.random.default_rng(3), free)
    scene = unlimited(write_scene(tmp_path, urdf, method, entry), coordinate_joints(model))
    result = mbsim("run", scene, "-o", tmp_path / "out.h5", "-q")
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "out.h5") as f:
        t = f["time"][:]
        picks = [0, len(t) // 2, len(t) - 1]
        reference = pinocchio_trajectory(model, q, v, t[picks], free)
        assert t[-1] == pytest.approx(1.0)
        for k, (q_ref, ref) in zip(picks, reference, strict=True):
            for name, com in ref.items():
                assert np.max(np.abs(f[f"bodies/{name}/position"][k] - com)) < 1e-6, (name, t[k])
            if method == "recursive":  # /q: the file's joint coordinates under its joint names
                names = [n.decode() if isinstance(n, bytes) else n for n in f["q"].attrs["names"]]
                for j in range(1, model.njoints):
                    if model.joints[j].nq == 1:
                        got = f["q"][k, names.index(f"{model.names[j]}.angle")]
                        assert abs(got - q_ref[model.joints[j].idx_q]) < 1e-6


def test_mjcf_mass_properties_and_motion_match_mujoco(tmp_path, mbsim):
    """An MJCF model whose mass properties MuJoCo's compiler derives (capsule, rotated box and
    sphere geoms with densities; degrees; a hinge off its body's origin with ref, stiffness with
    springref, damping; a slide): the bodies' masses and centres equal MuJoCo's, recursive's joint
    accelerations equal mj_forward's at 20 random states to 1e-9 relative, and 1 s agrees with
    MuJoCo's RK4 at 1e-4 s to 1e-8 m (measured 8e-12 m). Its motor is imported (control 0), not skipped."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(str(PENDULUM_MJCF))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT  # its geoms are for mass, not contact
    d = mujoco.MjData(m)
    rng = np.random.default_rng(11)
    names = ["shoulder", "elbow", "slider"]
    for _ in range(20):
        q, v = rng.uniform(-1, 1, 3), rng.uniform(-2, 2, 3)
        entry = {
            "joint_positions": dict(zip(names, q.tolist(), strict=True)),
            "joint_velocities": dict(zip(names, v.tolist(), strict=True)),
        }
        spec = load_scene(str(write_scene(tmp_path, PENDULUM_MJCF, "recursive", entry)))
        model, solver = prepare(spec)
        d.qpos[:], d.qvel[:] = q, v
        mujoco.mj_forward(m, d)
        state = solver.initial_state()
        qdd, _ = solver.acceleration(0.0, state.q, state.v)
        order = solver.coordinate_names()[1]
        got = [qdd[order.index(f"{n}.{'velocity' if n == 'slider' else 'angle_rate'}")] for n in names]
        np.testing.assert_allclose(got, d.qacc, rtol=0, atol=1e-9 * max(1.0, np.max(np.abs(d.qacc))))
        for b, name in enumerate(spec.body_names):
            assert model.body_mass[b] == pytest.approx(m.body(name).mass[0], rel=1e-14)
    entry = {"joint_positions": {"shoulder": 0.5, "elbow": -0.3, "slider": 0.05},
             "joint_velocities": {"shoulder": 0.2, "elbow": 1.0, "slider": -0.1}}  # fmt: skip
    scene = write_scene(tmp_path, PENDULUM_MJCF, "recursive", entry)
    result = mbsim("validate", scene)
    assert result.exit_code == 0 and "1 actuator imported" in result.output and "skipped" not in result.output
    assert mbsim("run", scene, "-o", tmp_path / "mj.h5", "-q").exit_code == 0
    m0, d0 = mujoco_rk4(PENDULUM_MJCF, [0.5, -0.3, 0.05], [0.2, 1.0, -0.1], seconds=0.0)
    m, d = mujoco_rk4(PENDULUM_MJCF, [0.5, -0.3, 0.05], [0.2, 1.0, -0.1])
    with h5py.File(tmp_path / "mj.h5") as f:
        t = f["time"][:]
        assert t[-1] == pytest.approx(d.time, abs=1e-9)
        for name in ("upper", "lower", "tip"):
            assert np.max(np.abs(f[f"bodies/{name}/position"][0] - d0.xipos[m0.body(name).id])) < 1e-12
            assert np.max(np.abs(f[f"bodies/{name}/position"][-1] - d.xipos[m.body(name).id])) < 1e-8


def test_import_writes_the_scene_the_models_run_equals(tmp_path, mbsim):
    """`mbsim import X.urdf -o x.yaml; mbsim run x.yaml` equals the `models:` run (here to round-off:
    the same bodies and joints at full double precision); an existing file it did not write stays."""
    out = tmp_path / "ur5.yaml"
    result = mbsim("import", UR5, "-o", out)
    assert result.exit_code == 0, result.output
    scene = yaml.safe_load(out.read_text())
    assert scene["solver"]["method"] == "recursive" and scene["gravity"] == [0.0, 0.0, -9.81]
    assert mbsim("run", out, "-o", tmp_path / "a.h5", "-q").exit_code == 0
    models = write_scene(tmp_path, UR5, "recursive", {}, "models.yaml")
    assert mbsim("run", models, "-o", tmp_path / "b.h5", "-q", "--set", "solver.integrator=rk4").exit_code == 0
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        assert set(a["bodies"]) == set(b["bodies"]) and len(a["bodies"]) == 6
        for name in a["bodies"]:
            assert np.max(np.abs(a[f"bodies/{name}/position"][:] - b[f"bodies/{name}/position"][:])) < 1e-9
    mine = tmp_path / "mine.yaml"
    mine.write_text("my notes\n")
    result = mbsim("import", UR5, "-o", mine)
    assert result.exit_code == 2 and "not written by mbsim import" in result.output
    assert mine.read_text() == "my notes\n"


BROKEN = {
    "not_xml": ("<robot name='r'><link name='a'>", "not a well-formed XML file", 1),
    "missing_link": (
        "<robot name='r'>\n<link name='a'/>\n<joint name='j' type='revolute'>\n<parent link='a'/><child link='b'/>"
        "<axis xyz='0 0 1'/></joint>\n</robot>",
        "joint 'j' <child>: its child link 'b' is not in the file",
        4,
    ),
    "mesh_uri": (
        "<robot name='r'>\n<link name='a'>\n<visual><geometry><mesh filename='package://nowhere/a.stl'/></geometry>"
        "</visual></link>\n</robot>",
        "link 'a' <visual> <mesh>: the mesh 'package://nowhere/a.stl' cannot be found",
        3,
    ),
    "joint_type": (
        "<robot name='r'>\n<link name='a'/><link name='b'/>\n<joint name='p' type='planar'><parent link='a'/>"
        "<child link='b'/></joint>\n</robot>",
        "joint 'p': joint type 'planar' is not supported",
        3,
    ),
}


FOUR_BAR_MJCF = ROOT / "scenes" / "robots" / "mjcf" / "parallelogram_four_bar.xml"


@pytest.mark.parametrize("method", ["null_space", "gauss"])
def test_mjcf_equality_connect_keeps_the_loop_closed(tmp_path, mbsim, method):
    """A parallelogram four-bar closed by an MJCF equality connect (a spherical joint in mbsim,
    one of its rows redundant with the hinges): crank0's centre follows the one-coordinate model
    (5/3) theta'' = -2 g sin(theta) from theta = 0.4 rad at rest to 1e-8 m over 3 s, the loop closed
    to round-off (measured 2e-11 m and 2e-16). recursive refuses it, naming the loop's joint."""
    scene = write_scene(tmp_path, FOUR_BAR_MJCF, method, {})
    result = mbsim("run", scene, "-o", tmp_path / "fb.h5", "-q", "--set", "time.end=3")
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "fb.h5") as f:
        t, centre = f["time"][:], f["bodies/crank0/position"][:]
        assert t[-1] == pytest.approx(3.0) and f.attrs["max_position_violation"] < 1e-12
    sol = solve_ivp(lambda _, y: [y[1], -2 * 9.81 * np.sin(y[0]) / (5 / 3)], (0, 3), [0.4, 0.0], method="DOP853",
                    rtol=1e-12, atol=1e-12, dense_output=True)  # fmt: skip
    theta = sol.sol(t)[0]
    reference = np.column_stack((0.5 * np.sin(theta), np.zeros_like(theta), -0.5 * np.cos(theta)))
    assert np.max(np.abs(centre - reference)) < 1e-8
    assert np.ptp(theta) > 0.7  # it swung
    result = mbsim("validate", scene, "--set", "solver.method=recursive")
    assert result.exit_code == 2 and "joint 'loop' closes a kinematic loop" in result.output


PANDA = ROOT / "scenes" / "robots" / "panda_description" / "urdf" / "panda.urdf"


def panda_mimic_reference(model, q, v):
    """Accelerations of the Panda with its second finger mimicking the first (q9 = q8), from
    Pinocchio's mass matrix (CRBA) and bias forces (RNEA) reduced to the 8 independent
    coordinates z (q = G z): z'' = (G^T M G)^-1 G^T (-b - D v), D the URDF joint damping."""
    data = model.createData()
    G = np.zeros((9, 8))
    G[:8, :8] = np.eye(8)
    G[8, 7] = 1.0
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    b = pin.rnea(model, data, q, v, np.zeros(9))
    z_dd = np.linalg.solve(G.T @ M @ G, G.T @ (-b - model.damping * v))
    return G @ z_dd


def test_urdf_mimic_is_a_coupling_and_the_panda_matches_pinocchio(tmp_path, mbsim):
    """The Panda arm with its two-finger hand: <mimic> of the second finger becomes a coupling
    (joint = 1.0 * leader + 0), its limits taken off. lagrange's centre-of-mass accelerations at 20 random states
    (fingers apart, moving together) equal Pinocchio's reduced to the mimic's 8 coordinates to 1e-9
    relative, and 1 s under DOP853 at 1e-10 follows them within 1e-6 m (measured: 2e-11 m).
    recursive refuses the coupling with its name."""
    model = pin_model(PANDA, False)
    data = model.createData()
    rng = np.random.default_rng(5)
    names = [model.names[j] for j in range(1, model.njoints)]
    for _ in range(20):
        q = np.concatenate((rng.uniform(-1.5, 1.5, 7), [rng.uniform(0.0, 0.04)] * 2))
        v = np.concatenate((rng.uniform(-1, 1, 7), [rng.uniform(-0.1, 0.1)] * 2))
        entry = {"joint_positions": dict(zip(names[:8], q[:8].tolist(), strict=True)),
                 "joint_velocities": dict(zip(names[:8], v[:8].tolist(), strict=True))}  # fmt: skip
        spec = load_scene(str(unlimited(write_scene(tmp_path, PANDA, "lagrange", entry), names)))
        m, solver = prepare(spec)
        vdot, _ = solver.acceleration(0.0, m.q0, m.v0)
        want = com_accelerations(model, data, q, v, panda_mimic_reference(model, q, v))
        scale = max(1.0, max(np.max(np.abs(x)) for x in want.values()))
        for k, name in enumerate(spec.body_names):
            assert np.max(np.abs(vdot[6 * k : 6 * k + 3] - want[name])) <= 1e-9 * scale, name
    q0, v0 = q, v
    scene = unlimited(write_scene(tmp_path, PANDA, "lagrange", entry), names)
    assert mbsim("run", scene, "-o", tmp_path / "panda.h5", "-q").exit_code == 0

    def f(_, y):
        q, v = y[:9], y[9:]
        return np.concatenate((v, panda_mimic_reference(model, q, v)))

    with h5py.File(tmp_path / "panda.h5") as out:
        t = out["time"][:]
        sol = solve_ivp(f, (0, 1), np.concatenate((q0, v0)), method="DOP853", rtol=1e-12, atol=1e-12, t_eval=t[[-1]])
        assert t[-1] == pytest.approx(1.0)
        for name, com in com_of_joints(model, data, sol.y[:9, -1]).items():
            assert np.max(np.abs(out[f"bodies/{name}/position"][-1] - com)) < 1e-6, name
    result = mbsim("validate", scene, "--set", "solver.method=recursive")
    assert result.exit_code == 2 and "coupling 'panda_finger_joint2_mimic'" in result.output


@pytest.mark.parametrize("method", ["recursive", "lagrange"])
def test_driven_imported_joints_record_pinocchios_inverse_dynamics(tmp_path, mbsim, method):
    """Every UR5 joint amended by name with a drive in the file's coordinates (q_i(t) = q0_i +
    0.3 sin((i + 1) t)): /joints/NAME/drive_force equals Pinocchio's RNEA torques at the
    prescribed motion to 1e-9 relative (measured ~1e-13), and recursive's /q is the drive."""
    model = pin_model(UR5, False)
    data = model.createData()
    q0 = {model.names[j]: 0.2 * j - 0.5 for j in range(1, model.njoints)}
    scene = yaml.safe_load(write_scene(tmp_path, UR5, method, {"joint_positions": q0}).read_text())
    scene["solver"]["integrator"] = "rk4"
    scene["time"]["end"] = 0.2
    scene["joints"] = [
        {"name": name, "drive": {"position": f"{value!r} + 0.3*sin({k + 1}*t)"}} for k, (name, value) in
        enumerate(q0.items())
    ]  # fmt: skip
    path = tmp_path / "driven.yaml"
    path.write_text(yaml.safe_dump(scene))
    assert mbsim("run", path, "-o", tmp_path / "driven.h5", "-q").exit_code == 0
    with h5py.File(tmp_path / "driven.h5") as f:
        t = f["time"][:]
        for k in (0, len(t) // 2, len(t) - 1):
            w = np.arange(1, 7)
            q = np.array(list(q0.values())) + 0.3 * np.sin(w * t[k])
            tau = pin.rnea(model, data, q, 0.3 * w * np.cos(w * t[k]), -0.3 * w**2 * np.sin(w * t[k]))
            got = [f[f"joints/{name}/drive_force"][k] for name in q0]
            np.testing.assert_allclose(got, tau, rtol=0, atol=1e-9 * np.max(np.abs(tau)))
            if method == "recursive":
                names = [n.decode() if isinstance(n, bytes) else n for n in f["q"].attrs["names"]]
                got_q = [f["q"][k, names.index(f"{name}.angle")] for name in q0]
                np.testing.assert_allclose(got_q, q, rtol=0, atol=1e-12)


def test_two_prefixed_arms_collision_meshes_and_package_paths(tmp_path, mbsim):
    """Two UR5s side by side by prefix (each amended by its prefixed joint name), one with its
    collision meshes as shapes, resolved through package_paths to a copy of the package in
    another folder; the arms are alike, so each moves as the other, offset by 1 m."""
    import shutil

    package = tmp_path / "elsewhere" / "ur_pkg"
    shutil.copytree(UR5.parents[1], package)
    scene = {
        "mbsim": 1, "name": "two arms", "gravity": [0, 0, -9.81], "time": {"end": 0.2, "step": 1e-3},
        "solver": {"method": "recursive", "integrator": "rk4"},
        "models": [
            {"file": str(UR5), "prefix": "left_", "joint_positions": {"elbow_joint": 0.5}},
            {"file": "elsewhere/ur_pkg/urdf/ur5_robot.urdf", "prefix": "right_", "position": [1, 0, 0],
             "joint_positions": {"elbow_joint": 0.5}, "collisions": True,
             "package_paths": {"ur_description": "elsewhere/ur_pkg"}},
        ],
        "joints": [{"name": f"{side}_shoulder_lift_joint", "spring": {"stiffness": 5.0, "rest": -0.3}}
                   for side in ("left", "right")],
    }  # fmt: skip
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(scene))
    spec = load_scene(str(path))
    names = spec.body_names
    assert len(names) == 12 and "left_forearm_link" in names and "right_forearm_link" in names
    right = next(b for b in spec.bodies if b.name == "right_forearm_link")
    assert [s["type"] for s in right.shapes] == ["mesh"] and Path(right.shapes[0]["file"]).is_file()
    assert str(package) in right.shapes[0]["file"]
    assert mbsim("run", path, "-o", tmp_path / "two.h5", "-q").exit_code == 0
    with h5py.File(tmp_path / "two.h5") as f:
        for link in ("forearm_link", "wrist_3_link"):
            left, right = f[f"bodies/left_{link}/position"][:], f[f"bodies/right_{link}/position"][:]
            assert np.max(np.abs(right - left - [1, 0, 0])) < 1e-12
            assert np.max(np.abs(left - left[0])) > 1e-3  # it moved


MJCF_BROKEN = {
    "tendon": (
        "<mujoco>\n<worldbody>\n<body name='a'>\n<joint name='j' type='hinge'/>\n<geom size='0.1'/>\n"
        "<site name='s'/>\n</body>\n</worldbody>\n<tendon>\n<fixed name='t'><joint joint='j' coef='1'/></fixed>\n"
        "</tendon>\n</mujoco>",
        "tendon 't': tendons change the dynamics",
        10,
    ),
    "ball_frictionloss": (
        "<mujoco>\n<worldbody>\n<body name='a'>\n<joint name='j' type='ball' frictionloss='0.1'/>\n"
        "<geom size='0.1'/>\n</body>\n</worldbody>\n</mujoco>",
        "joint 'j': a ball joint's frictionloss cannot be represented",
        4,
    ),
    "not_xml": ("<mujoco><worldbody>", "not a well-formed XML file", 1),
    "bad_attribute": (
        "<mujoco>\n<worldbody>\n<body name='a'>\n<joint name='j' type='hinge' axis='0 0'/>\n<geom size='0.1'/>\n"
        "</body>\n</worldbody>\n</mujoco>",
        "MuJoCo's compiler refuses the model",
        4,
    ),
}


MALFORMED = {**{("urdf", k): v for k, v in BROKEN.items()}, **{("xml", k): v for k, v in MJCF_BROKEN.items()}}


@pytest.mark.parametrize(("suffix", "case"), sorted(MALFORMED), ids=[f"{a}-{b}" for a, b in sorted(MALFORMED)])
def test_malformed_model_files_exit_2_naming_file_and_element(tmp_path, mbsim, suffix, case):
    """Both through a scene's models: (validate) and through mbsim import: exit 2, the message
    naming the file, the line where the parser knows it, and the element."""
    text, message, line = MALFORMED[(suffix, case)]
    model = tmp_path / f"bad.{suffix}"
    model.write_text(text)
    scene = write_scene(tmp_path, model, "recursive", {})
    for args in (("validate", scene), ("import", model)):
        result = mbsim(*args)
        assert result.exit_code == 2, result.output
        where = f"{model}:{line}" if line else f"{model}:"
        assert where in result.output and message in result.output, result.output


BALL_MJCF = """<mujoco model="ball and hinge">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="upper" pos="0 0 1" quat="0.9 0.1 0.3 0.2">
      <joint name="shoulder" type="ball" pos="0 0 0.05"/>
      <geom type="box" size="0.05 0.08 0.3" pos="0.02 0 -0.3" density="900"/>
      <body name="lower" pos="0 0 -0.6">
        <joint name="elbow" type="hinge" axis="1 0.5 0"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 -0.5" size="0.04" density="1200"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("method", ["recursive", "lagrange"])
def test_mjcf_ball_joint_matches_mujoco(tmp_path, mbsim, method):
    """An MJCF ball joint (off its body's origin, body quat not normalised in the file) becomes a
    spherical joint; its coordinates are given as MuJoCo's: the quaternion and the angular
    velocity in the body's frame. 1 s against MuJoCo's RK4 at 1e-4 s within 1e-7 m."""
    pytest.importorskip("mujoco")
    xml = tmp_path / "ball.xml"
    xml.write_text(BALL_MJCF)
    quat = np.array([0.8, 0.3, -0.4, 0.33])
    quat /= np.linalg.norm(quat)
    entry = {"joint_positions": {"shoulder": quat.tolist(), "elbow": 0.4},
             "joint_velocities": {"shoulder": [0.5, -1.0, 2.0], "elbow": -0.7}}  # fmt: skip
    scene = write_scene(tmp_path, xml, method, entry)
    result = mbsim("run", scene, "-o", tmp_path / "ball.h5", "-q")
    assert result.exit_code == 0, result.output
    m0, d0 = mujoco_rk4(xml, [*quat, 0.4], [0.5, -1.0, 2.0, -0.7], seconds=0.0)
    m, d = mujoco_rk4(xml, [*quat, 0.4], [0.5, -1.0, 2.0, -0.7])
    with h5py.File(tmp_path / "ball.h5") as f:
        for name in ("upper", "lower"):
            assert np.max(np.abs(f[f"bodies/{name}/position"][0] - d0.xipos[m0.body(name).id])) < 1e-12
        for name in ("upper", "lower"):
            assert np.max(np.abs(f[f"bodies/{name}/position"][-1] - d.xipos[m.body(name).id])) < 1e-7


def test_mjcf_armature_acts_on_the_joint_coordinate(tmp_path, mbsim):
    """MJCF armature (a hinge's 0.05 kg m^2, a slide's 0.3 kg) becomes the joints' `armature`:
    recursive adds it to the articulated inertia of the coordinate (and to the kinetic energy:
    total - work stays constant); 1 s against MuJoCo's RK4 within 1e-8 m (measured 9e-12 m).
    lagrange refuses it (in body coordinates it would couple the mass matrix), naming the key."""
    pytest.importorskip("mujoco")
    xml = tmp_path / "armature.xml"
    text = PENDULUM_MJCF.read_text()
    text = text.replace('springref="20"/>', 'springref="20" armature="0.05"/>')
    text = text.replace('<joint name="slider" type="slide" axis="0 0 1"/>',
                        '<joint name="slider" type="slide" axis="0 0 1" armature="0.3"/>')  # fmt: skip
    assert text.count("armature") == 2
    xml.write_text(text)
    entry = {"joint_positions": {"shoulder": 0.5, "elbow": -0.3, "slider": 0.05},
             "joint_velocities": {"shoulder": 0.2, "elbow": 1.0, "slider": -0.1}}  # fmt: skip
    scene = write_scene(tmp_path, xml, "recursive", entry)
    result = mbsim("run", scene, "-o", tmp_path / "arm.h5", "-q")
    assert result.exit_code == 0, result.output
    m, d = mujoco_rk4(xml, [0.5, -0.3, 0.05], [0.2, 1.0, -0.1])
    with h5py.File(tmp_path / "arm.h5") as f:
        for name in ("upper", "lower", "tip"):
            assert np.max(np.abs(f[f"bodies/{name}/position"][-1] - d.xipos[m.body(name).id])) < 1e-8
        assert f.attrs["energy_drift"] < 1e-9
    result = mbsim("validate", scene, "--set", "solver.method=lagrange")
    assert result.exit_code == 2 and "armature" in result.output and "needs method 'recursive'" in result.output


COLLISION_MJCF = """<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" pos="0 0 -0.5"/>
    <body name="ball" pos="0 0 1">
      <freejoint/>
      <geom name="b" type="sphere" size="0.1" density="1000"/>
      <geom name="look" type="box" size="0.2 0.2 0.2" contype="0" conaffinity="0" mass="0"/>
    </body>
    <body name="bar" pos="0.5 0 1" euler="0 30 0">
      <joint name="h" type="hinge" axis="0 1 0"/>
      <geom name="c" type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" density="500"/>
      <geom name="k" type="box" size="0.05 0.06 0.07" pos="0.4 0 0" density="500"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.slow  # ~4 s; test_import_trust.py::test_collision_geometry_is_never_dropped keeps the import
def test_mjcf_collision_geoms_become_shapes_and_the_ball_lands(tmp_path, mbsim):
    """collisions: true: the colliding geoms become shapes (the world's plane a ground plane, the
    sphere, capsule and box in the bodies' frames; the contype=0 conaffinity=0 box is left out), and
    a rigid contact with them works: the ball dropped from 1.5 m above the floor lands at
    t = sqrt(2 * 1.4 / g) and rests on it (timestepping)."""
    xml = tmp_path / "col.xml"
    xml.write_text(COLLISION_MJCF)
    scene = {
        "mbsim": 1, "name": "col", "gravity": [0, 0, -9.81], "time": {"end": 0.8, "step": 1e-4},
        "solver": {"method": "timestepping"}, "models": [{"file": str(xml), "collisions": True}],
        "contacts": [{"name": "floor", "type": "rigid", "body1": "ground", "body2": "ball", "restitution": 0.0}],
    }  # fmt: skip
    path = tmp_path / "col.yaml"
    path.write_text(yaml.safe_dump(scene))
    spec = load_scene(str(path))
    assert spec.ground_shapes == [{"type": "plane", "point": [0.0, 0.0, -0.5], "normal": [0.0, 0.0, 1.0]}]
    shapes = {b.name: [s["type"] for s in b.shapes] for b in spec.bodies}
    assert shapes == {"ball": ["sphere"], "bar": ["capsule", "box"]}
    assert mbsim("run", path, "-o", tmp_path / "col.h5", "-q").exit_code == 0
    with h5py.File(tmp_path / "col.h5") as f:
        t, z = f["time"][:], f["bodies/ball/position"][:, 2]
        landing = t[np.argmax(z <= -0.4 + 1e-9)]
        assert landing == pytest.approx(np.sqrt(2 * 1.4 / 9.81), abs=2e-4)
        assert abs(z[-1] + 0.4) < 1e-6


def test_mjcf_pendulum_under_lagrange_matches_mujoco(tmp_path, mbsim):
    """The MJCF pendulum of the test above in body coordinates (lagrange, DOP853 at 1e-10):
    1 s against MuJoCo's RK4 at 1e-4 s within 1e-8 m."""
    pytest.importorskip("mujoco")
    entry = {"joint_positions": {"shoulder": 0.5, "elbow": -0.3, "slider": 0.05},
             "joint_velocities": {"shoulder": 0.2, "elbow": 1.0, "slider": -0.1}}  # fmt: skip
    scene = write_scene(tmp_path, PENDULUM_MJCF, "lagrange", entry)
    assert mbsim("run", scene, "-o", tmp_path / "mj.h5", "-q").exit_code == 0
    m, d = mujoco_rk4(PENDULUM_MJCF, [0.5, -0.3, 0.05], [0.2, 1.0, -0.1])
    with h5py.File(tmp_path / "mj.h5") as f:
        assert f["time"][-1] == pytest.approx(1.0)
        for name in ("upper", "lower", "tip"):
            assert np.max(np.abs(f[f"bodies/{name}/position"][-1] - d.xipos[m.body(name).id])) < 1e-8


FREE_MJCF = ROOT / "tests" / "data" / "robots" / "free_brick.xml"


@pytest.mark.parametrize("method", ["recursive", "lagrange"])
def test_mjcf_free_joint_takes_mujocos_qpos_and_qvel(tmp_path, mbsim, method):
    """A free body (with a flap on a hinge) placed and thrown by its free joint's coordinates as
    MuJoCo's qpos (position, quaternion w x y z) and qvel (world velocity of the body's origin,
    angular velocity in its frame): 1 s against MuJoCo's RK4 within 1e-8 m (measured 1e-12)."""
    pytest.importorskip("mujoco")
    qpos = [0.2, -0.1, 1.5, 0.8, 0.2, -0.3, 0.1]
    qvel = [0.5, -0.2, 1.0, 1.0, -2.0, 3.0]
    entry = {"joint_positions": {"float": qpos, "hinge": 0.3}, "joint_velocities": {"float": qvel, "hinge": 1.5}}
    scene = write_scene(tmp_path, FREE_MJCF, method, entry)
    assert mbsim("run", scene, "-o", tmp_path / "free.h5", "-q").exit_code == 0
    quat = np.array(qpos[3:]) / np.linalg.norm(qpos[3:])
    m, d = mujoco_rk4(FREE_MJCF, [*qpos[:3], *quat, 0.3], [*qvel, 1.5])
    with h5py.File(tmp_path / "free.h5") as f:
        for name in ("brick", "flap"):
            assert np.max(np.abs(f[f"bodies/{name}/position"][-1] - d.xipos[m.body(name).id])) < 1e-8
    result = mbsim("validate", scene, "--set", "models[0].joint_positions.float=[0, 0, 1]")
    assert result.exit_code == 2 and "joint 'float' takes a list of 7 numbers" in result.output


def test_a_wrong_ground_with_imported_planes_is_a_scene_error(tmp_path, mbsim):
    """collisions: true adds the MJCF world's planes to the ground; a ground that is not a mapping
    is still reported by the scene check (exit 2), not an internal error."""
    xml = tmp_path / "col.xml"
    xml.write_text(COLLISION_MJCF)
    scene = tmp_path / "g.yaml"
    scene.write_text(f"mbsim: 1\nname: g\ntime: {{end: 0.1, step: 0.001}}\nground: 5\nmodels:\n"
                     f"  - {{file: {xml}, collisions: true}}\n")  # fmt: skip
    result = mbsim("validate", scene)
    assert result.exit_code == 2 and "ground: expected a mapping" in result.output
