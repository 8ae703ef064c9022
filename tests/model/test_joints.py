"""Every joint type's Jacobian, Phi_t and gamma against central finite differences.

Parametrised over the JOINT_TYPES registry and the dimensions each type supports, at random
configurations *off* the constraint manifold (the formulas must hold everywhere, not only
where Phi = 0), with drives and springs switched on where the type has a coordinate.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from mbsim.model.compile import compile_model
from mbsim.model.constraints import assemble_jacobian, constraint_values, evaluate_groups
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
    springs = model.springs[0]
    rng = np.random.default_rng(3)
    q, v = _random_state(model, rng)
    eps = 1e-6

    def coord(qq):
        return evaluate_groups(springs.groups, model.frames(qq, v), 0.0, springs.ncoord, dimension)[0]

    _, _, _, blocks = evaluate_groups(springs.groups, model.frames(q, v), 0.0, springs.ncoord, dimension)
    J = np.asarray(assemble_jacobian(blocks, springs.ncoord, model.nbody, model.body_width, False))
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


def test_sparse_and_dense_jacobians_agree():
    model = _model("revolute", 3, False, seed=2)
    rng = np.random.default_rng(1)
    q, v = _random_state(model, rng)
    _, _, _, blocks = evaluate_groups(model.groups, model.frames(q, v), 0.3, model.nc, 3)
    dense = assemble_jacobian(blocks, model.nc, model.nbody, model.body_width, False)
    sparse = assemble_jacobian(blocks, model.nc, model.nbody, model.body_width, True)
    np.testing.assert_array_equal(np.asarray(dense), sparse.toarray())
