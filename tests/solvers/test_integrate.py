"""The integrators, written once (mbsim.solvers.ode.integrate), against independent references:
scipy's RK45 and DOP853 (same accepted steps, states and dense output; also through the Python
path's stepper, mbsim.solvers.ode.integrators, with a corrected state between steps), the order of
convergence of the fixed-step ones on closed-form cases, the bounded energy of semi-implicit
Euler on an oscillator, and an mbsim run under the compiled DOP853 against the pendulum's energy
conservation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
from scipy.integrate import solve_ivp

from mbsim.errors import SimulationError
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare, run
from mbsim.solvers.ode import integrate, integrators, ode_kernels

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
    system = ode_kernels.system(solver._flat, solver.data.flat, solver._params)
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


def test_semi_implicit_euler_keeps_an_oscillators_energy_bounded():
    """q'' = -q with h = 0.1 over 10,000 steps (160 periods): symplectic Euler conserves the modified
    energy (q^2 + v^2 - h q v) / 2 exactly, so the energy E stays within h E / 2 of its start
    (|q v| <= E) with no drift; explicit Euler multiplies it by 1 + h^2 every step (e^100 here)."""

    def f(t, y):
        return np.array([y[1], -y[0], 0.0])

    h, n = 0.1, 10_000
    y0 = np.array([1.0, 0.0, 0.0])
    system = integrate.PySystem(f, 3, 1, 1)
    ys = integrate.fixed(system, integrate.INTEGRATORS["semi_implicit_euler"], 0.0, y0, h, n)
    energy = 0.5 * (ys[:, 0] ** 2 + ys[:, 1] ** 2)
    assert np.max(np.abs(energy - 0.5)) <= 0.5 * h * np.max(energy) * (1 + 1e-12)
    modified = 0.5 * (ys[:, 0] ** 2 + ys[:, 1] ** 2 - h * ys[:, 0] * ys[:, 1])
    np.testing.assert_allclose(modified, 0.5, rtol=1e-12)
    assert abs(np.mean(energy[-1000:]) - np.mean(energy[:1000])) < 1e-3  # no drift
    euler = integrate.fixed(system, integrate.INTEGRATORS["euler"], 0.0, y0, h, 100)
    np.testing.assert_allclose(0.5 * (euler[-1, 0] ** 2 + euler[-1, 1] ** 2), 0.5 * (1 + h * h) ** 100, rtol=1e-12)


class Pendulum:
    """A Python system as the methods' Python path hands it to the integrators: the forced pendulum
    with its work entry, y = (q, v, work); q_rate for semi-implicit Euler."""

    nq, nv = 1, 1

    def __init__(self):
        self.calls = 0

    def derivative(self, t, y):
        self.calls += 1
        a = -np.sin(y[0]) - 0.1 * y[1] + 0.3 * np.cos(1.3 * t)
        return np.array([y[1], a, -0.1 * y[1] ** 2])

    def q_rate(self, q, v):
        return np.asarray(v).copy()


@pytest.mark.parametrize("integrator,order", [("euler", 1), ("semi_implicit_euler", 1), ("rk4", 4)])
def test_the_python_paths_fixed_steps_converge_to_the_pendulums_small_angle_limit(integrator, order):
    """integrators.stepper's fixed step (the compiled step over a Python right-hand side) on the
    pendulum released from 1e-6 rad: the error against the small-angle closed form cos(t) falls as
    2^order when h halves (the small-angle model error, theta0^2 T / 16 ~ 1e-13 relative, is far
    below the errors measured: rk4's smallest 4e-10)."""

    class Small(Pendulum):
        def derivative(self, t, y):
            return np.array([y[1], -np.sin(y[0]), 0.0])

    fixed, adaptive = integrators.stepper(integrator, 1e-6, 1e-9, 2.0, None)
    assert adaptive is None
    system, theta0, T = Small(), 1e-6, 2.0
    errors = []
    for n in (40, 80, 160):
        y, h = np.array([theta0, 0.0, 0.0]), T / n
        for k in range(n):
            y = fixed(system, k * h, y, h)
        errors.append(abs(y[0] - theta0 * np.cos(T)) / theta0)
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(rates - order) < 0.15), rates


def test_the_python_paths_fixed_step_takes_the_callers_first_stage():
    """f0 (the derivative the caller holds at (t, y), a recorded state's) is the first stage: an
    Euler step is y + h f0 whatever the right-hand side says there."""
    fixed, _ = integrators.stepper("euler", 1e-6, 1e-9, 1.0, None)
    system = Pendulum()
    y, f0 = np.array([0.3, 0.2, 0.0]), np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(fixed(system, 0.0, y, 0.5, f0), y + 0.5 * f0)
    assert system.calls == 0
    np.testing.assert_allclose(fixed(system, 0.0, y, 0.5), y + 0.5 * system.derivative(0.0, y), rtol=1e-15)


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
def test_the_python_paths_embedded_pair_takes_scipys_steps(method):
    """integrators.stepper's scipy:RK45 / scipy:DOP853 (the compiled pair over a Python right-hand
    side) against scipy's own solver object stepped the way the methods' Python path stepped it:
    every third step the state is corrected (as a projection or the quaternions' rescaling does)
    and the solver continues from it with the derivative recomputed there (scipy: y and f set).
    Same accepted times, states and dense output to round-off (measured 3e-11). At tighter tolerances
    the error estimate (stages weighted by coefficients that sum to zero) loses digits to
    cancellation, and the summation order alone (numpy's BLAS against a loop) moves the step sizes
    by up to 1e-6 relative (rtol 1e-8, a first step of 1e-3: 3e-6 of the estimate at the second step)."""
    rtol, atol, t_end, h0 = 1e-5, 1e-7, 8.0, 1e-3
    _, pair = integrators.stepper(f"scipy:{method}", rtol, atol, t_end, None)
    system = Pendulum()
    ref = getattr(scipy.integrate, method)(system.derivative, 0.0, np.array([1.0, 0.0, 0.0]), t_end,
                                           first_step=h0, rtol=rtol, atol=atol)  # fmt: skip
    t, y, h, k = 0.0, np.array([1.0, 0.0, 0.0]), h0, 0
    while t < t_end:
        t, y, h = pair.step(system, t, y, h)
        ref.step()
        assert t == pytest.approx(ref.t, rel=1e-10, abs=0)
        np.testing.assert_allclose(y, ref.y, rtol=0, atol=1e-10)
        assert h == pytest.approx(ref.h_abs, rel=1e-8)
        mid = 0.5 * (ref.t_old + ref.t)
        np.testing.assert_allclose(pair.dense_output()(mid), ref.dense_output()(mid), rtol=0, atol=1e-10)
        k += 1
        if k % 3 == 0:  # a correction between steps
            y = y + np.array([1e-7, -2e-7, 0.0])
            ref.y = y.copy()
            ref.f = system.derivative(ref.t, ref.y)
    assert k > 10


def test_the_python_paths_steps_raise_what_the_right_hand_side_raises():
    """An error inside a stage (a rank-deficient solve, an interrupt) reaches the caller as it was
    raised, and the stepper is usable after it."""

    class Failing(Pendulum):
        fail_after = None

        def derivative(self, t, y):
            if self.fail_after is not None and self.calls >= self.fail_after:
                self.fail_after = None
                raise SimulationError("constraint Jacobian is rank deficient", t=t)
            return super().derivative(t, y)

    system = Failing()
    # the stage that fails: rk4's third, semi-implicit Euler's only one, a pair's second (after f at the start)
    for name, stage in (("rk4", 2), ("semi_implicit_euler", 0), ("scipy:RK45", 2), ("scipy:DOP853", 2)):
        fixed, pair = integrators.stepper(name, 1e-6, 1e-9, 1.0, None)
        system.fail_after = system.calls + stage
        with pytest.raises(SimulationError, match="rank deficient"):
            if fixed is not None:
                fixed(system, 0.0, np.array([0.1, 0.0, 0.0]), 0.01)
            else:
                pair.step(system, 0.0, np.array([0.1, 0.0, 0.0]), 0.01)
        if fixed is not None:
            assert np.all(np.isfinite(fixed(system, 0.0, np.array([0.1, 0.0, 0.0]), 0.01)))
        else:
            t, y, _ = pair.step(system, 0.0, np.array([0.1, 0.0, 0.0]), 0.01)
            assert t > 0 and np.all(np.isfinite(y))

    class Interrupted(Pendulum):
        def derivative(self, t, y):
            raise KeyboardInterrupt

    fixed, _ = integrators.stepper("rk4", 1e-6, 1e-9, 1.0, None)
    with pytest.raises(KeyboardInterrupt):
        fixed(Interrupted(), 0.0, np.zeros(3), 0.01)


def test_a_step_too_small_fails_as_scipys_did():
    """The Python path's pair stops with scipy's message at a singularity (y' = 1 / (1 - t)^2)."""

    class Blowup(Pendulum):
        nq = nv = 0

        def derivative(self, t, y):
            return np.array([1.0 / (1.0 - t) ** 2])

    _, pair = integrators.stepper("scipy:DOP853", 1e-8, 1e-8, 2.0, None)
    t, y, h = 0.0, np.array([1.0]), 1e-3
    with pytest.raises(SimulationError, match="DOP853 failed: Required step size is less than spacing"):
        while t < 2.0:
            t, y, h = pair.step(Blowup(), t, y, h)
