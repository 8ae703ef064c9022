"""``--param KEY=V1,V2,...`` of ``mbsim sweep``: parsing, the list of cases, file names.

A parameter is a dotted scene path (as ``--set`` takes it) and its values: a comma-separated
list (each value read as YAML, commas inside brackets kept: ``gravity=[0,0,-9.8],[0,0,-1.6]``)
or a range ``linspace(a, b, n)``, ``logspace(a, b, n)`` (as numpy: ``10**a`` to ``10**b``) or
``geomspace(a, b, n)`` (the end values themselves, geometrically spaced). ``a`` and ``b`` may
be constant expressions (``pi/4``). The cases are the cartesian product of the values, the last
parameter varying fastest, or with ``zip`` the values taken element by element.

File names come from the parameter values only (never from the case's position), so that a
sweep extended by more values finds the result files of the cases it already ran.

The cases are never all built at once: :func:`count_cases` checks their number, :func:`case_at`
gives the assignments of case k (mixed-radix digits of k for the product) and
:func:`iter_cases` walks them in order, so that a sweep of 100,000 cases holds only its file
names and the values of each parameter.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml

from mbsim.compare import split_top_level
from mbsim.errors import UsageError
from mbsim.scene.expr import ExpressionError, compile_expression

MAX_CASES = 100_000  # a guard against a typo such as linspace(0, 1, 1e6)
MAX_NESTING = 50  # brackets nested in one value (YAML's parser recurses on them)
_RANGE = re.compile(r"(?P<kind>linspace|logspace|geomspace)\s*\((?P<args>.*)\)\s*\Z", re.S)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[-?\d+\])*(\.([A-Za-z0-9_]+)(\[-?\d+\])*)*\Z")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# names Windows reserves in every directory, with any extension
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}
STEM_LIMIT = 120


@dataclass(frozen=True)
class SweepParam:
    """One ``--param``.

    Attributes:
        key: the dotted scene path (``contacts[0].stiffness``).
        texts: each value as the YAML text handed to ``--set`` (generated numbers round-trip exactly).
        values: each value as read (a float, int, bool, text or list), for the table.
        source: the ``--param`` text as given, for messages.
    """

    key: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]
    source: str
    is_range: bool = False

    @property
    def where(self) -> str:
        return _where(self.source)


def _where(source: str, limit: int = 80) -> str:
    """``--param 'KEY=...'`` for messages, cut after ``limit`` characters (a list of 60,000
    values is not repeated in every message)."""
    if len(source) > limit:
        source = f"{source[:limit]}... ({len(source)} characters)"
    return f"--param '{source}'"


def _yaml_float(value: float) -> str:
    """A float as YAML reads it back exactly: ``1e-05`` -> ``1.0e-05`` (YAML 1.1 wants the dot)."""
    text = repr(float(value))
    mantissa, e, exponent = text.partition("e")
    if e:
        if "." not in mantissa:
            mantissa += ".0"
        if exponent[0] not in "+-":
            exponent = "+" + exponent
        return f"{mantissa}e{exponent}"
    return text


def _range_values(kind: str, args: str, where: str) -> list[float]:
    parts = [p.strip() for p in split_top_level(args)]
    if len(parts) != 3 or not all(parts):
        raise UsageError(f"expected {kind}(a, b, n) with three arguments, got {kind}({args})", file=where)
    try:
        a, b = (float(compile_expression(p)()) for p in parts[:2])
    except ExpressionError as exc:
        raise UsageError(f"{kind}: {exc}", file=where) from None
    try:
        n_value = float(parts[2])  # '1e6' too; a huge literal is inf, not an OverflowError
    except ValueError:
        n_value = math.nan
    if not (math.isfinite(n_value) and n_value == int(n_value) and n_value >= 1):
        shown = parts[2] if len(parts[2]) <= 40 else f"{parts[2][:40]}... ({len(parts[2])} characters)"
        raise UsageError(f"{kind}: expected a whole number of values n >= 1, got '{shown}'", file=where)
    n = int(n_value)
    if n > MAX_CASES:
        raise UsageError(f"{kind}: {n} values is more than a sweep takes ({MAX_CASES})", file=where)
    if not (math.isfinite(a) and math.isfinite(b)):
        raise UsageError(f"{kind}: expected finite end values, got {a:g} and {b:g}", file=where)
    if kind == "linspace":
        values = np.linspace(a, b, n)
    elif kind == "logspace":
        if max(abs(a), abs(b)) > 300:
            raise UsageError(
                f"logspace(a, b, n) takes exponents (as numpy: logspace(5, 7, 3) is 1e5, 1e6, 1e7), got a = {a:g}, "
                f"b = {b:g}",
                file=where,
                hint="for the end values themselves use geomspace(a, b, n)",
            )
        values = np.logspace(a, b, n)
    else:
        if a == 0 or b == 0 or (a < 0) != (b < 0):
            raise UsageError(f"geomspace: expected non-zero end values of one sign, got {a:g} and {b:g}", file=where)
        values = np.geomspace(a, b, n)
    return [float(v) for v in values]


def _nesting(text: str) -> int:
    """How deep brackets nest in ``text`` (outside quotes)."""
    depth = deepest = 0
    quote = ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def _read_value(text: str, where: str) -> Any:
    """A value as YAML reads it; a number YAML 1.1 reads as text (``1e6``) becomes the number."""
    if ("[" in text or "{" in text) and _nesting(text) > MAX_NESTING:
        raise UsageError(f"a value nested more than {MAX_NESTING} levels deep", file=where)
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        shown = text if len(text) <= 60 else f"{text[:60]}... ({len(text)} characters)"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"cannot read the value '{shown}': {reason}", file=where) from None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return number if math.isfinite(number) else value
    return value


def parse_param(text: str) -> SweepParam:
    """Parse ``KEY=V1,V2,...`` or ``KEY=linspace(a,b,n)`` (``logspace``, ``geomspace``).

    Raises:
        UsageError: no ``=``, a malformed key, an empty value, a bad range (exit 2); the message
            names the ``--param``.
    """
    source = text.strip()
    where = _where(source)
    key, sep, rest = source.partition("=")
    key, rest = key.strip(), rest.strip()
    if not sep or not key:
        raise UsageError("expected KEY=V1,V2,... (or KEY=linspace(a,b,n)), e.g. time.step=1e-3,5e-4", file=where)
    if not _KEY.match(key):
        shown = key if len(key) <= 60 else f"{key[:60]}... ({len(key)} characters)"
        raise UsageError(f"expected a dotted scene path such as contacts[0].stiffness, got '{shown}'", file=where)
    if not rest:
        raise UsageError(f"no values for '{key}'", file=where)
    match = _RANGE.match(rest)
    if match:
        floats = _range_values(match["kind"], match["args"], where)
        return SweepParam(key, tuple(_yaml_float(v) for v in floats), tuple(floats), source, is_range=True)
    texts = [p.strip() for p in split_top_level(rest)]
    if not all(texts):
        raise UsageError("an empty value in the list (write YAML null as null)", file=where)
    if len(texts) > MAX_CASES:
        raise UsageError(f"{len(texts)} values is more than a sweep takes ({MAX_CASES})", file=where)
    return SweepParam(key, tuple(texts), tuple(_read_value(t, where) for t in texts), source)


def parse_params(texts: list[str] | tuple[str, ...]) -> list[SweepParam]:
    """Every ``--param``; a key given twice is an error."""
    params = [parse_param(t) for t in texts]
    if not params:
        raise UsageError("expected at least one --param KEY=V1,V2,...", file="--param")
    seen: dict[str, SweepParam] = {}
    for p in params:
        norm = _normal_key(p.key)
        if norm in seen:
            raise UsageError(f"'{p.key}' is swept twice (also {seen[norm].where})", file=p.where)
        seen[norm] = p
    return params


Assignment = tuple[str, str, Any]  # (key, YAML text, value)


def count_cases(params: list[SweepParam], zipped: bool = False) -> int:
    """How many cases the parameters make (computed, not built).

    Raises:
        UsageError: ``zipped`` with lists of different lengths, or more than MAX_CASES cases.
    """
    if zipped:
        lengths = {len(p.texts) for p in params}
        if len(lengths) > 1:
            counts = ", ".join(f"{p.key}: {len(p.texts)}" for p in params)
            raise UsageError(f"with --zip every --param needs the same number of values, got {counts}", file="--zip")
        return lengths.pop() if lengths else 0
    total = math.prod(len(p.texts) for p in params)
    if total > MAX_CASES:
        raise UsageError(f"{total} cases is more than a sweep takes ({MAX_CASES})", file="--param")
    return total


def value_indices(params: list[SweepParam], zipped: bool, index: int) -> tuple[int, ...]:
    """Which value of each parameter case ``index`` (0-based) takes: the digits of ``index`` in
    the mixed radix of the value counts, the last parameter fastest; with ``zipped`` all ``index``."""
    if zipped:
        return (index,) * len(params)
    digits = []
    for p in reversed(params):
        index, k = divmod(index, len(p.texts))
        digits.append(k)
    return tuple(reversed(digits))


def case_index(params: list[SweepParam], zipped: bool, digits: tuple[int, ...]) -> int:
    """The inverse of :func:`value_indices` (for ``zipped``, all digits are the same)."""
    if zipped:
        return digits[0] if digits else 0
    index = 0
    for p, k in zip(params, digits, strict=True):
        index = index * len(p.texts) + k
    return index


def case_at(params: list[SweepParam], zipped: bool, index: int) -> tuple[Assignment, ...]:
    """The (key, text, value) of every parameter in case ``index`` (0-based)."""
    return tuple(
        (p.key, p.texts[k], p.values[k]) for p, k in zip(params, value_indices(params, zipped, index), strict=True)
    )


def iter_cases(params: list[SweepParam], zipped: bool = False) -> Iterator[tuple[Assignment, ...]]:
    """The cases in sweep order, one at a time (checked by :func:`count_cases` first)."""
    count_cases(params, zipped)
    columns = [[(p.key, t, v) for t, v in zip(p.texts, p.values, strict=True)] for p in params]
    if zipped:
        return (tuple(row) for row in zip(*columns, strict=True))
    return itertools.product(*columns)


def expand(params: list[SweepParam], zipped: bool = False) -> list[tuple[Assignment, ...]]:
    """Every case as a list: one tuple of (key, text, value) per case, in the order of the sweep
    (small sweeps and tests; :func:`iter_cases` and :func:`case_at` do not build the list).

    Raises:
        UsageError: ``zipped`` with lists of different lengths, or more than MAX_CASES cases.
    """
    return list(iter_cases(params, zipped))


def _normal_key(key: str) -> str:
    """``contacts[0].stiffness`` -> ``contacts.0.stiffness``."""
    return re.sub(r"\[(-?\d+)\]", r".\1", key)


def _short_keys(keys: list[str]) -> dict[str, str]:
    """The last name of each path (``stiffness``), or the whole path where two would share it."""
    last = {k: next((p for p in reversed(_normal_key(k).split(".")) if not re.fullmatch(r"-?\d+", p)), k) for k in keys}
    counts: dict[str, int] = {}
    for name in last.values():
        counts[name.lower()] = counts.get(name.lower(), 0) + 1
    return {k: (last[k] if counts[last[k].lower()] == 1 else _normal_key(k)) for k in keys}


def value_label(text: str, value: Any) -> str:
    """A short label of a value for a file name: numbers to 6 significant digits without exponent
    padding (``1e+06`` -> ``1e6``, ``1e-05`` -> ``1e-5``), anything else as written."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        label = format(value, ".6g")
        return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", label)
    return text


def case_stems(cases: Iterable[tuple[Assignment, ...]]) -> list[str]:
    """A file-name stem per case, safe on every file system: ``stiffness-1e6_step-1e-5``.

    Letters, digits and ``. _ -`` only; no leading ``-`` or ``.``; no Windows device name; at
    most 120 characters (longer ones are cut and end in a hash of the whole assignment). Stems
    equal without regard to case (two values equal to six digits) get ``-case<N>`` (1-based),
    and ``-case<N>-2``, ... should that be another case's own name.
    ``cases`` may be an iterator (:func:`iter_cases`): only the stems are kept.
    """
    shorts: dict[str, str] | None = None
    pieces: dict[tuple[str, str], str] = {}  # (key, text) -> its piece, made once per value
    stems: list[str] = []
    for case in cases:
        if shorts is None:
            shorts = _short_keys([key for key, _, _ in case])
        parts = []
        for key, text, value in case:
            piece = pieces.get((key, text))
            if piece is None:  # each piece is made safe alone: '_' joins them and is itself safe
                piece = pieces[(key, text)] = _UNSAFE.sub("-", f"{shorts[key]}-{value_label(text, value)}")
            parts.append(piece)
        stem = "_".join(parts).strip("-. ") or "case"
        if len(stem) > STEM_LIMIT:
            digest = hashlib.sha1(repr([(k, t) for k, t, _ in case]).encode()).hexdigest()[:8]
            stem = f"{stem[: STEM_LIMIT - 9].rstrip('-._')}-{digest}"
        if stem.split(".")[0].upper() in _RESERVED:
            stem = f"case-{stem}"
        stems.append(stem)
    counts = Counter(s.lower() for s in stems)
    if all(n == 1 for n in counts.values()):
        return stems
    # a suffixed name must not be one another case has by itself (values a, A and a-case1 of
    # one key make name-a twice and name-a-case1 once): two cases would write one file
    taken = {s.lower() for s in stems if counts[s.lower()] == 1}
    out = []
    for i, s in enumerate(stems):
        if counts[s.lower()] > 1:
            name, k = f"{s}-case{i + 1}", 2
            while name.lower() in taken:
                name, k = f"{s}-case{i + 1}-{k}", k + 1
            taken.add(name.lower())
            s = name
        out.append(s)
    return out


__all__ = [
    "MAX_CASES",
    "SweepParam",
    "case_at",
    "case_index",
    "case_stems",
    "count_cases",
    "expand",
    "iter_cases",
    "parse_param",
    "parse_params",
    "value_indices",
    "value_label",
]
