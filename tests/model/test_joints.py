"""Every joint type's Jacobian, Phi_t and gamma against central finite differences.

Parametrised over the JOINT_TYPES registry and the dimensions each type supports, at random
configurations *off* the constraint manifold (the formulas must hold everywhere, not only
where Phi = 0), with drives and springs switched on where the type has a coordinate.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest

from mbsim.model.compile import compile_model
from mbsim.model.constraints import constraint_residual, constraint_values, coordinate_rows
from mbsim.model.joints import JOINT_TYPES
from mbsim.scene.load import RawScene
from mbsim.scene.spec import build_spec

CASES = [(name, d) for name, jt in sorted(JOINT_TYPES.items()) for d in jt.dimensions]
DRIVE = "0.3*sin(2*t) + 0.1*t**2"


def _scene(joint_type: str, dimension: int, ground: bool, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    jt = JOINT_TYPES[joint_type]
    d = dimension

    def body(name, centre):
        if d == 3:
            quat = rng.normal(size=4)
            return {
                "name": name,
                "mass": 1.0 + rng.random(),
                "inertia": [1.0, 1.5, 2.0],
                "position": centre,
                "orientation": {"quaternion": (quat / np.linalg.norm(quat)).tolist()},
            }
        return {
            "name": name,
            "mass": 1.0 + rng.random(),
            "inertia": 0.5,
            "position": centre,
            "orientation": float(rng.normal()),
        }

    bodies = [body("b1", rng.normal(size=d).tolist()), body("b2", rng.normal(size=d).tolist())]
    joint = {
        "name": "j",
        "type": joint_type,
        "body1": "ground" if ground else "b1",
        "body2": "b2",
        "point": rng.normal(size=d).tolist(),
    }
    keys = jt.allowed_keys(d)
    if "axis" in keys:
        joint["axis"] = rng.normal(size=d).tolist()
    if "axes" in keys:
        a1 = rng.normal(size=3)
        a2 = np.cross(a1, rng.normal(size=3))
        joint["axes"] = [a1.tolist(), a2.tolist()]
    if "drive" in keys:
        joint["drive"] = {"position": DRIVE}
    if "spring" in keys:
        joint["spring"] = {"stiffness": 3.0, "damping": 0.5, "rest": 0.1}
    return {
        "mbsim": 1,
        "name": "fd",
        "dimension": d,
        "time": {"end": 1.0, "step": 0.01},
        "bodies": bodies,
        "joints": [joint],
    }


def _model(joint_type, dimension, ground, seed):
    return compile_model(build_spec(RawScene(data=_scene(joint_type, dimension, ground, seed), file="<test>")))


def _random_state(model, rng):
    """A random state far from the manifold (no assembly), positions near the start."""
    q = model.q0.copy()
    dx = 0.3 * rng.normal(size=model.nv)
    q = model.retract(q, dx)
    v = rng.normal(size=model.nv)
    return q, v


@pytest.mark.parametrize("ground", [False, True], ids=["body-body", "ground-body"])
@pytest.mark.parametrize(("joint_type", "dimension"), CASES, ids=[f"{n}-{d}d" for n, d in CASES])
def test_jacobian_gamma_phi_t_match_finite_differences(joint_type, dimension, ground):
    # a seed of its own per case, the same in every process (hash() of a string is salted per process)
    seed = zlib.crc32(f"{joint_type}-{dimension}-{ground}".encode())
    model = _model(joint_type, dimension, ground, seed=seed)
    rng = np.random.default_rng(7)
    eps = 1e-6
    for _ in range(3):
        q, v = _random_state(model, rng)
        t = float(rng.random())
        cv = constraint_values(model, model.frames(q, v), t)
        J = np.asarray(cv.jacobian)
        assert J.shape == (model.nc, model.nv)

        def phi(qq, tt=t, v=v):
            return constraint_values(model, model.frames(qq, v), tt).phi

        # J columns: derivative of Phi along each velocity direction (retraction of q)
        J_fd = np.empty_like(J)
        for k in range(model.nv):
            e = np.zeros(model.nv)
            e[k] = eps
            J_fd[:, k] = (phi(model.retract(q, e)) - phi(model.retract(q, -e))) / (2 * eps)
        np.testing.assert_allclose(J, J_fd, atol=1e-7 * max(1.0, np.abs(J).max()))

        # Phi_t: partial derivative in time at fixed q
        phi_t_fd = (phi(q, t + eps) - phi(q, t - eps)) / (2 * eps)
        np.testing.assert_allclose(cv.phi_t, phi_t_fd, atol=1e-7)

        # gamma = -(dJ/dt) v + c''(t): along the flow q(s) = retract(q, s v) with constant v
        def jv(s, q=q, v=v, t=t):
            qq = model.retract(q, s * v)
            return np.asarray(constraint_values(model, model.frames(qq, v), t).jacobian) @ v

        bias_fd = (jv(eps) - jv(-eps)) / (2 * eps)
        c2_fd = -(phi(q, t + 1e-4) - 2 * phi(q, t) + phi(q, t - 1e-4)) / 1e-8  # Phi_tt = -c''
        np.testing.assert_allclose(cv.gamma, -bias_fd + c2_fd, atol=2e-6 * max(1.0, np.abs(bias_fd).max()))


@pytest.mark.parametrize(
    ("joint_type", "dimension"), [c for c in CASES if JOINT_TYPES[c[0]].coordinate], ids=lambda c: str(c)
)
def test_spring_coordinate_jacobian_matches_finite_differences(joint_type, dimension):
    model = _model(joint_type, dimension, False, seed=11)
    table = model.joint_coordinates[0]
    rng = np.random.default_rng(3)
    q, v = _random_state(model, rng)
    eps = 1e-6

    table = model.joint_coordinates[0]
    w = model.body_width
    reference = coordinate_rows(model, model.frames(q, v), 0.0, -table.rest)[0]  # unwrapped near q

    def coord(qq):
        return coordinate_rows(model, model.frames(qq, v), 0.0, reference)[0]

    # the body blocks (row r: body i's, then body j's) scattered into a dense J
    value, blocks = coordinate_rows(model, model.frames(q, v), 0.0, reference)
    np.testing.assert_allclose(value, reference, rtol=0, atol=1e-14)  # unwrapped against itself
    J = np.zeros((table.ncoord, model.nv))
    for bi, bj, r0, n in zip(table.item_bi, table.item_bj, table.item_row, table.item_nrow, strict=True):
        for side, b in ((0, bi), (1, bj)):
            if b < model.nbody:
                J[r0 : r0 + n, b * w : (b + 1) * w] += blocks[r0 : r0 + n, side * w : (side + 1) * w]
    J_fd = np.column_stack(
        [(coord(model.retract(q, e)) - coord(model.retract(q, -e))) / (2 * eps) for e in eps * np.eye(model.nv)]
    )
    np.testing.assert_allclose(J, J_fd, atol=1e-7)


@pytest.mark.parametrize(("joint_type", "dimension"), CASES, ids=[f"{n}-{d}d" for n, d in CASES])
def test_joint_holds_at_start_and_removes_the_right_freedoms(joint_type, dimension):
    """Phi = 0 at the scene's start (point given in the world), and the Jacobian has full row rank
    equal to the number of equations the joint type documents."""
    model = _model(joint_type, dimension, False, seed=5)
    cv = constraint_values(model, model.frames(model.q0, model.v0), 0.0)
    np.testing.assert_allclose(cv.phi, 0.0, atol=1e-12)
    expected_rows = {
        3: {"spherical": 3, "revolute": 5, "prismatic": 5, "cylindrical": 4, "universal": 4, "fixed": 6},
        2: {"revolute": 2, "prismatic": 2, "fixed": 3},
    }[dimension][joint_type] + (1 if JOINT_TYPES[joint_type].coordinate else 0)  # + the drive row
    assert model.nc == expected_rows
    assert np.linalg.matrix_rank(np.asarray(cv.jacobian), tol=1e-9) == expected_rows


def _fd_jacobian(model, q, t, eps=1e-6):
    """Central differences of Phi along each velocity direction (retraction of q)."""
    return np.column_stack(
        [
            (constraint_residual(model, model.retract(q, e), t) - constraint_residual(model, model.retract(q, -e), t))
            / (2 * eps)
            for e in eps * np.eye(model.nv)
        ]
    )


FOUR_BODY_COUPLING = {
    "mbsim": 1, "name": "screw", "dimension": 3, "time": {"end": 1.0, "step": 0.01},
    "bodies": [{"name": n, "mass": 1.0, "inertia": [0.3, 0.4, 0.5], "position": p}
               for n, p in (("a", [0.5, 0, 0]), ("b", [1.5, 0, 0]), ("c", [0, 1.5, -0.5]), ("d", [0, 1.5, -1.5]))],
    "joints": [
        {"name": "hinge", "type": "revolute", "body1": "ground", "body2": "a", "point": [0, 0, 0], "axis": [0, 0, 1]},
        {"name": "twist", "type": "revolute", "body1": "a", "body2": "b", "point": [1, 0, 0], "axis": [1, 0, 0]},
        {"name": "swing", "type": "revolute", "body1": "ground", "body2": "c", "point": [0, 1.5, 0], "axis": [0, 1, 0]},
        {"name": "slide", "type": "prismatic", "body1": "c", "body2": "d", "point": [0, 1.5, -1], "axis": [0, 0, 1],
         "drive": {"position": DRIVE}},
    ],
    "couplings": [{"name": "screw", "joint": "slide", "leader": "twist", "ratio": 0.2, "offset": 0.01}],
}  # fmt: skip


@pytest.mark.parametrize("scene", ["revolute", "revolute-2d", "four-body coupling"])
def test_sparse_jacobian_matches_finite_differences(scene):
    """A sparse model's J (CSR from the rows' body blocks; a coupling's row over four bodies) is the
    derivative of Phi, and its phi, phi_t, gamma are the dense model's."""
    if scene.startswith("revolute"):
        model = _model("revolute", 2 if scene.endswith("2d") else 3, False, seed=2)
    else:
        model = compile_model(build_spec(RawScene(data=FOUR_BODY_COUPLING, file="<test>")))
    sparse = dataclasses.replace(model, sparse=True)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, v = _random_state(model, rng)
        cv = constraint_values(sparse, sparse.frames(q, v), 0.3)
        assert cv.jacobian.shape == (model.nc, model.nv)
        J = cv.jacobian.toarray()
        J_fd = _fd_jacobian(sparse, q, 0.3)
        np.testing.assert_allclose(J, J_fd, atol=1e-7 * max(1.0, np.abs(J_fd).max()))
        assert np.abs(J_fd).max() > 0.1
        dense = constraint_values(model, model.frames(q, v), 0.3)
        np.testing.assert_allclose(J, dense.jacobian, rtol=0, atol=1e-14)
        for key in ("phi", "phi_t", "gamma"):
            np.testing.assert_allclose(getattr(cv, key), getattr(dense, key), rtol=0, atol=1e-14)


def test_a_wrapped_angle_row_counts_its_angle_modulo_a_turn():
    """A 3D revolute's driven angle row is wrapped to [-pi, pi): body 2 turned about the joint axis
    by delta (several turns included) changes Phi by delta modulo 2 pi, and a turn of 2 pi not at all."""
    model = _model("revolute", 3, True, seed=4)
    (row,) = [r for r, label in enumerate(model.row_labels) if "drive" in label]
    frame = model.joints[0].frame
    b, axis = frame.body_j, frame.axis_j  # the joint axis in body 2's axes
    q = model.q0.copy()
    for t in (0.0, 0.7, 3.0):
        phi0 = constraint_residual(model, q, t)[row]
        assert -np.pi <= phi0 < np.pi
        for delta in (0.4, -2.5, 2 * np.pi, 3 * 2 * np.pi + 1.0, -5 * np.pi):
            dx = np.zeros(model.nv)
            dx[6 * b + 3 : 6 * b + 6] = delta * axis
            phi = constraint_residual(model, model.retract(q, dx), t)[row]
            assert -np.pi <= phi < np.pi
            expected = (phi0 + delta + np.pi) % (2 * np.pi) - np.pi
            gap = (phi - expected + np.pi) % (2 * np.pi) - np.pi  # equal modulo 2 pi (pi and -pi alike)
            assert abs(gap) < 1e-9, (t, delta, phi, expected)
