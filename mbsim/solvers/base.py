"""What every solver method shares: StepInfo, Evaluation, option parsing and the protocol.

A solver method is one module in this package with ``NAME``, ``OPTION_FIELDS`` (a scene field
table: defaults, checks and docs in one place), ``CAPABILITIES`` and a ``Solver`` class with
``step(state, h) -> (state, StepInfo, h_next)`` and ``evaluate(state) -> Evaluation``.
Solvers never print and never write files.
"""

from __future__ import annotations

from typing import Any, Protocol

from mbsim.errors import did_you_mean
from mbsim.model.model import Evaluation, Model, State, StepInfo
from mbsim.scene.fields import Context, Field, read_mapping
from mbsim.scene.load import KeyPath
from mbsim.scene.spec import SOLVER_FIELDS


class Solver(Protocol):
    model: Model
    block_stepping: bool  # whether advance() runs blocks of fixed steps in compiled code (OdeSolver)

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        """Advance by (at most, for adaptive integrators) h; returns the new state, info, next h."""

    def evaluate(self, state: State) -> Evaluation:
        """Multipliers, residuals and energies at a state (for recording)."""


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
