"""``--assert`` conditions over the run summary (``mbsim run`` and ``mbsim sweep``).

An assertion is an expression of the scene's safe expression language (:mod:`mbsim.scene.expr`:
parsed with ``ast`` against a whitelist, never ``eval``) whose names are the numeric fields of
the run summary (:data:`SUMMARY_NAMES`), e.g. ``max_position_violation < 1e-10`` or
``energy_drift < 1e-4 and steps >= 1000``. It must be a comparison or a combination of
comparisons with ``and`` / ``or`` / ``not``, so that a bare number is not mistaken for a test.
It holds when its value is true; a NaN compares false, so a run without a number fails the
test that needs it.

This module parses and evaluates; it neither prints nor sets exit codes (``mbsim.cli`` does,
with exit 4 when one does not hold).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mbsim.errors import UsageError, did_you_mean
from mbsim.scene.expr import Expression, ExpressionError, compile_expression

# the numeric fields of mbsim.simulate.RunSummary that an assertion may name
SUMMARY_NAMES: dict[str, str] = {
    "steps": "completed steps",
    "recorded": "recorded rows in the result file",
    "t_end": "time reached, s",
    "wall_time_s": "wall time of the step loop, s",
    "us_per_step": "wall time per step, µs",
    "max_position_violation": "max |Phi(q)| over the run",
    "max_velocity_violation": "max |Phi_q v| over the run",
    "max_quaternion_norm_error": "max | |quat| - 1 | over the run (3D)",
    "energy_drift": "max relative energy error over the run",
}

_TESTS = (ast.Compare, ast.BoolOp)
# the summaries of a scene's outputs (CONTRACT §8): max_NAME, min_NAME, final_NAME
OUTPUT_SUMMARIES = ("max_", "min_", "final_")


class _Names:
    """What an assertion may name: SUMMARY_NAMES and the outputs' summaries (any name with an
    output prefix; a run whose scene has no such output gives it no value, so it fails)."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name in SUMMARY_NAMES or any(name.startswith(p) and len(name) > len(p) for p in OUTPUT_SUMMARIES)
        )

    def __iter__(self):
        return iter(SUMMARY_NAMES)


ASSERTION_NAMES = _Names()


@dataclass(frozen=True)
class Assertion:
    """A checked ``--assert`` expression.

    Attributes:
        text: the expression as given (stripped).
        expression: the compiled expression over :data:`SUMMARY_NAMES`.
    """

    text: str
    expression: Expression

    @property
    def names(self) -> list[str]:
        """The summary names it uses, in the order of :data:`SUMMARY_NAMES`."""
        own = [n for n in SUMMARY_NAMES if n in self.expression.variables]
        return own + sorted(n for n in self.expression.variables if n not in SUMMARY_NAMES)

    def evaluate(self, values: Mapping[str, Any]) -> AssertionOutcome:
        """The outcome on a summary's values (missing or non-numeric values count as NaN)."""
        env = {n: _number(values.get(n)) for n in self.names}
        passed = bool(self.expression(env))
        return AssertionOutcome(self.text, passed, {n: (v if math.isfinite(v) else None) for n, v in env.items()})


@dataclass
class AssertionOutcome:
    """One assertion evaluated on one run: its text, whether it held, the values it used.

    ``values`` maps each name of the expression to its value (None for NaN or infinity, so that
    the JSON stays strict).
    """

    expression: str
    passed: bool
    values: dict[str, float | None] = field(default_factory=dict)

    def describe(self) -> str:
        """``energy_drift < 1e-4 (energy_drift = 0.0032)``: the expression and the values it used."""
        shown = ", ".join(f"{n} = {_format(v)}" for n, v in self.values.items())
        return self.expression + (f" ({shown})" if shown else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _format(value: float | None) -> str:
    return "nan" if value is None else format(value, ".6g")


def parse_assertion(text: str) -> Assertion:
    """Check one ``--assert`` expression.

    Raises:
        UsageError: a syntax error, a name that is not in the summary (with "did you mean"), or an
            expression that is not a test (exit 2); the message names the assertion.
    """
    source = str(text).strip()
    where = f"--assert '{source}'"
    try:
        expression = compile_expression(source, variables=ASSERTION_NAMES)
    except ExpressionError as exc:
        hint = ""
        try:
            unknown = [
                n.id
                for n in ast.walk(ast.parse(source, mode="eval"))
                if isinstance(n, ast.Name) and n.id not in ASSERTION_NAMES
            ]
        except SyntaxError:
            unknown = []
        if unknown:
            hint = did_you_mean(unknown[0], SUMMARY_NAMES)
        raise UsageError(str(exc), file=where, hint=hint) from None
    top = ast.parse(source, mode="eval").body
    is_not = isinstance(top, ast.UnaryOp) and isinstance(top.op, ast.Not)
    if not (isinstance(top, _TESTS) or is_not):
        raise UsageError(
            f"expected a comparison such as 'energy_drift < 1e-4' (combine them with and, or, not), got '{source}'",
            file=where,
        )
    return Assertion(source, expression)


def check_output_names(assertions: Iterable[Assertion], outputs: Iterable[str]) -> None:
    """Every max_/min_/final_ name of the assertions must be a summary of one of the scene's
    ``outputs`` (CONTRACT §8).

    Raises:
        UsageError: (exit 2) naming the assertion, with "did you mean" among the names it may use.
    """
    known = {f"{prefix}{name}" for prefix in OUTPUT_SUMMARIES for name in outputs}
    for assertion in assertions:
        for name in assertion.names:
            if name not in SUMMARY_NAMES and name not in known:
                listing = ", ".join(sorted(known)[:12]) or "none: the scene has no outputs"
                raise UsageError(
                    f"'{name}' is not a summary of the scene's outputs (their summaries: {listing})",
                    file=f"--assert '{assertion.text}'",
                    hint=did_you_mean(name, [*SUMMARY_NAMES, *known]),
                )


def parse_assertions(texts: Iterable[str]) -> tuple[Assertion, ...]:
    """Check every ``--assert`` expression (see :func:`parse_assertion`)."""
    return tuple(parse_assertion(t) for t in texts)


def evaluate_all(assertions: Iterable[Assertion], summary: Mapping[str, Any]) -> list[AssertionOutcome]:
    """Every assertion on one summary (a mapping such as ``RunSummary.to_dict()``)."""
    return [a.evaluate(summary) for a in assertions]


__all__ = [
    "SUMMARY_NAMES",
    "check_output_names",
    "Assertion",
    "AssertionOutcome",
    "evaluate_all",
    "parse_assertion",
    "parse_assertions",
]
