"""The compiled step (mbsim.solvers.ode.ode_kernels over mbsim.model.flat) on mechanisms that use every
primitive kind, drives, joint springs (a torsion spring wound past half a turn), spring-dampers and
applied loads given by expressions of time and state: its acceleration solve (the only one) against
independent references (finite differences of the constraint values, the equations of motion, a
closed form, energy conservation), its blocks of steps and recorded rows against the Python loop
around the same solve."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from quick_loop import quick

from mbsim.model.constraints import constraint_residual, constraint_values
from mbsim.model.data import new_data
from mbsim.model.dynamics import generalized_forces, update_coordinate_references
from mbsim.model.flat import FlatModel, dense_reason, flatten, model_form, python_reason
from mbsim.model.model import State
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare
from mbsim.solvers.ode import ode_kernels


def write_yaml_scene(scene: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(scene, sort_keys=False))
    return path


BOX = {"mass": 2.0, "inertia": [0.3, 0.4, 0.5]}


def scene_3d() -> dict:
    return {
        "mbsim": 1,
        "name": "every 3D primitive",
        "dimension": 3,
        "gravity": [0, 0, -9.81],
        "time": {"end": 0.2, "step": 0.002},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [
            {"name": "a", **BOX, "position": [0.5, 0, 0], "velocity": [0, 0.3, 0], "angular_velocity": [0, 0, 0.4]},
            {"name": "b", **BOX, "position": [1.5, 0, 0], "angular_velocity": [0.2, 0, 0.1]},
            {"name": "c", **BOX, "position": [1.5, 0, -1]},
            {"name": "d", **BOX, "position": [2.5, 0, -1], "velocity": [0.1, 0, 0]},
        ],
        "joints": [
            {"name": "hinge", "type": "revolute", "body1": "ground", "body2": "a", "point": [0, 0, 0],
             "axis": [0, 0, 1], "drive": {"position": "0.3*sin(2*t) + where(t < 0.1, t**2, 0.2*t - 0.01)"}},
            {"name": "twist", "type": "revolute", "body1": "a", "body2": "b", "point": [1, 0, 0], "axis": [1, 0, 0],
             "spring": {"stiffness": 40.0, "damping": 0.5, "rest": 3.0}},
            {"name": "slide", "type": "prismatic", "body1": "b", "body2": "c", "point": [1.5, 0, -0.5],
             "axis": [0, 0, 1], "spring": {"stiffness": 100.0, "damping": 2.0, "rest": 0.1}},
            {"name": "cyl", "type": "cylindrical", "body1": "c", "body2": "d", "point": [2, 0, -1], "axis": [1, 0, 0]},
        ],
        "forces": [
            {"type": "spring_damper", "body1": "ground", "body2": "d", "point1": [3, 0, 0], "point2": [2.5, 0, -1],
             "stiffness": 30.0, "damping": 1.5},
            {"type": "force", "body": "c", "point": [1.6, 0.1, -1], "value": ["-2*vx", "sin(3*t)", "-z"],
             "frame": "body"},
            {"type": "torque", "body": "d", "value": ["0.1*wx", "0", "cos(t)*y"], "frame": "world"},
        ],
    }  # fmt: skip


def scene_2d() -> dict:
    return {
        "mbsim": 1,
        "name": "every 2D primitive",
        "dimension": 2,
        "gravity": [0, -9.81],
        "time": {"end": 0.2, "step": 0.002},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "bodies": [
            {"name": "crank", "mass": 1.0, "inertia": 0.1, "position": [0.5, 0], "angular_velocity": 2.0},
            {"name": "rod", "mass": 1.0, "inertia": 0.2, "position": [1.5, 0]},
            {"name": "slider", "mass": 0.5, "inertia": 0.01, "position": [2.5, 0]},
            {"name": "free", "mass": 0.5, "inertia": 0.01, "position": [0, 1], "velocity": [0.2, 0]},
        ],
        "joints": [
            {"name": "O", "type": "revolute", "body1": "ground", "body2": "crank", "point": [0, 0],
             "drive": {"position": "2*t + 0.1*sin(5*t)"}},
            {"name": "A", "type": "revolute", "body1": "crank", "body2": "rod", "point": [1, 0],
             "spring": {"stiffness": 5.0, "damping": 0.2, "rest": 0.3}},
            {"name": "B", "type": "revolute", "body1": "rod", "body2": "slider", "point": [2, 0]},
            {"name": "slide", "type": "prismatic", "body1": "ground", "body2": "slider", "point": [2, 0],
             "axis": [1, 0], "spring": {"stiffness": 10.0, "damping": 0.5}},
        ],
        "forces": [
            {"type": "spring_damper", "body1": "free", "body2": "rod", "point1": [0, 1], "point2": [1.5, 0.1],
             "stiffness": 20.0, "damping": 0.7, "rest_length": 1.0},
            {"type": "force", "body": "free", "value": ["-vy*angle", "where(x > 0.01, -1, 1)"], "frame": "body"},
            {"type": "torque", "body": "rod", "value": "0.5*sin(t) - 0.1*w"},
        ],
    }  # fmt: skip


# every method with a compiled step (ode_kernels.METHODS; gauss with its direct optimizer kkt)
METHODS = ["lagrange", "null_space", "gauss", "augmented_lagrangian"]


@pytest.fixture(params=[(d, m) for m in METHODS for d in ("3d", "2d")], ids=lambda p: f"{p[1]}-{p[0]}")
def prepared(request, tmp_path):
    dim, method = request.param
    scene = scene_3d() if dim == "3d" else scene_2d()
    scene["solver"]["method"] = method
    spec = load_scene(str(write_yaml_scene(scene, tmp_path / "scene.yaml")))
    model, solver = prepare(spec)
    assert solver.block_stepping, solver.compiled_reason
    return model, solver


def random_state(model, rng) -> tuple[float, np.ndarray]:
    """A state near the start, off the constraint manifold (the right-hand side does not care)."""
    q = model.q0 + 0.05 * rng.standard_normal(model.nq)
    v = model.v0 + 0.5 * rng.standard_normal(model.nv)
    return float(rng.uniform(0, 1)), np.concatenate((model.normalize(q), v, [0.0]))


def fd_jacobian(model, q: np.ndarray, t: float, eps: float = 1e-6) -> np.ndarray:
    """J (nc, nv) by central differences of the constraint values Phi(q, t) along each velocity
    coordinate (model.retract: 3D rotations as body-frame rotation vectors, as J's columns)."""
    cols = []
    for k in range(model.nv):
        dx = np.zeros(model.nv)
        dx[k] = eps
        plus = constraint_residual(model, model.retract(q, dx), t)
        minus = constraint_residual(model, model.retract(q, -dx), t)
        cols.append((plus - minus) / (2 * eps))
    return np.array(cols).T


def velocity_residual(model, q: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
    """J v + Phi_t at a state."""
    cv = constraint_values(model, model.frames(q, v), t)
    J = cv.jacobian.toarray() if hasattr(cv.jacobian, "toarray") else cv.jacobian
    return J @ v + cv.phi_t


def test_the_accelerations_satisfy_the_equations_of_motion(prepared):
    """The compiled acceleration solve (ode_kernels.accelerations_at, the one every path calls) at
    states off the constraint manifold, against references it does not compute: J by central
    differences of the constraint values equals the solve's J; M v_dot + J^T lambda = Q with that J,
    M and Q of the model's own functions; and the velocity residual J v + Phi_t, differentiated along
    the motion (central differences in time of the state moved by v and v_dot) vanishes -- the
    constraints hold at acceleration level (augmented_lagrangian: it equals the penalty's
    stabilisation -2 mu Omega (J v + Phi_t) - Omega^2 Phi)."""
    model, solver = prepared
    rng = np.random.default_rng(7)
    F, D, P = solver._flat, solver.data.flat, solver._params
    mass = model.mass_matrix.toarray() if hasattr(model.mass_matrix, "toarray") else model.mass_matrix
    al = solver.COMPILED == "augmented_lagrangian"
    for _ in range(3):
        t, y = random_state(model, rng)
        q, v = y[: model.nq], y[model.nq : model.nq + model.nv]
        if model.joint_coordinates:
            D.jc_ref[:] = solver.data.coordinate_reference[0]
        ok, vdot, _ = ode_kernels.accelerations_at(F, D, P, t, q, v)
        assert ok
        lam = np.array(D.lam)
        J = fd_jacobian(model, q, t)
        jscale = np.max(np.abs(J))
        np.testing.assert_allclose(np.asarray(D.J), J, rtol=0, atol=1e-8 * jscale)
        Q = generalized_forces(model, solver.data, model.frames(q, v), v, t).q_force
        scale = max(np.max(np.abs(Q)), np.max(np.abs(mass @ vdot)))
        # the penalty (1e6) conditions augmented_lagrangian's multipliers at ~1e6 (measured 1e-12)
        np.testing.assert_allclose(mass @ vdot + J.T @ lam, Q, rtol=0, atol=1e-8 * scale)
        h = 1e-5
        moved = [velocity_residual(model, model.retract(q, s * v + 0.5 * s * s * vdot), v + s * vdot, t + s)
                 for s in (h, -h)]  # fmt: skip
        rate = (moved[0] - moved[1]) / (2 * h)  # d/dt (J v + Phi_t) = J v_dot - gamma
        expected = np.zeros(model.nc)
        if al:
            omega, mu = P[ode_kernels.OMEGA], P[ode_kernels.MU]
            phi = constraint_residual(model, q, t)
            expected = -2 * mu * omega * velocity_residual(model, q, v, t) - omega**2 * phi
        rscale = max(1.0, np.max(np.abs(J @ vdot)))
        np.testing.assert_allclose(rate, expected, rtol=0, atol=1e-6 * rscale)
        # and with the solve's own J and gamma, to round-off
        np.testing.assert_allclose(np.asarray(D.J) @ vdot - np.asarray(D.gamma), expected, rtol=0,
                                   atol=(1e-8 if al else 1e-12) * rscale)  # fmt: skip


def test_a_pendulum_accelerates_as_the_closed_form_says(tmp_path):
    """A rigid 2D pendulum (centre of mass at distance L from a ground pivot, mass m, inertia I about
    the centre) at angle theta from the downward vertical turning at omega: every method's solve gives
    theta'' = -m g L sin(theta) / (I + m L^2) and the centre's acceleration theta'' e_t - omega^2 L e_r
    (e_r = r / L, e_t its normal), to round-off (augmented_lagrangian: to its iteration's tolerance)."""
    m, inertia, L, g, theta, omega = 2.0, 0.3, 0.8, 9.81, 0.7, 1.9
    r = L * np.array([np.sin(theta), -np.cos(theta)])
    e_t = np.array([np.cos(theta), np.sin(theta)])
    alpha = -m * g * L * np.sin(theta) / (inertia + m * L**2)
    for method in METHODS:
        scene = {
            "mbsim": 1, "name": "pendulum", "dimension": 2, "gravity": [0, -g], "time": {"end": 0.1, "step": 1e-3},
            "solver": {"method": method, "integrator": "rk4"},
            "bodies": [{"name": "bob", "mass": m, "inertia": inertia, "position": [float(r[0]), float(r[1])],
                        "orientation": theta, "velocity": [float(c) for c in omega * L * e_t],
                        "angular_velocity": omega}],
            "joints": [{"name": "pivot", "type": "revolute", "body1": "ground", "body2": "bob", "point": [0, 0]}],
        }  # fmt: skip
        spec = load_scene(str(write_yaml_scene(scene, tmp_path / f"{method}.yaml")))
        model, solver = prepare(spec)
        vdot, _ = solver.acceleration(0.0, model.q0, model.v0)
        tol = 1e-9 if method == "augmented_lagrangian" else 1e-12  # its iteration's tol (measured 2e-11)
        np.testing.assert_allclose(vdot[2], alpha, rtol=tol)
        np.testing.assert_allclose(vdot[:2], alpha * L * e_t - omega**2 * r, rtol=0, atol=tol * g)


@pytest.mark.parametrize("method", METHODS)
def test_energy_is_conserved_over_a_run(tmp_path, method):
    """The four-box chain (gravity and joints only: conservative) under every method's compiled
    solve, RK4 with projection for 10 s: the total energy stays within 1e-7 of its scale (measured
    lagrange 1.1e-8)."""
    from mbsim.scene.load import load_raw_scene
    from mbsim.scene.spec import build_spec
    from mbsim.simulate import run

    path = ROOT / "scenes" / "four_box_chain.yaml"
    summary = run(build_spec(load_raw_scene(path, [f"solver.method={method}"])), tmp_path / "chain.h5")
    assert summary.status == "completed", summary.message
    assert summary.energy_drift < 1e-7


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler", "rk4"])
def test_compiled_block_matches_python_steps(tmp_path, integrator, method):
    for scene in (scene_3d(), scene_2d()):
        scene["solver"].update({"integrator": integrator, "method": method})
        path = write_yaml_scene(scene, tmp_path / f"{scene['dimension']}.yaml")
        model, solver = prepare(load_scene(str(path)))
        start = State(0.0, model.q0.copy(), model.v0.copy(), 0.0)
        block = solver.advance(start, 0.002, 0, 60, 59, 0.2, np.inf)  # steps 1..60
        compiled_reference = solver.data.coordinate_reference[0].copy()
        assert block.status == "ok" and block.steps == 60
        solver.data.coordinate_reference[0][:] = new_data(model).coordinate_reference[
            0
        ]  # the Python steps start afresh
        state = start
        for _ in range(60):
            state, info, _ = solver.step(state, 0.002)
            update_coordinate_references(model, solver.data, state.q, state.t)
        assert block.state.t == state.t
        # the penalty (1e6) conditions M + alpha J^T J at ~1e6: round-off in its factorisation
        # (LAPACK in Python, loops compiled) reaches the states at ~1e-10 (measured 4e-12 abs)
        loose = 1e2 if method == "augmented_lagrangian" else 1.0
        np.testing.assert_allclose(block.state.q, state.q, rtol=0, atol=1e-12 * loose)
        np.testing.assert_allclose(block.state.v, state.v, rtol=0, atol=1e-11 * loose)
        assert abs(block.state.work - state.work) <= 1e-11 * loose * max(1.0, abs(state.work))
        assert block.info.iterations == info.iterations
        assert block.info.h == info.h
        assert abs(block.info.position_violation - info.position_violation) < 1e-14
        np.testing.assert_allclose(compiled_reference, solver.data.coordinate_reference[0], rtol=0, atol=1e-12 * loose)


def test_torsion_spring_wound_past_half_a_turn_does_not_snap_back(tmp_path):
    """A 3D revolute spring at rest 3 rad starts 3 rad from rest: the compiled deflection follows
    the unwrapped angle (the reference of JointCoordinates), so the spring keeps winding it back."""
    path = write_yaml_scene(scene_3d(), tmp_path / "s.yaml")
    model, solver = prepare(load_scene(str(path)))
    block = solver.advance(State(0.0, model.q0.copy(), model.v0.copy(), 0.0), 0.002, 0, 100, 99, 0.2, np.inf)
    assert block.steps == 100
    deflection = solver.data.flat.jc_value[: model.joint_coordinates[0].ncoord]
    assert np.all(np.abs(deflection) < 4.0)  # never re-wrapped to the other side of +-pi


def dataset_names(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("every", [1, 7])
def test_compiled_rows_match_the_python_records(tmp_path, monkeypatch, every, method):
    """A whole run, a row every ``every`` steps: every dataset of the result file (states, body
    data, energies, violations, reactions, drive forces) as the Python path records it, to
    round-off; the steps themselves are the same operations."""
    from mbsim.simulate import run
    from mbsim.solvers.ode import OdeSolver

    for scene in (scene_3d(), scene_2d()):
        scene["output"] = {"every": every}
        scene["solver"]["method"] = method
        path = write_yaml_scene(scene, tmp_path / f"{scene['dimension']}.yaml")
        compiled = run(load_scene(str(path)), tmp_path / "compiled.h5")
        with monkeypatch.context() as patch:
            patch.setattr(OdeSolver, "block_stepping", property(lambda self: False))
            python = run(load_scene(str(path)), tmp_path / "python.h5")
        assert compiled.status == python.status == "completed"
        assert compiled.steps == python.steps and compiled.recorded == python.recorded
        with h5py.File(tmp_path / "compiled.h5") as a, h5py.File(tmp_path / "python.h5") as b:
            names = dataset_names(b)
            names.remove("scene")
            assert [n for n in names if n not in a] == []  # every dataset of the Python rows
            for name in names:
                x, y = a[name][()], b[name][()]
                assert x.shape == y.shape, name
                np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=name)  # no solve at t = 0
                scale = max(1.0, float(np.nanmax(np.abs(y), initial=0.0)))
                assert np.nanmax(np.abs(x - y), initial=0.0) <= 1e-9 * scale, name


def test_models_without_a_compiled_form_step_in_python(tmp_path):
    """What still steps in Python: the implicit integrators (scipy's loop), gauss's optimizers and
    compliant contact with trimesh's brute_force detection (its force group has no compiled form:
    its forces by Python at every stage, into the compiled acceleration solve; flatten leaves it
    out; the other detections are compiled, tests/solvers/test_compliant.py). A sparse model
    flattens (a dense-only caller refuses it: dense_reason); couplings are a compiled kind
    (tests/model/test_couplings)."""
    scene = scene_2d()
    scene["solver"]["integrator"] = "scipy:Radau"  # the implicit ones stay scipy's (Python) loop
    model, solver = prepare(load_scene(str(write_yaml_scene(scene, tmp_path / "a.yaml"))))
    assert not solver.block_stepping and "scipy:Radau" in solver.compiled_reason
    scene = scene_2d()
    scene["solver"].update({"method": "gauss", "optimizer": "pso"})  # the optimizers step in Python
    model, solver = prepare(load_scene(str(write_yaml_scene(scene, tmp_path / "b.yaml"))))
    assert not solver.block_stepping
    sparse = dataclasses.replace(model, sparse=True)
    assert isinstance(flatten(sparse), FlatModel) and isinstance(flatten(model), FlatModel)
    assert "sparse linear algebra" in dense_reason(sparse, 0) and dense_reason(model, 0) == ""
    scene = {
        "mbsim": 1,
        "name": "ball on block",
        "time": {"end": 0.01, "step": 1e-4},
        "bodies": [
            {"name": "block", "density": 1000, "position": [0, 0, -0.1],
             "shapes": [{"type": "box", "size": [1, 1, 0.2]}]},
            {"name": "ball", "density": 1000, "position": [0, 0, 0.097],
             "shapes": [{"type": "sphere", "radius": 0.1}]},
        ],
        "contacts": [{"type": "compliant", "body1": "block", "body2": "ball", "stiffness": 1e6, "damping": 10,
                      "detection": "brute_force"}],
    }  # fmt: skip
    model, solver = prepare(load_scene(str(write_yaml_scene(scene, tmp_path / "c.yaml"))))
    assert solver.compiled and not solver.block_stepping and "has no compiled form" in solver.compiled_reason
    assert "has no compiled form" in python_reason(model) and isinstance(model_form(model), FlatModel)


def test_adaptive_integrators_step_in_compiled_blocks(tmp_path, monkeypatch):
    """scipy:DOP853 steps in compiled blocks (mbsim.solvers.ode.integrate, issue 29) around the compiled
    right-hand side: the derivative equals the Python path's at arbitrary states to round-off
    (measured 1e-14 relative), and a whole run (joint springs, drives with a kink, loads) at
    tolerance 1e-12 gives the Python path's (scipy's loop, Python right-hand side) states to 1e-9.
    At looser tolerances the two differ by the run's own error: the step control turns round-off
    in the derivative into 1e-7 relative changes of the step size."""
    from mbsim.simulate import run
    from mbsim.solvers.ode import OdeSolver

    rng = np.random.default_rng(3)
    for scene in (scene_3d(), scene_2d()):
        scene["solver"].update({"integrator": "scipy:DOP853", "rtol": 1e-12, "atol": 1e-12})
        path = write_yaml_scene(scene, tmp_path / f"{scene['dimension']}.yaml")
        model, solver = prepare(load_scene(str(path)))
        assert solver.block_stepping and not solver.compiled_reason
        for _ in range(5):
            y = np.concatenate((model.q0, model.v0 + rng.normal(0, 0.3, model.nv), (0.0,)))
            t = float(rng.uniform(0, 0.2))
            compiled = solver.derivative(t, y)
            with monkeypatch.context() as patch:
                patch.setattr(solver, "_flat", None)
                python = solver.derivative(t, y)
            np.testing.assert_allclose(compiled, python, rtol=0, atol=1e-11 * np.max(np.abs(python)))
        a = run(load_scene(str(path)), tmp_path / "compiled.h5")
        with monkeypatch.context() as patch:
            patch.setattr(OdeSolver, "__init__", _python_only(OdeSolver.__init__))
            b = run(load_scene(str(path)), tmp_path / "python.h5")
        assert a.status == b.status == "completed"
        with h5py.File(tmp_path / "compiled.h5") as fa, h5py.File(tmp_path / "python.h5") as fb:
            assert fa["time"][-1] == fb["time"][-1] == 0.2
            for name in ("q", "v"):
                x, y = fa[name][-1], fb[name][-1]
                assert np.max(np.abs(x - y)) <= 1e-9 * max(1.0, float(np.max(np.abs(y)))), name


def _python_only(init):
    """OdeSolver.__init__ without the compiled form: the Python right-hand side."""

    def wrapped(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self._flat = None

    return wrapped


def test_compiled_extras_are_the_methods_extra_diagnostics():
    """The compiled rows write a method's per-step values in the order its EXTRA_DIAGNOSTICS names
    them (ode_kernels.EXTRAS; OdeSolver.row_columns lists them so)."""
    from mbsim.solvers import SOLVERS

    for name, key in ode_kernels.METHODS.items():
        module = SOLVERS[name.removesuffix("_kkt")]
        assert ode_kernels.EXTRAS.get(key, ()) == tuple(module.Solver.EXTRA_DIAGNOSTICS), name


def test_a_failed_compiled_solve_ends_the_run_with_the_python_message(tmp_path):
    """The augmented Lagrangian's multiplier iteration capped at one iteration cannot converge: the
    compiled step hands the step to the Python path, whose error ends the run (exit 3's message)."""
    from mbsim.simulate import run

    scene = scene_2d()
    scene["solver"].update({"method": "augmented_lagrangian", "max_iter": 1})
    summary = run(load_scene(str(write_yaml_scene(scene, tmp_path / "s.yaml"))), tmp_path / "s.h5")
    assert summary.status == "failed" and summary.steps == 0
    assert "did not converge in 1 iterations" in summary.message


@pytest.mark.parametrize("dim", quick(["3d", "2d"], keep="3d"))
def test_variational_steps_with_every_force_converge_at_second_order(tmp_path, dim):
    """The variational method's compiled step (variational_kernels) on the mechanisms of every
    primitive kind with drives, joint springs, spring-dampers and loads by expressions of time and
    state (their Jacobian in the Newton matrix by differences) against an independent reference:
    lagrange under scipy:DOP853 at 1e-12. The state at t = 0.2 s converges at second order
    (measured slopes 2.000) and the joints hold at every node to round-off."""
    from mbsim.simulate import run

    def final(solver: dict, h: float) -> np.ndarray:
        scene = scene_3d() if dim == "3d" else scene_2d()
        if dim == "2d":  # a smooth load: the step function of x would cap the order at the crossing
            scene["forces"][1]["value"][1] = "-cos(3*x)"
        scene.update({"solver": solver, "time": {"end": 0.2, "step": h}, "output": {"every": 1000}})
        summary = run(load_scene(str(write_yaml_scene(scene, tmp_path / "s.yaml"))), tmp_path / "s.h5")
        assert summary.status == "completed", summary.message
        if solver["method"] == "variational":
            assert summary.max_position_violation < 1e-12
        with h5py.File(tmp_path / "s.h5") as f:
            assert f["time"][-1] == pytest.approx(0.2, abs=1e-12)
            return np.concatenate((f["q"][-1], f["v"][-1]))

    reference = final({"method": "lagrange", "integrator": "scipy:DOP853", "rtol": 1e-12, "atol": 1e-12}, 0.002)
    errors = [np.max(np.abs(final({"method": "variational"}, h) - reference)) for h in (0.004, 0.002, 0.001)]
    slopes = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(slopes - 2.0) < 0.05), (errors, slopes)


def test_a_failed_compiled_newton_step_ends_the_run_with_the_python_message(tmp_path):
    """Newton capped at one iteration cannot converge: the compiled block leaves the step untaken
    and Solver.step takes it again to raise its error, which ends the run (exit 3), with the state
    before that step kept."""
    from mbsim.simulate import run

    scene = scene_2d()
    scene["solver"] = {"method": "variational", "max_iter": 1}
    summary = run(load_scene(str(write_yaml_scene(scene, tmp_path / "s.yaml"))), tmp_path / "s.h5")
    assert summary.status == "failed" and summary.steps == 0
    assert "did not converge in 1 iterations" in summary.message


def test_envelope_cholesky_is_the_dense_one():
    """lapack_kernels.cholesky_envelope on a symmetric positive definite matrix with an irregular
    envelope gives the dense factor bit for bit (it skips only products with zeros), and its solve
    the dense solve's numbers."""
    from mbsim.solvers.numerics.lapack_kernels import (
        cholesky_envelope,
        cholesky_envelope_solve,
        cholesky_in_place,
        cholesky_solve,
    )

    rng = np.random.default_rng(5)
    n = 40
    first = np.array([max(0, k - int(rng.integers(0, 6))) for k in range(n)], dtype=np.int64)
    first[17] = 2  # a long row: fill inside its envelope
    A = np.zeros((n, n))
    for i in range(n):
        for j in range(first[i], i):
            if rng.random() < 0.6:
                A[i, j] = A[j, i] = rng.normal()
    A += np.diag(np.abs(A).sum(axis=1) + 1.0)
    last = np.array([max([k for k in range(n) if first[k] <= r] + [r]) for r in range(n)], dtype=np.int64)
    dense, envelope = A.copy(), np.tril(A)
    assert cholesky_in_place(dense) and cholesky_envelope(envelope, first)
    np.testing.assert_array_equal(np.tril(dense), np.tril(envelope))
    np.testing.assert_allclose(np.tril(dense) @ np.tril(dense).T, A, rtol=0, atol=1e-12 * np.abs(A).max())
    b = rng.normal(size=n)
    x1, x2 = b.copy(), b.copy()
    cholesky_solve(dense, x1)
    cholesky_envelope_solve(envelope, first, last, x2)
    np.testing.assert_allclose(x2, x1, rtol=0, atol=1e-14 * np.abs(x1).max())
    np.testing.assert_allclose(A @ x2, b, rtol=0, atol=1e-12 * np.abs(b).max())


def test_a_large_model_steps_compiled_and_matches_the_sparse_python_path(tmp_path, monkeypatch):
    """A planar chain of 55 links whose tip slides on a rail (nv = 165: a sparse model, a closed
    loop) steps in compiled code, the Schur complement factored within its envelope, and gives the
    Python path's (sparse LU) result file to round-off (measured 1e-13)."""
    from mbsim.simulate import run
    from mbsim.solvers.ode import OdeSolver

    n = 55
    bodies = [{"name": f"l{k}", "mass": 1.0, "inertia": 0.1, "position": [k + 0.5, 0]} for k in range(n)]
    joints = [{"name": "j0", "type": "revolute", "body1": "ground", "body2": "l0", "point": [0, 0]}]
    joints += [{"name": f"j{k}", "type": "revolute", "body1": f"l{k - 1}", "body2": f"l{k}", "point": [k, 0]}
               for k in range(1, n)]  # fmt: skip
    joints.append({"name": "rail", "type": "prismatic", "body1": "ground", "body2": f"l{n - 1}",
                   "point": [n - 0.5, 0], "axis": [1, 0]})  # fmt: skip
    scene = {"mbsim": 1, "name": "long chain on a rail", "dimension": 2, "gravity": [0, -9.81],
             "time": {"end": 0.05, "step": 0.001}, "solver": {"method": "lagrange", "integrator": "rk4"},
             "output": {"every": 5}, "bodies": bodies, "joints": joints}  # fmt: skip
    path = write_yaml_scene(scene, tmp_path / "chain.yaml")
    model, solver = prepare(load_scene(str(path)))
    assert model.sparse and solver.block_stepping, solver.compiled_reason
    compiled = run(load_scene(str(path)), tmp_path / "compiled.h5")
    with monkeypatch.context() as patch:
        patch.setattr(OdeSolver, "block_stepping", property(lambda self: False))
        python = run(load_scene(str(path)), tmp_path / "python.h5")
    assert compiled.status == python.status == "completed"
    with h5py.File(tmp_path / "compiled.h5") as a, h5py.File(tmp_path / "python.h5") as b:
        for name in ("q", "v", "diagnostics/constraints/position_violation", "joints/rail/reaction"):
            x, y = a[name][()], b[name][()]
            scale = max(1.0, float(np.max(np.abs(y))))
            assert np.max(np.abs(x - y)) <= 1e-9 * scale, name


ROOT = Path(__file__).resolve().parents[2]
A02 = ROOT / "mbsim" / "verify" / "problems" / "A02_n_four_bar" / "scene.yaml"


def _prepared(path: Path, method: str, overrides: tuple[str, ...] = ()):
    from mbsim.scene.load import load_raw_scene
    from mbsim.scene.spec import build_spec

    spec = build_spec(load_raw_scene(path, [f"solver.method={method}", *overrides]))
    model, solver = prepare(spec)
    assert solver._flat is not None, solver.compiled_reason
    return model, solver


def test_the_schur_complement_is_factored_in_a_narrow_order():
    """The N four-bar (N = 40) lists its ground hinges first: in that order every coupler row's
    envelope reaches back to its crank's hinge. S is factored in reverse Cuthill-McKee order
    (FlatModel.s_rows) with an envelope a tenth the size, and the compiled solve still equals a
    dense solve of [M J^T; J 0] [v_dot; lambda] = [Q; gamma] (numpy) at random states."""
    model, solver = _prepared(A02, "lagrange")
    F, D, P = solver._flat, solver.data.flat, solver._params
    nc = model.nc
    given_first = []
    for r in range(nc):  # the envelope in the scene's own order
        bodies = {int(F.row_bi[r]), int(F.row_bj[r])} - {F.nbody}
        given_first.append(min(c for c in range(r + 1) if bodies & {int(F.row_bi[c]), int(F.row_bj[c])}))
    given = int(np.sum(np.arange(nc) - np.array(given_first)))
    factored = int(np.sum(np.arange(nc) - F.row_first))
    assert sorted(F.s_rows) == list(range(nc)) and list(F.s_rows) != list(range(nc))
    assert factored < 0.1 * given  # measured: 757 against 14,660
    rng = np.random.default_rng(3)
    for _ in range(3):
        t, y = random_state(model, rng)
        ok, vdot, _ = ode_kernels.accelerations_at(F, D, P, t, y[: model.nq], y[model.nq : model.nq + model.nv])
        assert ok
        expected = _dense_kkt(model, D)
        np.testing.assert_allclose(vdot, expected[: model.nv], rtol=0, atol=1e-11 * np.max(np.abs(expected)))
        np.testing.assert_allclose(D.lam, expected[model.nv :], rtol=0, atol=1e-11 * np.max(np.abs(expected)))


def _dense_kkt(model, D) -> np.ndarray:
    """[v_dot; lambda] of [M J^T; J 0] [v_dot; lambda] = [Q; gamma] by numpy's dense solve, from the
    model's mass matrix and the solve's J, Q and gamma."""
    M = model.mass_matrix.toarray() if hasattr(model.mass_matrix, "toarray") else np.asarray(model.mass_matrix)
    J, nv = np.asarray(D.J), model.nv
    K = np.zeros((nv + model.nc, nv + model.nc))
    K[:nv, :nv], K[:nv, nv:], K[nv:, :nv] = M, J.T, J
    return np.linalg.solve(K, np.concatenate((D.Q, D.gamma)))


def _fold_state(model) -> np.ndarray:
    """The slider-crank of scenes/slider_crank_singular_2d.yaml folded: both bars vertical (crank
    down from O, rod up to the slider at the origin), at rest."""
    q = np.array([0.0, -0.5, -np.pi / 2, 0.0, -0.5, np.pi / 2, 0.0, 0.0, 0.0])
    return np.concatenate((q, np.zeros(model.nv), [0.0]))


@pytest.mark.parametrize("method", ["null_space", "gauss"])
def test_the_full_rank_fast_path_is_taken_only_away_from_singular_positions(method):
    """ode_kernels.certified_full_rank: at the slider-crank's start (regular) the rank-robust solve
    is lagrange's and equals a dense KKT solve (numpy); at the fold (J loses rank) and with a
    redundant joint it is refused and the SVD / KKT solve decides: at the fold, at rest, the
    accelerations are the free ones projected M-orthogonally onto J v_dot = 0 (the pseudo-inverse
    by numpy.linalg.lstsq on the scene's M and J)."""
    model, solver = _prepared(ROOT / "scenes" / "slider_crank_singular_2d.yaml", method)
    F, D, P = solver._flat, solver.data.flat, solver._params
    kkt = method == "gauss"
    out = np.zeros(model.nq + model.nv + 1)
    start = np.concatenate((model.q0, model.v0, [0.0]))
    nq, nv = model.nq, model.nv
    assert ode_kernels.derivative(F, D, P, 0.0, start, out)
    expected = _dense_kkt(model, D)[:nv]
    np.testing.assert_allclose(out[nq : nq + nv], expected, rtol=0, atol=1e-12 * np.max(np.abs(expected)))
    assert ode_kernels.certified_full_rank(F, D, P[ode_kernels.RANK_TOL], kkt)
    fold = _fold_state(model)
    assert ode_kernels.derivative(F, D, P, 0.0, fold, out)
    assert not ode_kernels.certified_full_rank(F, D, P[ode_kernels.RANK_TOL], kkt)
    M = np.asarray(model.mass_matrix)
    J, free = np.asarray(D.J), np.linalg.solve(M, D.Q)
    w = np.diag(1.0 / np.sqrt(np.diag(M)))  # M^-1/2 (2D: diagonal)
    y = np.linalg.lstsq(J @ w, J @ free - D.gamma, rcond=1e-6)[0]
    expected = free - w @ y  # at the fold the constraints hold the bars against gravity: ~0
    np.testing.assert_allclose(out[nq : nq + nv], expected, rtol=0, atol=1e-12 * np.max(np.abs(free)))
    model, solver = _prepared(ROOT / "scenes" / "parallelogram_redundant_2d.yaml", method)
    F, D, P = solver._flat, solver.data.flat, solver._params
    y = np.concatenate((model.q0, model.v0, [0.0]))
    assert ode_kernels.derivative(F, D, P, 0.0, y, np.zeros_like(y))
    assert not ode_kernels.certified_full_rank(F, D, P[ode_kernels.RANK_TOL], kkt)
