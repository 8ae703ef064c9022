"""Joint springs (a spring and damper on a joint coordinate; mbsim.model.joint_force_kernels, run by
JointCoordinates for the Python path and by the compiled step) against independent references: the
spring's generalized force along each joint motion is minus the central difference of its
potential 1/2 k (coordinate - rest)^2, the coordinate measured by hand from the body frames of
states the scene's own kinematics produce (Model.retract, Model.frames); the damper's power is
-c (coordinate rate)^2; a torsion spring wound through several turns follows the closed-form
harmonic motion (a deflection that snapped at pi would let the rotor spin on); a rest given as an
expression of the scene's parameters is its value (one of t is refused at load: the rest is a
constant)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from mbsim.errors import SceneError
from mbsim.model.compile import compile_model
from mbsim.model.data import new_data
from mbsim.model.dynamics import applied_forces
from mbsim.scene.load import RawScene
from mbsim.scene.spec import build_spec
from mbsim.simulate import prepare, run
from mbsim.solvers.ode import ode_kernels

# 3D: body a turns about the oblique axis N through P (ground to a), body b slides on a along M
N3 = np.array([0.3, -0.4, 0.866])
N3 /= np.linalg.norm(N3)
P3 = np.array([0.1, 0.2, -0.1])
M3 = np.array([0.6, 0.8, 0.0])
# (k, c, rest) of the revolute and prismatic springs; rest 2 r0 + pi/8 with r0 = 0.1 (parameters)
HINGE, SLIDE = (7.0, 0.3, 2 * 0.1 + np.pi / 8), (20.0, 0.6, 0.15)


def _scene(d: int) -> dict:
    if d == 3:
        bodies = [
            {"name": "a", "mass": 2.0, "inertia": [0.3, 0.4, 0.5], "position": [0.5, 0.0, 0.0],
             "orientation": {"axis_angle": {"axis": [0.3, -0.5, 0.8], "angle": 0.7}}},
            {"name": "b", "mass": 1.5, "inertia": [0.2, 0.25, 0.3], "position": [1.5, 0.0, 0.2],
             "orientation": {"axis_angle": {"axis": [1.0, 0.2, 0.0], "angle": -0.4}}},
        ]  # fmt: skip
        hinge = {"point": P3.tolist(), "axis": N3.tolist()}
        slide = {"point": [1.0, 0.1, 0.1], "axis": M3.tolist()}
    else:
        bodies = [
            {"name": "a", "mass": 2.0, "inertia": 0.3, "position": [0.5, 0.0], "orientation": 0.4},
            {"name": "b", "mass": 1.5, "inertia": 0.2, "position": [1.5, 0.2], "orientation": -0.3},
        ]
        hinge = {"point": P3[:2].tolist()}
        slide = {"point": [1.0, 0.1], "axis": M3[:2].tolist()}
    return {
        "mbsim": 1,
        "name": "joint springs",
        "dimension": d,
        "gravity": [0.0] * d,
        "parameters": {"r0": 0.1},
        "time": {"end": 0.1, "step": 0.01},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": bodies,
        "joints": [
            {"name": "hinge", "type": "revolute", "body1": "ground", "body2": "a", **hinge,
             "spring": {"stiffness": HINGE[0], "damping": HINGE[1], "rest": "2*r0 + pi/8"}},
            {"name": "slide", "type": "prismatic", "body1": "a", "body2": "b", **slide,
             "spring": {"stiffness": SLIDE[0], "damping": SLIDE[1], "rest": SLIDE[2]}},
        ],
    }  # fmt: skip


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues' rotation about the unit ``axis`` (3D)."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


class Mechanism:
    """The scene's two joint coordinates (theta about the hinge, s along the slide) measured by
    hand from body frames, and the velocities of their motions."""

    def __init__(self, d: int) -> None:
        self.d = d
        self.model = compile_model(build_spec(RawScene(data=_scene(d), file="<test>")))
        f0 = self.model.frames(self.model.q0, self.model.v0)
        self.pos0, self.rot0 = f0.pos[:2].copy(), f0.rot[:2].copy()
        self.axis = N3 if d == 3 else np.array([0.0, 0.0, 1.0])
        self.point = P3 if d == 3 else np.array([*P3[:2], 0.0])
        # a reference direction across the hinge, fixed in a, and the slide axis in a's axes
        self.ref_a = self.rot0[0].T @ self._plane(np.cross(self.axis, [1.0, 0.0, 0.0]))
        self.slide_a = self.rot0[0].T @ self._plane(M3 / np.linalg.norm(M3))
        self.b_minus_a0 = self.pos0[1] - self.pos0[0]

    def _plane(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x)[: self.d]

    def coordinates(self, q: np.ndarray) -> tuple[float, float]:
        """theta (the hinge's turn since t = 0, right-handed about its axis) and s (b's slide
        along a's axis since t = 0), from the frames of q."""
        f = self.model.frames(q, np.zeros(self.model.nv))
        Ra = f.rot[0]
        if self.d == 3:
            r0, r = self.rot0[0] @ self.ref_a, Ra @ self.ref_a  # the reference direction then and now
            theta = np.arctan2(np.cross(r0, r) @ self.axis, r0 @ r)
        else:
            theta = np.arctan2(Ra[1, 0], Ra[0, 0]) - np.arctan2(self.rot0[0][1, 0], self.rot0[0][0, 0])
        # b's centre moves with a (its offset turned with a) plus s along the slide axis
        s = (f.pos[1] - f.pos[0] - Ra @ self.rot0[0].T @ self.b_minus_a0) @ (Ra @ self.slide_a)
        return float(theta), float(s)

    def potential(self, q: np.ndarray) -> float:
        theta, s = self.coordinates(q)
        return 0.5 * HINGE[0] * (theta - HINGE[2]) ** 2 + 0.5 * SLIDE[0] * (s - SLIDE[2]) ** 2

    def motions(self, q: np.ndarray) -> np.ndarray:
        """(2, nv): the velocities of theta' = 1 (a and b turn about the hinge) and s' = 1 (b
        slides), rotational parts in body axes."""
        f = self.model.frames(q, np.zeros(self.model.nv))
        w = self.model.body_width
        u = np.zeros((2, self.model.nv))
        for b in range(2):
            arm = np.zeros(3)
            arm[: self.d] = f.pos[b] - self.point[: self.d]
            lin = np.cross(self.axis, arm)[: self.d]
            u[0, w * b : w * b + self.d] = lin
            u[0, w * b + self.d : w * (b + 1)] = f.rot[b].T @ self.axis if self.d == 3 else 1.0
        u[1, w : w + self.d] = f.rot[0] @ self.slide_a
        return u

    def state(self, theta: float, s: float) -> np.ndarray:
        """q of the hinge turned by theta and b slid by s (through Model.retract from q0)."""
        w, d = self.model.body_width, self.d
        R = _rotation(self.axis, theta)[:d, :d]
        dx = np.zeros(self.model.nv)
        pivot = self.point[:d]
        pos_a = pivot + R @ (self.pos0[0] - pivot)
        pos_b = pivot + R @ (self.pos0[1] - pivot) + s * (R @ self.rot0[0] @ self.slide_a)
        for b, pos in enumerate((pos_a, pos_b)):
            dx[w * b : w * b + d] = pos - self.pos0[b]
            dx[w * b + d : w * (b + 1)] = self.rot0[b].T @ self.axis * theta if d == 3 else theta
        q = self.model.retract(self.model.q0, dx)
        assert self.coordinates(q) == pytest.approx((theta, s), abs=1e-12)
        return q


STATES = [(0.3, 0.05), (-1.1, 0.4), (2.5, -0.3), (-2.9, 0.2)]


@pytest.mark.parametrize("d", [3, 2])
def test_spring_force_is_minus_the_gradient_of_its_potential_and_the_damper_takes_c_rate_squared(d):
    mech = Mechanism(d)
    model = mech.model
    (table,) = model.joint_coordinates
    _, solver = prepare(build_spec(RawScene(data=_scene(d), file="<test>")))
    assert solver.compiled
    F, D, P = solver._flat, solver.data.flat, solver._params
    M = np.zeros((model.nv, model.nv))
    for b, block in enumerate(model.mass_diag_blocks):
        w = model.body_width
        M[w * b : w * (b + 1), w * b : w * (b + 1)] = block
    eps = 1e-6
    for theta, s in STATES:
        q = mech.state(theta, s)
        u = mech.motions(q)
        # minus the potential's central difference along each joint motion (the scene's retraction)
        grad = np.array([(mech.potential(model.retract(q, eps * x)) - mech.potential(model.retract(q, -eps * x)))
                         / (2 * eps) for x in u])  # fmt: skip
        assert np.abs(grad).max() > 1.0
        # the Python path: the springs' Q along the motions (gravity is off: the springs alone)
        data = new_data(model)  # references at the run's start, -rest
        static = applied_forces(model, data, model.frames(q, np.zeros(model.nv)), np.zeros(model.nv), 0.2)
        np.testing.assert_allclose(u @ static.conservative, -grad, rtol=1e-7, atol=1e-9)
        assert not static.nonconservative.any()
        theta_c, s_c = mech.coordinates(q)
        expected = 0.5 * HINGE[0] * (theta_c - HINGE[2]) ** 2 + 0.5 * SLIDE[0] * (s_c - SLIDE[2]) ** 2
        assert static.potential == pytest.approx(expected, rel=1e-12)
        # the compiled step at rest: u^T M v' = u^T Q for the joint motions u (J u = 0)
        out = np.zeros(model.nq + model.nv + 1)
        assert ode_kernels.derivative(F, D, P, 0.2, np.concatenate((q, np.zeros(model.nv), [0.0])), out)
        accel = out[model.nq : model.nq + model.nv]
        np.testing.assert_allclose(u @ (M @ accel), -grad, rtol=1e-7, atol=1e-9)
        # moving along the joints: the dampers' power is -c (coordinate rate)^2, both paths
        rates = np.array([1.3, -0.7])
        v = rates @ u
        moving = applied_forces(model, data, model.frames(q, v), v, 0.2)
        power = -(HINGE[1] * rates[0] ** 2 + SLIDE[1] * rates[1] ** 2)
        assert moving.power_nc == pytest.approx(power, rel=1e-12)
        assert float(moving.nonconservative @ v) == pytest.approx(power, rel=1e-12)
        assert ode_kernels.derivative(F, D, P, 0.2, np.concatenate((q, v, [0.0])), out)
        assert out[-1] == pytest.approx(power, rel=1e-12)


def test_a_rest_given_as_an_expression_of_t_is_refused():
    scene = _scene(3)
    scene["joints"][0]["spring"]["rest"] = "0.1*t"
    with pytest.raises(SceneError, match="unknown name 't'"):
        compile_model(build_spec(RawScene(data=scene, file="<test>")))


# a rotor on a vertical hinge through its centre with a torsion spring (rest 0), spun at W0:
# theta(t) = (W0 / OMEGA) sin(OMEGA t), OMEGA = sqrt(k / I), an amplitude of three turns
IZZ, K_ROTOR, TURNS = 0.2, 0.2, 3.0
OMEGA = np.sqrt(K_ROTOR / IZZ)
W0 = TURNS * 2 * np.pi * OMEGA


def _rotor() -> dict:
    return {
        "mbsim": 1,
        "name": "wound rotor",
        "dimension": 3,
        "gravity": [0.0, 0.0, -9.81],
        "time": {"end": float(np.pi / OMEGA), "step": float(np.pi / OMEGA / 1000)},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [{"name": "rotor", "mass": 1.0, "inertia": [0.1, 0.15, IZZ], "position": [0.0, 0.0, 0.0],
                    "angular_velocity": [0.0, 0.0, float(W0)]}],
        "joints": [{"name": "hinge", "type": "revolute", "body1": "ground", "body2": "rotor", "point": [0, 0, 0],
                    "axis": [0, 0, 1], "spring": {"stiffness": K_ROTOR, "damping": 0.0}}],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("method", "tol"), [("lagrange", 1e-6), ("variational", 1e-3), ("timestepping", 1e-5), ("event_driven", 1e-6)]
)
def test_a_torsion_spring_wound_through_three_turns_keeps_its_deflection_continuous(tmp_path, method, tol):
    """lagrange and variational step in compiled blocks (their FlatData.jc_ref views the run's
    Data.coordinate_reference), timestepping through JointCoordinates and event_driven through its free
    phase's compiled right-hand side (the run's loop updates the same array); variational is second
    order, the others closer."""
    scene = _rotor()
    scene["solver"]["method"] = method
    scene["output"] = {"every": 10}
    result = run(build_spec(RawScene(data=scene, file="<test>")), tmp_path / "rotor.h5")
    assert result.status == "completed"
    with h5py.File(tmp_path / "rotor.h5") as f:
        t, spin = f["time"][:], f["v"][:, 5]
        potential = f["diagnostics/energy/potential"][:]
    # the closed form: the spring winds the rotor three turns out, stops it and brings it back; a
    # deflection wrapped to (-pi, pi] would hold at most 1/2 k pi^2 and let the rotor spin on
    theta = W0 / OMEGA * np.sin(OMEGA * t)
    np.testing.assert_allclose(spin, W0 * np.cos(OMEGA * t), rtol=0, atol=tol * W0)
    np.testing.assert_allclose(potential, 0.5 * K_ROTOR * theta**2, rtol=0, atol=tol * 0.5 * K_ROTOR * theta.max() ** 2)
    assert potential.max() > 0.5 * K_ROTOR * (2 * TURNS * np.pi) ** 2 * (1 - 1e-4)
    assert t[-1] == pytest.approx(np.pi / OMEGA, abs=1e-12)
