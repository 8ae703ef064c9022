"""A verification problem: a folder with ``problem.yaml``, a scene and its reference tables.

The problems shipped with mbsim live in ``mbsim/verify/problems/`` (package data, so that
``mbsim verify`` runs from an installed mbsim); a user's own problem is a folder in the same
format. ``problem.yaml`` is checked against :data:`PROBLEM_FIELDS` and :data:`CHECK_FIELDS`
(the tables the user guide's problem reference is generated from); every mistake is a
SceneError (exit 2) naming the file, line and key.

A check compares one quantity of the result file with its reference:

- a dataset of the result file (``bodies/B0/position``, ``diagnostics/energy/total``), optionally
  some of its columns, against a reference table (CSV: a header ``t,NAME,...`` then one row per
  time): the error is the largest, over the table's times, of the Euclidean norm of the
  difference over the columns (``error: relative`` divides it by the norm of the reference row);
- a number of the run's summary (``summary.energy_drift``, ``summary.max_position_violation``,
  ...) against zero: the error is the number itself.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import SceneError
from mbsim.scene.fields import Choice, Context, Field, Number, Reader, Text, read_mapping
from mbsim.scene.load import KeyPath, RawScene, load_raw_scene

PROBLEM_FILE = "problem.yaml"
SHIPPED = Path(__file__).resolve().parent / "problems"
MAX_REFERENCE_BYTES = 16 * 1024 * 1024

# the numbers of mbsim.simulate.RunSummary a check may name as summary.NAME
SUMMARY_QUANTITIES = (
    "energy_drift",
    "max_position_violation",
    "max_velocity_violation",
    "max_quaternion_norm_error",
    "t_end",
)


@dataclass
class TextList(Reader):
    """A non-empty list of texts (solver specs, --set overrides)."""

    what: str = "texts"

    def read(self, ctx: Context, path: KeyPath, value: Any) -> list[str]:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise ctx.error(path, f"expected {self.describe()}")
        return [v.strip() for v in value]

    def describe(self) -> str:
        return f"a non-empty list of {self.what}"


@dataclass
class RunList(Reader):
    """A non-empty list of runs: each a solver spec, or {solver: SPEC, set: [KEY=VALUE, ...]} when
    the run needs scene overrides of its own (an adaptive run recording every step). Returns
    [(spec, overrides)]."""

    def read(self, ctx: Context, path: KeyPath, value: Any) -> list[tuple[str, list[str]]]:
        if not isinstance(value, list) or not value:
            raise ctx.error(path, f"expected {self.describe()}")
        out = []
        for i, item in enumerate(value):
            if isinstance(item, str) and item.strip():
                out.append((item.strip(), []))
                continue
            if not isinstance(item, dict):
                raise ctx.error((*path, i), f"expected {self.describe()}")
            run = read_mapping(ctx, (*path, i), item, RUN_FIELDS)
            out.append((run["solver"].strip(), run["set"] or []))
        return out

    def describe(self) -> str:
        return "a non-empty list of solver specs or {solver, set} mappings"


@dataclass
class Section(Reader):
    """A value checked by its own table or by hand after the top level (checks, quick, ...)."""

    what: str = "mapping"

    def read(self, ctx: Context, path: KeyPath, value: Any) -> Any:
        return value

    def describe(self) -> str:
        return self.what


PROBLEM_FIELDS = {
    "id": Field(Text(), "short name shown in the table and given on the command line (A02, bouncing_ball)"),
    "title": Field(Text(), "one line saying what the problem is"),
    "source": Field(Text(), "where the problem comes from, short (shown in the table)"),
    "citation": Field(Text(), "the full citation of the problem and of its reference", ""),
    "reference": Field(
        Text(),
        "what the reference is: published values, a closed form, or an independent formulation (which, and how "
        "its table was made)",
    ),
    "scene": Field(Text(), "the scene file, relative to the problem's folder", "scene.yaml"),
    "methods": Field(
        RunList(),
        "list of solver specs run by default, written as for `compare --solvers` (METHOD or METHOD:key=value,...)",
    ),
    "expected_failures": Field(
        Section("a mapping"),
        "mapping of solver spec -> text its failure message must contain: the method must refuse the problem "
        "(exit 3); verify records that outcome as `expected`, not as a pass",
        None,
    ),
    "checks": Field(
        Section("a list of checks"),
        "list of checks (table below); a row passes when every check is within its tolerance",
    ),
    "quick": Field(Section("a mapping"), "the shortened variant `--quick` runs (table below)", None),
}
CHECK_FIELDS = {
    "quantity": Field(
        Text(),
        "a dataset of the result file (bodies/NAME/position, diagnostics/energy/total, q, ...) compared with "
        "`reference`, or summary.NAME (" + ", ".join(SUMMARY_QUANTITIES) + ") compared with zero",
    ),
    "columns": Field(
        Section("a list of whole numbers"), "list of the dataset's columns to compare (0-based); default all", None
    ),
    "reference": Field(
        Text(), "CSV table relative to the problem's folder: header t,NAME,... then one row per compared time", None
    ),
    "error": Field(
        Choice(("absolute", "relative")),
        "absolute: max over the times of |value - reference| (Euclidean over the columns); relative: each "
        "divided by |reference|",
        "absolute",
    ),
    "match": Field(
        Choice(("exact", "interpolate", "interpolate_result")),
        "exact: compare at the table's times, which must be recorded times (fixed-step integrators); "
        "interpolate: compare at every recorded time within the table's span, the table interpolated by a "
        "cubic spline (adaptive integrators record at their own steps; the table must be fine enough); "
        "interpolate_result: compare at the table's times within the run, the recorded values interpolated "
        "by a cubic spline (a sparse table such as published values at a few times; the run must be "
        "recorded finely enough)",
        "exact",
    ),
    "tolerance": Field(Number(positive=True), "the largest error that passes"),
    "label": Field(Text(), "what the table calls the quantity (default: quantity)", None),
}
RUN_FIELDS = {
    "solver": Field(Text(), "the solver spec (METHOD or METHOD:key=value,...)"),
    "set": Field(TextList("--set overrides"), "scene overrides of this run only (output.every=1)", None),
}
QUICK_FIELDS = {
    "set": Field(
        TextList("--set overrides"),
        "list of --set overrides that shorten the problem (time.end=2); reference rows after "
        "the shortened end are not compared",
        None,
    ),  # fmt: skip
    "methods": Field(RunList(), "list of solver specs of the quick run (default: the problem's methods)", None),
    "note": Field(Text(), "what the quick variant leaves out", ""),
}


@dataclass
class Check:
    quantity: str
    tolerance: float
    error: str = "absolute"
    match: str = "exact"
    columns: list[int] | None = None
    label: str = ""
    times: np.ndarray | None = None  # reference table: times (k,)
    values: np.ndarray | None = None  # and values (k, columns)

    @property
    def summary_field(self) -> str | None:
        return self.quantity.removeprefix("summary.") if self.quantity.startswith("summary.") else None


@dataclass
class Problem:
    id: str
    title: str
    source: str
    citation: str
    reference: str
    folder: Path
    scene: Path
    methods: list[tuple[str, list[str]]]  # (solver spec, scene overrides of that run)
    checks: list[Check]
    expected_failures: dict[str, str] = field(default_factory=dict)
    quick_set: list[str] = field(default_factory=list)
    quick_methods: list[tuple[str, list[str]]] | None = None
    quick_note: str = ""

    def runs(self, quick: bool) -> list[tuple[str, list[str]]]:
        """(solver spec, the run's own scene overrides) of each run."""
        return list(self.quick_methods) if quick and self.quick_methods is not None else list(self.methods)


def _read_reference(ctx: Context, path: KeyPath, file: Path) -> tuple[np.ndarray, np.ndarray]:
    """A reference table: '#' lines are comments, then a header t,NAME,..., then rows of numbers."""
    where = f"{file}"
    if not file.is_file():
        raise ctx.error(path, f"reference table not found: {file}")
    if file.stat().st_size > MAX_REFERENCE_BYTES:
        raise SceneError(f"larger than {MAX_REFERENCE_BYTES} bytes; expected a reference table", file=where)
    text = file.read_text(encoding="utf-8", errors="replace")
    rows = []
    header: list[str] | None = None
    for number, line in enumerate(io.StringIO(text), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cells = next(csv.reader([line]))
        if header is None:
            header = [c.strip() for c in cells]
            if header[0] != "t" or len(header) < 2:
                raise SceneError(f"expected the header t,NAME,... ; got '{line[:80]}'", file=where, line=number)
            continue
        if len(cells) != len(header):
            raise SceneError(
                f"expected {len(header)} numbers (as the header), got {len(cells)}", file=where, line=number
            )
        try:
            row = [float(c) for c in cells]
        except ValueError:
            raise SceneError(f"expected numbers, got '{line[:80]}'", file=where, line=number) from None
        if not all(math.isfinite(x) for x in row):
            raise SceneError("expected finite numbers", file=where, line=number)
        rows.append(row)
    if not rows:
        raise SceneError("no rows; expected a header t,NAME,... and at least one row", file=where)
    table = np.array(rows)
    if np.any(np.diff(table[:, 0]) <= 0):
        raise SceneError("the times (first column) must increase", file=where)
    return table[:, 0], table[:, 1:]


def _read_check(ctx: Context, folder: Path, path: KeyPath, value: Any) -> Check:
    values = read_mapping(ctx, path, value, CHECK_FIELDS)
    check = Check(values["quantity"], values["tolerance"], values["error"], values["match"])
    check.label = values["label"] or check.quantity
    if values["columns"] is not None:
        cols = value["columns"]
        if not isinstance(cols, list) or not cols or not all(isinstance(c, int) and c >= 0 for c in cols):
            raise ctx.error((*path, "columns"), "expected a non-empty list of column numbers (0-based)")
        check.columns = cols
    if check.summary_field is not None:
        if check.summary_field not in SUMMARY_QUANTITIES:
            raise ctx.error(
                (*path, "quantity"), f"unknown summary number; expected one of {', '.join(SUMMARY_QUANTITIES)}"
            )
        if values["reference"] is not None:
            raise ctx.error((*path, "reference"), "a summary number is compared with zero; expected no reference")
        return check
    if values["reference"] is None:
        raise ctx.error((*path, "reference"), "missing required key 'reference' (a CSV table) for a dataset")
    check.times, check.values = _read_reference(ctx, (*path, "reference"), folder / values["reference"])
    width = len(check.columns) if check.columns is not None else check.values.shape[1]
    if check.values.shape[1] != width:
        raise ctx.error(
            path, f"the reference table has {check.values.shape[1]} value columns, the check compares {width}"
        )
    return check


def load_problem(folder: str | Path) -> Problem:
    """Read and check ``folder/problem.yaml`` and its reference tables.

    Raises:
        SceneError: a missing file or a wrong key (exit 2), naming the file, line and key.
    """
    folder = Path(folder)
    raw: RawScene = load_raw_scene(folder / PROBLEM_FILE)
    ctx = Context(scene=raw)
    data = raw.data
    if not isinstance(data, dict):
        raise raw.error((), "expected a mapping (id, title, source, reference, scene, methods, checks)")
    values = read_mapping(ctx, (), data, PROBLEM_FIELDS)
    scene = folder / values["scene"]
    if not scene.is_file():
        raise raw.error(("scene",), f"scene file not found: {scene}")
    checks_raw = values["checks"]
    if not isinstance(checks_raw, list) or not checks_raw:
        raise raw.error(("checks",), "expected a non-empty list of checks")
    checks = [_read_check(ctx, folder, ("checks", i), c) for i, c in enumerate(checks_raw)]
    expected: dict[str, str] = {}
    if values["expected_failures"] is not None:
        given = values["expected_failures"]
        if not isinstance(given, dict) or not all(isinstance(v, str) and v for v in given.values()):
            raise raw.error(("expected_failures",), "expected a mapping of solver spec -> text of its failure message")
        expected = {str(k).strip(): v for k, v in given.items()}
    problem = Problem(
        id=values["id"],
        title=values["title"],
        source=values["source"],
        citation=values["citation"],
        reference=values["reference"],
        folder=folder,
        scene=scene,
        methods=values["methods"],
        checks=checks,
        expected_failures=expected,
    )
    if values["quick"] is not None:
        quick = read_mapping(ctx, ("quick",), values["quick"], QUICK_FIELDS)
        problem.quick_set = quick["set"] or []
        problem.quick_methods = quick["methods"]
        problem.quick_note = quick["note"]
    return problem


def shipped_problems() -> list[Path]:
    """The folders of the problems shipped with mbsim, in their order (by folder name)."""
    return sorted(p for p in SHIPPED.iterdir() if (p / PROBLEM_FILE).is_file())


def find_problems(names: list[str] | tuple[str, ...]) -> list[Problem]:
    """The problems named (a shipped problem's id, a problem folder, or a folder of problem folders),
    or every shipped problem when none is named.

    Raises:
        SceneError: an unknown name or a wrong problem file (exit 2).
    """
    from mbsim.errors import UsageError, did_you_mean

    shipped = {load_problem(p).id: p for p in shipped_problems()}
    if not names:
        return [load_problem(p) for p in shipped.values()]
    out: list[Problem] = []
    for name in names:
        path = Path(name)
        if name in shipped:
            out.append(load_problem(shipped[name]))
        elif (path / PROBLEM_FILE).is_file():
            out.append(load_problem(path))
        elif path.is_dir() and any((p / PROBLEM_FILE).is_file() for p in path.iterdir()):
            out.extend(load_problem(p) for p in sorted(path.iterdir()) if (p / PROBLEM_FILE).is_file())
        else:
            raise UsageError(
                f"no such problem '{name}': expected a shipped problem ({', '.join(shipped)}) or a folder with "
                f"{PROBLEM_FILE} (or a folder of such folders)",
                hint=did_you_mean(name, list(shipped)),
            )
    ids = [p.id for p in out]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise UsageError(f"problem id given twice: {', '.join(twice)}")
    return out


__all__ = [
    "CHECK_FIELDS",
    "PROBLEM_FIELDS",
    "QUICK_FIELDS",
    "RUN_FIELDS",
    "Check",
    "Problem",
    "find_problems",
    "load_problem",
]
