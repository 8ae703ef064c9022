"""The compiled integrators (mbsim.solvers.integrate) against independent references: scipy's
RK45 and DOP853 (same accepted steps, states and dense output), the order of convergence of the
fixed-step ones on a closed-form case, and an mbsim run under the compiled DOP853 against the
pendulum's energy conservation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare, run
from mbsim.solvers import integrate, ode_kernels

SCENES = __import__("pathlib").Path(__file__).resolve().parents[2] / "scenes"


def forced_pendulum(t, y):
    return np.array([y[1], -np.sin(y[0]) - 0.1 * y[1] + 0.3 * np.cos(1.3 * t)])


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
@pytest.mark.parametrize("rtol", [1e-3, 1e-6])
def test_adaptive_pairs_take_scipys_steps(method, rtol):
    """Same accepted times and states as solve_ivp, and the same dense output. (At tolerances where
    the error estimate sits near its round-off floor -- a sum of stages weighted by coefficients
    that cancel -- the summation order alone moves the step sizes by ~eps/rtol: here 1e-10.)"""
    y0 = np.array([1.0, 0.0])
    sol = solve_ivp(forced_pendulum, (0, 20), y0, method=method, rtol=rtol, atol=rtol * 1e-2, dense_output=True)
    tq = np.linspace(0.05, 19.9, 37)
    system = integrate.PySystem(forced_pendulum, 2, 1, 1)
    ts, ys, work, yd = integrate.solve(
        system, integrate.INTEGRATORS[method], 0.0, y0, 20.0, rtol, rtol * 1e-2, dense_at=tq
    )
    assert len(ts) == len(sol.t)
    np.testing.assert_allclose(ts, sol.t, rtol=1e-10, atol=0)
    np.testing.assert_allclose(ys, sol.y.T, rtol=0, atol=1e-9)
    np.testing.assert_allclose(yd, sol.sol(tq).T, rtol=0, atol=1e-9)


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
def test_adaptive_pairs_on_an_mbsim_right_hand_side(method):
    """The four-box chain's compiled right-hand side (ode_kernels.OdeSystem) under the compiled pair and
    under scipy's: the same accepted steps (selected first step included) and states."""
    spec = load_scene(str(SCENES / "four_box_chain.yaml"), [f"solver.integrator=scipy:{method}"])
    model, solver = prepare(spec)
    rng = np.random.default_rng(1)
    y0 = np.concatenate((model.q0, model.v0 + rng.normal(0, 0.5, model.nv), (0.0,)))
    system = ode_kernels.system(solver._flat, solver._data, solver._params)
    ts, ys, work = integrate.solve(system, integrate.INTEGRATORS[method], 0.0, y0, 1.0, 1e-5, 1e-7)
    sol = solve_ivp(solver.derivative, (0, 1.0), y0, method=method, rtol=1e-5, atol=1e-7)
    assert len(ts) == len(sol.t) > 4
    np.testing.assert_allclose(ts, sol.t, rtol=1e-9, atol=0)
    np.testing.assert_allclose(ys, sol.y.T, rtol=0, atol=1e-9 * np.max(np.abs(sol.y)))


def test_too_small_a_step_fails_as_scipy_does():
    system = integrate.PySystem(lambda t, y: np.array([1.0 / (1.0 - t) ** 2]), 1)
    with pytest.raises(FloatingPointError, match="spacing between numbers"):
        integrate.solve(system, integrate.INTEGRATORS["DOP853"], 0.0, np.array([1.0]), 2.0, 1e-8, 1e-8)


@pytest.mark.parametrize("method,order", [("euler", 1), ("semi_implicit_euler", 1), ("rk4", 4)])
def test_fixed_steps_converge_at_their_order(method, order):
    """y = (q, v, work) of a damped oscillator q'' = -q - 0.2 q' (work' = q'^2), closed form."""

    def f(t, y):
        return np.array([y[1], -y[0] - 0.2 * y[1], y[1] ** 2])

    y0, T = np.array([1.0, 0.0, 0.0]), 2.0
    w = np.sqrt(1 - 0.01)
    exact = np.exp(-0.1 * T) * (np.cos(w * T) + 0.1 / w * np.sin(w * T))
    system = integrate.PySystem(f, 3, 1, 1)
    errors = []
    for n in (40, 80, 160):
        ys = integrate.fixed(system, integrate.INTEGRATORS[method], 0.0, y0, T / n, n)
        errors.append(abs(ys[-1, 0] - exact))
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(rates - order) < 0.15), rates


def test_a_dop853_run_keeps_the_pendulums_energy(tmp_path):
    """pendulum_2d (released from 2.5 rad) under the compiled DOP853 at 1e-10: energy conserved,
    the same steps as its own Python path's count within a few, period as the closed form."""
    spec = load_scene(
        str(SCENES / "pendulum_2d.yaml"),
        ["solver.integrator=scipy:DOP853", "solver.rtol=1e-10", "solver.atol=1e-12"],
    )
    model, solver = prepare(spec)
    assert solver.block_stepping
    summary = run(spec, tmp_path / "p.h5")
    assert summary.status == "completed"
    assert summary.energy_drift < 1e-8
    assert summary.max_position_violation < 1e-12
