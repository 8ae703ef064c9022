"""Issue 30 (CONTRACT §8): actuators, compliant stops, joint friction, signals and outputs,
against closed forms a run does not produce: the linear servo's response, a clamped constant
torque, the linear spring-damper impact, the regularised friction's creep and slide, and the
distance between two recorded points."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
from quick_loop import quick

I_BAR = 0.1 + 2.0 * 0.5**2  # a 2 kg bar of inertia 0.1 about its centre, hinged 0.5 m from it

PENDULUM = """
mbsim: 1
name: driven pendulum
dimension: 2
time: {{end: {end}, step: {step}}}
solver: {{method: {method}, integrator: rk4}}
bodies:
  - {{name: bar, mass: 2.0, inertia: 0.1, position: [0.5, 0], velocity: [0, {speed}], angular_velocity: {w0}}}
joints:
  - {{name: hinge, type: revolute, body1: ground, body2: bar, point: [0, 0]{joint}}}
{extra}
"""


def _pendulum(write_scene, mbsim, tmp_path, method="lagrange", end=2.0, step=1e-3, w0=0.0, joint="", extra=""):
    scene = write_scene(
        PENDULUM.format(end=end, step=step, method=method, speed=0.5 * w0, w0=w0, joint=joint, extra=extra)
    )
    out = tmp_path / f"{method}.h5"
    result = mbsim("run", scene, "-o", out, "--quiet", "--json")
    assert result.exit_code == 0, result.output
    return h5py.File(out, "r")


@pytest.mark.parametrize(
    "method", quick(["lagrange", "null_space", "augmented_lagrangian", "recursive"], keep="lagrange")
)
def test_position_servo_follows_the_linear_second_order_response(write_scene, mbsim, tmp_path, method) -> None:
    """kp (target - q) - kd qd on I q'' : q(t) = target (1 - e^{-zeta wn t} (cos wd t + zeta/sqrt(1-zeta^2)
    sin wd t)), wn = sqrt(kp / I), zeta = kd / (2 sqrt(kp I)); the actuator's recorded force is
    the law at the recorded state and its work is the energy the bar gained."""
    kp, kd, target = 40.0, 2.0, 0.3
    extra = f"actuators:\n  - {{name: s1, joint: hinge, type: position, kp: {kp}, kd: {kd}, target: {target}}}"
    with _pendulum(write_scene, mbsim, tmp_path, method, extra=extra) as f:
        t, q = f["time"][:], f["joints/hinge/position"][:]
        wn, zeta = math.sqrt(kp / I_BAR), kd / (2 * math.sqrt(kp * I_BAR))
        wd = wn * math.sqrt(1 - zeta**2)
        decay = np.exp(-zeta * wn * t)
        exact = target * (1 - decay * (np.cos(wd * t) + zeta / math.sqrt(1 - zeta**2) * np.sin(wd * t)))
        assert np.max(np.abs(q - exact)) < 1e-9
        assert np.max(np.abs(f["bodies/bar/angle"][:] - q)) < 1e-12  # the coordinate counts from t = 0
        qd = f["joints/hinge/velocity"][:]
        force = f["actuators/s1/force"][:]
        assert np.max(np.abs(force - (kp * (target - q) - kd * qd))) < 1e-9
        # work done = kinetic energy gained (no gravity, no other force)
        work, kinetic = f["diagnostics/energy/work"][:], f["diagnostics/energy/kinetic"][:]
        assert abs(work[-1] - kinetic[-1]) < 1e-8 * max(1.0, abs(work).max())
        power = f["actuators/s1/power"][:]
        assert np.max(np.abs(power - force * qd)) < 1e-12


def test_forcerange_clamps_and_gear_multiplies(write_scene, mbsim, tmp_path) -> None:
    """A torque 10 clamped to 2 through a gear of 3: the joint gets 6 N m, q = 3 t^2 / I."""
    extra = "actuators:\n  - {name: m, joint: hinge, type: torque, value: 10, gear: 3, forcerange: [-2, 2]}"
    with _pendulum(write_scene, mbsim, tmp_path, extra=extra, end=1.0) as f:
        t, q = f["time"][:], f["joints/hinge/position"][:]
        assert np.max(np.abs(q - 0.5 * (6.0 / I_BAR) * t**2)) < 1e-10
        assert np.all(f["actuators/m/force"][:] == 2.0)


def test_compliant_stop_rebounds_with_its_restitution(write_scene, mbsim, tmp_path) -> None:
    """A bar turning at w0 into an upper limit at 0.02 rad: the linear spring-damper stop returns it
    at e w0 (e = exp(-zeta pi / sqrt(1 - zeta^2)), the stop's default damping), after a deepest
    penetration of w0 / wn exp(-zeta/sqrt(1-zeta^2) atan(sqrt(1-zeta^2)/zeta)), wn = 2 pi / 0.02 s.
    The damping force jumps at the stop, so a fixed step's error is O(h c / I)."""
    w0, e = 1.0, 0.5
    zeta = -math.log(e) / math.sqrt(math.pi**2 + math.log(e) ** 2)
    wn = 2 * math.pi / 0.02
    root = math.sqrt(1 - zeta**2)
    deepest = w0 / wn * math.exp(-zeta / root * math.atan(root / zeta))
    errors = []
    for step in (1e-5, 2e-6):
        joint = ", limits: {upper: 0.02, restitution: 0.5}"
        with _pendulum(write_scene, mbsim, tmp_path, end=0.05, step=step, w0=w0, joint=joint) as f:
            qd, q = f["joints/hinge/velocity"][:], f["joints/hinge/position"][:]
            errors.append(abs(qd[-1] / (-e * w0) - 1))
            assert q.max() - 0.02 == pytest.approx(deepest, rel=1e-3)
            stop = f["joints/hinge/limit_force"][:]
            assert np.all(stop[q < 0.02] == 0.0) and stop.min() < 0
    # each within one step's jump of the damping force, h c / I (its phase in the step decides the rest)
    for step, error in zip((1e-5, 2e-6), errors, strict=True):
        assert error < step * 2 * zeta * wn


def test_regularised_friction_creeps_then_slides(write_scene, mbsim, tmp_path) -> None:
    """A ramp torque 2 t against Coulomb friction 1 N m (smoothing 1e-4 rad/s): below 1 N m the bar
    creeps at less than 1e-4 rad/s; from t = 0.5 it slides with I qdd = 2 t - 1, so its rate at t = 1.5
    is ((1.5^2 - 0.5^2) - (1.5 - 0.5)) / I, up to the creep's head start."""
    joint = ", friction: {coulomb: 1.0, smoothing: 1.0e-4}"
    extra = "actuators:\n  - {name: ramp, joint: hinge, type: torque, value: 2*t}"
    with _pendulum(write_scene, mbsim, tmp_path, end=1.5, step=1e-4, joint=joint, extra=extra) as f:
        t, qd = f["time"][:], f["joints/hinge/velocity"][:]
        assert np.max(np.abs(qd[t < 0.49])) < 1e-4
        assert qd[-1] == pytest.approx(((1.5**2 - 0.5**2) - 1.0) / I_BAR, abs=2e-3)
        friction = f["joints/hinge/friction_force"][:]
        assert friction[-1] == pytest.approx(-1.0, abs=1e-9)


def test_distance_output_is_the_recorded_points_distance(write_scene, mbsim, tmp_path) -> None:
    """distance(bar, [0.5, 0], ground, [1, 0]) against the same points from the recorded pose."""
    extra = (
        "actuators:\n  - {name: s, joint: hinge, type: position, kp: 40, kd: 2, target: 0.5*sin(3*t)}\n"
        "outputs:\n  - {name: gap, value: 'distance(bar, [0.5, 0], ground, [1, 0])'}\n"
        "  - {name: lead, value: 'q.hinge - bar.angle + actuator.s'}"
    )
    with _pendulum(write_scene, mbsim, tmp_path, extra=extra) as f:
        p, a = f["bodies/bar/position"][:], f["bodies/bar/angle"][:]
        tip = p + 0.5 * np.c_[np.cos(a), np.sin(a)]
        assert np.max(np.abs(np.linalg.norm(tip - [1.0, 0.0], axis=1) - f["outputs/gap"][:])) < 1e-12
        assert np.max(np.abs(f["outputs/lead"][:] - f["actuators/s/force"][:])) < 1e-12


def test_an_output_assertion_fails_with_exit_4(write_scene, mbsim, tmp_path) -> None:
    scene = write_scene(
        PENDULUM.format(
            end=0.5,
            step=1e-3,
            method="lagrange",
            speed=0.5,
            w0=1.0,
            joint="",
            extra="outputs:\n  - {name: turn, value: q.hinge}",
        )  # fmt: skip
    )
    ok = mbsim("run", scene, "-o", tmp_path / "a.h5", "--quiet", "--assert", "max_turn > 0.49")
    assert ok.exit_code == 0, ok.output
    failed = mbsim("run", scene, "-o", tmp_path / "b.h5", "--quiet", "--assert", "final_turn < 0.4")
    assert failed.exit_code == 4, failed.output


@pytest.mark.parametrize(
    ("joint", "extra", "key", "fragment"),
    [
        ("", "outputs:\n  - {name: o, value: q.hing}", "outputs[0].value", "did you mean 'q.hinge'"),
        ("", "outputs:\n  - {name: o, value: bar.vz}", "outputs[0].value", "unknown signal 'bar.vz'"),
        (", limits: {lower: 1, upper: -1}", "", "joints[0].limits", "lower <= upper"),
        ("", "actuators:\n  - {name: a, joint: hinj, type: torque, value: 1}", "actuators[0].joint", "hinge"),
        ("", "actuators:\n  - {name: a, joint: hinge, type: position, target: 1}", "actuators[0]", "'kp'"),
        (
            "",
            "actuators:\n  - {name: a, joint: hinge, type: velocity, kd: 1, target: 1, kp: 3}",
            "actuators[0].kp",
            "no key 'kp'",
        ),
        (
            "",
            "actuators:\n  - {name: a, joint: hinge, type: position, kp: 1, target: q.hinge}",
            "actuators[0].rate",
            "give its rate",
        ),
    ],
    ids=["signal_typo", "signal_2d", "limits_order", "unknown_joint", "missing_kp", "foreign_key", "rate_needed"],
)
def test_bad_driven_input_is_exit_2(write_scene, mbsim, tmp_path, joint, extra, key, fragment) -> None:
    scene = write_scene(PENDULUM.format(end=0.1, step=1e-3, method="lagrange", speed=0, w0=0, joint=joint, extra=extra))
    result = mbsim("run", scene, "-o", tmp_path / "x.h5", "--quiet")
    assert result.exit_code == 2, result.output
    assert f"{scene}:" in result.stderr and key in result.stderr and fragment in result.stderr, result.stderr
    assert not (tmp_path / "x.h5").exists()


def test_a_servo_on_a_spherical_joint_is_exit_2(write_scene, mbsim, tmp_path) -> None:
    scene = write_scene(
        """
mbsim: 1
name: ball servo
time: {end: 0.1, step: 1e-3}
bodies:
  - {name: b, mass: 1, inertia: [1, 1, 1], position: [0, 0, -1]}
joints:
  - {name: ball, type: spherical, body1: ground, body2: b, point: [0, 0, 0]}
actuators:
  - {name: a, joint: ball, type: position, kp: 1, target: 0}
"""
    )
    result = mbsim("run", scene, "-o", tmp_path / "x.h5", "--quiet")
    assert result.exit_code == 2 and "actuators[0].joint" in result.stderr and "spherical" in result.stderr


@pytest.mark.parametrize("method", quick(["lagrange", "recursive"], keep="recursive"))
def test_a_torque_reading_a_joint_signal_acts_as_the_joint_spring(write_scene, mbsim, tmp_path, method) -> None:
    """A body torque -k q.hinge - c qd.hinge (a force element reading signals) and a joint spring
    {k, c} are one force written two ways: the same motion."""
    k, c = 3.0, 0.2
    torque = f"forces:\n  - {{type: torque, body: bar, value: '-{k}*q.hinge - {c}*qd.hinge'}}"
    spring = f", spring: {{stiffness: {k}, damping: {c}}}"
    with _pendulum(write_scene, mbsim, tmp_path / "a", method, w0=1.0, extra=torque) as a:
        first = a["joints/hinge/position"][:]
    with _pendulum(write_scene, mbsim, tmp_path / "b", method, w0=1.0, joint=spring) as b:
        second = b["joints/hinge/position"][:]
    assert np.max(np.abs(first)) > 0.1 and np.max(np.abs(first - second)) < 1e-12


def test_3d_body_signals_are_the_recorded_state(write_scene, mbsim, tmp_path) -> None:
    """BODY.x .. BODY.wz and BODY.qw .. BODY.qz (taken with qw >= 0) equal the recorded position,
    velocity, angular velocity and orientation of a tumbling body on a ball joint."""
    names = ["x", "y", "z", "vx", "vy", "vz", "wx", "wy", "wz", "qw", "qx", "qy", "qz"]
    outputs = "\n".join(f"  - {{name: {n}, value: box.{n}}}" for n in names)
    scene = write_scene(
        f"""
mbsim: 1
name: tumbling
gravity: [0, 0, -9.81]
time: {{end: 1.0, step: 1e-3}}
bodies:
  - {{name: box, mass: 2, inertia: [0.1, 0.2, 0.3], position: [0.3, 0, -0.4], angular_velocity: [1, -2, 5]}}
joints:
  - {{name: ball, type: spherical, body1: ground, body2: box, point: [0, 0, 0]}}
outputs:
{outputs}
"""
    )
    result = mbsim("run", scene, "-o", tmp_path / "x.h5", "--quiet")
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "x.h5", "r") as f:
        got = {n: f[f"outputs/{n}"][:] for n in names}
        position, velocity = f["bodies/box/position"][:], f["bodies/box/velocity"][:]
        omega, quat = f["bodies/box/angular_velocity"][:], f["bodies/box/orientation"][:]
    quat = quat * np.where(quat[:, :1] < 0, -1.0, 1.0) / np.linalg.norm(quat, axis=1)[:, None]
    for k, axis in enumerate("xyz"):
        assert np.max(np.abs(got[axis] - position[:, k])) < 1e-14
        assert np.max(np.abs(got[f"v{axis}"] - velocity[:, k])) < 1e-14
        assert np.max(np.abs(got[f"w{axis}"] - omega[:, k])) < 1e-13
    for k, part in enumerate(("qw", "qx", "qy", "qz")):
        assert np.max(np.abs(got[part] - quat[:, k])) < 1e-12


@pytest.mark.parametrize("method", quick(["lagrange", "recursive"], keep="lagrange"))
def test_a_slide_and_a_hinge_keep_their_own_coordinates(write_scene, mbsim, tmp_path, method) -> None:
    """A cart on a slide carrying a pendulum on a hinge (the table's rows are batched by kind, the
    hinge's before the slide's): each joint's recorded coordinate is its own (the cart's x, the
    pendulum's angle), and a force on the slide moves the cart, a torque on the hinge the pendulum."""
    scene = write_scene(
        f"""
mbsim: 1
name: cart pendulum
dimension: 2
time: {{end: 0.5, step: 1e-3}}
solver: {{method: {method}, integrator: rk4}}
bodies:
  - {{name: cart, mass: 3, inertia: 0.1, position: [0, 0]}}
  - {{name: pole, mass: 1, inertia: 0.05, position: [0, -0.5]}}
joints:
  - {{name: rail, type: prismatic, body1: ground, body2: cart, point: [0, 0], axis: [1, 0]}}
  - {{name: pivot, type: revolute, body1: cart, body2: pole, point: [0, 0]}}
actuators:
  - {{name: push, joint: rail, type: force, value: 6}}
  - {{name: twist, joint: pivot, type: torque, value: 0.5}}
"""
    )
    result = mbsim("run", scene, "-o", tmp_path / "x.h5", "--quiet")
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "x.h5", "r") as f:
        cart_x = f["bodies/cart/position"][:, 0]
        assert np.max(np.abs(f["joints/rail/position"][:] - cart_x)) < 1e-12
        assert np.max(np.abs(f["joints/pivot/position"][:] - f["bodies/pole/angle"][:])) < 1e-12
        # the whole system's momentum along the rail grows at the pushing force, 6 N
        momentum = 3 * f["bodies/cart/velocity"][:, 0] + f["bodies/pole/velocity"][:, 0]
        assert momentum[-1] == pytest.approx(6 * 0.5, rel=1e-9)


def test_the_effort_bound_scales_the_recorded_forces(write_scene, mbsim, tmp_path) -> None:
    """Two torques 10 and 5 N m on a joint of effort 3: the joint gets 3 N m (q = 1.5 t^2 / I) and
    the actuators record 2 and 1 N m, the shares they applied; their powers sum to the work."""
    extra = (
        "actuators:\n  - {name: a, joint: hinge, type: torque, value: 10}\n"
        "  - {name: b, joint: hinge, type: torque, value: 5}"
    )
    with _pendulum(write_scene, mbsim, tmp_path, end=1.0, joint=", effort: 3", extra=extra) as f:
        t, q = f["time"][:], f["joints/hinge/position"][:]
        assert np.max(np.abs(q - 0.5 * (3.0 / I_BAR) * t**2)) < 1e-10
        assert np.allclose(f["actuators/a/force"][:], 2.0, rtol=0, atol=1e-12)
        assert np.allclose(f["actuators/b/force"][:], 1.0, rtol=0, atol=1e-12)
        power = f["actuators/a/power"][:] + f["actuators/b/power"][:]
        assert np.max(np.abs(power - 3.0 * f["joints/hinge/velocity"][:])) < 1e-10
        assert f["diagnostics/energy/work"][-1] == pytest.approx(f["diagnostics/energy/kinetic"][-1], rel=1e-9)


def test_an_assertion_on_a_misspelt_output_is_exit_2(write_scene, mbsim, tmp_path) -> None:
    scene = write_scene(
        PENDULUM.format(
            end=0.1,
            step=1e-3,
            method="lagrange",
            speed=0,
            w0=0,
            joint="",
            extra="outputs:\n  - {name: turn, value: q.hinge}",
        )  # fmt: skip
    )
    result = mbsim("run", scene, "-o", tmp_path / "x.h5", "--quiet", "--assert", "max_trun < 1")
    assert result.exit_code == 2 and "did you mean 'max_turn'" in result.stderr, result.stderr
    assert not (tmp_path / "x.h5").exists()


# (variational: from rest with no energy scale at all, its first step's Newton accepts the start within
# its position tolerance and the divergence check meets kinetic energy 6e-18 J against zero work: see
# the closing note)
@pytest.mark.parametrize("method", quick(["lagrange", "recursive", "null_space"], keep="lagrange"))
def test_a_block_on_a_slide_under_a_ramp_force_sticks_then_slides(write_scene, mbsim, tmp_path, method) -> None:
    """A 2 kg block on a prismatic joint, Coulomb friction F_c = 3 N (smoothing 1e-4 m/s), pushed by
    F = 2 t: it creeps below 1e-4 m/s while F < F_c (the regularisation's stated error: a creep of
    smoothing F / F_c) and from t_b = 1.5 s slides with m a = 2 t - 3, so its speed at 2.5 s is
    ((2.5^2 - 1.5^2) - 3 (2.5 - 1.5)) / 2 = 0.5 m/s, up to the creep's head start."""
    scene = write_scene(
        f"""
mbsim: 1
name: block on a slide
dimension: 2
time: {{end: 2.5, step: 1e-4}}
solver: {{method: {method}, integrator: rk4}}
bodies:
  - {{name: block, mass: 2, inertia: 0.1, position: [0, 0]}}
joints:
  - {{name: slide, type: prismatic, body1: ground, body2: block, point: [0, 0], axis: [1, 0],
     friction: {{coulomb: 3.0, smoothing: 1.0e-4}}}}
actuators:
  - {{name: push, joint: slide, type: force, value: 2*t}}
"""
    )
    result = mbsim("run", scene, "-o", tmp_path / "x.h5", "--quiet")
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "x.h5", "r") as f:
        t, v = f["time"][:], f["joints/slide/velocity"][:]
        assert np.max(np.abs(v[t < 1.49])) < 1e-4
        assert v[-1] == pytest.approx(0.5, abs=2e-3)
        assert f["joints/slide/friction_force"][-1] == pytest.approx(-3.0, abs=1e-9)
