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
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import SceneError
from mbsim.scene.fields import Choice, Context, Field, Number, Reader, Text, read_mapping
from mbsim.scene.load import KeyPath, RawScene, load_raw_scene, not_a_regular_file

PROBLEM_FILE = "problem.yaml"
SHIPPED = Path(__file__).resolve().parent / "problems"
# A problem folder may come from anyone (CONTRACT §4: every malformed input is exit 2, within
# seconds and bounded memory); these bound what one problem can ask for.
MAX_REFERENCE_BYTES = 16 * 1024 * 1024  # a reference table (the shipped ones are < 0.3 MB)
MAX_REFERENCE_ROWS = 1_000_000  # rows of one reference table
MAX_RUNS = 100  # solver specs of one problem (methods, quick.methods, expected_failures)
MAX_CHECKS = 100  # checks of one problem
MAX_ID_LENGTH = 64
# an id names the problem's folder under -o: a plain name, never a path (no '/', no '..')
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # one-line texts: no control character at all
_CONTROL_IN_PARAGRAPH = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # free text: newlines and tabs

# the numbers of mbsim.simulate.RunSummary a check may name as summary.NAME
SUMMARY_QUANTITIES = (
    "energy_drift",
    "max_position_violation",
    "max_velocity_violation",
    "max_quaternion_norm_error",
    "t_end",
)


def _control_character(text: str, pattern: re.Pattern[str]) -> str | None:
    """The first forbidden control character of ``text``, shown as U+XXXX, or None."""
    found = pattern.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


@dataclass
class Line(Reader):
    """One line of text (shown in the table, or a file name): no control characters, which would
    reach the user's terminal (escape sequences) or the file system (NUL)."""

    def read(self, ctx: Context, path: KeyPath, value: Any) -> str:
        text = Text().read(ctx, path, value)
        bad = _control_character(text, _CONTROL)
        if bad is not None:
            raise ctx.error(path, f"expected one line of text without control characters, found {bad}")
        return text

    def describe(self) -> str:
        return "one line of text"


@dataclass
class Paragraph(Reader):
    """Free text (citation, reference): newlines and tabs allowed, no other control characters."""

    def read(self, ctx: Context, path: KeyPath, value: Any) -> str:
        text = Text().read(ctx, path, value)
        bad = _control_character(text, _CONTROL_IN_PARAGRAPH)
        if bad is not None:
            raise ctx.error(path, f"expected text without control characters (newlines and tabs allowed), found {bad}")
        return text

    def describe(self) -> str:
        return "text"


@dataclass
class ProblemId(Reader):
    """The problem's id: a plain name, since it names the problem's folder of result files."""

    def read(self, ctx: Context, path: KeyPath, value: Any) -> str:
        text = Line().read(ctx, path, value)
        if len(text) > MAX_ID_LENGTH or not _ID.fullmatch(text):
            raise ctx.error(
                path,
                f"expected a plain name of at most {MAX_ID_LENGTH} letters, digits and _ . + - (starting with a "
                f"letter or digit; it names the problem's folder of result files), got '{_shown(text)}'",
            )
        return text

    def describe(self) -> str:
        return f"a plain name (letters, digits, _ . + -; at most {MAX_ID_LENGTH})"


def _shown(text: str, limit: int = 60) -> str:
    from mbsim.errors import shorten

    return shorten(text, limit).encode("unicode_escape").decode("ascii")


@dataclass
class TextList(Reader):
    """A non-empty list of texts (solver specs, --set overrides)."""

    what: str = "texts"

    def read(self, ctx: Context, path: KeyPath, value: Any) -> list[str]:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise ctx.error(path, f"expected {self.describe()}")
        return [Line().read(ctx, (*path, i), v).strip() for i, v in enumerate(value)]

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
        if len(value) > MAX_RUNS:
            raise ctx.error(path, f"expected at most {MAX_RUNS} runs, got {len(value)}")
        out = []
        for i, item in enumerate(value):
            if isinstance(item, str) and item.strip():
                out.append((Line().read(ctx, (*path, i), item).strip(), []))
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
    "id": Field(ProblemId(), "short name shown in the table and given on the command line (A02, bouncing_ball)"),
    "title": Field(Line(), "one line saying what the problem is"),
    "source": Field(Line(), "where the problem comes from, short (shown in the table)"),
    "citation": Field(Paragraph(), "the full citation of the problem and of its reference", ""),
    "reference": Field(
        Paragraph(),
        "what the reference is: published values, a closed form, or an independent formulation (which, and how "
        "its table was made)",
    ),
    "scene": Field(Line(), "the scene file, relative to the problem's folder and inside it", "scene.yaml"),
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
        Line(),
        "a dataset of the result file (bodies/NAME/position, diagnostics/energy/total, q, ...) compared with "
        "`reference`, or summary.NAME (" + ", ".join(SUMMARY_QUANTITIES) + ") compared with zero",
    ),
    "columns": Field(
        Section("a list of whole numbers"), "list of the dataset's columns to compare (0-based); default all", None
    ),
    "reference": Field(
        Line(),
        "CSV table relative to the problem's folder and inside it: header t,NAME,... then one row per compared time",
        None,
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
    "label": Field(Line(), "what the table calls the quantity (default: quantity)", None),
}
RUN_FIELDS = {
    "solver": Field(Line(), "the solver spec (METHOD or METHOD:key=value,...)"),
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
    "note": Field(Line(), "what the quick variant leaves out", ""),
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
    # a SceneError at the check's quantity in problem.yaml (a quantity found wrong after the run)
    locate: Callable[[str], SceneError] | None = None

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


def inside_folder(ctx: Context, path: KeyPath, folder: Path, given: str, what: str) -> Path:
    """The file ``given`` (relative to the problem's ``folder``) as a resolved path inside the folder.

    A problem folder may come from anyone: a scene or table that leads outside it (an absolute
    path, ``..``, a symlink) would have mbsim read, and echo into its messages, a file the problem
    does not own (``scene: /etc/passwd``). Raises a SceneError at ``path`` for such a path, for a
    missing file and for one that is not a regular file (a FIFO would block the read for ever).
    """
    try:
        home = folder.resolve()
        target = (folder / given).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ctx.error(path, f"cannot resolve the {what} '{_shown(given)}': {exc}") from None
    if not target.is_relative_to(home):
        raise ctx.error(
            path,
            f"the {what} '{_shown(given)}' is outside the problem's folder {home}; expected a file inside it "
            "(a problem reads only its own files)",
        )
    if not target.is_file():
        odd = not_a_regular_file(target)
        raise ctx.error(path, f"{what} not found: {folder / given}" if odd is None else f"{odd}; expected the {what}")
    return target


def _read_small_file(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a regular file, opened without blocking (a FIFO swapped in
    since the last look is refused, not waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return stream.read(limit + 1)


def _read_reference(ctx: Context, path: KeyPath, file: Path) -> tuple[np.ndarray, np.ndarray]:
    """A reference table: '#' lines are comments, then a header t,NAME,..., then rows of numbers."""
    where = f"{file}"
    try:
        data = _read_small_file(file, MAX_REFERENCE_BYTES)
    except OSError as exc:
        raise SceneError(f"cannot read the reference table: {exc.strerror or exc}", file=where) from None
    if len(data) > MAX_REFERENCE_BYTES:
        raise SceneError(
            f"larger than {MAX_REFERENCE_BYTES} bytes ({MAX_REFERENCE_BYTES // 2**20} MiB); expected a reference table",
            file=where,
        )
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")  # a BOM from a spreadsheet
    rows = []
    header: list[str] | None = None
    for number, line in enumerate(io.StringIO(text), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            cells = next(csv.reader([line]))
        except csv.Error as exc:  # a NUL byte, a cell over csv's field size limit
            raise SceneError(f"not a CSV row ({exc})", file=where, line=number) from None
        if header is None:
            header = [c.strip() for c in cells]
            if not header or header[0] != "t" or len(header) < 2:
                raise SceneError(f"expected the header t,NAME,... ; got '{_shown(line, 80)}'", file=where, line=number)
            continue
        if len(cells) != len(header):
            raise SceneError(
                f"expected {len(header)} numbers (as the header), got {len(cells)}", file=where, line=number
            )
        try:
            row = [float(c) for c in cells]
        except ValueError:
            raise SceneError(f"expected numbers, got '{_shown(line, 80)}'", file=where, line=number) from None
        if not all(math.isfinite(x) for x in row):
            raise SceneError("expected finite numbers (no nan or inf)", file=where, line=number)
        rows.append(row)
        if len(rows) > MAX_REFERENCE_ROWS:
            raise SceneError(f"more than {MAX_REFERENCE_ROWS:,} rows; expected a reference table", file=where)
    if not rows:
        raise SceneError("no rows; expected a header t,NAME,... and at least one row", file=where)
    table = np.array(rows)
    backwards = np.flatnonzero(np.diff(table[:, 0]) <= 0)
    if len(backwards):
        k = int(backwards[0])
        raise SceneError(
            f"the times (first column) must increase; row {k + 2} has t = {table[k + 1, 0]:g} after "
            f"t = {table[k, 0]:g}",
            file=where,
        )
    return table[:, 0], table[:, 1:]


def _read_check(ctx: Context, folder: Path, path: KeyPath, value: Any) -> Check:
    values = read_mapping(ctx, path, value, CHECK_FIELDS)
    check = Check(values["quantity"], values["tolerance"], values["error"], values["match"])
    check.label = values["label"] or check.quantity
    check.locate = lambda reason: ctx.error((*path, "quantity"), reason)
    name = check.quantity.strip("/")
    if not name:
        raise ctx.error(
            (*path, "quantity"), f"expected a dataset path such as bodies/NAME/position, got '{_shown(check.quantity)}'"
        )
    if values["columns"] is not None:
        cols = value["columns"]
        if (
            not isinstance(cols, list)
            or not cols
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cols)
        ):
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
    table = inside_folder(ctx, (*path, "reference"), folder, values["reference"], "reference table")
    check.times, check.values = _read_reference(ctx, (*path, "reference"), table)
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
    file = folder / PROBLEM_FILE
    try:
        outside = not file.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise SceneError(f"cannot resolve the problem file: {exc}", file=str(file)) from None
    if outside:  # a symlink: its text would be echoed into the messages
        raise SceneError(
            f"is a link to {file.resolve()}, outside the problem's folder; expected the problem's own file",
            file=str(file),
        )
    raw: RawScene = load_raw_scene(file)
    ctx = Context(scene=raw)
    data = raw.data
    if not isinstance(data, dict):
        raise raw.error((), "expected a mapping (id, title, source, reference, scene, methods, checks)")
    values = read_mapping(ctx, (), data, PROBLEM_FIELDS)
    scene = inside_folder(ctx, ("scene",), folder, values["scene"], "scene file")
    checks_raw = values["checks"]
    if not isinstance(checks_raw, list) or not checks_raw:
        raise raw.error(("checks",), "expected a non-empty list of checks")
    if len(checks_raw) > MAX_CHECKS:
        raise raw.error(("checks",), f"expected at most {MAX_CHECKS} checks, got {len(checks_raw)}")
    checks = [_read_check(ctx, folder, ("checks", i), c) for i, c in enumerate(checks_raw)]
    expected: dict[str, str] = {}
    if values["expected_failures"] is not None:
        given = values["expected_failures"]
        if not isinstance(given, dict) or not all(isinstance(v, str) and v for v in given.values()):
            raise raw.error(("expected_failures",), "expected a mapping of solver spec -> text of its failure message")
        if len(given) > MAX_RUNS:
            raise raw.error(("expected_failures",), f"expected at most {MAX_RUNS} solver specs, got {len(given)}")
        expected = {
            Line().read(ctx, ("expected_failures", str(k)), str(k)).strip(): Line().read(
                ctx, ("expected_failures", str(k)), v
            )
            for k, v in given.items()
        }
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
