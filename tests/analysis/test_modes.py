"""mbsim.analysis.modes (linearize, modes, state_space) and ``mbsim modes`` / ``mbsim linearize``
against independent references: closed forms, hand-written one- and two-coordinate
linearisations, and Pinocchio's CRBA and gravity derivatives for the UR5."""

from __future__ import annotations

import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.linalg
import yaml
from click.testing import CliRunner

from mbsim.analysis.modes import linearize, modes, state_space
from mbsim.cli.main import cli
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare

SCENES = Path(__file__).resolve().parents[2] / "scenes"
G = 9.81


def compiled(scene: dict | Path, tmp_path: Path, overrides: tuple[str, ...] = ()):
    """(spec, model) of a scene file or a scene dict written to tmp_path."""
    if isinstance(scene, dict):
        path = tmp_path / "scene.yaml"
        path.write_text(yaml.safe_dump(scene))
    else:
        path = scene
    spec = load_scene(str(path), overrides)
    model, _ = prepare(spec)
    return spec, model


def chain_scene(n: int, mass: float, stiffness: float, damping: float = 0.0) -> dict:
    """N masses on prismatic joints along x (2D, no gravity), springs between neighbours and to
    walls at x = 0 and x = N + 1."""
    bodies = [{"name": f"m{i}", "mass": mass, "inertia": 0.01, "position": [float(i), 0.0]} for i in range(1, n + 1)]
    joints = [
        {"name": f"s{i}", "type": "prismatic", "body1": "ground", "body2": f"m{i}", "point": [float(i), 0.0],
         "axis": [1.0, 0.0]}
        for i in range(1, n + 1)
    ]  # fmt: skip
    ends = ["ground", *[f"m{i}" for i in range(1, n + 1)], "ground"]
    forces = [
        {"type": "spring_damper", "body1": ends[i], "body2": ends[i + 1], "point1": [float(i), 0.0],
         "point2": [float(i + 1), 0.0], "stiffness": stiffness, "damping": damping}
        for i in range(n + 1)
    ]  # fmt: skip
    return {
        "mbsim": 1,
        "name": "spring chain",
        "dimension": 2,
        "gravity": [0.0, 0.0],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": bodies,
        "joints": joints,
        "forces": forces,
    }


def chain_omegas(n: int, mass: float, stiffness: float) -> np.ndarray:
    """The fixed-fixed chain's angular frequencies 2 sqrt(k/m) sin(j pi / (2 (N + 1)))."""
    j = np.arange(1, n + 1)
    return 2 * math.sqrt(stiffness / mass) * np.sin(j * math.pi / (2 * (n + 1)))


# ------------------------------------------------------------------ closed forms


def test_double_pendulum_two_frequencies(tmp_path):
    """Two uniform bars (1 kg, 1 m) hanging down: the 2x2 problem in the joint angles by hand."""
    _, model = compiled(SCENES / "double_pendulum_2d.yaml", tmp_path, ("parameters.th1=0", "parameters.th2=0"))
    lin = linearize(model, model.q0)
    result = modes(lin)
    m, L = 1.0, 1.0
    # T = 1/2 [(m L^2/3 + m L^2) th1'^2 + m L^2 th1' th2' + m L^2/3 th2'^2] (bar 2's centre at L + L/2)
    M = np.array([[m * L**2 / 3 + m * L**2, m * L**2 / 2], [m * L**2 / 2, m * L**2 / 3]])
    # V = -g (m L/2 cos th1 + m (L cos th1 + L/2 cos th2))
    K = np.diag([m * G * L / 2 + m * G * L, m * G * L / 2])
    reference = np.sqrt(scipy.linalg.eigh(K, M, eigvals_only=True)) / (2 * math.pi)
    assert lin.dof == 2 and lin.rank == 4 and lin.equilibrium
    np.testing.assert_allclose(result.frequency_hz, reference, rtol=1e-9)
    np.testing.assert_allclose(result.damping_ratio, 0.0, atol=1e-12)
    np.testing.assert_allclose(lin.mass, np.eye(2), atol=1e-12)  # the basis is M-orthonormal
    # mass-normalised shapes: the bars' angles phi (rows of shape[:, :, 2]) satisfy phi^T M phi = 1
    angles = result.shape[:, :, 2]
    np.testing.assert_allclose(np.einsum("ki,ij,kj->k", angles, M, angles), 1.0, rtol=1e-8)
    # and they are the generalized eigenvectors: K phi = omega^2 M phi
    for k in range(2):
        omega2 = (2 * math.pi * result.frequency_hz[k]) ** 2
        np.testing.assert_allclose(K @ angles[k], omega2 * M @ angles[k], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("n", [3, 8])
def test_spring_chain_analytic_eigenvalues(tmp_path, n):
    m, k = 2.0, 50.0
    _, model = compiled(chain_scene(n, m, k), tmp_path)
    lin = linearize(model, model.q0)
    result = modes(lin)
    omega = chain_omegas(n, m, k)
    assert lin.dof == n
    np.testing.assert_allclose(2 * math.pi * result.frequency_hz, omega, rtol=1e-9)
    # shapes: x_i of mode j ~ sin(i j pi / (N + 1)), mass-normalised (sum m x_i^2 = 1)
    i = np.arange(1, n + 1)
    for j in range(1, n + 1):
        analytic = np.sin(i * j * math.pi / (n + 1))
        analytic /= math.sqrt(m * analytic @ analytic)
        got = result.shape[j - 1, :, 0]
        np.testing.assert_allclose(np.abs(got), np.abs(analytic), atol=1e-8)
        np.testing.assert_allclose(result.shape[j - 1, :, 1:], 0.0, atol=1e-8)  # no lateral motion, no turn


def test_damped_spring_chain_eigenvalues(tmp_path):
    """Stiffness-proportional damping C = (c/k) K: lambda_j = -c w_j^2 / 2k + i w_j sqrt(1 - (c w_j / 2k)^2)."""
    n, m, k, c = 5, 1.0, 40.0, 0.3
    _, model = compiled(chain_scene(n, m, k, c), tmp_path)
    result = modes(linearize(model, model.q0))
    omega = chain_omegas(n, m, k)
    zeta = c * omega / (2 * k)
    np.testing.assert_allclose(result.damping_ratio, zeta, rtol=1e-8)
    np.testing.assert_allclose(result.eigenvalue[:, 0], -zeta * omega, rtol=1e-8)
    np.testing.assert_allclose(result.eigenvalue[:, 1], omega * np.sqrt(1 - zeta**2), rtol=1e-9)
    np.testing.assert_allclose(2 * math.pi * result.frequency_hz, omega * np.sqrt(1 - zeta**2), rtol=1e-9)


def slider_crank_held(theta: float, damping: float) -> dict:
    """scenes/slider_crank_2d.yaml at crank angle theta, held there by a constant torque on the
    crank (gravity's m_bar g L cos theta), with a damper on the crank joint."""
    scene = yaml.safe_load((SCENES / "slider_crank_2d.yaml").read_text())
    scene["parameters"]["th1"] = theta
    scene["joints"][0]["spring"] = {"stiffness": 0.0, "damping": damping}
    hold = repr(6.0 * G * 1.0 * math.cos(theta))
    scene["actuators"] = [{"name": "hold", "joint": "O", "type": "torque", "value": hold}]
    return scene


@pytest.mark.parametrize("theta", [-math.pi / 3, -math.pi / 6])
def test_slider_crank_one_coordinate(tmp_path, theta):
    """One coordinate (the crank angle): M(th) from the bodies' velocities by hand, V = m g L sin th
    (both bars' centres at height L/2 sin th), a constant holding torque (no stiffness) and the
    damper c: lambda^2 M + lambda c + K = 0 with K = V''(th) = -m g L sin th."""
    m, ms, L, c = 6.0, 2.0, 1.0, 0.7
    _, model = compiled(slider_crank_held(theta, c), tmp_path)
    lin = linearize(model, model.q0)
    result = modes(lin)
    s, co = math.sin(theta), math.cos(theta)
    # crank about O; rod: centre (1.5 L cos th, 0.5 L sin th), angle -th; slider at 2 L cos th
    M = m * L**2 / 3 + m * L**2 * (2.25 * s**2 + 0.25 * co**2) + m * L**2 / 12 + ms * 4 * L**2 * s**2
    K = -m * G * L * s
    lam = np.roots([M, c, K])
    lam = lam[np.argmax(lam.imag)]
    assert lin.dof == 1
    assert lin.force_residual < 1e-9  # the holding torque balances gravity: an equilibrium
    np.testing.assert_allclose(result.eigenvalue[0], [lam.real, lam.imag], rtol=1e-8)


def test_parallelogram_redundant_count_and_frequency(tmp_path):
    """12 equations of rank 11 on 12 coordinates: one mode (nv - nc would say none); hanging
    straight down it is the pendulum I = 3 m L^2/3 + mc L^2, torque (3 m L/2 + mc L) g theta."""
    _, model = compiled(SCENES / "parallelogram_redundant_2d.yaml", tmp_path, ("parameters.th=0",))
    assert model.nv - model.nc == 0
    lin = linearize(model, model.q0)
    result = modes(lin)
    m, mc, L = 1.0, 2.0, 1.0
    omega = math.sqrt((3 * m * L / 2 + mc * L) * G / (3 * m * L**2 / 3 + mc * L**2))
    assert lin.dof == 1 and lin.rank == 11
    np.testing.assert_allclose(2 * math.pi * result.frequency_hz, [omega], rtol=1e-9)
    # the coupler translates without turning; its shape's rotation is zero
    coupler = model.body_names.index("coupler")
    assert abs(result.shape[0, coupler, 2]) < 1e-8


def test_spherical_pendulum_3d_rigid_mode_and_world_shapes(tmp_path):
    """A body on a spherical joint hanging below it, principal axes turned 0.5 rad about z: two
    swings about the world axes R e_x, R e_y with omega^2 = m g d / (I + m d^2), and the spin about
    the vertical, a rigid-body mode (0 Hz); shapes in world axes, mass-normalised."""
    m, d, inertia, turn = 2.0, 0.8, [0.3, 0.5, 0.25], 0.5
    scene = {
        "mbsim": 1,
        "name": "spherical pendulum",
        "dimension": 3,
        "gravity": [0.0, 0.0, -G],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "bob", "mass": m, "inertia": inertia, "position": [0.0, 0.0, -d],
                    "orientation": {"axis_angle": {"axis": [0, 0, 1], "angle": turn}}}],
        "joints": [{"name": "ball", "type": "spherical", "body1": "ground", "body2": "bob", "point": [0, 0, 0]}],
    }  # fmt: skip
    _, model = compiled(scene, tmp_path)
    lin = linearize(model, model.q0)
    result = modes(lin)
    assert lin.dof == 3 and lin.equilibrium
    R = np.array([[math.cos(turn), -math.sin(turn), 0], [math.sin(turn), math.cos(turn), 0], [0, 0, 1]])
    arm = np.array([0.0, 0.0, -d])
    expected = [(0.0, R[:, 2], inertia[2])]  # the spin: no stiffness; shape theta = 1/sqrt(Iz)
    for axis, value in ((R[:, 0], inertia[0]), (R[:, 1], inertia[1])):
        expected.append((math.sqrt(m * G * d / (value + m * d**2)), axis, value + m * d**2))
    expected.sort(key=lambda e: e[0])
    for k, (omega, axis, moment) in enumerate(expected):
        assert 2 * math.pi * result.frequency_hz[k] == pytest.approx(omega, rel=1e-9, abs=1e-9)
        theta = axis / math.sqrt(moment)  # mass-normalised: moment theta^2 = 1
        shape = result.shape[k, 0]
        sign = np.sign(shape[3:] @ theta)
        np.testing.assert_allclose(sign * shape[3:], theta, atol=1e-8)
        np.testing.assert_allclose(sign * shape[:3], np.cross(theta, arm), atol=1e-8)


def sleeping_top(height: float, spin: float, mass: float, transverse: float, axial: float) -> dict:
    """A symmetric top on a spherical pivot at the origin, its centre at (0, 0, height), spinning
    about the vertical at ``spin`` rad/s."""
    return {
        "mbsim": 1,
        "name": "sleeping top",
        "dimension": 3,
        "gravity": [0.0, 0.0, -G],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "top", "mass": mass, "inertia": [transverse, transverse, axial],
                    "position": [0.0, 0.0, height], "angular_velocity": [0.0, 0.0, spin]}],
        "joints": [{"name": "pivot", "type": "spherical", "body1": "ground", "body2": "top", "point": [0, 0, 0]}],
    }  # fmt: skip


@pytest.mark.parametrize(
    "height, spin", [(0.1, 40.0), (0.1, 5.0), (-0.1, 10.0)], ids=["upright-fast", "upright-slow", "hanging"]
)
def test_sleeping_top_gyroscopic(tmp_path, height, spin):
    """A top spinning on its pivot (a motion steady in world axes): the small tilts u = a + i b obey
    I1 u'' - i I3 s u' - m g l u = 0 (I1 about the pivot), lambda = (i I3 s +- sqrt(4 I1 m g l -
    I3^2 s^2)) / 2 I1: stable above the Maxwell-Klein spin I3^2 s^2 > 4 I1 m g l, unstable below;
    the spin angle is a rigid-body mode."""
    m, it, i3 = 1.5, 0.02, 0.03
    _, model = compiled(sleeping_top(height, spin, m, it, i3), tmp_path)
    lin = linearize(model, model.q0, model.v0)
    assert lin.dof == 3 and not lin.equilibrium
    i1 = it + m * height**2
    root = np.sqrt(complex(4 * i1 * m * G * height - (i3 * spin) ** 2))
    expected = [(1j * i3 * spin + root) / (2 * i1), (1j * i3 * spin - root) / (2 * i1)]
    # each mode once: of lambda and its conjugate the one with Im > 0
    expected = [value if value.imag > 0 else np.conj(value) for value in expected]
    ours = np.linalg.eigvals(lin.state_matrix())
    scale = max(abs(value) for value in expected)
    for value in expected:
        assert np.min(np.abs(ours - value)) < 1e-8 * scale
    result = modes(lin)
    got = result.eigenvalue[:, 0] + 1j * result.eigenvalue[:, 1]
    assert abs(got[0]) < 1e-8 * scale  # the spin
    for value in expected:
        assert np.min(np.abs(got - value)) < 1e-8 * scale


def test_free_body_hanging_on_a_spring_is_an_equilibrium(tmp_path):
    """A free planar body hanging at rest on a spring from the origin, stretched by its weight:
    its net force is zero (no joint carries a reaction), and it is an equilibrium; the modes are
    the spring's k / m, the spring pendulum's g / L (the tension m g over the length L) and the
    body's free turn (the spring acts at its centre)."""
    m, k, length = 2.0, 80.0, 1.5
    rest = length - m * G / k
    scene = {
        "mbsim": 1, "name": "hanging", "dimension": 2, "gravity": [0.0, -G],
        "time": {"end": 1.0, "step": 0.001}, "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "bob", "mass": m, "inertia": 0.1, "position": [0.0, -length]}],
        "forces": [{"type": "spring_damper", "body1": "ground", "body2": "bob", "point1": [0.0, 0.0],
                    "point2": [0.0, -length], "stiffness": k, "rest_length": rest}],
    }  # fmt: skip
    _, model = compiled(scene, tmp_path)
    lin = linearize(model, model.q0)
    assert lin.force_residual < 1e-12 and lin.equilibrium
    omega = 2 * math.pi * modes(lin).frequency_hz
    np.testing.assert_allclose(omega, [0.0, math.sqrt(G / length), math.sqrt(k / m)], rtol=1e-8, atol=1e-8)


def precessing_top(tilt: float, spin: float, root: int) -> tuple[dict, float, float]:
    """A heavy symmetric top on a spherical pivot at the origin in steady precession: its axis at
    ``tilt`` from the upward vertical (in the xz-plane at t = 0), ``spin`` = omega . axis, and the
    precession rate Omega a root of I1 Omega^2 cos(tilt) - I3 n Omega + m g l = 0 (the theta
    equation of Lagrange's top at theta_dot = 0; I1 about the pivot). Returns (scene, Omega, the
    nutation frequency omega_n), omega_n^2 = ((I3 n - 2 I1 Omega cos)^2 + I1^2 Omega^2 sin^2) / I1^2:
    U_eff''(tilt) / I1 of the effective potential in theta at the conserved p_phi, p_psi."""
    m, l, it, i3 = 1.5, 0.1, 0.02, 0.03
    i1 = it + m * l**2
    c, s = math.cos(tilt), math.sin(tilt)
    rates = np.roots([i1 * c, -i3 * spin, m * G * l])
    rate = float(np.sort(rates.real)[root])
    axis = np.array([s, 0.0, c])
    omega = rate * np.array([0.0, 0.0, 1.0]) + (spin - rate * c) * axis  # omega . axis = spin
    nutation = math.sqrt((i3 * spin - 2 * i1 * rate * c) ** 2 + (i1 * rate * s) ** 2) / i1
    scene = {
        "mbsim": 1,
        "name": "precessing top",
        "dimension": 3,
        "gravity": [0.0, 0.0, -G],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "top", "mass": m, "inertia": [it, it, i3], "position": (l * axis).tolist(),
                    "orientation": {"axis_angle": {"axis": [0, 1, 0], "angle": tilt}},
                    "velocity": np.cross(omega, l * axis).tolist(), "angular_velocity": omega.tolist()}],
        "joints": [{"name": "pivot", "type": "spherical", "body1": "ground", "body2": "top", "point": [0, 0, 0]}],
    }  # fmt: skip
    return scene, rate, nutation


@pytest.mark.parametrize(
    "tilt, spin, root",
    [(0.5, 40.0, 0), (0.5, 40.0, 1), (2.2, 25.0, 1), (1.0, 60.0, 0)],
    ids=["slow", "fast", "hanging", "tilted-slow"],
)
def test_heavy_top_in_steady_precession(tmp_path, tilt, spin, root):
    """The heavy top about steady precession (a gyroscopic relative equilibrium): seen from the
    frame turning with the precession, the nutation eigenvalues +-i omega_n of the closed form, and
    the precession and spin angles rigid-body modes (their rates move to a neighbouring precession)."""
    scene, rate, nutation = precessing_top(tilt, spin, root)
    _, model = compiled(scene, tmp_path)
    lin = linearize(model, model.q0, model.v0)
    assert lin.steady and lin.steady_residual < 1e-10
    np.testing.assert_allclose(lin.frame_rate, [0.0, 0.0, rate], atol=1e-9 * abs(rate))
    ours = np.linalg.eigvals(lin.state_matrix())
    assert np.min(np.abs(ours - 1j * nutation)) < 1e-8 * nutation
    assert np.min(np.abs(ours + 1j * nutation)) < 1e-8 * nutation
    assert np.sum(np.abs(ours) < 1e-4 * nutation) == 4  # two double zeros (Jordan blocks: ~sqrt(eps))
    result = modes(lin)
    assert 2 * math.pi * result.frequency_hz[-1] == pytest.approx(nutation, rel=1e-8)
    assert np.all(result.frequency_hz[:2] == 0.0) and np.all(np.abs(result.damping_ratio) < 1e-8)
    # the same state seen from world axes is not steady: a frozen linearisation, said so
    frozen = linearize(model, model.q0, model.v0, frame_rate=np.zeros(3))
    assert not frozen.steady and frozen.steady_residual > 0.1


def test_the_shipped_heavy_top_precesses_steadily_and_nutates_at_the_closed_form():
    """scenes/heavy_top.yaml: run (rk4), its axis keeps the tilt to 1e-9 rad and turns at the
    closed-form precession rate over 2 s; its modes give the closed-form nutation frequency."""
    import mbsim

    m, l, it, i3, tilt, n = 1.5, 0.1, 0.02, 0.03, 0.5, 40.0
    i1, c, s = it + m * l**2, math.cos(tilt), math.sin(tilt)
    rate = (i3 * n - math.sqrt((i3 * n) ** 2 - 4 * i1 * c * m * G * l)) / (2 * i1 * c)
    sim = mbsim.load(SCENES / "heavy_top.yaml")
    result = sim.run()
    p = result.body("top").position
    np.testing.assert_allclose(np.arccos(p[:, 2] / np.linalg.norm(p, axis=1)), tilt, atol=1e-9)
    np.testing.assert_allclose(np.unwrap(np.arctan2(p[:, 1], p[:, 0])), rate * result.time, atol=1e-9)
    nutation = math.sqrt((i3 * n - 2 * i1 * rate * c) ** 2 + (i1 * rate * s) ** 2) / i1
    assert 2 * math.pi * sim.modes().frequency_hz[-1] == pytest.approx(nutation, rel=1e-8)


def test_precession_frame_is_refused_when_not_steady(tmp_path):
    """A top released with its precession rate off by 5 %: steady in no rotating frame, so the
    linearisation stays in world axes and says it is not steady."""
    scene, rate, _ = precessing_top(0.5, 40.0, 0)
    scene["bodies"][0]["angular_velocity"][2] += 0.05 * rate
    _, model = compiled(scene, tmp_path)
    lin = linearize(model, model.q0, model.v0)
    assert not lin.steady and np.all(lin.frame_rate == 0.0)


def test_planar_orbit_epicyclic_frequency(tmp_path):
    """A planar body on a spring to the origin, orbiting in a circle (m Omega^2 r = k (r - L0)):
    seen from the frame turning with it, the radial oscillation at the epicyclic frequency
    kappa^2 = k / m + 3 Omega^2 (m r'' = -k (r - L0) + l^2 / (m r^3) linearised), and two
    rigid-body modes (the orbit's phase, the body's own angle)."""
    m, k, rest, r = 2.0, 50.0, 0.6, 1.0
    rate = math.sqrt(k * (r - rest) / (m * r))
    scene = {
        "mbsim": 1, "name": "orbit", "dimension": 2, "gravity": [0.0, 0.0],
        "time": {"end": 1.0, "step": 0.001}, "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "bob", "mass": m, "inertia": 0.1, "position": [r, 0.0], "velocity": [0.0, rate * r]}],
        "forces": [{"type": "spring_damper", "body1": "ground", "body2": "bob", "point1": [0.0, 0.0],
                    "point2": [r, 0.0], "stiffness": k, "rest_length": rest}],
    }  # fmt: skip
    _, model = compiled(scene, tmp_path)
    lin = linearize(model, model.q0, model.v0)
    assert lin.steady
    np.testing.assert_allclose(lin.frame_rate, [0.0, 0.0, rate], rtol=1e-9)
    kappa = math.sqrt(k / m + 3 * rate**2)
    result = modes(lin)
    assert 2 * math.pi * result.frequency_hz[-1] == pytest.approx(kappa, rel=1e-8)
    assert np.all(result.frequency_hz[:2] == 0.0)


# ------------------------------------------------------------------ an imported arm against Pinocchio


def test_ur5_against_pinocchio(tmp_path):
    """UR5 at a pose, gravity held by constant joint torques (Pinocchio's g(q)), the wrist_3
    spring (2 N m/rad, 0.05 N m s/rad) of scenes/ur5_arm.yaml: the eigenvalues of (K, M) with
    M = CRBA and K = dg/dq + the spring, and the damped ones, to 1e-8 relative."""
    pin = pytest.importorskip("pinocchio")
    urdf = SCENES / "robots/ur_description/urdf/ur5_robot.urdf"
    pm = pin.buildModelFromUrdf(str(urdf))
    pd = pm.createData()
    pose = {"shoulder_lift_joint": -1.2, "elbow_joint": 0.7, "wrist_1_joint": -1.0, "wrist_2_joint": 0.4}
    q = np.zeros(pm.nq)
    for name, value in pose.items():
        q[pm.joints[pm.getJointId(name)].idx_q] = value
    gravity = pin.computeGeneralizedGravity(pm, pd, q)
    scene = yaml.safe_load((SCENES / "ur5_arm.yaml").read_text())
    scene["solver"] = {"method": "lagrange", "integrator": "rk4"}
    scene["models"][0].update(file=str(urdf), joint_positions=pose, joint_velocities={})
    scene["actuators"] = [
        {"name": f"hold{i}", "joint": pm.names[i + 1], "type": "torque", "value": repr(float(gravity[i]))}
        for i in range(6)
    ]
    _, model = compiled(scene, tmp_path)
    lin = linearize(model, model.q0)
    assert lin.dof == 6 and lin.force_residual < 1e-9
    M = pin.crba(pm, pd, q)
    M = np.triu(M) + np.triu(M, 1).T
    K = pin.computeGeneralizedGravityDerivatives(pm, pd, q).copy()
    K[5, 5] += 2.0
    C = np.zeros((6, 6))
    C[5, 5] = 0.05
    reference = np.sort(scipy.linalg.eigvals(K, M).real)
    got = np.sort(scipy.linalg.eigvals(lin.stiffness, lin.mass).real)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-8 * np.abs(reference).max())
    # the damped eigenvalues of the state matrices
    A = np.block([[np.zeros((6, 6)), np.eye(6)], [-np.linalg.solve(M, K), -np.linalg.solve(M, C)]])
    ref = np.linalg.eigvals(A)
    ours = np.linalg.eigvals(lin.state_matrix())
    scale = np.abs(ref).max()
    big = ref[np.abs(ref) > 1e-3 * scale]
    for value in big:  # every eigenvalue away from zero has its partner in ours
        assert np.min(np.abs(ours - value)) < 1e-8 * scale
    result = modes(lin)
    assert len(result.frequency_hz) == 6 and result.shape.shape == (6, 6, 6)
    # the unstable modes (gravity: K has negative eigenvalues) come out as positive real lambdas
    unstable = np.sort(big.real[big.real > 0])
    np.testing.assert_allclose(np.sort(result.eigenvalue[result.eigenvalue[:, 0] > 1e-6, 0]), unstable, rtol=1e-8)


# ------------------------------------------------------------------ state space


def test_state_space_transfer_function(tmp_path):
    """A force actuator on the first mass of a 4-mass chain and the third mass's position as an
    output: C (sI - A)^-1 B equals e3^T (M s^2 + C s + K)^-1 e1 of the physical chain."""
    n, m, k, c = 4, 1.5, 30.0, 0.2
    scene = chain_scene(n, m, k, c)
    scene["actuators"] = [{"name": "push", "joint": "s1", "type": "force", "value": "0"}]
    scene["outputs"] = [{"name": "x3", "value": "m3.x"}, {"name": "v2", "value": "m2.vx"}]
    _, model = compiled(scene, tmp_path)
    ss = state_space(linearize(model, model.q0))
    assert ss.inputs == ["push"] and ss.outputs == ["x3", "v2"]
    K = k * (2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1))
    Cm = (c / k) * K
    for s in (0.3 + 2.0j, 5.0j):
        H = np.linalg.solve(m * s**2 * np.eye(n) + Cm * s + K, np.eye(n)[:, 0])
        G_ref = np.array([H[2], s * H[1]])
        G = ss.C @ np.linalg.solve(s * np.eye(len(ss.A)) - ss.A, ss.B)[:, 0] + ss.D[:, 0]
        np.testing.assert_allclose(G, G_ref, rtol=1e-8)


# ------------------------------------------------------------------ the commands


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_modes_command_writes_result_file(tmp_path):
    scene = tmp_path / "chain.yaml"
    n, m, k = 3, 2.0, 50.0
    scene.write_text(yaml.safe_dump(chain_scene(n, m, k)))
    out = tmp_path / "modes.h5"
    result = invoke("modes", scene, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    omega = chain_omegas(n, m, k)
    np.testing.assert_allclose(2 * math.pi * np.array(summary["frequency_hz"]), omega, rtol=1e-9)
    with h5py.File(out, "r") as f:
        assert f.attrs["format"] == "mbsim-result" and f.attrs["status"] == "completed"
        np.testing.assert_allclose(2 * math.pi * f["modes/frequency_hz"][:], omega, rtol=1e-9)
        assert f["modes/eigenvalue"].shape == (n, 2)
        assert f["modes/damping_ratio"].shape == (n,)
        assert f["modes/shape/m1"].shape == (n, 3)
        assert f["modes/state"].shape == (3 * n + 3 * n,)
        assert f["time"].shape == (1,)
    table = invoke("modes", scene, "-o", out)
    assert table.exit_code == 0 and "frequency Hz" in table.output


def test_modes_command_about_a_precessing_top(tmp_path):
    """``mbsim modes`` about the heavy top in steady precession: the nutation frequency of the
    closed form in the table's JSON, the turning frame in the file's root attributes and on stderr;
    the same top 5 % off its precession is a frozen linearisation, and says so."""
    scene, rate, nutation = precessing_top(0.5, 40.0, 1)
    path = tmp_path / "top.yaml"
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    out = tmp_path / "top-modes.h5"
    result = CliRunner().invoke(cli, ["modes", str(path), "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["steady"] and 2 * math.pi * summary["frequency_hz"][-1] == pytest.approx(nutation, rel=1e-8)
    with h5py.File(out, "r") as f:
        assert bool(f.attrs["steady"])
        np.testing.assert_allclose(f.attrs["frame_rate"], [0.0, 0.0, rate], atol=1e-9 * rate)
    table = CliRunner().invoke(cli, ["modes", str(path), "-o", str(tmp_path / "again.h5")])
    assert f"frame turning at {rate:.6g} rad/s" in table.stderr
    scene["bodies"][0]["angular_velocity"][2] += 0.05 * rate
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    frozen = CliRunner().invoke(cli, ["modes", str(path), "-o", str(tmp_path / "off.h5")])
    assert frozen.exit_code == 0 and "steadily in no rotating frame" in frozen.stderr


def test_modes_from_a_recorded_row(tmp_path):
    """--from a run's file: a row at rest of the hanging double pendulum gives the closed form;
    --time past the end and a file of another scene are exit 2 naming the problem."""
    scene = SCENES / "double_pendulum_2d.yaml"
    run_file = tmp_path / "run.h5"
    sets = ("--set", "parameters.th1=0", "--set", "parameters.th2=0", "--set", "time.end=0.01")
    assert invoke("run", scene, "-o", run_file, *sets, "--quiet").exit_code == 0
    out = tmp_path / "modes.h5"
    result = invoke("modes", scene, *sets, "--from", run_file, "--time", 0.01, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)["frequency_hz"]
    M = np.array([[4 / 3, 1 / 2], [1 / 2, 1 / 3]])
    K = np.diag([1.5 * G, 0.5 * G])
    np.testing.assert_allclose(got, np.sqrt(scipy.linalg.eigh(K, M, eigvals_only=True)) / (2 * math.pi), rtol=1e-8)
    fresh = tmp_path / "late.h5"
    late_args = ["modes", str(scene), *sets, "--from", str(run_file), "--time", "5", "-o", str(fresh)]
    late = CliRunner().invoke(cli, late_args)
    assert late.exit_code == 2 and "--time: expected a time within the recorded rows" in late.output
    assert "got 5 s" in late.output and not fresh.exists()  # refused before anything is written
    chain = tmp_path / "chain.yaml"
    chain.write_text(yaml.safe_dump(chain_scene(3, 1.0, 1.0)))
    foreign = CliRunner().invoke(cli, ["modes", str(chain), "--from", str(run_file), "-o", str(out)])
    assert foreign.exit_code == 2 and "another scene" in foreign.output


def test_linearize_command_writes_matrices(tmp_path):
    scene = chain_scene(3, 1.0, 20.0)
    scene["actuators"] = [{"name": "push", "joint": "s2", "type": "force", "value": "0"}]
    scene["outputs"] = [{"name": "x1", "value": "m1.x"}]
    path = tmp_path / "chain.yaml"
    path.write_text(yaml.safe_dump(scene))
    out = tmp_path / "lin.h5"
    result = invoke("linearize", path, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    with h5py.File(out, "r") as f:
        A, B, C = f["linearize/A"][:], f["linearize/B"][:], f["linearize/C"][:]
        assert A.shape == (6, 6) and B.shape == (6, 1) and C.shape == (1, 6) and f["linearize/D"].shape == (1, 1)
        assert list(f["linearize/B"].attrs["inputs"]) == ["push"]
    # the static gain from the force on mass 2 to x1: (K^-1)[0, 1] of the chain (K = k tridiag(-1, 2, -1))
    K = 20.0 * (2 * np.eye(3) - np.eye(3, k=1) - np.eye(3, k=-1))
    np.testing.assert_allclose(-(C @ np.linalg.solve(A, B))[0, 0], np.linalg.inv(K)[0, 1], rtol=1e-8)


def test_modes_at_the_equilibrium_of_a_pendulum_with_a_torsion_spring(tmp_path):
    """``--at equilibrium``: a bob (mass m, inertia I_c) on an arm of length l with a torsion spring
    k (rest angle from hanging down) rests where k (rest - theta) = m g l sin theta (brentq here);
    about it the one mode has omega^2 = (k + m g l cos theta) / (I_c + m l^2)."""
    from scipy.optimize import brentq

    m, ic, length, k, rest, g = 1.5, 0.01, 0.8, 20.0, 1.0, 9.81
    scene = {
        "mbsim": 1, "name": "spring pendulum", "dimension": 2, "gravity": [0, -g],
        "time": {"end": 1.0, "step": 0.001},
        "bodies": [{"name": "bob", "mass": m, "inertia": ic, "position": [0.0, -length], "orientation": 0.0}],
        "joints": [{"name": "pivot", "type": "revolute", "body1": "ground", "body2": "bob", "point": [0, 0],
                    "spring": {"stiffness": k, "rest": rest}}],
    }  # fmt: skip
    path = tmp_path / "spring_pendulum.yaml"
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["modes", str(path), "--at", "equilibrium", "-o", str(tmp_path / "m.h5"), "--json"]
    )
    assert result.exit_code == 0, result.output
    theta = brentq(lambda th: k * (rest - th) - m * g * length * math.sin(th), 0.0, rest)
    omega = math.sqrt((k + m * g * length * math.cos(theta)) / (ic + m * length**2))
    with h5py.File(tmp_path / "m.h5", "r") as f:
        frequency = f["modes/frequency_hz"][:]
        state = f["modes/state"][:]
    assert frequency.shape == (1,)
    assert frequency[0] == pytest.approx(omega / (2 * math.pi), rel=1e-8)
    # the linearisation point is the equilibrium: the bob at angle theta from hanging down
    np.testing.assert_allclose(state[:2], [length * math.sin(theta), -length * math.cos(theta)], atol=1e-9)


def test_modes_at_an_equilibrium_that_does_not_exist(tmp_path):
    """A free body under gravity has no static equilibrium: ``--at equilibrium`` exits 3 naming it."""
    scene = {"mbsim": 1, "name": "falling", "gravity": [0, 0, -9.81], "time": {"end": 1.0, "step": 0.01},
             "bodies": [{"name": "box", "mass": 1.0, "inertia": [0.1, 0.1, 0.1], "position": [0, 0, 1]}]}  # fmt: skip
    path = tmp_path / "falling.yaml"
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    result = CliRunner().invoke(cli, ["modes", str(path), "--at", "equilibrium", "-o", str(tmp_path / "m.h5")])
    assert result.exit_code == 3, result.output
    assert "no static equilibrium" in result.output


def test_position_servo_stiffness_and_damping(tmp_path):
    """A mass on a prismatic joint held by a position servo (kp, kd, gear 2): the servo's
    stiffness gear^2 kp and damping gear^2 kd enter K_r and C_r: lambda^2 m + lambda g^2 kd + g^2 kp = 0."""
    m, kp, kd, gear = 3.0, 120.0, 4.0, 2.0
    scene = chain_scene(1, m, 0.0)
    scene["forces"] = []
    scene["actuators"] = [
        {"name": "servo", "joint": "s1", "type": "position", "kp": kp, "kd": kd, "target": "0", "gear": gear}
    ]
    _, model = compiled(scene, tmp_path)
    result = modes(linearize(model, model.q0))
    lam = np.roots([m, gear**2 * kd, gear**2 * kp])
    lam = lam[np.argmax(lam.imag)]
    np.testing.assert_allclose(result.eigenvalue[0], [lam.real, lam.imag], rtol=1e-9)


def test_welded_body_has_no_modes(tmp_path):
    """A body welded to the ground: 3 equations of rank 3 on 3 coordinates, k = 0 modes; the state
    space is empty but keeps its output's row."""
    scene = {
        "mbsim": 1,
        "name": "welded",
        "dimension": 2,
        "gravity": [0.0, -G],
        "time": {"end": 1.0, "step": 0.001},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "b", "mass": 1.0, "inertia": 0.1, "position": [0.0, 0.0]}],
        "joints": [{"name": "w", "type": "fixed", "body1": "ground", "body2": "b", "point": [0.0, 0.0]}],
        "outputs": [{"name": "height", "value": "b.y"}],
    }
    _, model = compiled(scene, tmp_path)
    lin = linearize(model, model.q0)
    result = modes(lin)
    ss = state_space(lin)
    assert lin.dof == 0 and lin.rank == 3
    assert result.frequency_hz.shape == (0,) and result.shape.shape == (0, 1, 3)
    assert ss.A.shape == (0, 0) and ss.C.shape == (1, 0)


def test_the_default_result_files_sit_beside_the_runs(tmp_path, monkeypatch):
    """Without -o, modes and linearize write outputs/<stem>-modes.h5 and -linearize.h5, as
    equilibrium writes -equilibrium.h5: never over the run's outputs/<stem>.h5."""
    monkeypatch.chdir(tmp_path)
    scene = tmp_path / "pendulum.yaml"
    scene.write_text((SCENES / "pendulum_2d.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    for command in ("modes", "linearize", "equilibrium"):
        result = CliRunner().invoke(cli, [command, str(scene)])
        assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == [
        "pendulum-equilibrium.h5",
        "pendulum-linearize.h5",
        "pendulum-modes.h5",
    ]
