"""Method ``variational`` (papers/quaternion-symplectic-multibody.txt), its one compiled step
(variational_kernels) against independent references: the analytic Newton Jacobian against finite
differences, the Legendre transform against 2 T, a free body's momenta and a heavy top's vertical
angular momentum conserved to round-off (the discrete Noether theorem), bounded energy without
drift over long runs, second order against scipy's DOP853 on the same equations of motion,
constraints at round-off, and the paper's four-box chain."""

from __future__ import annotations

import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from mbsim.errors import SimulationError
from mbsim.model.model import State
from mbsim.model.spatial import quat_to_matrix
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare
from mbsim.solvers.variational import variational_kernels as vk

SCENES = Path(__file__).resolve().parents[2] / "scenes"
CHAIN = SCENES / "four_box_chain.yaml"


def _random_quats(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_newton_jacobian_of_the_kinetic_terms_matches_finite_differences():
    """dD1/db of the discrete Lagrangian (translation and the quaternion kinetic energy of eqs.
    (19)-(20)) against central differences, at non-unit midpoints as Newton meets them."""
    model, solver = prepare(load_scene(str(CHAIN), ["solver.method=variational"]))
    rng = np.random.default_rng(3)
    h = 0.01
    for _ in range(3):
        a = np.concatenate([np.r_[rng.normal(size=3), q] for q in _random_quats(rng, 4)])
        b = a + 0.05 * rng.normal(size=a.size)
        V, W = solver.var_model, solver.data.var
        _, _, jac = vk.kinetic(V, W, a, b, h, True)
        fd = np.empty_like(jac)
        eps = 1e-6
        for k in range(a.size):
            e = np.zeros(a.size)
            e[k] = eps
            fd[:, k] = (vk.kinetic(V, W, a, b + e, h, False)[0] - vk.kinetic(V, W, a, b - e, h, False)[0]) / (2 * eps)
        np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-6 * np.abs(jac).max())


def test_start_momentum_is_the_legendre_transform():
    """p = dT/du' (eq. 37): p . u' = 2 T for the quadratic kinetic energy."""
    model, solver = prepare(load_scene(str(CHAIN), ["solver.method=variational"]))
    rng = np.random.default_rng(0)
    v = rng.normal(size=model.nv)
    rate = model.q_rate(model.q0, v)
    p = vk.legendre(solver.var_model, solver.data.var, model.q0, rate)
    kinetic = 0.5 * float(v @ (model.mass_matrix @ v))
    assert p @ rate == pytest.approx(2 * kinetic, rel=1e-12)


def test_node_velocity_inverts_the_legendre_transform_at_the_constraints():
    """The node velocity of a step (the constrained inverse Legendre transform of p_{k+1}^-) meets
    the velocity constraints, and p . u' = 2 T: p differs from dT/du' by C_u^T nu, whose product
    with u' is -nu . C_t = 0 for joints fixed in time."""
    model, solver = prepare(load_scene(str(CHAIN), ["solver.method=variational"]))
    state = solver.initial_state()
    solver._start(state)
    V, W = solver.var_model, solver.data.var
    t, work = 0.0, 0.0
    for _ in range(40):
        outcome, work, _, _, _ = vk.step_once(solver.evaluator, V, W, t, 0.002, work)
        assert outcome == vk.TAKEN
        t += 0.002
    v = np.array(W.v_new)
    rate = model.q_rate(np.array(W.a), v)
    kinetic = 0.5 * float(v @ (model.mass_matrix @ v))
    assert kinetic > 1.0  # moving: the chain has fallen for 0.08 s
    assert float(np.array(W.p) @ rate) == pytest.approx(2 * kinetic, rel=1e-10)
    _, J, _ = solver._joints(np.array(W.a), t)
    assert np.max(np.abs(J @ v)) < 1e-12 * np.max(np.abs(v))


# a heavy top: an asymmetric body on a spherical joint at the origin, its centre of mass c from the
# pivot (at the start, body and world axes agree), spinning fast about its tilted axis
TOP_MASS, TOP_INERTIA, TOP_C = 1.0, np.array([0.02, 0.03, 0.01]), np.array([0.05, 0.0, 0.2])
TOP_OMEGA, GRAVITY = np.array([0.5, -0.3, 20.0]), 9.81


def top_scene(t_end: float, h: float, every: int) -> dict:
    return {
        "mbsim": 1,
        "name": "heavy top",
        "gravity": [0, 0, -GRAVITY],
        "time": {"end": t_end, "step": h},
        "solver": {"method": "variational"},
        "output": {"every": every},
        "bodies": [
            {"name": "top", "mass": TOP_MASS, "inertia": TOP_INERTIA.tolist(), "position": TOP_C.tolist(),
             "velocity": np.cross(TOP_OMEGA, TOP_C).tolist(), "angular_velocity": TOP_OMEGA.tolist()},
        ],
        "joints": [{"name": "pivot", "type": "spherical", "body1": "ground", "body2": "top", "point": [0, 0, 0]}],
    }  # fmt: skip


def angular_momentum(res, body: str, mass: float, inertia: np.ndarray) -> np.ndarray:
    """World angular momentum about the origin of one body, per recorded row (n, 3)."""
    R = quat_to_matrix(res[f"bodies/{body}/orientation"])
    r, v, omega = (res[f"bodies/{body}/{key}"] for key in ("position", "velocity", "angular_velocity"))
    spin = np.einsum("nij,jk,nlk,nl->ni", R, np.diag(inertia), R, omega)  # R J R^T omega (omega in world axes)
    return spin + mass * np.cross(r, v)


def test_free_body_momenta_are_conserved_to_round_off(run_scene):
    """Discrete Noether theorem: the discrete action of a free body is invariant under translations
    and rotations, so its linear and angular momentum (about the origin, in world axes) are
    conserved to the Newton tolerance -- not merely to O(h^2) -- while it tumbles and drifts."""
    scene = {
        "mbsim": 1,
        "name": "free tumbling",
        "gravity": [0, 0, 0],
        "time": {"end": 10.0, "step": 0.01},
        "solver": {"method": "variational"},
        "output": {"every": 5},
        "bodies": [{"name": "b", "mass": 1.0, "inertia": [1.0, 2.0, 3.0], "position": [0.3, -0.2, 0.1],
                    "velocity": [0.4, 0.1, -0.2], "angular_velocity": [0.3, 1.5, 0.7]}],
    }  # fmt: skip
    _, res = run_scene(scene)
    p = res["bodies/b/velocity"]
    L = angular_momentum(res, "b", 1.0, np.array([1.0, 2.0, 3.0]))
    # measured 1.2e-13 and 6e-13 relative over 1,000 steps (Newton tol 1e-12); O(h^2) would be ~1e-4
    assert np.max(np.abs(p - p[0])) < 1e-12 * np.linalg.norm(p[0])
    assert np.max(np.linalg.norm(L - L[0], axis=1)) < 5e-12 * np.linalg.norm(L[0])


def test_heavy_top_keeps_its_vertical_angular_momentum_and_bounded_energy(run_scene):
    """A heavy top on a spherical joint, 20,000 steps: rotations about the vertical through the pivot
    leave its discrete action and the joint unchanged, so L_z is conserved to round-off; the energy
    error is O(h^2) and oscillates without drift; joint and unit quaternion hold at every node."""
    summary, res = run_scene(top_scene(100.0, 0.005, 20))
    assert summary.max_position_violation < 1e-12 and summary.max_quaternion_norm_error < 1e-12
    Lz = angular_momentum(res, "top", TOP_MASS, TOP_INERTIA)[:, 2]
    assert np.max(np.abs(Lz - Lz[0])) < 2e-12 * abs(Lz[0])  # measured 2.2e-13
    t, total = res.time, res["diagnostics/energy/total"]
    error = np.abs(total - total[0]) / np.max(res["diagnostics/energy/kinetic"])
    assert error.max() < 1e-3  # measured 5.0e-4, the same in the first and the last quarter
    # bounded, not drifting: the last quarter's error is of the first quarter's size
    assert error[t >= 75].max() <= 1.5 * error[t <= 25].max()


def test_heavy_top_converges_at_second_order_to_dop853_on_its_equations():
    """The top's position at t = 1 s against scipy's DOP853 at 1e-12 on Euler's equations about the
    pivot (J_o w' + w x J_o w = c x R^T m g, R' = R [w]x), written here independently of mbsim:
    halving the step quarters the error."""
    from scipy.integrate import solve_ivp

    from mbsim.simulate import run

    Jo = np.diag(TOP_INERTIA) + TOP_MASS * (TOP_C @ TOP_C * np.eye(3) - np.outer(TOP_C, TOP_C))
    weight = np.array([0.0, 0.0, -TOP_MASS * GRAVITY])

    def rhs(_, y):
        R, w = y[:9].reshape(3, 3), y[9:]
        wx = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        wdot = np.linalg.solve(Jo, np.cross(TOP_C, R.T @ weight) - np.cross(w, Jo @ w))
        return np.concatenate(((R @ wx).reshape(-1), wdot))

    sol = solve_ivp(rhs, (0, 1), np.concatenate((np.eye(3).reshape(-1), TOP_OMEGA)), method="DOP853",
                    rtol=1e-12, atol=1e-12)  # fmt: skip
    expected = sol.y[:9, -1].reshape(3, 3) @ TOP_C
    errors = []
    for h in (0.004, 0.002, 0.001):
        path = Path(tempfile.mkdtemp()) / "top.yaml"
        path.write_text(yaml.safe_dump(top_scene(1.0, h, 1000), sort_keys=False))
        out = path.with_suffix(".h5")
        assert run(load_scene(str(path)), out).status == "completed"
        with h5py.File(out) as f:
            errors.append(np.linalg.norm(f["bodies/top/position"][-1] - expected))
    slopes = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(slopes - 2.0) < 0.1), (errors, slopes)


def test_an_error_of_a_python_evaluation_is_raised_by_the_step():
    """A model flatten does not take steps through the same compiled step with its joints and forces
    evaluated in Python (PyEvaluator): an exception there leaves the node and is raised again."""
    model, solver = prepare(load_scene(str(CHAIN), ["solver.method=variational"]))

    def broken(u, t):
        raise ArithmeticError("a joint evaluation failed")

    solver.evaluator = vk.PyEvaluator(model.nc, model.nv, broken, solver._forces)
    solver._node = None
    state = State(0.0, model.q0.copy(), model.v0.copy(), 0.0)
    with pytest.raises(ArithmeticError, match="a joint evaluation failed"):
        solver.step(state, 0.002)
    # the Python functions themselves step the chain as the compiled kernels do (to round-off)
    solver.evaluator = vk.PyEvaluator(model.nc, model.nv, solver._joints, solver._forces)
    solver._node = None
    python, info, _ = solver.step(state, 0.002)
    assert info.position_violation < 1e-12
    with pytest.raises(SimulationError, match="did not converge in 1 iterations"):
        prepare(load_scene(str(CHAIN), ["solver.method=variational", "solver.max_iter=1"]))[1].step(state, 0.002)


@pytest.fixture(scope="module")
def chain_100s(simulate, tmp_path_factory):
    """The paper's four-box chain, 100 s at step 0.002 (takes ~25 s)."""
    return simulate(
        CHAIN,
        ["solver.method=variational", "time.end=100", "output.every=10"],
        tmp_path_factory.mktemp("chain"),
    )


@pytest.mark.slow
def test_four_box_chain_constraints_at_round_off_for_100_s(chain_100s):
    summary, res = chain_100s
    assert summary.steps == 50000
    # every step, not only the recorded ones (the summary's maxima cover every step)
    assert summary.max_position_violation < 1e-12
    assert np.max(res["diagnostics/constraints/quaternion_norm_error"]) < 1e-12
    assert np.max(res["diagnostics/constraints/velocity_violation"]) < 1e-10


@pytest.mark.slow
def test_four_box_chain_energy_is_bounded_and_does_not_grow(chain_100s):
    summary, res = chain_100s
    t = res.time
    total = res["diagnostics/energy/total"]
    error = np.abs(total - total[0]) / abs(total[0])
    first, last = error[t <= 25].max(), error[t >= 75].max()
    # measured: max 4.8e-4 relative to |E0| (O(h^2): 1.2e-4 at h = 0.001); the error peaks at the
    # chain's whip events and does not grow
    assert error.max() < 1e-3
    assert last <= 1.5 * first
    assert summary.energy_drift < 1e-3


@pytest.mark.slow
def test_four_box_chain_first_box_stays_in_its_plane_then_leaves(chain_100s):
    """The paper's observation (its fig. 4): box 1's centre stays in the vertical plane of the
    start -- spanned by (-1, 1, 0)/sqrt 2 and z -- for the first seconds, then the out-of-plane
    motion, which is unstable, grows."""
    _, res = chain_100s
    t = res.time
    normal = np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    off = np.abs(res["bodies/box1/position"] @ normal)
    assert off[t <= 5].max() < 1e-6
    assert off.max() > 1e-2


@pytest.mark.slow
def test_dzhanibekov_flips_with_momentum_conserved(run_scene):
    """Torque-free body, inertia (1, 2, 3), spinning at 2 rad/s about the middle axis with a 1e-3
    perturbation: it flips over and over; the world angular momentum is conserved to the Newton
    tolerance and the energy stays bounded (measured: 6e-12 and 2e-12 relative)."""
    scene = {
        "mbsim": 1,
        "name": "dzhanibekov",
        "time": {"end": 200.0, "step": 0.01},
        "solver": {"method": "variational"},
        "output": {"every": 10},
        "bodies": [
            {"name": "body", "mass": 1.0, "inertia": [1, 2, 3], "position": [0, 0, 0],
             "angular_velocity": [1e-3, 2.0, 1e-3]},
        ],
    }  # fmt: skip
    _, res = run_scene(scene)
    R = quat_to_matrix(res["bodies/body/orientation"])
    omega = res["bodies/body/angular_velocity"]
    L = np.einsum("nij,jk,nlk,nl->ni", R, np.diag([1.0, 2.0, 3.0]), R, omega)
    assert np.max(np.linalg.norm(L - L[0], axis=1)) / np.linalg.norm(L[0]) < 1e-10
    omega_body = np.einsum("nji,nj->ni", R, omega)
    assert np.sum(np.diff(np.sign(omega_body[:, 1])) != 0) >= 6  # it flips repeatedly
    total = res["diagnostics/energy/total"]
    error = np.abs(total - total[0]) / total[0]
    t = res.time
    assert error.max() < 1e-4
    # bounded, not drifting: the late error is of the early one's size. The Newton tolerance and
    # round-off add a random walk of a few 1e-12 over 20,000 steps (numpy and BLAS builds differ
    # here: 1.2e-12 early, 2.5e-12 late with numpy 2.4); a secular drift would be orders larger
    assert error[t > 150].max() <= 1.5 * error[t < 50].max() + 5e-12


def test_second_order_convergence(run_scene):
    """Pendulum (2D) at t = 1 s: halving the step quarters the error (slope 2)."""
    from scipy.integrate import solve_ivp

    L, g, m, inertia, theta0 = 1.0, 9.81, 1.0, 1e-6, 2.5
    sol = solve_ivp(
        lambda _, y: [y[1], -m * g * L * np.sin(y[0]) / (m * L**2 + inertia)], (0, 1), [theta0, 0.0],
        method="DOP853", rtol=1e-13, atol=1e-13,
    )  # fmt: skip
    errors = []
    for h in (0.01, 0.005, 0.0025):
        _, res = run_scene(SCENES / "pendulum_2d.yaml", ["solver.method=variational", "time.end=1", f"time.step={h}"])
        errors.append(abs(res["bodies/bob/angle"][-1] - sol.y[0, -1]))
    slopes = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(slopes - 2.0) < 0.2), (errors, slopes)


@pytest.mark.parametrize("joint", ["revolute", "prismatic", "cylindrical", "universal", "fixed", "spherical"])
def test_every_3d_joint_holds_at_the_nodes(run_scene, joint):
    """Two bodies under gravity on each joint type (spinning, so every equation is exercised):
    joint and quaternion constraints at round-off, energy error O(h^2) small."""
    base = {"name": "j", "type": joint, "body1": "ground", "body2": "b", "point": [0, 0, 0]}
    extra = {"revolute": {"axis": [1, 1, 0]}, "prismatic": {"axis": [0.3, 0, 1]}, "cylindrical": {"axis": [0, 1, 1]},
             "universal": {"axes": [[1, 0, 0], [0, 1, 0]]}}.get(joint, {})  # fmt: skip
    scene = {
        "mbsim": 1,
        "name": joint,
        "gravity": [0, 0, -9.81],
        "time": {"end": 2.0, "step": 0.002},
        "solver": {"method": "variational"},
        "bodies": [
            {"name": "b", "mass": 2.0, "inertia": [0.1, 0.2, 0.25], "position": [0.3, 0.1, -0.5],
             "angular_velocity": [0.5, 1.0, 2.0]},
        ],
        "joints": [{**base, **extra}],
    }  # fmt: skip
    summary, res = run_scene(scene)
    assert summary.max_position_violation < 1e-12
    assert summary.max_quaternion_norm_error < 1e-12
    assert summary.energy_drift < 1e-3


@pytest.mark.slow
def test_drive_spring_and_damper_with_work_bookkeeping(run_scene):
    """A driven revolute joint, a joint spring and a spring-damper: the drive is followed at the
    nodes to round-off, and total - work is conserved to O(h^2) (the drive's and the damper's
    work are counted)."""
    scene = {
        "mbsim": 1,
        "name": "driven",
        "gravity": [0, 0, -9.81],
        "time": {"end": 2.0, "step": 0.001},
        "solver": {"method": "variational"},
        "bodies": [
            {"name": "arm", "mass": 1.0, "inertia": [0.01, 0.1, 0.1], "position": [0.5, 0, 0]},
            {"name": "tip", "mass": 0.5, "inertia": [0.01, 0.01, 0.01], "position": [1.0, 0, -0.3]},
        ],
        "joints": [
            {"name": "motor", "type": "revolute", "body1": "ground", "body2": "arm", "point": [0, 0, 0],
             "axis": [0, 0, 1], "drive": {"position": "0.5*sin(2*t)"}},
            {"name": "elbow", "type": "revolute", "body1": "arm", "body2": "tip", "point": [1.0, 0, 0],
             "axis": [0, 1, 0], "spring": {"stiffness": 20.0, "damping": 0.0}},
        ],
        "forces": [
            {"type": "spring_damper", "body1": "ground", "body2": "tip", "point1": [1.0, 0, 0.5],
             "point2": [1.0, 0, -0.3], "stiffness": 30.0, "damping": 0.5},
        ],
    }  # fmt: skip
    summary, res = run_scene(scene)
    assert summary.max_position_violation < 1e-12
    conserved = res["diagnostics/energy/total"] - res["diagnostics/energy/work"]
    scale = np.max(res["diagnostics/energy/kinetic"])
    assert np.max(np.abs(conserved - conserved[0])) < 1e-3 * scale
    assert abs(res["diagnostics/energy/work"][-1]) > 1e-3 * scale  # the drive and damper did work
    assert np.all(np.isfinite(res["joints/motor/drive_force"]))


def test_redundant_constraints_fail_cleanly(run_scene):
    summary, _ = run_scene(
        SCENES / "parallelogram_redundant_2d.yaml", ["solver.method=variational", "time.end=0.5"], status="failed"
    )
    assert "singular" in summary.message
