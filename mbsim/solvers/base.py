"""What every solver method shares: StepInfo, Evaluation, option parsing and the protocol.

A solver method is one module in this package with ``NAME``, ``OPTION_FIELDS`` (a scene field
table: defaults, checks and docs in one place), ``CAPABILITIES`` and a ``Solver`` class with
``step(state, h) -> (state, StepInfo, h_next)`` and ``evaluate(state) -> Evaluation``.
Solvers never print and never write files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mbsim.model.model import Model, State
from mbsim.scene.fields import Context, Field, read_mapping
from mbsim.scene.load import KeyPath


@dataclass
class StepInfo:
    """What a step reports: iterations (Newton/projection/multiplier/LCP), and how it went."""

    iterations: int = 0
    h: float = 0.0
    position_violation: float | None = None  # max |Phi| at the new state, when the solver knows it


@dataclass
class Evaluation:
    """Quantities at one recorded state.

    Attributes:
        multipliers: (nc,) Lagrange multipliers lambda of M v_dot = Q - J^T lambda.
        phi: (nc,) constraint residual; phi_dot: (nc,) J v + Phi_t.
        jacobian: J at the state (dense or sparse).
        kinetic, potential: energies, J.
    """

    multipliers: np.ndarray
    phi: np.ndarray
    phi_dot: np.ndarray
    jacobian: Any
    kinetic: float
    potential: float


class Solver(Protocol):
    model: Model

    def step(self, state: State, h: float) -> tuple[State, StepInfo, float]:
        """Advance by (at most, for adaptive integrators) h; returns the new state, info, next h."""

    def evaluate(self, state: State) -> Evaluation:
        """Multipliers, residuals and energies at a state (for recording)."""


def read_options(ctx: Context, path: KeyPath, raw: dict[str, Any], table: dict[str, Field]) -> dict[str, Any]:
    """Check method options against the method's table (unknown keys get "did you mean")."""
    return read_mapping(ctx, path, raw, table)
