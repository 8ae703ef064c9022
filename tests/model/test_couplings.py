"""Joint couplings (joint = ratio * leader + offset, a row over up to four bodies): the one
compiled implementation (mbsim.model.kernels.coupling_at) against finite differences of its own
value, in the Python evaluation and in the compiled step's rows (mbsim.model.flat's COUPLING
entries), and a coupled scene stepping compiled under every ODE method."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from mbsim.model import kernels
from mbsim.model.constraints import constraint_residual, constraint_values
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare, run
from mbsim.solvers.ode import ode_kernels

BOX = {"mass": 2.0, "inertia": [0.3, 0.4, 0.5]}


def coupled_3d() -> dict:
    """Two separate chains: a revolute (a 3D angle, wrapped) follows a revolute through the ground,
    and a prismatic between c and d follows a revolute between a and b (four distinct bodies)."""
    return {
        "mbsim": 1, "name": "coupled 3D", "dimension": 3, "gravity": [0, 0, -9.81],
        "time": {"end": 0.5, "step": 0.002},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [
            {"name": "a", **BOX, "position": [0.5, 0, 0], "angular_velocity": [0, 0, 0.7]},
            {"name": "b", **BOX, "position": [1.5, 0, 0], "angular_velocity": [0.9, 0, 0.7]},
            {"name": "c", **BOX, "position": [0, 1.5, -0.5]},
            {"name": "d", **BOX, "position": [0, 1.5, -1.5]},
        ],
        "joints": [
            {"name": "hinge", "type": "revolute", "body1": "ground", "body2": "a", "point": [0, 0, 0],
             "axis": [0, 0, 1]},
            {"name": "twist", "type": "revolute", "body1": "a", "body2": "b", "point": [1, 0, 0], "axis": [1, 0, 0],
             "initial": 0.2},
            {"name": "swing", "type": "revolute", "body1": "ground", "body2": "c", "point": [0, 1.5, 0],
             "axis": [0, 1, 0]},
            {"name": "slide", "type": "prismatic", "body1": "c", "body2": "d", "point": [0, 1.5, -1],
             "axis": [0, 0, 1]},
        ],
        "couplings": [
            {"name": "gear", "joint": "swing", "leader": "hinge", "ratio": -1.5, "offset": 0.05},
            {"name": "screw", "joint": "slide", "leader": "twist", "ratio": 0.2, "offset": 0.01},
        ],
    }  # fmt: skip


def coupled_2d() -> dict:
    """A hinge follows its chain's pivot (bodies shared), a slider on the turning bob follows it too."""
    return {
        "mbsim": 1, "name": "coupled 2D", "dimension": 2, "gravity": [0, -9.81],
        "time": {"end": 0.5, "step": 0.002},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [
            {"name": "bob", "mass": 1.0, "inertia": 0.1, "position": [0.5, 0], "angular_velocity": 1.0},
            {"name": "b", "mass": 1.0, "inertia": 0.2, "position": [1.5, 0]},
            {"name": "slider", "mass": 0.5, "inertia": 0.01, "position": [0, 1]},
        ],
        "joints": [
            {"name": "pivot", "type": "revolute", "body1": "ground", "body2": "bob", "point": [0, 0]},
            {"name": "hinge", "type": "revolute", "body1": "bob", "body2": "b", "point": [1, 0], "initial": 0.3},
            {"name": "slide", "type": "prismatic", "body1": "bob", "body2": "slider", "point": [0, 1],
             "axis": [1, 0]},
        ],
        "couplings": [
            {"name": "gear", "joint": "hinge", "leader": "pivot", "ratio": 0.5, "offset": 0.1},
            {"name": "rack", "joint": "slide", "leader": "pivot", "ratio": 0.3, "offset": 0.05},
        ],
    }  # fmt: skip


SCENES = {"3d": coupled_3d, "2d": coupled_2d}


def prepared(tmp_path: Path, dim: str, method: str = "lagrange"):
    scene = SCENES[dim]()
    scene["solver"]["method"] = method
    path = tmp_path / f"{dim}_{method}.yaml"
    path.write_text(yaml.safe_dump(scene, sort_keys=False))
    return prepare(load_scene(str(path)))


def moved(model, q: np.ndarray, dx: np.ndarray) -> np.ndarray:
    """q moved by a velocity-space increment (3D: body-axes rotation vectors, the exponential map)."""
    return kernels.retract3(q, dx, model.nbody) if model.dimension == 3 else q + dx


def coupling_rows(model) -> list[int]:
    return [r for r, label in enumerate(model.row_labels) if label.endswith(": coupling")]


def random_state(model, rng) -> tuple[np.ndarray, np.ndarray]:
    q = model.normalize(model.q0 + 0.3 * rng.standard_normal(model.nq))
    return q, rng.standard_normal(model.nv)


def fd_jacobian_and_bias(model, q, v, rows, h=1e-6):
    """Central differences: J[:, k] of the value along unit velocity k, and the bias (dJ/dt) v =
    d/ds (J(q(s)) v) along the motion q(s) = q moved by s v (constant v)."""
    J = np.zeros((len(rows), model.nv))
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = h
        J[:, k] = (constraint_residual(model, moved(model, q, e), 0.0)[rows]
                   - constraint_residual(model, moved(model, q, -e), 0.0)[rows]) / (2 * h)  # fmt: skip

    def jv(s):
        qs = moved(model, q, s * v)
        return constraint_values(model, model.frames(qs, v), 0.0).jacobian[rows] @ v

    return J, (jv(h) - jv(-h)) / (2 * h)


@pytest.mark.parametrize("dim", ["3d", "2d"])
def test_coupling_rows_jacobian_and_bias_are_the_derivatives_of_their_value(tmp_path, dim):
    """At random states: J of each coupling row equals central differences of its value (measured
    ~2e-10 relative with h = 1e-6), gamma = -(dJ/dt) v equals minus those of J v along the motion
    (~4e-10; the 2D slider sits on the turning bob, so neither scene's bias is zero);
    the compiled step's rows (the flat table's COUPLING entries, its four-body blocks) the same."""
    model, solver = prepared(tmp_path, dim)
    assert solver.compiled, solver.compiled_reason
    rows = coupling_rows(model)
    assert len(rows) == 2
    rng = np.random.default_rng(11)
    for _ in range(4):
        q, v = random_state(model, rng)
        cv = constraint_values(model, model.frames(q, v), 0.0)
        J_fd, bias_fd = fd_jacobian_and_bias(model, q, v, rows)
        scale = max(1.0, np.max(np.abs(J_fd)))
        assert np.max(np.abs(cv.jacobian[rows] - J_fd)) <= 1e-7 * scale
        assert np.max(np.abs(-cv.gamma[rows] - bias_fd)) <= 1e-6 * max(1.0, np.max(np.abs(bias_fd)))
        assert np.max(np.abs(bias_fd)) > 0.1  # a bias to check (each scene's parts move)
        # the compiled step's rows at the same state (its D.J, D.phi, D.gamma after one derivative)
        y = np.concatenate((q, v, [0.0]))
        assert ode_kernels.derivative(solver._flat, solver.data.flat, solver._params, 0.0, y, np.zeros_like(y))
        D = solver.data.flat
        assert np.max(np.abs(D.J[rows] - J_fd)) <= 1e-7 * scale
        assert np.max(np.abs(-D.gamma[rows] - bias_fd)) <= 1e-6 * max(1.0, np.max(np.abs(bias_fd)))
        np.testing.assert_allclose(D.phi[rows], constraint_residual(model, q, 0.0)[rows], rtol=0, atol=1e-14)


def test_a_wrapped_coupling_counts_its_angle_modulo_a_turn(tmp_path):
    """A 3D revolute's coordinate is wrapped to (-pi, pi] before the ratio applies (as the joint's
    own rows): the leader turned by a whole turn leaves the coupling's value unchanged."""
    model, _ = prepared(tmp_path, "3d")
    row = coupling_rows(model)[0]  # gear: swing follows hinge (turning a about the world z axis)
    q = model.q0.copy()
    turn = np.zeros(model.nv)
    turn[5] = 2 * np.pi  # body a's body-axes z (the hinge axis): one whole turn
    before = constraint_residual(model, q, 0.0)[row]
    after = constraint_residual(model, moved(model, q, turn), 0.0)[row]
    assert after == pytest.approx(before, abs=1e-12)


@pytest.mark.parametrize("method", ["lagrange", "null_space", "gauss", "augmented_lagrangian"])
@pytest.mark.parametrize("dim", ["3d", "2d"])
def test_coupled_scenes_step_compiled_and_keep_the_coupling(tmp_path, dim, method):
    """Every ODE method with a compiled step takes a coupled scene compiled (before: the Python
    path), and the coupled coordinates keep their relation along the run (0.5 s of rk4)."""
    model, solver = prepared(tmp_path, dim, method)
    assert solver.compiled and solver.block_stepping, solver.compiled_reason
    out = tmp_path / "run.h5"
    run(load_scene(str(tmp_path / f"{dim}_{method}.yaml")), out)
    with h5py.File(out) as f:
        q = f["q"][()]
    rows = coupling_rows(model)
    worst = max(np.max(np.abs(constraint_residual(model, qk, 0.0)[rows])) for qk in q[::25])
    assert worst < 1e-6
