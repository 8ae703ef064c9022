"""The integrators by name, for first-order systems y' = f(t, y) with y = (q, v, work).

Fixed step: ``euler`` (explicit), ``semi_implicit_euler`` (symplectic Euler: v first, then q
with the new v), ``rk4`` (classical Runge-Kutta). Adaptive: ``scipy:RK45``, ``scipy:DOP853``
(scipy's algorithm and coefficients, compiled), ``scipy:Radau``, ``scipy:BDF`` (scipy's own
``OdeSolver.step()``) with ``rtol``/``atol``; one accepted step of theirs is one mbsim step.

Every integrator but Radau and BDF is written once, in mbsim.solvers.ode.integrate; the compiled
blocks of the methods call it directly, and the Python path (models that do not flatten, steps
handed over by a block, event_driven between events) through :class:`FixedStep` and
:class:`EmbeddedPair` here, whose right-hand side calls back into Python.

The system object passed in provides ``derivative(t, y)`` and ``q_rate(q, v)`` (semi-implicit
Euler: dq/dt at the new velocities), plus the sizes ``nq``, ``nv``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mbsim.errors import SimulationError
from mbsim.solvers.ode import integrate

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
# the integrators compiled once (mbsim.solvers.ode.integrate): every fixed step and the embedded pairs
COMPILED = (*FIXED, "scipy:RK45", "scipy:DOP853")


def compiled_code(integrator: str) -> int:
    """The code of a compiled integrator (mbsim.solvers.ode.integrate.INTEGRATORS): ``rk4``,
    ``scipy:DOP853`` ... (KeyError for Radau and BDF, which stay scipy's)."""
    if integrator not in COMPILED:
        raise KeyError(integrator)
    return integrate.INTEGRATORS[integrator.split(":", 1)[-1]]


class _Bound:
    """The compiled integrator's view of a Python system (integrate.PySystem: its ``derivative``
    and ``q_rate``, sizes ``nq``, ``nv``) with the integrator's buffers (integrate.Work), made
    for the first system stepped and kept while the same one is."""

    def __init__(self, code: int, rtol: float = 1e-3, atol: float = 1e-6, t_end: float = np.inf, max_step=np.inf):
        self.code, self.rtol, self.atol, self.t_end, self.max_step = code, rtol, atol, t_end, max_step
        self._system: Any = None
        self.S: Any = None
        self.W: Any = None

    def bind(self, system: Any, n: int) -> None:
        if self._system is system and self.W.n == n:
            return
        self.S = integrate.PySystem(system.derivative, n, system.nq, system.nv, system.q_rate)
        self.W = integrate.Work(n, self.code, self.rtol, self.atol, self.max_step, self.t_end)
        self._system = system


class FixedStep(_Bound):
    """One fixed step (euler, semi_implicit_euler, rk4) of the compiled integrator
    (integrate.fixed_step) over a Python system: ``step(system, t, y, h, f0)`` -> y_new, f0 the
    derivative at (t, y) when the caller holds it (the first stage)."""

    def __call__(self, system: Any, t: float, y: np.ndarray, h: float, f0: np.ndarray | None = None) -> np.ndarray:
        y = np.ascontiguousarray(y, dtype=float)
        self.bind(system, len(y))
        if f0 is not None:
            self.S.first = np.asarray(f0, dtype=float)
        return integrate.fixed_step_of(self.S, self.W, t, h, y)


class EmbeddedPair(_Bound):
    """scipy:RK45 / scipy:DOP853 compiled (integrate.adaptive_step: scipy's step control and dense
    output) over a Python system, kept across steps as scipy's solver object was: it continues
    from a state the caller corrected (projection) with the derivative recomputed there."""

    def __init__(self, method: str, rtol: float, atol: float, t_end: float, max_step: float = np.inf) -> None:
        super().__init__(compiled_code(method), rtol, atol, t_end, max_step)
        self.method = method

    def step(
        self, system: Any, t: float, y: np.ndarray, h: float, prepare: Any = None
    ) -> tuple[float, np.ndarray, float]:
        """One accepted step from (t, y); h is the first step when the pair starts afresh (it is
        not at t). Returns (t, y, h_next). ``prepare(t, y) -> bool`` (OdeSolver.before_adaptive_step)
        sets what the right-hand side keeps fixed over the step's stages and says whether that
        changed: then the derivative at the step's start is recomputed."""
        changed = bool(prepare(t, y)) if prepare is not None else False
        y = np.ascontiguousarray(y, dtype=float)
        self.bind(system, len(y))
        S, W = self.S, self.W
        status = integrate.STEP_OK
        if not W.started or W.t != t:
            status = integrate.start(S, W, t, y, min(h, self.t_end - t))
        elif changed or not np.array_equal(W.state[1], y):
            status = integrate.resume(S, W, y)
        if status == integrate.STEP_OK:
            status = integrate.step(S, W)
        if status == integrate.TOO_SMALL:
            raise SimulationError(f"{self.method} failed: {integrate.TOO_SMALL_MESSAGE}", t=t)
        if status != integrate.STEP_OK:
            raise SimulationError(f"{self.method} failed: the right-hand side could not be evaluated", t=t)
        t_new, y_new, _, h_next = W.state
        return float(t_new), y_new, float(h_next)

    def dense_output(self) -> Any:
        """The interpolant of the last step (scipy's dense output): y(t) for t in that step."""
        return integrate.dense(self.S, self.W)


def _continue_from(solver: Any, y: np.ndarray, fun: Any) -> bool:
    """Let a running scipy solver continue from a corrected state y at its current time.

    Radau (and scipy's Runge-Kutta pairs) keep the derivative at the current point (recomputed here); BDF keeps
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
    """One scipy OdeSolver (Radau, BDF: the implicit methods stay scipy's) kept across steps. When
    the caller changed the state between steps (projection), the solver continues from the
    corrected state (see _continue_from)."""

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
    """(FixedStep or None, EmbeddedPair / AdaptiveStepper or None) of an integrator name: what the
    methods' Python path steps with (the compiled integrators; scipy's Radau and BDF)."""
    max_step = max_step if max_step else np.inf
    if integrator in COMPILED and integrator not in FIXED:
        return None, EmbeddedPair(integrator, rtol, atol, t_end, max_step)
    if integrator in SCIPY_METHODS:
        return None, AdaptiveStepper(integrator, rtol, atol, t_end, max_step)
    return FixedStep(compiled_code(integrator)), None
