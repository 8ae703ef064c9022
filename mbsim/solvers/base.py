"""What every solver method shares: StepInfo, Evaluation, option parsing and the protocol.

A solver method is one module in this package with ``NAME``, ``OPTION_FIELDS`` (a scene field
table: defaults, checks and docs in one place), ``CAPABILITIES`` and a ``Solver`` class with
``step(state, h) -> (state, StepInfo, h_next)`` and ``evaluate(state) -> Evaluation``.
Solvers never print and never write files.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.scene.fields import Context, Field, read_mapping
from mbsim.scene.load import KeyPath
from mbsim.scene.spec import SOLVER_FIELDS


class Solver(Protocol):
    """Everything mbsim.simulate asks of a method (SolverBase gives the defaults)."""

    model: Model
    integrator_label: str  # the integrator as the result file names it
    block_stepping: bool  # whether advance() runs blocks of fixed steps in compiled code (OdeSolver)
    adaptive: bool  # whether step() chooses its own step size (keeps its proposal h_next)
    extra_diagnostics: tuple[str, ...]  # per-step values under /diagnostics/solver/ (StepInfo.extra)

    def coordinate_names(self) -> tuple[list[str], list[str]]:
        """Names of the columns of /q and /v: the method's own coordinates."""

    def initial_state(self) -> State:
        """The start state in the method's own coordinates."""

    def body_coordinates(self, state: State) -> tuple[np.ndarray, np.ndarray]:
        """The model's body coordinates (q, v) of a state in the method's own."""

    def load_compiled(self) -> None:
        """Load the method's compiled code now (a run calls it before its timed loop; ``validate``
        does not, and so does not pay for it)."""

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        """Advance by (at most, for adaptive integrators) h; returns the new state, info, next h."""

    def evaluate(self, state: State) -> Evaluation:
        """Multipliers, residuals and energies at a state (for recording)."""


class SolverBase:
    """The defaults of the Solver protocol: a method in the model's body coordinates, stepped
    one step at a time by ``step``, at the step size it is given, with no diagnostics of its own.
    Subclasses set ``model`` and ``integrator_label``, implement ``step`` and ``evaluate`` (each
    method its own; the architecture test checks every method has the whole protocol) and
    override what differs."""

    model: Model
    integrator_label: str = ""
    block_stepping: bool = False
    adaptive: bool = False
    extra_diagnostics: tuple[str, ...] = ()

    def coordinate_names(self) -> tuple[list[str], list[str]]:
        return self.model.coordinate_names()

    def initial_state(self) -> State:
        return State(0.0, self.model.q0.copy(), self.model.v0.copy(), 0.0)

    def body_coordinates(self, state: State) -> tuple[np.ndarray, np.ndarray]:
        return state.q, state.v

    def load_compiled(self) -> None:
        return None


def read_options(ctx: Context, path: KeyPath, raw: dict[str, Any], table: dict[str, Field]) -> dict[str, Any]:
    """Check method options against the method's table; an unknown key is listed against the
    general solver keys too, so that a typo of ``integrator`` gets its "did you mean"."""
    general = tuple(SOLVER_FIELDS)
    allowed = (*general, *table)
    for key in raw:
        if key not in table:
            raise ctx.error(
                (*path, key), f"unknown key '{key}'; expected one of {', '.join(allowed)}", did_you_mean(key, allowed)
            )
    return read_mapping(ctx, path, raw, table)
