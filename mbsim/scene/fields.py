"""Declarative field tables and their checkers.

A table is a ``dict[str, Field]``; :func:`read_mapping` checks a mapping of the scene
against it (unknown keys with "did you mean", required keys, types, shapes, ranges) and
returns the checked values. The same tables generate the scene reference in docs/, so the
documentation cannot drift from what the loader accepts.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.errors import shorten as _cut
from mbsim.names import MAX_NAME_LENGTH, check_name
from mbsim.scene.expr import Expression, ExpressionError, _digits, compile_expression
from mbsim.scene.load import KeyPath, RawScene

REQUIRED = object()  # marker default: the key must be given
MAX_TEXT = 4096  # characters of a name, method or file name (free text such as description may be longer)
# iterations per step or per solve that a solver option may ask for: a solve that 10^6 iterations
# do not settle never will, and a step must end for a signal to be honoured (CONTRACT §4)
MAX_ITERATIONS = 1_000_000

# the state of the body a force or torque acts on, by dimension (CONTRACT §1)
STATE_3D = frozenset({"t", "x", "y", "z", "vx", "vy", "vz", "wx", "wy", "wz"})
STATE_2D = frozenset({"t", "x", "y", "angle", "vx", "vy", "w"})


@dataclass
class Context:
    """What a checker needs: the raw scene (for error marks), parameters and dimension."""

    scene: RawScene
    parameters: dict[str, float] = field(default_factory=dict)
    dimension: int = 3
    # the model's signals (mbsim.model.signals.Signals) once its bodies and joints are known:
    # what Expr(signals=True) may read besides its own variables
    signals: Any = None

    def error(self, path: KeyPath, reason: str, hint: str = ""):
        return self.scene.error(path, reason, hint)


def kind_of(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a whole number of {_digits(value)} digits"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text '{_cut(value)}'"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class Reader(ABC):
    """Checks one value; ``describe`` says what it expects (for messages and docs)."""

    @abstractmethod
    def read(self, ctx: Context, path: KeyPath, value: Any) -> Any:
        """Return the checked value or raise a SceneError located at ``path``."""

    def describe(self) -> str:
        return "value"


@dataclass
class Number(Reader):
    """A number, or an expression of the parameters evaluated once at load; never inf or nan."""

    minimum: float | None = None
    positive: bool = False
    maximum: float | None = None
    integer: bool = False

    def read(self, ctx: Context, path: KeyPath, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ctx.error(path, f"expected {self.describe()}, got {kind_of(value)}")
        if isinstance(value, str):
            try:
                expr = compile_expression(value, ctx.parameters)
            except ExpressionError as exc:
                raise ctx.error(path, str(exc)) from None
            if not expr.is_constant:
                names = ", ".join(sorted(expr.variables))
                raise ctx.error(path, f"expected a constant expression, got '{value}' which uses {names}")
            number = float(expr())
            if not math.isfinite(number):
                raise ctx.error(path, f"expected a finite number, got {number} (the value of '{_cut(expr.text)}')")
        else:
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
        if not math.isfinite(number):
            raise ctx.error(path, f"expected a finite number, got {kind_of(value)}")
        if self.integer and number != int(number):
            raise ctx.error(path, f"expected a whole number, got {number}")
        if self.positive and number <= 0:
            raise ctx.error(path, f"expected a positive number, got {number:g}")
        if self.minimum is not None and number < self.minimum:
            raise ctx.error(path, f"expected a number >= {self.minimum:g}, got {number:g}")
        if self.maximum is not None and number > self.maximum:
            raise ctx.error(path, f"expected a number <= {self.maximum:g}, got {number:g}")
        return int(number) if self.integer else number

    def describe(self) -> str:
        text = "whole number" if self.integer else "number"
        if self.positive:
            text = "positive " + text
        if self.minimum is not None and self.minimum == self.maximum:
            text += f" equal to {self.minimum:g}"
        elif self.minimum is not None and self.maximum is not None:
            text += f" from {self.minimum:g} to {self.maximum:g}"
        elif self.minimum is not None:
            text += f" >= {self.minimum:g}"
        elif self.maximum is not None:
            text += f" <= {self.maximum:g}"
        return "a " + text


@dataclass
class Vector(Reader):
    """A list of numbers; ``length`` is a number or "dim" (2 or 3 by the scene's dimension)."""

    length: int | str = "dim"
    nonzero: bool = False

    def size(self, ctx: Context) -> int:
        if self.length == "dim":
            return ctx.dimension
        return int(self.length)

    def read(self, ctx: Context, path: KeyPath, value: Any) -> np.ndarray:
        n = self.size(ctx)
        if not isinstance(value, list) or len(value) != n:
            raise ctx.error(path, f"expected a list of {n} numbers, got {kind_of(value)}")
        out = np.array([Number().read(ctx, (*path, i), v) for i, v in enumerate(value)])
        if self.nonzero and np.max(np.abs(out)) < 1e-12 and np.linalg.norm(out) < 1e-12:  # no overflow: max first
            raise ctx.error(path, "expected a non-zero vector, got a zero vector")
        return out

    def describe(self) -> str:
        n = "2 or 3 (by dimension)" if self.length == "dim" else str(self.length)
        return f"a list of {n} numbers" + (", not zero" if self.nonzero else "")


@dataclass
class Text(Reader):
    """A non-empty text of at most ``MAX_TEXT`` characters (names, methods, file names)."""

    def read(self, ctx: Context, path: KeyPath, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ctx.error(path, f"expected a non-empty text, got {kind_of(value)}")
        if len(value) > MAX_TEXT:
            raise ctx.error(path, f"expected a text of at most {MAX_TEXT} characters, got {kind_of(value)}")
        return value

    def describe(self) -> str:
        return "text"


@dataclass
class Name(Reader):
    """A name by the rule of mbsim.names (any text of 1 to 200 characters without control
    characters); ``reserved``: names mbsim itself writes at that place of the result file."""

    reserved: tuple[str, ...] = ()

    def read(self, ctx: Context, path: KeyPath, value: Any) -> str:
        return check_name(value, path, ctx, self.reserved)

    def describe(self) -> str:
        text = f"a name (1 to {MAX_NAME_LENGTH} characters, no control characters)"
        return text + (f", not {', '.join(sorted(self.reserved))}" if self.reserved else "")


@dataclass
class Choice(Reader):
    options: tuple[str, ...] = ()

    def read(self, ctx: Context, path: KeyPath, value: Any) -> str:
        if value not in self.options:
            raise ctx.error(
                path,
                f"expected one of {', '.join(map(str, self.options))}, got {kind_of(value)}",
                did_you_mean(str(value), self.options),
            )
        return value

    def describe(self) -> str:
        return "one of " + ", ".join(f"`{o}`" for o in self.options)


@dataclass
class Boolean(Reader):
    def read(self, ctx: Context, path: KeyPath, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ctx.error(path, f"expected true or false, got {kind_of(value)}")
        return value

    def describe(self) -> str:
        return "true or false"


@dataclass
class Expr(Reader):
    """An expression kept symbolic: it may use ``t`` and the names in ``variables``."""

    variables: frozenset[str] = frozenset({"t"})
    signals: bool = False  # also the model's signals (CONTRACT §8: q.JOINT, BODY.x, distance(...))

    def names(self, ctx: Context):
        """What the expression may read at this place of this scene."""
        if self.signals and ctx.signals is not None:
            return ctx.signals.where(self.variables, tuple(ctx.signals.actuators))
        return self.variables

    def read(self, ctx: Context, path: KeyPath, value: Any) -> Expression:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ctx.error(path, f"expected a number or an expression, got {kind_of(value)}")
        try:
            expr = compile_expression(value, ctx.parameters, self.names(ctx))
        except ExpressionError as exc:
            raise ctx.error(path, str(exc)) from None
        if expr.is_constant and not math.isfinite(float(expr())):
            raise ctx.error(path, f"expected a finite value, got {float(expr())} (the value of '{_cut(expr.text)}')")
        return expr

    def describe(self) -> str:
        return (
            "a number or an expression of "
            + ", ".join(sorted(self.variables))
            + (" and the signals" if self.signals else "")
        )


@dataclass
class ExprVector(Reader):
    """A list of expressions (a force or torque value)."""

    length: int | str = "dim"
    variables: frozenset[str] | None = None  # None: t and the body state of the dimension
    signals: bool = True  # also the model's signals (CONTRACT §8)

    def read(self, ctx: Context, path: KeyPath, value: Any) -> list[Expression]:
        n = ctx.dimension if self.length == "dim" else (3 if ctx.dimension == 3 else 1)
        names = self.variables
        if names is None:
            names = STATE_3D if ctx.dimension == 3 else STATE_2D
        if self.length == "rot" and ctx.dimension == 2 and not isinstance(value, list):
            value = [value]
        if not isinstance(value, list) or len(value) != n:
            want = f"a list of {n} numbers or expressions" if n > 1 else "one number or expression"
            raise ctx.error(path, f"expected {want}, got {kind_of(value)}")
        reader = Expr(names, self.signals)
        return [reader.read(ctx, (*path, i), v) for i, v in enumerate(value)]

    def describe(self) -> str:
        what = "expressions of t and the body state" if self.variables is None else "expressions"
        what += " and the signals" if self.signals else ""
        if self.length == "rot":
            return f"3 {what} (one when dimension is 2)"
        return f"2 or 3 {what} (by dimension)"


@dataclass
class Sub(Reader):
    """A nested mapping checked against its own table."""

    table: Mapping[str, Field] = field(default_factory=dict)
    name: str = "mapping"

    def read(self, ctx: Context, path: KeyPath, value: Any) -> dict[str, Any]:
        return read_mapping(ctx, path, value, self.table)

    def describe(self) -> str:
        return f"a mapping ({self.name})"


@dataclass
class Raw(Reader):
    """Passed through unchecked here; checked later by the owner (e.g. solver options)."""

    what: str = "mapping"

    def read(self, ctx: Context, path: KeyPath, value: Any) -> Any:
        return value

    def describe(self) -> str:
        return self.what


@dataclass
class Custom(Reader):
    """A reader given by a function ``(ctx, path, value) -> checked value``."""

    function: Callable[[Context, KeyPath, Any], Any] = lambda ctx, path, value: value
    what: str = "value"

    def read(self, ctx: Context, path: KeyPath, value: Any) -> Any:
        return self.function(ctx, path, value)

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class Field:
    """One key of a scene mapping: its reader, default and the sentence for the docs."""

    reader: Reader
    doc: str
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def read_mapping(ctx: Context, path: KeyPath, value: Any, table: Mapping[str, Field]) -> dict[str, Any]:
    """Check ``value`` against ``table``; returns every key of the table (defaults filled in)."""
    if not isinstance(value, dict):
        raise ctx.error(path, f"expected a mapping with keys {', '.join(table)}, got {kind_of(value)}")
    for key in value:
        if key not in table:
            raise ctx.error(
                (*path, key),
                f"unknown key '{_cut(key)}'; expected one of {', '.join(table)}",
                did_you_mean(key, table),
            )
    out: dict[str, Any] = {}
    for key, spec in table.items():
        if key in value and value[key] is not None:
            out[key] = spec.reader.read(ctx, (*path, key), value[key])
        elif spec.required:
            raise ctx.error((*path, key), f"missing required key '{key}' ({spec.reader.describe()})")
        else:
            out[key] = spec.default
    return out


def table_markdown(table: Mapping[str, Field]) -> str:
    """A markdown table of the fields (used to generate docs/scene-reference.md)."""
    rows = ["| key | expects | default | meaning |", "| --- | --- | --- | --- |"]
    for key, spec in table.items():
        if spec.required:
            default = "**required**"
        elif spec.default is None:
            default = "—"
        elif spec.default == "":
            default = '`""`'
        else:
            default = f"`{spec.default}`"
        cells = (spec.reader.describe(), default, spec.doc)
        cells = tuple(c.replace("|", "\\|") for c in cells)  # a pipe would end the table cell
        rows.append(f"| `{key}` | {cells[0]} | {cells[1]} | {cells[2]} |")
    return "\n".join(rows)
