"""Singular positions and redundant constraints: null_space, gauss (kkt, slsqp, pso) and
augmented_lagrangian against independent one-coordinate references
(papers/singular-positions-gauss-pso.txt; scenes/slider_crank_singular_2d.yaml and
scenes/parallelogram_redundant_2d.yaml)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from quick_loop import quick
from scipy.integrate import solve_ivp

from mbsim.cli.main import cli

SCENES = Path(__file__).resolve().parents[2] / "scenes"

SLIDER = SCENES / "slider_crank_singular_2d.yaml"
PARALLELOGRAM = SCENES / "parallelogram_redundant_2d.yaml"


# ------------------------------------------------------------------ references (one coordinate)


def slider_crank_reference(t: np.ndarray, theta0: float = 0.0, w0: float = 6.0) -> np.ndarray:
    """Slider position x = 2 L cos(theta1) of the one-coordinate slider-crank (theta2 = -theta1).

    Bars: m = 6 kg, L = 1 m, I = m L^2 / 12 about their centres; slider 2 kg; gravity 9.81 down.
    Kinetic energy 1/2 I(theta) w^2 with I(theta) = I_O + m (9/4 sin^2 + 1/4 cos^2) L^2 + I_c
    + 4 m_s L^2 sin^2 (crank about O, rod centre at (3/2 L cos, 1/2 L sin), rod turning at -w,
    slider at 2 L cos); potential m g L sin(theta) (both bar centres at height L/2 sin).
    """
    m, ms, L, g = 6.0, 2.0, 1.0, 9.81
    ic = m * L**2 / 12

    def inertia(th):
        s, c = np.sin(th), np.cos(th)
        return ic + m * L**2 / 4 + m * L**2 * (2.25 * s * s + 0.25 * c * c) + ic + 4 * ms * L**2 * s * s

    def d_inertia(th):
        s, c = np.sin(th), np.cos(th)
        return m * L**2 * 4.0 * s * c + 8 * ms * L**2 * s * c

    def rhs(_, y):
        th, w = y
        return [w, (-m * g * L * np.cos(th) - 0.5 * d_inertia(th) * w * w) / inertia(th)]

    sol = solve_ivp(rhs, (0, t[-1]), [theta0, w0], method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True)
    return 2 * L * np.cos(sol.sol(t)[0])


def parallelogram_reference(t: np.ndarray, theta0: float = 1.0) -> np.ndarray:
    """Crank angle of the parallelogram: a pendulum with I = 3 m L^2/3 + m_c L^2 and torque
    (3 m L/2 + m_c L) g sin(theta); m = 1, m_c = 2, L = 1."""
    m, mc, L, g = 1.0, 2.0, 1.0, 9.81
    inertia, k = 3 * m * L**2 / 3 + mc * L**2, (3 * m * L / 2 + mc * L) * g
    sol = solve_ivp(
        lambda _, y: [y[1], -k / inertia * np.sin(y[0])], (0, t[-1]), [theta0, 0.0],
        method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True,
    )  # fmt: skip
    return sol.sol(t)[0]


def test_the_reference_turns_through_the_singular_positions():
    """The crank goes round: the slider sweeps -2 L .. 2 L and passes x = 0 (both bars vertical,
    the singular positions) twice per turn, 8 times in 10 s."""
    t = np.linspace(0, 10, 2001)
    x = slider_crank_reference(t)
    assert x.min() == pytest.approx(-2.0, abs=1e-3) and x.max() == pytest.approx(2.0, abs=1e-9)
    assert np.sum(np.diff(np.sign(x)) != 0) == 8


# ------------------------------------------------------------------ slider-crank through singular positions

SLIDER_METHODS = [
    ("null_space", []),
    ("gauss", ["solver.optimizer=kkt"]),
    ("gauss", ["solver.optimizer=slsqp"]),
    ("gauss", ["solver.optimizer=pso"]),
    ("augmented_lagrangian", []),
]


@pytest.mark.slow
@pytest.mark.parametrize(("method", "extra"), SLIDER_METHODS, ids=[" ".join([m, *e]) for m, e in SLIDER_METHODS])
def test_slider_crank_passes_singular_positions(run_scene, method, extra):
    summary, res = run_scene(SLIDER, [f"solver.method={method}", *extra])
    t = res.time
    x = res["bodies/slider/position"][:, 0]
    error = np.abs(x - slider_crank_reference(t))
    on_seconds = [int(np.argmin(np.abs(t - s))) for s in range(1, 11)]
    # measured: 5e-7 m for every method (rk4, step 0.002)
    assert np.max(error[on_seconds]) < 1e-5
    assert np.max(error) < 1e-5
    assert summary.max_position_violation < 1e-8
    assert summary.steps == 5000


def folding_slider_crank(method: str) -> dict:
    """The paper's case (papers/singular-positions-gauss-pso.txt, Fig. 1): bars 6 kg / 1 m, slider
    2 kg, released at rest with the crank at theta1 = pi/4; it falls through the fold (both bars
    vertical, theta1 = -pi/2) at t = 1.01, 3.04 and 5.06 s. scipy:DOP853 at 1e-10, 6 s."""
    th = float(np.pi / 4)
    c, s = float(np.cos(th)), float(np.sin(th))
    bar = {"mass": 6.0, "inertia": 0.5}
    scene = {
        "mbsim": 1, "name": "slider-crank from pi/4 at rest", "dimension": 2, "gravity": [0, -9.81],
        "time": {"end": 6.0, "step": 0.002},
        "solver": {"method": method, "integrator": "scipy:DOP853", "rtol": 1e-10, "atol": 1e-10},
        "output": {"every": 1},
        "bodies": [
            {"name": "crank", **bar, "position": [c / 2, s / 2], "orientation": th},
            {"name": "rod", **bar, "position": [1.5 * c, s / 2], "orientation": -th},
            {"name": "slider", "mass": 2.0, "inertia": 2.0 * (0.2**2 + 0.1**2) / 12, "position": [2 * c, 0]},
        ],
        "joints": [
            {"name": "O", "type": "revolute", "body1": "ground", "body2": "crank", "point": [0, 0]},
            {"name": "A", "type": "revolute", "body1": "crank", "body2": "rod", "point": [c, s]},
            {"name": "B", "type": "revolute", "body1": "rod", "body2": "slider", "point": [2 * c, 0]},
            {"name": "slide", "type": "prismatic", "body1": "ground", "body2": "slider", "point": [2 * c, 0],
             "axis": [1, 0]},
        ],
    }  # fmt: skip
    return scene


@pytest.mark.parametrize("method", ["null_space", "gauss", "augmented_lagrangian"])
def test_slider_crank_passes_the_fold_under_an_adaptive_integrator(run_scene, method):
    """Issue 14: each method that declares rank_loss follows the one-coordinate solution through
    three folds under scipy:DOP853 (rtol = atol = 1e-10) with its default settings. The
    augmented Lagrangian used to stop at the first fold (its multiplier iteration stalls along the
    vanishing direction; see its module docstring). Measured: 2e-9 m (null_space, gauss), 1.1e-9 m
    (augmented_lagrangian)."""
    summary, res = run_scene(folding_slider_crank(method))
    assert summary.status == "completed" and summary.t_end == pytest.approx(6.0)
    t = res.time
    x = res["bodies/slider/position"][:, 0]
    reference = slider_crank_reference(t, theta0=np.pi / 4, w0=0.0)
    assert np.sum(np.diff(np.sign(reference)) != 0) == 3  # through the fold (x = 0) three times
    assert np.max(np.abs(x - reference)) < 1e-6


# IFToMM A02 with N = 4 (written by its derivation in the verify problem folder): N + 1 cranks
# (uniform bars, 1 m, 1 kg) hinged to the ground at (i, 0) and standing up, joined at their tips by
# N couplers, gravity -y; B0, the first crank's tip, starts at 1 m/s along +x. All cranks turn
# together; when they lie horizontal every loop is flat and the degrees of freedom jump from 1 to
# N + 1. scipy:DOP853 at 1e-10, 20 s.
N_FOUR_BAR_4 = (
    Path(__file__).resolve().parents[2] / "mbsim" / "verify" / "problems" / "A02_n_four_bar_n4" / "scene.yaml"
)


def n_four_bar_reference(t: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """B0 of the one-coordinate model: the crank angle phi from +x obeys I phi'' = -k cos(phi) with
    I = (N + 1)/3 + N (cranks about their pivots, couplers translating with the tips) and
    k = g ((N + 1)/2 + N); phi(0) = pi/2, phi'(0) = -1 rad/s. For N = 40 it gives the published
    ADAMS values of B0 at t = 5, 10, 15, 20 s to 2e-6 m."""
    inertia, k = (n + 1) / 3 + n, 9.81 * ((n + 1) / 2 + n)
    sol = solve_ivp(
        lambda _, y: [y[1], -k * np.cos(y[0]) / inertia], (0, t[-1]), [np.pi / 2, -1.0],
        method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True,
    )  # fmt: skip
    phi = sol.sol(t)[0]
    return np.cos(phi), np.sin(phi)


def test_n_four_bar_reference_gives_the_published_solution():
    """IFToMM A02 (N = 40): B0 at t = 5, 10, 15, 20 s as published (ADAMS), to 1e-5 m."""
    x, y = n_four_bar_reference(np.array([5.0, 10.0, 15.0, 20.0]), 40)
    published = [(-0.540191, -0.841543), (0.180513, 0.983573), (-0.999878, -0.015606), (0.410902, 0.911679)]
    np.testing.assert_allclose(np.column_stack((x, y)), published, atol=1e-5)


@pytest.mark.parametrize(
    ("method", "tolerance"),
    quick(
        [("null_space", 1e-6), ("gauss", 1e-6), pytest.param("augmented_lagrangian", 1e-4, marks=pytest.mark.slow)],
        keep=0,
    ),
)
def test_n_four_bar_passes_its_folds_under_an_adaptive_integrator(run_scene, method, tolerance):
    """IFToMM A02 with N = 4 under scipy:DOP853 at 1e-10 with default settings: 20 folds in 20 s,
    four loops singular at once. null_space (rank_tol 1e-9) and gauss (1e-12) used to stop at a
    fold with the step size collapsed (see their module docstrings). Measured B0 errors: 7e-8 m
    (null_space), 4e-9 m (gauss), 8e-6 m (augmented_lagrangian)."""
    n = 4
    summary, res = run_scene(N_FOUR_BAR_4, [f"solver.method={method}"])
    assert summary.status == "completed" and summary.t_end == pytest.approx(20.0)
    t = res.time
    centre, angle = res["bodies/crank0/position"], res["bodies/crank0/angle"]
    x, y = centre[:, 0] + 0.5 * np.cos(angle), centre[:, 1] + 0.5 * np.sin(angle)
    rx, ry = n_four_bar_reference(t, n)
    assert np.sum(np.abs(np.diff(np.sign(ry))) > 0) >= 10  # the folds (B0 on the x axis) it went through
    assert np.max(np.hypot(x - rx, y - ry)) < tolerance


def test_augmented_lagrangian_penalty_too_small_for_the_masses_still_fails(run_scene):
    """The stall test accepts only a direction whose singular value is tiny against the largest:
    bars of 6e8 kg make every direction slow for the default penalty 1e6 (alpha s^2 ~ 2e-3), and
    the iteration still ends the run with its message rather than accepting unconverged forces."""
    overrides = ["solver.method=augmented_lagrangian", "parameters.m_bar=6e8", "parameters.m_slider=2e8",
                 "time.end=0.01"]  # fmt: skip
    summary, _ = run_scene(SLIDER, overrides, status="failed")
    assert "did not converge in 3000 iterations" in summary.message


def test_gauss_reports_residual_and_optimizer_result(run_scene):
    _, kkt = run_scene(SLIDER, ["solver.method=gauss", "time.end=0.5"])
    _, pso = run_scene(SLIDER, ["solver.method=gauss", "solver.optimizer=pso", "time.end=0.5"])
    assert np.all(kkt["diagnostics/solver/optimizer_result"][1:] == 0)
    assert set(np.unique(pso["diagnostics/solver/optimizer_result"][1:])) <= {2.0, 3.0}
    for res in (kkt, pso):
        residual = res["diagnostics/solver/acceleration_residual"][1:]
        assert np.all(residual < 1e-9)
    assert np.all(pso["diagnostics/solver/iterations"][1:] >= 1)


def test_pso_runs_are_bit_identical_for_a_seed(run_scene):
    overrides = ["solver.method=gauss", "solver.optimizer=pso", "time.end=0.3", "solver.pso.seed=7"]
    _, first = run_scene(SLIDER, overrides)
    _, second = run_scene(SLIDER, overrides)
    assert np.array_equal(first["q"], second["q"])
    assert np.array_equal(first["diagnostics/solver/iterations"], second["diagnostics/solver/iterations"])


def test_without_projection_lagrange_leaves_the_branch(run_scene):
    """The paper's phenomenon: without violation correction, the plain Lagrange method drifts off at a
    singular position and its violation runs away: about 1e-8 before the passage near t = 3.2 s, past
    1e-5 soon after (measured: t = 3.3 s; how fast it grows past the passage is round-off amplified by
    the singular position: 1e-3 was reached at 4.45 s with numpy's sums and not by 10 s with the
    compiled step's)."""
    summary, res = run_scene(
        SLIDER,
        [
            "solver.method=lagrange",
            "solver.projection.position=false",
            "solver.projection.velocity=false",
            "solver.max_violation=1e-5",
        ],
        status="failed",
    )
    assert "max_violation" in summary.message
    assert 3.0 < summary.t_end < 5.0
    before = res["diagnostics/constraints/position_violation"][res.time < 3.0]
    assert before.max() < 2e-8


def test_augmented_lagrangian_counts_iterations_and_fails_cleanly(run_scene):
    _, res = run_scene(SLIDER, ["solver.method=augmented_lagrangian", "time.end=0.5"])
    iterations = res["diagnostics/solver/iterations"][1:]
    assert iterations.min() >= 4  # at least one multiplier iteration per rk4 stage
    summary, _ = run_scene(SLIDER, ["solver.method=augmented_lagrangian", "solver.max_iter=1"], status="failed")
    assert "did not converge" in summary.message


# ------------------------------------------------------------------ redundant constraints


@pytest.mark.parametrize(
    ("method", "extra"),
    [("null_space", []), ("gauss", []), ("gauss", ["solver.optimizer=pso"]), ("augmented_lagrangian", [])],
)
@pytest.mark.slow
def test_parallelogram_with_redundant_crank_follows_one_dof_motion(run_scene, method, extra):
    summary, res = run_scene(PARALLELOGRAM, [f"solver.method={method}", *extra])
    t = res.time
    reference = parallelogram_reference(t)
    for crank in ("crank1", "crank2", "crank3"):
        assert np.max(np.abs(res[f"bodies/{crank}/angle"] - reference)) < 1e-5  # measured 2e-10 .. 6e-9
    # the coupler translates without turning
    assert np.max(np.abs(res["bodies/coupler/angle"])) < 1e-9
    assert summary.max_position_violation < 1e-8


def test_lagrange_refuses_the_redundant_parallelogram_naming_the_joints(tmp_path):
    out = tmp_path / "pg.h5"
    result = CliRunner().invoke(cli, ["run", str(PARALLELOGRAM), "--set", "solver.method=lagrange", "-o", str(out)])
    assert result.exit_code == 3
    assert "rank deficient" in result.output
    for joint in ("pivot1", "pivot2", "pivot3", "tip1", "tip2", "tip3"):
        assert joint in result.output
    import h5py

    with h5py.File(out) as f:
        assert f.attrs["status"] == "failed"
        assert f["time"].shape == (0,)


def test_null_space_multipliers_are_minimum_norm_and_balance_the_forces():
    from mbsim.model.constraints import constraint_values
    from mbsim.model.dynamics import generalized_forces
    from mbsim.model.model import State
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    model, solver = prepare(load_scene(str(PARALLELOGRAM)))
    state = State(0.0, model.q0, model.v0 + 0.0, 0.0)
    ev = solver.evaluate(state)
    frames = model.frames(state.q, state.v)
    Q = generalized_forces(model, solver.data, frames, state.v, 0.0).q_force
    J = np.asarray(constraint_values(model, frames, 0.0).jacobian)
    vdot, _ = solver.acceleration(0.0, state.q, state.v)
    lam = ev.multipliers
    np.testing.assert_allclose(model.mass_matrix @ vdot + J.T @ lam, Q, atol=1e-10)
    # minimum norm: no component in the left null space of J (J^T y = 0)
    u, s, _ = np.linalg.svd(J)
    left_null = u[:, s.size - 1 :] if s[-1] < 1e-9 * s[0] else u[:, len(s) :]
    assert left_null.shape[1] >= 1
    assert np.max(np.abs(left_null.T @ lam)) < 1e-9 * max(1.0, np.max(np.abs(lam)))


def test_redundant_multipliers_are_the_pseudo_inverse_solution():
    """The redundant parallelogram under null_space (the compiled solve, ode_kernels.accelerations_at)
    against numpy on matrices this test assembles itself: J by central differences of the constraint
    values, gamma by second differences of Phi along the unaccelerated motion q + s v (2D), M and Q
    of the model. The accelerations are the free ones corrected M-orthogonally onto J v_dot = gamma
    (numpy.linalg.lstsq of J M^-1/2), the multipliers the minimum-norm solution of J^T lambda =
    Q - M v_dot (numpy.linalg.lstsq), with no part in the left null space of J."""
    from mbsim.model.constraints import constraint_residual
    from mbsim.model.dynamics import generalized_forces
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare
    from mbsim.solvers.ode import ode_kernels

    model, solver = prepare(load_scene(str(PARALLELOGRAM)))
    F, D, P = solver._flat, solver.data.flat, solver._params
    rng = np.random.default_rng(11)
    q, v, t = model.q0, model.v0 + 0.3 * rng.standard_normal(model.nv), 0.0
    ok, vdot, _ = ode_kernels.accelerations_at(F, D, P, t, q, v)
    assert ok
    eps, h = 1e-6, 1e-4
    J = np.array(
        [(constraint_residual(model, q + eps * e, t) - constraint_residual(model, q - eps * e, t)) / (2 * eps)
         for e in np.eye(model.nv)]
    ).T  # fmt: skip
    phi = [constraint_residual(model, q + s * v, t + s) for s in (h, 0.0, -h)]
    gamma = -(phi[0] - 2 * phi[1] + phi[2]) / h**2
    M = np.asarray(model.mass_matrix)
    Q = generalized_forces(model, solver.data, model.frames(q, v), v, t).q_force
    assert np.linalg.matrix_rank(J, tol=1e-6 * np.abs(J).max()) < model.nc  # redundant
    w = np.diag(1.0 / np.sqrt(np.diag(M)))  # M^-1/2 (2D: diagonal)
    free = np.linalg.solve(M, Q)
    expected = free - w @ np.linalg.lstsq(J @ w, J @ free - gamma, rcond=1e-6)[0]
    np.testing.assert_allclose(vdot, expected, rtol=0, atol=1e-6 * np.max(np.abs(expected)))
    lam = np.linalg.lstsq(J.T, Q - M @ vdot, rcond=1e-6)[0]
    np.testing.assert_allclose(D.lam, lam, rtol=0, atol=1e-6 * np.max(np.abs(lam)))
    np.testing.assert_allclose(M @ vdot + J.T @ np.asarray(D.lam), Q, rtol=0, atol=1e-6 * np.max(np.abs(Q)))


def test_the_rank_cut_of_an_adaptive_step_sits_in_the_gap():
    """ode_kernels.step_cut against the singular values of J M^-1/2 numpy finds at the same state: the
    rank decided by rank_tol as always, the cut in the middle (geometric) of the gap around it,
    sqrt(s_r s_r+1) / s_1, within [rank_tol / 10, 10 rank_tol]: at the slider-crank's fold (one
    direction lost: mid-gap or clipped) and at its regular start (certified full rank: rank_tol / 10)."""
    from mbsim.scene.load import load_raw_scene
    from mbsim.scene.spec import build_spec
    from mbsim.simulate import prepare
    from mbsim.solvers.ode import ode_kernels

    model, solver = prepare(build_spec(load_raw_scene(SLIDER, ["solver.method=null_space"])))
    F, D, P = solver._flat, solver.data.flat, solver._params
    tau = P[ode_kernels.RANK_TOL]
    start = np.concatenate((model.q0, model.v0, [0.0]))
    assert ode_kernels.step_cut(F, D, P, 0.0, start) == pytest.approx(0.1 * tau)
    for tilt in (0.0, 1e-4, 1e-3):  # at the fold and beside it
        q = np.array([0.0, -0.5, -np.pi / 2 + tilt, 0.0, -0.5, np.pi / 2, 0.0, 0.0, 0.0])
        y = np.concatenate((q, np.zeros(model.nv), [0.0]))
        cut = ode_kernels.step_cut(F, D, P, 0.0, y)
        M = np.asarray(model.mass_matrix)
        s = np.linalg.svd(np.asarray(D.J) @ np.diag(1.0 / np.sqrt(np.diag(M))), compute_uv=False)
        rank = int(np.sum(s > tau * s[0]))
        below = s[rank] if rank < len(s) else 0.0
        expected = min(max(np.sqrt(s[rank - 1] * below) / s[0], 0.1 * tau), 10 * tau)
        assert cut == pytest.approx(expected, rel=1e-6), tilt


def test_the_rank_cut_of_gauss_sits_in_the_kkt_matrix_gap():
    """ode_kernels.step_cut under gauss against numpy's singular values of the KKT matrix
    [M J^T; J 0] at the same state (the rank by rank_tol, the cut mid-gap within [rank_tol / 10,
    10 rank_tol]): at the slider-crank's fold and beside it. At the fold itself the lost singular
    value is round-off (1e-16 of the largest, a different number for each algorithm): there the
    cut only has to lie inside the gap."""
    from mbsim.scene.load import load_raw_scene
    from mbsim.scene.spec import build_spec
    from mbsim.simulate import prepare
    from mbsim.solvers.ode import ode_kernels

    model, solver = prepare(build_spec(load_raw_scene(SLIDER, ["solver.method=gauss"])))
    F, D, P = solver._flat, solver.data.flat, solver._params
    tau = P[ode_kernels.RANK_TOL]
    M = np.asarray(model.mass_matrix)
    for tilt in (0.0, 1e-4, 1e-3):
        q = np.array([0.0, -0.5, -np.pi / 2 + tilt, 0.0, -0.5, np.pi / 2, 0.0, 0.0, 0.0])
        y = np.concatenate((q, np.zeros(model.nv), [0.0]))
        cut = ode_kernels.step_cut(F, D, P, 0.0, y)
        J = np.asarray(D.J)
        s = np.linalg.svd(np.block([[M, J.T], [J, np.zeros((model.nc, model.nc))]]), compute_uv=False)
        rank = int(np.sum(s > tau * s[0]))
        if rank == len(s):
            assert cut == pytest.approx(0.1 * tau)  # certified full rank, no SVD
            continue
        expected = min(max(np.sqrt(s[rank - 1] * s[rank]) / s[0], 0.1 * tau), 10 * tau)
        if s[rank] > 1e-13 * s[0]:
            assert cut == pytest.approx(expected, rel=1e-6), tilt
        else:
            assert s[rank] / s[0] < cut < s[rank - 1] / s[0] and 0.1 * tau <= cut <= 10 * tau, tilt


@pytest.mark.slow
def test_n_four_bar_with_forty_loops_passes_its_folds_under_dop853(run_scene):
    """IFToMM A02 with N = 40 under scipy:DOP853 at 1e-10, null_space, through its first two folds
    (0.72 s and 2.69 s). With the cut fixed at rank_tol the second fold took steps of 1e-8 s for
    minutes: 22 to 40 singular values cross the cut one after another and each crossing inside a
    step is a jump of the right-hand side the error estimate rejects. With the cut of each step in
    its singular values' gap (null_space.step_cut) the crossings fall between steps. Measured:
    0 -> 3.2 s in about 320 steps, B0 within 6e-7 m of the one-coordinate solution."""
    scene = Path(__file__).resolve().parents[2] / "mbsim" / "verify" / "problems" / "A02_n_four_bar" / "scene.yaml"
    overrides = ["solver.method=null_space", "solver.integrator=scipy:DOP853", "solver.rtol=1e-10",
                 "solver.atol=1e-10", "time.end=3.2", "output.every=1"]  # fmt: skip
    summary, res = run_scene(scene, overrides)
    assert summary.status == "completed" and summary.steps < 1000
    t = res.time
    centre = res["bodies/crank0/position"]
    rx, ry = n_four_bar_reference(t, 40)
    assert np.max(np.hypot(2 * centre[:, 0] - rx, 2 * centre[:, 1] - ry)) < 1e-5
    assert np.nanmin(res["diagnostics/solver/rank"]) < 242 - 20  # it went through rank loss


@pytest.mark.parametrize("method", ["null_space", "gauss"])
def test_truncated_solves_at_the_forty_loop_fold_are_the_dense_ones(method):
    """At a state 2e-7 rad from the N = 40 four-bar's fold (40 loops nearly singular at once, rank
    cut), the compiled solve against numpy on the same J, gamma, Q: null_space's y = J_hat_r^+ gamma
    + V_n V_n^T y_free and lambda = (J_hat_r^T)^+ (y_free - y) by numpy's SVD of J M^-1/2, gauss's
    minimum-norm least squares of the KKT system by numpy's lstsq with the same cut. Two dense
    LAPACK drivers differ here by about 2e-10 (null_space) and 3e-9 (gauss, eigh against gelsd)
    relative: the cut keeps singular values down to 1e-6 (1e-8) of the largest."""
    from mbsim.scene.load import load_raw_scene
    from mbsim.scene.spec import build_spec
    from mbsim.simulate import prepare
    from mbsim.solvers.ode import ode_kernels

    scene = Path(__file__).resolve().parents[2] / "mbsim" / "verify" / "problems" / "A02_n_four_bar" / "scene.yaml"
    model, solver = prepare(build_spec(load_raw_scene(str(scene), [f"solver.method={method}"])))
    F, D, P = solver._flat, solver.data.flat, solver._params
    # every crank at phi, every coupler translating with the crank tips (the one-coordinate motion)
    phi, rate = 2e-7, -3.0
    q, v = np.zeros(model.nv), np.zeros(model.nv)
    for b, name in enumerate(model.body_names):
        i = int(name[5:] if name.startswith("crank") else name[7:])
        if name.startswith("crank"):
            q[3 * b : 3 * b + 3] = (i + 0.5 * np.cos(phi), 0.5 * np.sin(phi), phi)
            v[3 * b : 3 * b + 3] = (-0.5 * rate * np.sin(phi), 0.5 * rate * np.cos(phi), rate)
        else:
            q[3 * b : 3 * b + 3] = (i + 0.5 + np.cos(phi), np.sin(phi), 0.0)
            v[3 * b : 3 * b + 3] = (-rate * np.sin(phi), rate * np.cos(phi), 0.0)
    cut = P[ode_kernels.RANK_TOL]
    P[ode_kernels.CUT] = cut
    ode_kernels.reset_stats(D.solve_stats, 0)
    ok, vdot, _ = ode_kernels.accelerations_at(F, D, P, 0.0, q, v)
    assert ok
    J, gamma, Q, lam = np.array(D.J), np.array(D.gamma), np.array(D.Q), np.array(D.lam)
    M = model.mass_matrix if isinstance(model.mass_matrix, np.ndarray) else model.mass_matrix.toarray()
    if method == "null_space":
        w = np.diag(1.0 / np.sqrt(np.diag(M)))  # M^-1/2 (2D: diagonal)
        U, s, Vt = np.linalg.svd(J @ w)
        rank = int(np.sum(s > cut * s[0]))
        assert rank < model.nc - 20 and D.solve_stats[1] == rank  # the fold: many directions cut
        y_free = w @ Q
        y = Vt[:rank].T @ (U[:, :rank].T @ gamma / s[:rank]) + Vt[rank:].T @ (Vt[rank:] @ y_free)
        expected, expected_lam, tol = w @ y, U[:, :rank] @ (Vt[:rank] @ (y_free - y) / s[:rank]), 1e-8
    else:
        K = np.block([[M, J.T], [J, np.zeros((model.nc, model.nc))]])
        x, _, rank, _ = np.linalg.lstsq(K, np.concatenate((Q, gamma)), rcond=cut)
        assert rank < model.nv + model.nc - 20 and D.kkt_rank[0] == rank
        expected, expected_lam, tol = x[: model.nv], x[model.nv :], 1e-6
    np.testing.assert_allclose(vdot, expected, rtol=0, atol=tol * np.abs(expected).max())
    np.testing.assert_allclose(lam, expected_lam, rtol=0, atol=tol * np.abs(expected_lam).max())
