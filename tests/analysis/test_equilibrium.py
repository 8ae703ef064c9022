"""Static equilibrium (mbsim.analysis.equilibrium, ``mbsim equilibrium``, ``initial: equilibrium``)
against references it does not compute: the pendulum with a torsion spring's closed form, a
four-bar's potential written in its crank angle and minimised by scipy, Pinocchio's gravity
torques balanced by position servos, the inverted pendulum's closed-form stiffness, and a free
body, which has no equilibrium."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar, root

from mbsim.analysis.equilibrium import solve_equilibrium
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare

ROOT = Path(__file__).resolve().parents[2]
UR5_URDF = ROOT / "scenes" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf"
G = 9.81

# pendulum: a bob of mass M (inertia IC about its centre) on an arm of length L, hinged at the
# origin, a torsion spring K on the hinge with rest angle REST from hanging straight down
M, IC, L, K, REST = 1.5, 0.01, 0.8, 20.0, 1.0


def pendulum(dimension: int, spring: bool = True, angle: float = 0.0) -> str:
    """The pendulum scene, the bob at ``angle`` from hanging down (planar: in x-y; 3D: in x-z about y)."""
    s, c = math.sin(angle), math.cos(angle)
    spring_key = f", spring: {{stiffness: {K}, rest: {REST}}}" if spring else ""
    if dimension == 2:
        body = f"{{name: bob, mass: {M}, inertia: {IC}, position: [{L * s!r}, {-L * c!r}], orientation: {angle!r}}}"
        joint = f"{{name: pivot, type: revolute, body1: ground, body2: bob, point: [0, 0]{spring_key}}}"
        gravity = f"[0, {-G}]"
    else:  # the 3D bob turns about -y, so that the joint angle about its axis grows as in the planar case
        body = (f"{{name: bob, mass: {M}, inertia: [{IC}, {IC}, {IC}], position: [{L * s!r}, 0, {-L * c!r}], "
                f"orientation: {{axis_angle: {{axis: [0, -1, 0], angle: {angle!r}}}}}}}")  # fmt: skip
        joint = (f"{{name: pivot, type: revolute, body1: ground, body2: bob, point: [0, 0, 0], "
                 f"axis: [0, -1, 0]{spring_key}}}")  # fmt: skip
        gravity = f"[0, 0, {-G}]"
    return f"""mbsim: 1
name: pendulum with a torsion spring
dimension: {dimension}
gravity: {gravity}
time: {{end: 1.0, step: 0.001}}
bodies:
  - {body}
joints:
  - {joint}
"""


def prepared(write_scene, text: str, name: str = "scene.yaml"):
    return prepare(load_scene(str(write_scene(text, name))))


def spring_angle() -> float:
    """The closed form: K (REST - theta) = M g L sin(theta)."""
    return brentq(lambda th: K * (REST - th) - M * G * L * math.sin(th), 0.0, REST)


@pytest.mark.parametrize("dimension", [2, 3])
def test_pendulum_with_a_torsion_spring_rests_at_the_closed_form_angle(write_scene, dimension) -> None:
    model, _ = prepared(write_scene, pendulum(dimension))
    eq = solve_equilibrium(model)
    theta = spring_angle()
    assert eq.converged, eq.reason
    assert eq.residual < 1e-10
    if dimension == 2:
        x, y, angle = eq.q
        assert abs(angle - theta) < 1e-9
        assert np.allclose([x, y], [L * math.sin(theta), -L * math.cos(theta)], rtol=0, atol=1e-9)
    else:
        x, y, z, qw, qx, qy, qz = eq.q
        assert np.allclose([x, y, z], [L * math.sin(theta), 0.0, -L * math.cos(theta)], rtol=0, atol=1e-9)
        # a turn by theta about -y: (cos(theta/2), 0, -sin(theta/2), 0), up to the quaternion's sign
        assert np.allclose(np.sign(qw) * np.array([qw, qx, qy, qz]),
                           [math.cos(theta / 2), 0, -math.sin(theta / 2), 0], rtol=0, atol=1e-9)  # fmt: skip
    # the reduced stiffness in mass-normalised coordinates: (K + M g L cos(theta)) / (IC + M L^2), s^-2
    expected = (K + M * G * L * math.cos(theta)) / (IC + M * L**2)
    assert eq.stable
    assert eq.stiffness.shape == (1, 1)
    assert abs(eq.smallest_eigenvalue - expected) < 1e-6 * expected
    assert eq.stiffness_error < 1e-6 * expected


def test_inverted_pendulum_is_an_unstable_equilibrium(write_scene) -> None:
    """No spring, started 0.14 rad from upright: Newton finds the top, where the stiffness is
    -M g L / (IC + M L^2)."""
    model, _ = prepared(write_scene, pendulum(2, spring=False, angle=3.0))
    eq = solve_equilibrium(model)
    assert eq.converged, eq.reason
    assert eq.residual < 1e-10
    assert abs(eq.q[2] - math.pi) < 1e-9
    assert np.allclose(eq.q[:2], [0.0, L], rtol=0, atol=1e-9)
    assert not eq.stable
    expected = -M * G * L / (IC + M * L**2)
    assert abs(eq.smallest_eigenvalue - expected) < 1e-6 * abs(expected)


def test_pendulum_started_level_finds_the_bottom(write_scene) -> None:
    """Level, the stiffness is zero (M g L cos(pi/2)): Newton has no step, the descent along the
    unbalanced torque takes it down to the stable bottom, M g L / (IC + M L^2)."""
    model, _ = prepared(write_scene, pendulum(2, spring=False, angle=math.pi / 2))
    eq = solve_equilibrium(model)
    assert eq.converged, eq.reason
    assert eq.residual < 1e-10
    assert np.max(np.abs(eq.q - [0.0, -L, 0.0])) < 1e-9
    expected = M * G * L / (IC + M * L**2)
    assert eq.stable and abs(eq.smallest_eigenvalue - expected) < 1e-6 * expected


# four-bar: ground pivots O1 = (0, 0), O2 = (D4, 0); crank a (bar1), coupler b (bar2), rocker c
# (bar3), uniform bars; gravity -y; a torsion spring on the crank's pivot
A4, B4, C4, D4 = 0.2, 0.45, 0.3, 0.5
M4 = (0.4, 0.9, 0.6)
K4, REST4, THETA0 = 3.0, -0.8, 1.2


def four_bar_points(theta):
    """(A, B): the crank's and the rocker's moving ends at crank angle theta (the upper branch);
    works on complex theta too (the complex-step derivative below)."""
    a = np.array([A4 * np.cos(theta), A4 * np.sin(theta)])
    d = np.array([D4, 0.0]) - a
    dist = np.sqrt(d[0] ** 2 + d[1] ** 2)
    along = (dist**2 + B4**2 - C4**2) / (2 * dist)
    h = np.sqrt(B4**2 - along**2)
    b = a + (along * d + h * np.array([-d[1], d[0]])) / dist
    return a, b


def four_bar_bodies(theta: float) -> np.ndarray:
    """(3, 3): x, y, angle of the three bars' centres."""
    a, b = four_bar_points(theta)
    o2 = np.array([D4, 0.0])
    return np.array([
        [*(a / 2), theta],
        [*((a + b) / 2), math.atan2(b[1] - a[1], b[0] - a[0])],
        [*((o2 + b) / 2), math.atan2(b[1], b[0] - D4)],
    ])  # fmt: skip


def four_bar_potential(theta):
    """V(theta) = sum m_i g y_i + K4 / 2 (theta - THETA0 - REST4)^2: the spring's coordinate is
    the crank's angle from its start."""
    a, b = four_bar_points(theta)
    heights = (a[1] / 2, (a[1] + b[1]) / 2, b[1] / 2)
    return G * sum(m * y for m, y in zip(M4, heights, strict=True)) + 0.5 * K4 * (theta - THETA0 - REST4) ** 2


def four_bar_scene() -> str:
    bars = four_bar_bodies(THETA0).tolist()
    a, b = (p.tolist() for p in four_bar_points(THETA0))
    lengths = (A4, B4, C4)
    bodies = "\n".join(
        f"  - {{name: bar{i + 1}, mass: {m}, inertia: {m * n**2 / 12!r}, position: [{x!r}, {y!r}], "
        f"orientation: {phi!r}}}"
        for i, (m, n, (x, y, phi)) in enumerate(zip(M4, lengths, bars, strict=True))
    )
    return f"""mbsim: 1
name: four-bar with a spring
dimension: 2
gravity: [0, {-G}]
time: {{end: 1.0, step: 0.001}}
bodies:
{bodies}
joints:
  - {{name: O1, type: revolute, body1: ground, body2: bar1, point: [0, 0], spring: {{stiffness: {K4}, rest: {REST4}}}}}
  - {{name: A, type: revolute, body1: bar1, body2: bar2, point: [{a[0]!r}, {a[1]!r}]}}
  - {{name: B, type: revolute, body1: bar2, body2: bar3, point: [{b[0]!r}, {b[1]!r}]}}
  - {{name: O2, type: revolute, body1: ground, body2: bar3, point: [{D4}, 0]}}
"""


def test_four_bar_with_a_spring_rests_at_the_minimum_of_its_one_coordinate_potential(write_scene) -> None:
    # the independent solution: V(theta) minimised by scipy, then dV/dtheta = 0 to round-off by its
    # complex-step derivative
    rough = minimize_scalar(four_bar_potential, bounds=(-1.0, 1.5), method="bounded").x
    slope = lambda th: float(np.imag(four_bar_potential(th + 1e-30j)) / 1e-30)  # noqa: E731
    theta = brentq(slope, rough - 0.05, rough + 0.05, xtol=1e-15)
    model, _ = prepared(write_scene, four_bar_scene())
    eq = solve_equilibrium(model)
    assert eq.converged, eq.reason
    assert eq.residual < 1e-10
    assert eq.basis.shape[1] == 1  # one degree of freedom
    got = eq.q.reshape(3, 3)
    expected = four_bar_bodies(theta)
    assert np.max(np.abs(got[:, :2] - expected[:, :2])) < 1e-9
    assert np.max(np.abs(np.angle(np.exp(1j * (got[:, 2] - expected[:, 2]))))) < 1e-9
    # stiffness: V''(theta) over the crank's generalized mass sum m |dc/dtheta|^2 + I (dphi/dtheta)^2
    h = 1e-5
    second = (slope(theta + h) - slope(theta - h)) / (2 * h)
    rates = (four_bar_bodies(theta + h) - four_bar_bodies(theta - h)) / (2 * h)
    inertia = [m * n**2 / 12 for m, n in zip(M4, (A4, B4, C4), strict=True)]
    mass = sum(m * (r[0] ** 2 + r[1] ** 2) + i * r[2] ** 2 for m, i, r in zip(M4, inertia, rates, strict=True))
    assert second > 0 and eq.stable
    assert abs(eq.smallest_eigenvalue - second / mass) < 1e-6 * second / mass


# the UR5 with a position servo on every joint (no feed-forward): it sags until each servo's
# kp (target - q) equals the gravity torque g(q)
UR5_JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint"]  # fmt: skip
UR5_TARGET = np.array([0.3, -1.0, 0.8, -0.9, 0.4, 0.2])
UR5_KP = np.array([300.0, 400.0, 200.0, 50.0, 50.0, 20.0])


def ur5_scene() -> str:
    start = ", ".join(f"{n}: {q!r}" for n, q in zip(UR5_JOINTS, UR5_TARGET.tolist(), strict=True))
    servos = "\n".join(
        f"  - {{name: s{i}, joint: {n}, type: position, target: {q!r}, kp: {kp!r}, kd: {kp / 10!r}}}"
        for i, (n, q, kp) in enumerate(zip(UR5_JOINTS, UR5_TARGET.tolist(), UR5_KP.tolist(), strict=True))
    )
    return f"""mbsim: 1
name: UR5 held by servos
gravity: [0, 0, {-G}]
time: {{end: 1.0, step: 0.001}}
solver: {{method: lagrange, integrator: rk4}}
models:
  - file: {UR5_URDF}
    joint_positions: {{{start}}}
actuators:
{servos}
"""


def test_imported_arm_held_by_servos_balances_pinocchios_gravity_torques(write_scene, mbsim, tmp_path) -> None:
    pin = pytest.importorskip("pinocchio")
    robot = pin.buildModelFromUrdf(str(UR5_URDF))
    robot.gravity.linear = np.array([0.0, 0.0, -G])
    data = robot.createData()
    reference = root(lambda q: UR5_KP * (UR5_TARGET - q) - pin.computeGeneralizedGravity(robot, data, q),
                     UR5_TARGET, tol=1e-15).x  # fmt: skip
    assert np.max(np.abs(reference - UR5_TARGET)) > 0.05  # gravity moves it: the check means something
    out = tmp_path / "ur5.h5"
    result = mbsim("equilibrium", write_scene(ur5_scene()), "-o", out)
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "completed"
        assert f["time"].shape == (1,) and f["q"].shape[0] == 1
        assert f.attrs["residual"] < 1e-10 and f.attrs["iterations"] >= 1
        assert bool(f.attrs["stable"]) is True
        joints = np.array([f[f"joints/{n}/position"][0] for n in UR5_JOINTS])
        assert np.max(np.abs(f["v"][:])) == 0.0
    assert np.max(np.abs(joints - reference)) < 1e-9


def test_equilibrium_command_prints_and_writes_the_state(write_scene, mbsim, tmp_path) -> None:
    import json

    out = tmp_path / "eq.h5"
    result = mbsim("equilibrium", write_scene(pendulum(2)), "-o", out, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    theta = spring_angle()
    assert summary["status"] == "completed" and summary["stable"] is True
    assert summary["residual"] < 1e-10 and summary["iterations"] >= 1
    assert abs(summary["q"]["bob.angle"] - theta) < 1e-9
    with h5py.File(out, "r") as f:
        assert abs(f["bodies/bob/angle"][0] - theta) < 1e-9
        assert f.attrs["residual"] == summary["residual"]
    text = mbsim("equilibrium", write_scene(pendulum(2)), "-o", out)
    assert text.exit_code == 0, text.output
    assert "stable     yes" in text.stdout and "bob.angle" in text.stdout
    info = json.loads(mbsim("info", out, "--json").stdout)
    assert info["stable"] is True and info["residual"] < 1e-10 and info["iterations"] == summary["iterations"]


@pytest.mark.parametrize("method", ["lagrange", "null_space", "recursive", "variational", "timestepping"])
def test_a_run_from_initial_equilibrium_stays_at_rest(write_scene, mbsim, tmp_path, method) -> None:
    out = tmp_path / "run.h5"
    text = pendulum(2).replace("time:", "initial: equilibrium\ntime:")
    result = mbsim("run", write_scene(text), "-o", out, "--quiet", "--set", f"solver.method={method}")
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as f:
        assert f["time"][-1] == pytest.approx(1.0)
        speed = np.hypot(*f["bodies/bob/velocity"][:].T)
        assert max(speed.max(), np.abs(f["bodies/bob/angular_velocity"][:]).max()) < 1e-9
        assert abs(f["bodies/bob/angle"][0] - spring_angle()) < 1e-9


def test_a_free_body_has_no_equilibrium_exit_3_with_the_reason(write_scene, mbsim, tmp_path) -> None:
    scene = write_scene("""mbsim: 1
name: free brick
gravity: [0, 0, -9.81]
time: {end: 1.0, step: 0.001}
bodies:
  - {name: brick, mass: 2.0, inertia: [0.1, 0.2, 0.3], position: [0, 0, 1]}
""")
    out = tmp_path / "free.h5"
    result = mbsim("equilibrium", scene, "-o", out)
    assert result.exit_code == 3
    assert "no static equilibrium" in result.stderr and "against gravity" in result.stderr
    assert "Traceback" not in result.output
    with h5py.File(out, "r") as f:  # CONTRACT §2: exit 3 keeps a file that says failed, and why
        assert f.attrs["status"] == "failed"
        assert "no static equilibrium" in f.attrs["message"]
    run = mbsim("run", scene, "-o", tmp_path / "run.h5", "--set", "initial=equilibrium")
    assert run.exit_code == 3 and "no static equilibrium" in run.stderr


def test_no_convergence_is_a_reason_not_an_answer(write_scene) -> None:
    model, _ = prepared(write_scene, four_bar_scene())
    eq = solve_equilibrium(model, max_iterations=1)
    assert not eq.converged and not eq.stable
    assert "did not converge in 1 iterations" in eq.reason
    assert eq.residual > 1e-10


def test_initial_must_be_given_or_equilibrium_exit_2(write_scene, mbsim) -> None:
    result = mbsim("equilibrium", write_scene(pendulum(2).replace("time:", "initial: equilibrim\ntime:")))
    assert result.exit_code == 2
    assert "scene.yaml:5:" in result.stderr and "initial: expected one of given, equilibrium" in result.stderr
    assert "did you mean 'equilibrium'" in result.stderr


def test_redundant_parallelogram_has_one_coordinate_and_its_closed_form_rest() -> None:
    """The shipped parallelogram with a third, redundant crank (12 equations on 12 velocities, rank
    11): a spring on pivot1 against gravity, k (rest - (theta - 1)) = (3/2 m + mc) g L sin(theta)."""
    k, rest, th0, m, mc = 40.0, 0.5, 1.0, 1.0, 2.0
    spec = load_scene(str(ROOT / "scenes" / "parallelogram_redundant_2d.yaml"),
                      [f"joints.pivot1.spring={{stiffness: {k}, rest: {rest}}}"])  # fmt: skip
    model, _ = prepare(spec)
    eq = solve_equilibrium(model)
    assert eq.converged, eq.reason
    assert eq.residual < 1e-10
    assert eq.basis.shape[1] == 1  # the redundant crank takes no coordinate
    theta = brentq(lambda t: k * (rest - (t - th0)) - (1.5 * m + mc) * G * math.sin(t), 0.0, 2.0, xtol=1e-15)
    bodies = eq.q.reshape(4, 3)
    assert np.max(np.abs(bodies[:3, 2] - theta)) < 1e-9
    assert np.max(np.abs(bodies[3] - [0.5 + math.sin(theta), -math.cos(theta), 0.0])) < 1e-9
    inertia = 3 * m * (1 / 12 + 1 / 4) + mc  # about the pivots, and the translating coupler
    expected = (k + (1.5 * m + mc) * G * math.cos(theta)) / inertia
    assert eq.stable and abs(eq.smallest_eigenvalue - expected) < 1e-6 * expected


def test_rigid_contacts_hold_nothing_and_the_reason_says_so(mbsim, tmp_path) -> None:
    """The shipped bouncing ball over a rigid floor: contacts of the LCP methods are not forces,
    so the ball has no static equilibrium; the reason names the contact."""
    out = tmp_path / "ball.h5"
    result = mbsim("equilibrium", ROOT / "scenes" / "bouncing_ball.yaml", "-o", out)
    assert result.exit_code == 3
    assert "no static equilibrium" in result.stderr and "rigid contacts, here floor" in result.stderr
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "failed" and "rigid contacts" in f.attrs["message"]
