"""The force elements (mbsim.model.forces, compiled in mbsim.model.force_kernels) against
independent references: the elastic force of spring-dampers is minus the gradient of their
potential (central differences through the scene's kinematics), their damping force is
-c (dL/dt) grad L, so its power is -c (dL/dt)^2; a load's generalized force has the closed form
(F, s x R^T F) with the components evaluated from the state by hand. The force groups' evaluate
and the compiled step (ode_kernels.derivative, whose force stage is the same kernels reached
through FlatModel/FlatData) are each held to these references."""

from __future__ import annotations

import numpy as np
import pytest

from mbsim.model.compile import compile_model
from mbsim.model.data import new_data
from mbsim.model.forces.applied import Loads
from mbsim.model.forces.spring_damper import SpringDamperGroup
from mbsim.scene.load import RawScene
from mbsim.scene.spec import build_spec
from mbsim.simulate import prepare
from mbsim.solvers.ode import ode_kernels

# spring-dampers of the scenes below: (body1, body2, point1, point2, k, c, rest or None)
SPRINGS = {
    3: [
        ("ground", "a", [0.2, -0.3, 1.0], [0.6, 0.1, 0.2], 30.0, 1.5, None),
        ("a", "b", [0.4, 0.3, -0.1], [1.3, -0.2, 0.4], 12.0, 0.7, 0.5),
        ("b", "a", [1.7, 0.1, 0.0], [0.5, -0.1, 0.1], 8.0, 0.0, 2.0),
    ],
    2: [
        ("ground", "a", [0.2, 1.0], [0.6, 0.1], 30.0, 1.5, None),
        ("a", "b", [0.4, 0.3], [1.3, -0.2], 12.0, 0.7, 0.5),
        ("b", "a", [1.7, 0.1], [0.5, -0.1], 8.0, 0.0, 2.0),
    ],
}


def _bodies(d: int) -> list[dict]:
    if d == 3:
        return [
            {"name": "a", "mass": 2.0, "inertia": [0.3, 0.4, 0.5], "position": [0.5, 0.0, 0.0],
             "orientation": {"axis_angle": {"axis": [0.3, -0.5, 0.8], "angle": 0.7}}},
            {"name": "b", "mass": 1.5, "inertia": [0.2, 0.25, 0.3], "position": [1.5, 0.0, 0.2]},
        ]  # fmt: skip
    return [
        {"name": "a", "mass": 2.0, "inertia": 0.3, "position": [0.5, 0.0], "orientation": 0.4},
        {"name": "b", "mass": 1.5, "inertia": 0.2, "position": [1.5, 0.2]},
    ]


def _scene(d: int, forces: list[dict]) -> dict:
    return {
        "mbsim": 1,
        "name": "forces",
        "dimension": d,
        "gravity": [0.0] * d,
        "time": {"end": 0.1, "step": 0.01},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": _bodies(d),
        "forces": forces,
    }


def _spring_forces(d: int) -> list[dict]:
    out = []
    for b1, b2, p1, p2, k, c, rest in SPRINGS[d]:
        item = {"type": "spring_damper", "body1": b1, "body2": b2, "point1": p1, "point2": p2, "stiffness": k,
                "damping": c}  # fmt: skip
        if rest is not None:
            item["rest_length"] = rest
        out.append(item)
    return out


def _model(d: int, forces: list[dict]):
    return compile_model(build_spec(RawScene(data=_scene(d, forces), file="<test>")))


def _random_state(model, rng) -> tuple[np.ndarray, np.ndarray]:
    return model.retract(model.q0, 0.4 * rng.normal(size=model.nv)), rng.normal(size=model.nv)


def _attachments(model, d: int):
    """Per spring (i, j, s_i, s_j, k, c, L0): body indices (ground = nbody) and the points in
    body axes, from the scene's world points at t = 0."""
    index = {"a": 0, "b": 1, "ground": model.nbody}
    f0 = model.frames(model.q0, model.v0)
    out = []
    for b1, b2, p1, p2, k, c, rest in SPRINGS[d]:
        i, j = index[b1], index[b2]
        s_i = f0.rot[i].T @ (np.array(p1) - f0.pos[i])
        s_j = f0.rot[j].T @ (np.array(p2) - f0.pos[j])
        length0 = float(np.linalg.norm(np.array(p2) - np.array(p1)))
        out.append((i, j, s_i, s_j, k, c, length0 if rest is None else rest))
    return out


def _lengths(model, springs, q) -> np.ndarray:
    f = model.frames(q, np.zeros(model.nv))
    return np.array([np.linalg.norm(f.pos[j] + f.rot[j] @ sj - f.pos[i] - f.rot[i] @ si)
                     for i, j, si, sj, *_ in springs])  # fmt: skip


def _length_gradients(model, springs, q, eps: float = 1e-6) -> np.ndarray:
    """(nspring, nv): dL/dx along each velocity direction (the retraction of q), central differences."""
    grad = np.empty((len(springs), model.nv))
    for m in range(model.nv):
        e = np.zeros(model.nv)
        e[m] = eps
        grad[:, m] = _lengths(model, springs, model.retract(q, e)) - _lengths(model, springs, model.retract(q, -e))
        grad[:, m] /= 2 * eps
    return grad


def _spring_reference(model, springs, q, v):
    """(elastic Q, damping Q, potential, damping power) of the springs, from their lengths alone."""
    k, c, rest = (np.array([s[m] for s in springs]) for m in (4, 5, 6))
    stretch = _lengths(model, springs, q) - rest
    grad = _length_gradients(model, springs, q)
    rate = grad @ v  # dL/dt
    return -(k * stretch) @ grad, -(c * rate) @ grad, float(0.5 * np.sum(k * stretch**2)), -float(np.sum(c * rate**2))


@pytest.mark.parametrize("d", [3, 2])
def test_spring_damper_forces_are_the_gradient_of_the_potential_and_the_damping_law(d):
    model = _model(d, _spring_forces(d))
    (group,) = model.forces
    assert isinstance(group, SpringDamperGroup)
    springs = _attachments(model, d)
    rng = np.random.default_rng(11)
    nb = model.nbody
    for _ in range(4):
        q, v = _random_state(model, rng)
        elastic, damping, potential, power = _spring_reference(model, springs, q, v)
        q_cons, q_nc, pot = group.evaluate(model.frames(q, v), 0.3, new_data(model))
        scale = np.abs(elastic).max()
        np.testing.assert_allclose(q_cons[:nb].reshape(-1), elastic, rtol=0, atol=1e-7 * scale)
        np.testing.assert_allclose(q_nc[:nb].reshape(-1), damping, rtol=0, atol=1e-7 * np.abs(damping).max())
        assert pot == pytest.approx(potential, rel=1e-13)
        # the damping's power is -c (dL/dt)^2 summed: it only ever takes energy out
        assert float(q_nc[:nb].reshape(-1) @ v) == pytest.approx(power, rel=1e-7)
        assert power < 0


def test_undamped_springs_report_no_damping_force():
    model = _model(3, [f | {"damping": 0.0} for f in _spring_forces(3)])
    q_cons, q_nc, _ = model.forces[0].evaluate(model.frames(model.q0, model.v0), 0.0, None)
    assert q_nc is None and q_cons.shape == (model.nbody + 1, 6)


def _quat_matrix(quat) -> np.ndarray:
    w, x, y, z = np.asarray(quat) / np.linalg.norm(quat)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def _loads(model, t, q, v):
    """Sum of every Loads group's evaluate (nbody, w)."""
    f = model.frames(q, v)
    total = np.zeros((model.nbody + 1, model.body_width))
    for group in model.forces:
        assert isinstance(group, Loads)
        q_cons, q_nc, pot = group.evaluate(f, t, None)
        assert q_cons is None and pot == 0.0
        total += q_nc
    return total[: model.nbody]


def test_a_constant_world_force_at_a_body_point_has_the_closed_form_force_and_moment():
    # body a at (0.5, 0, 0) turned by 90 deg about z: the world point (0.5, 1, 0) is (1, 0, 0) in its axes
    forces = [{"type": "force", "body": "a", "point": [0.5, 1.0, 0.0], "value": ["0", "0", "2"]}]
    scene = _scene(3, forces)
    scene["bodies"][0]["orientation"] = {"axis_angle": {"axis": [0, 0, 1], "angle": float(np.pi / 2)}}
    model = compile_model(build_spec(RawScene(data=scene, file="<test>")))
    Q = _loads(model, 0.0, model.q0, model.v0)
    # force (0, 0, 2); moment r x F = (0, 1, 0) x (0, 0, 2) = (2, 0, 0) in the world, (0, -2, 0) in a's axes
    np.testing.assert_allclose(Q[0], [0, 0, 2, 0, -2, 0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(Q[1], 0.0, atol=0)
    # at any orientation R: force F, moment s x R^T F in body axes (s: the point in body axes)
    rng = np.random.default_rng(5)
    s = np.array([1.0, 0.0, 0.0])
    for _ in range(3):
        q, v = _random_state(model, rng)
        R = _quat_matrix(q[3:7])
        F = np.array([0.0, 0.0, 2.0])
        Q = _loads(model, 0.0, q, v)
        np.testing.assert_allclose(Q[0], np.concatenate((F, np.cross(s, R.T @ F))), rtol=0, atol=1e-14)


@pytest.mark.parametrize("frame", ["world", "body"])
def test_3d_loads_in_world_and_body_axes_with_state_expressions(frame):
    """Components in body axes turn with the body (world = R vals); every state variable is the
    one VARIABLES names (centre of mass, its velocity, angular velocity in world axes)."""
    forces = [
        {"type": "force", "body": "b", "point": [1.5, 0.5, 0.2], "value": ["x*t + vz", "y - wx", "z*wy + 1"],
         "frame": frame},
        {"type": "torque", "body": "a", "value": ["vx", "wz*t", "-vy + x"], "frame": frame},
    ]  # fmt: skip
    model = _model(3, forces)
    rng = np.random.default_rng(3)
    s_b = np.array([0.0, 0.5, 0.0])  # b starts unrotated: the point in its axes
    for _ in range(3):
        q, v = _random_state(model, rng)
        t = float(rng.uniform(0, 2))
        Ra, Rb = _quat_matrix(q[3:7]), _quat_matrix(q[10:14])
        xa, (xb, yb, zb) = q[0], q[7:10]
        va, vb = v[0:3], v[6:9]
        wa, wb = Ra @ v[3:6], Rb @ v[9:12]  # world angular velocities
        force = np.array([xb * t + vb[2], yb - wb[0], zb * wb[1] + 1])
        torque = np.array([va[0], wa[2] * t, -va[1] + xa])
        if frame == "body":
            force, torque = Rb @ force, Ra @ torque
        Q = _loads(model, t, q, v)
        np.testing.assert_allclose(Q[1, :3], force, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(Q[1, 3:], np.cross(s_b, Rb.T @ force), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(Q[0, :3], 0.0, atol=0)
        np.testing.assert_allclose(Q[0, 3:], Ra.T @ torque, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("frame", ["world", "body"])
def test_2d_loads_with_state_expressions(frame):
    forces = [
        {"type": "force", "body": "b", "point": [1.5, 0.7], "value": ["angle*w + t", "vx - y"], "frame": frame},
        {"type": "torque", "body": "a", "value": "x*vy - 2*w"},
    ]
    model = _model(2, forces)
    rng = np.random.default_rng(4)
    s_b = np.array([0.0, 0.5])  # b starts at angle 0
    for _ in range(3):
        q, v = _random_state(model, rng)
        t = float(rng.uniform(0, 2))
        xb, yb, ab = q[3:6]
        c, s = np.cos(ab), np.sin(ab)
        Rb = np.array([[c, -s], [s, c]])
        force = np.array([ab * v[5] + t, v[3] - yb])
        if frame == "body":
            force = Rb @ force
        r = Rb @ s_b
        Q = _loads(model, t, q, v)
        np.testing.assert_allclose(Q[1], [force[0], force[1], r[0] * force[1] - r[1] * force[0]], rtol=1e-14)
        np.testing.assert_allclose(Q[0], [0.0, 0.0, q[0] * v[1] - 2 * v[2]], rtol=1e-14, atol=0)


@pytest.mark.parametrize("d", [3, 2])
def test_the_compiled_step_applies_the_same_forces(d):
    """The compiled right-hand side of free bodies (no joints, no gravity) accelerates them by
    M^-1 (Q - omega x (I omega)) with Q the references above: springs, dampers and a load."""
    load = {"type": "force", "body": "b", "value": ["t + x", "vy"] + (["z"] if d == 3 else []), "frame": "body"}
    model, solver = prepare(build_spec(RawScene(data=_scene(d, [*_spring_forces(d), load]), file="<test>")))
    assert solver.block_stepping, solver.compiled_reason
    springs = _attachments(model, d)
    rng = np.random.default_rng(9)
    w = model.body_width
    for _ in range(3):
        q, v = _random_state(model, rng)
        t = float(rng.uniform(0, 1))
        y = np.concatenate((q, v, [0.0]))
        out = np.zeros_like(y)
        assert ode_kernels.derivative(solver._flat, solver.data.flat, solver._params, t, y, out)
        v_dot = out[model.nq : model.nq + model.nv].reshape(-1, w)
        Q = np.einsum("nij,nj->ni", model.mass_diag_blocks, v_dot)
        if d == 3:  # less the gyroscopic term -omega x (I omega), body axes
            omega = v.reshape(-1, 6)[:, 3:]
            Q[:, 3:] += np.cross(omega, np.einsum("nij,nj->ni", model.body_inertia, omega))
        Q = Q.reshape(-1)
        elastic, damping, _, power = _spring_reference(model, springs, q, v)
        # the load on b at its centre: components in b's axes
        f = model.frames(q, v)
        vals = np.array([t + f.pos[1, 0], f.vel[1, 1]] + ([f.pos[1, 2]] if d == 3 else []))
        applied = np.zeros(model.nv)
        applied[w : w + d] = f.rot[1] @ vals
        np.testing.assert_allclose(Q, elastic + damping + applied, rtol=0, atol=1e-7 * np.abs(elastic).max())
        # the work rate: the dampers' power plus the load's
        assert out[-1] == pytest.approx(power + applied @ v, rel=1e-6)
