"""Time integrators for first-order systems y' = f(t, y) with y = (q, v, work).

Fixed step: ``euler`` (explicit), ``semi_implicit_euler`` (symplectic Euler: v first, then q
with the new v), ``rk4`` (classical Runge-Kutta). Adaptive: ``scipy:RK45``, ``scipy:DOP853``,
``scipy:Radau``, ``scipy:BDF`` through scipy's ``OdeSolver.step()`` with ``rtol``/``atol``;
one accepted step of theirs is one mbsim step.

The system object passed in provides ``derivative(t, y)``, and for the split integrator
``acceleration(t, q, v) -> (v_dot, power)`` and ``q_rate(q, v)``, plus the sizes ``nq``, ``nv``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mbsim.errors import SimulationError

# scipy.integrate (and scipy.optimize below it) is imported when a run uses one: validate stays quick
SCIPY_METHODS = ("scipy:RK45", "scipy:DOP853", "scipy:Radau", "scipy:BDF")


def scipy_solver_class(name: str) -> type:
    """``scipy:RK45`` -> scipy.integrate.RK45."""
    import scipy.integrate

    return getattr(scipy.integrate, name.split(":", 1)[1])


IMPLICIT = ("scipy:Radau", "scipy:BDF")  # they take the Jacobian of f (jacobian_by_differences)


def jacobian_by_differences(derivative: Any) -> Any:
    """jac(t, y) of f by forward differences with the step sqrt(eps) max(|y_i|, 1), for Radau and
    BDF. scipy's own estimate (num_jac) adapts a step factor per column and multiplies it by 10 at
    every evaluation where f does not depend on that coordinate (the work entry of y, a cyclic
    coordinate such as a freely spinning shaft's angle); after some hundred Jacobians the step is
    infinite, f is evaluated at an infinite angle and the run fails with NaNs (the flyball governor,
    recursive under scipy:Radau at 1e-10, at t = 5.2 s). A fixed relative step has no such state."""
    step = np.sqrt(np.finfo(float).eps)

    def jac(t: float, y: np.ndarray) -> np.ndarray:
        f0 = derivative(t, y)
        J = np.empty((f0.shape[0], y.shape[0]))
        shifted = y.copy()
        for i in range(y.shape[0]):
            shifted[i] = y[i] + step * max(abs(y[i]), 1.0)
            J[:, i] = (derivative(t, shifted) - f0) / (shifted[i] - y[i])
            shifted[i] = y[i]
        return J

    return jac


FIXED = ("euler", "semi_implicit_euler", "rk4")
INTEGRATORS = (*FIXED, *SCIPY_METHODS)


def euler(system: Any, t: float, y: np.ndarray, h: float, f0: np.ndarray | None = None) -> np.ndarray:
    k1 = system.derivative(t, y) if f0 is None else f0
    return y + h * k1


def semi_implicit_euler(system: Any, t: float, y: np.ndarray, h: float, f0: np.ndarray | None = None) -> np.ndarray:
    nq, nv = system.nq, system.nv
    q, v = y[:nq], y[nq : nq + nv]
    if f0 is None:
        a, power = system.acceleration(t, q, v)
    else:
        a, power = f0[nq : nq + nv], f0[-1]
    v_new = v + h * a
    q_new = q + h * system.q_rate(q, v_new)
    return np.concatenate((q_new, v_new, [y[-1] + h * power]))


def rk4(system: Any, t: float, y: np.ndarray, h: float, f0: np.ndarray | None = None) -> np.ndarray:
    k1 = system.derivative(t, y) if f0 is None else f0
    k2 = system.derivative(t + 0.5 * h, y + 0.5 * h * k1)
    k3 = system.derivative(t + 0.5 * h, y + 0.5 * h * k2)
    k4 = system.derivative(t + h, y + h * k3)
    return y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


FIXED_STEP = {"euler": euler, "semi_implicit_euler": semi_implicit_euler, "rk4": rk4}


def _continue_from(solver: Any, y: np.ndarray, fun: Any) -> bool:
    """Let a running scipy solver continue from a corrected state y at its current time.

    Runge-Kutta and Radau keep the derivative at the current point (recomputed here); BDF keeps
    backward differences whose zeroth row is the current point (shifted here, so its history
    and order survive). Returns False if the solver is of a kind this does not know, in which
    case the caller restarts it. (These are scipy's internal attributes, exercised by the tests
    of every adaptive integrator.)
    """
    kind = type(solver).__name__  # by name: this runs every corrected step, scipy is imported already
    if kind == "BDF" and hasattr(solver, "D"):
        solver.D[0] += y - solver.y
        solver.y = y.copy()
        return True
    if kind in ("RK45", "DOP853", "Radau") and hasattr(solver, "f"):
        solver.y = y.copy()
        solver.f = fun(solver.t, solver.y)
        return True
    return False


@dataclass
class AdaptiveStepper:
    """One scipy OdeSolver kept across steps. When the caller changed the state between steps
    (projection), the solver continues from the corrected state (see _continue_from)."""

    method: str
    rtol: float
    atol: float
    t_end: float
    max_step: float = np.inf

    def __post_init__(self) -> None:
        self._solver = None
        self._y_last: np.ndarray | None = None

    def step(
        self, system: Any, t: float, y: np.ndarray, h: float, prepare: Any = None
    ) -> tuple[float, np.ndarray, float]:
        """Take one accepted step from (t, y); h is the proposed first step. Returns (t, y, h_next).

        ``prepare(t, y) -> bool`` (OdeSolver.before_adaptive_step) sets what the right-hand side
        keeps fixed over the step's stages (null_space, gauss: the rank cut) and says whether that
        changed: then the derivative at the step's start is recomputed."""
        changed = bool(prepare(t, y)) if prepare is not None else False
        solver = self._solver
        fresh = solver is None or solver.t != t
        if not fresh and (changed or not np.array_equal(self._y_last, y)):
            fresh = not _continue_from(solver, y, system.derivative)
        if fresh:
            implicit = {"jac": jacobian_by_differences(system.derivative)} if self.method in IMPLICIT else {}
            solver = scipy_solver_class(self.method)(
                system.derivative,
                t,
                y,
                self.t_end,
                first_step=min(h, self.t_end - t),
                rtol=self.rtol,
                atol=self.atol,
                max_step=self.max_step,
                **implicit,
            )
            self._solver = solver
        message = solver.step()
        if solver.status == "failed":
            raise SimulationError(f"{self.method} failed: {message}", t=t)
        h_next = float(getattr(solver, "h_abs", solver.step_size) or h)
        self._y_last = solver.y.copy()
        return float(solver.t), solver.y.copy(), h_next

    def dense_output(self) -> Any:
        """The interpolant of the last step (scipy's dense output): y(t) for t in that step."""
        return self._solver.dense_output()


def stepper(integrator: str, rtol: float, atol: float, t_end: float, max_step: float | None):
    """(fixed-step function or None, AdaptiveStepper or None) of an integrator name: what the
    ODE-based methods step with."""
    if integrator in SCIPY_METHODS:
        return None, AdaptiveStepper(integrator, rtol, atol, t_end, max_step if max_step else np.inf)
    return FIXED_STEP.get(integrator), None
