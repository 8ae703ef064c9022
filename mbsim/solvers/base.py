"""What every solver method shares: StepInfo, Evaluation, option parsing and the protocol.

A solver method is one module in this package with ``NAME``, ``OPTION_FIELDS`` (a scene field
table: defaults, checks and docs in one place), ``CAPABILITIES`` and a ``Solver`` class with
``step(state, h) -> (state, StepInfo, h_next)`` and ``evaluate(state) -> Evaluation``.
Solvers never print and never write files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mbsim.diagnostics import row_columns
from mbsim.errors import did_you_mean
from mbsim.model.data import Data
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.scene.fields import Context, Field, read_mapping
from mbsim.scene.load import KeyPath
from mbsim.scene.spec import SOLVER_FIELDS


@dataclass
class Block:
    """What a block of compiled steps and recorded rows (:meth:`Solver.advance`) did.

    Attributes:
        state: the state after the last step taken.
        steps: steps taken (0 when the first one must go through the Python path).
        rows: (n, ncolumns + 1) the rows recorded, columns of the solver's ``row_columns()`` and
            the step number last (a view of the solver's buffer: valid until the next call).
        info: the StepInfo of the last step taken.
        worst_violation: the largest position violation over the steps taken.
        status: "ok"; "violation" (the last step passed the limit, its state is the last row);
            "python" (the next step failed in compiled code and must be taken again by ``step``,
            which raises its error); "record" (the state reached is due a row that the compiled
            code did not record -- a method that records no rows in compiled code, or an
            evaluation that failed there --: the Python path records it, raising any error).
    """

    state: State
    steps: int
    rows: np.ndarray
    info: StepInfo
    worst_violation: float
    status: str


class Solver(Protocol):
    """Everything mbsim.simulate asks of a method (SolverBase gives the defaults)."""

    model: Model
    data: Data  # what this run changes (the model is never written after compile)
    integrator_label: str  # the integrator as the result file names it
    block_stepping: bool  # whether advance() runs blocks of fixed steps in compiled code
    contact_step_blocks: bool  # whether those blocks take time.contact_step's step control themselves
    implicit_contact: str  # why solver.contact_integration implicit is not available ("": it is)
    adaptive: bool  # whether step() chooses its own step size (keeps its proposal h_next)
    extra_diagnostics: tuple[str, ...]  # per-step values under /diagnostics/solver/ (StepInfo.extra)
    notes: tuple[str, ...]  # what the user should know about the set-up (printed by the CLI)

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

    def row_columns(self) -> list[tuple[str, tuple[int, ...]]]:
        """The columns of the rows :meth:`advance` records (mbsim.diagnostics.row_columns)."""

    def advance(
        self, state: State, h: float, done: int, every: int, max_steps: int, t_end: float, max_violation: float
    ) -> Block:
        """When ``block_stepping``: fixed steps of size h in compiled code from step number
        ``done`` (the last one landing on t_end) up to the next recorded row (every ``every``-th
        step and the last), at most max_steps + 1 steps in all, stopping after a step whose
        position violation passes ``max_violation``; the rows it recorded itself."""

    def evaluate(self, state: State) -> Evaluation:
        """Multipliers, residuals and energies at a state (for recording)."""

    @property
    def interpolates(self) -> bool:
        """Whether :meth:`interpolant` gives the last step's dense output (output.interval's rows
        between steps); False: a fixed-step method, whose rows must fall on its steps."""

    def interpolant(self) -> Callable[[float], State]:
        """The state at a time inside the last step taken, from that step's dense output (in the
        method's own coordinates, quaternions rescaled to unit norm); valid until the next step."""

    def event_table(self) -> tuple[np.ndarray, list[str], list[str]] | None:
        """The events so far (times, kinds, contact names; /events of CONTRACT §3), or None for
        a method that does not locate events."""

    def carried(self) -> dict[str, np.ndarray]:
        """The method's state beyond (t, q, v, work) that its next step depends on (timestepping's
        warm-start impulses): what a continued run restores (/restart/carry, mbsim.output.restart);
        copies, kept while the run goes on."""

    def restore(self, carried: dict[str, np.ndarray]) -> None:
        """Take back what :meth:`carried` gave (a run continued from that row)."""

    def state_from_row(self, t: float, q: np.ndarray, v: np.ndarray, work: float) -> State:
        """The state of a recorded row (/q, /v as recorded) to continue from."""


class SolverBase:
    """The defaults of the Solver protocol: a method in the model's body coordinates, stepped
    one step at a time by ``step``, at the step size it is given, with no diagnostics of its own.
    Subclasses set ``model`` and ``integrator_label``, implement ``step`` and ``evaluate`` (each
    method its own; the architecture test checks every method has the whole protocol) and
    override what differs."""

    model: Model
    data: Data
    integrator_label: str = ""
    block_stepping: bool = False
    contact_step_blocks: bool = False
    implicit_contact: str = "the method has no implicit contact step (the ODE methods in body coordinates have)"
    adaptive: bool = False
    extra_diagnostics: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def coordinate_names(self) -> tuple[list[str], list[str]]:
        return self.model.coordinate_names()

    def initial_state(self) -> State:
        return State(0.0, self.model.q0.copy(), self.model.v0.copy(), 0.0)

    def body_coordinates(self, state: State) -> tuple[np.ndarray, np.ndarray]:
        return state.q, state.v

    def load_compiled(self) -> None:
        return None

    def row_columns(self) -> list[tuple[str, tuple[int, ...]]]:
        return row_columns(self.model)

    def advance(
        self, state: State, h: float, done: int, every: int, max_steps: int, t_end: float, max_violation: float
    ) -> Block:
        raise TypeError(f"{type(self).__name__} steps one step at a time (block_stepping is False)")

    def event_table(self) -> tuple[np.ndarray, list[str], list[str]] | None:
        return None

    def carried(self) -> dict[str, np.ndarray]:
        # the joint coordinates' unwrapping references (joint springs' and limits' turns)
        return {f"coordinate_reference/{k}": r.copy() for k, r in enumerate(self.data.coordinate_reference)}

    def restore(self, carried: dict[str, np.ndarray]) -> None:
        for k, reference in enumerate(self.data.coordinate_reference):  # in place: compiled steps view them
            key = f"coordinate_reference/{k}"
            if key in carried:
                reference[...] = carried[key]

    def state_from_row(self, t: float, q: np.ndarray, v: np.ndarray, work: float) -> State:
        return State(t, np.array(q, dtype=float), np.array(v, dtype=float), work)

    @property
    def interpolates(self) -> bool:
        return False

    def interpolant(self) -> Callable[[float], State]:
        raise TypeError(f"{type(self).__name__} has no dense output (interpolates is False)")


def dense_states(
    dense: Callable[[float], np.ndarray], nq: int, nv: int, normalize: Callable[[np.ndarray], np.ndarray]
) -> Callable[[float], State]:
    """A step's dense output y(t), y = (q, v, work), as states. The quaternions of q are rescaled to
    unit norm, as every step's end is (the interpolant's norm differs from 1 by the order of the
    step's local error): a recorded orientation is a rotation, its rotation matrix and an
    exported animation's keyframe are those of that rotation."""

    def at(t: float) -> State:
        y = np.asarray(dense(t), dtype=float)
        return State(t, normalize(y[:nq]), y[nq : nq + nv].copy(), float(y[-1]))

    return at


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
