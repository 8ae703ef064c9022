"""The sweep's table: one row per case, as ``sweep.json``, ``sweep.csv``, ``sweep.md`` and stdout.

A row holds the case's parameter values, where its result came from (``run`` now, or
``resumed`` from a completed file of an earlier run of the same sweep), its status, how many
attempts it took, the run summary's numbers and the outcome of every ``--assert``.

Each table file carries the mark by which a later sweep into the same OUTDIR knows it may
replace it (:data:`TABLES`, mbsim.output.outdir): sweep.json its ``"format": "mbsim-sweep"``
first key, sweep.md its first line, sweep.csv its header row.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import operator
import os
import platform
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import mbsim
from mbsim import errors
from mbsim.errors import EXIT_CODES
from mbsim.output.outdir import Mark, csv_mark, json_mark, markdown_line, markdown_mark, write_report
from mbsim.output.tables import aligned_rows, cell, json_ready, markdown_rows

SWEEP_FORMAT = "mbsim-sweep"
SWEEP_FORMAT_VERSION = 1
FORMATS = ("table", "json", "csv", "markdown")
SUMMARY_KEYS = (
    "steps",
    "t_end",
    "wall_time_s",
    "us_per_step",
    "max_position_violation",
    "max_velocity_violation",
    "max_quaternion_norm_error",
    "energy_drift",
)


OUTPUT_SUMMARIES = ("max_", "min_", "final_")


def output_summaries(summary: dict[str, Any]) -> dict[str, float]:
    """The outputs' ``max_NAME``, ``min_NAME``, ``final_NAME`` of a case's run summary: its
    ``outputs`` (the worker keeps them apart from the standard numbers, so that no output's name
    meets one), else (a summary stored without them) its keys with those prefixes that are not a
    standard number."""
    kept = summary.get("outputs")
    if isinstance(kept, dict):
        return dict(kept)
    return {k: v for k, v in summary.items() if k.startswith(OUTPUT_SUMMARIES) and k not in SUMMARY_KEYS}


@dataclass(slots=True)
class SweepRow:
    """One case of the sweep.

    Attributes:
        case: 1-based position in the sweep.
        file: the result file's name in OUTDIR ('' when none was written).
        parameters: key -> value of the case.
        status: ``completed``, ``failed`` (after its retries, or a scene error) or ``interrupted``
            (not finished when the sweep was interrupted).
        source: ``run`` (run by this sweep), ``resumed`` (a completed file of the same case was
            found and kept) or ``none`` (not run).
        attempts: how many times the case was started (0 for resumed and never-started cases).
        retried: attempts > 1.
        history: why each earlier attempt did not count (``attempt 1: worker died``).
        message: why the case failed ('' when it completed).
        assertions: the outcome of each ``--assert`` (expression, passed, values).
        worker: ``host:pid`` of the worker of the last attempt.
        case_hash: see mbsim.sweep.cases ('' for a case whose turn never came: the cases are
            derived one at a time, and an interrupted sweep leaves the rest underived).
        steps ... energy_drift: the run summary's numbers (None when the case did not run).
        outputs: the summaries of the scene's outputs (CONTRACT §8), ``max_NAME``, ``min_NAME``,
            ``final_NAME`` -> value, in the scene's order (empty when the case did not run).
    """

    case: int
    file: str
    parameters: dict[str, Any]
    status: str = "interrupted"
    source: str = "none"
    attempts: int = 0
    retried: bool = False
    history: list[str] = field(default_factory=list)
    message: str = ""
    assertions: list[dict[str, Any]] = field(default_factory=list)
    worker: str = ""
    case_hash: str = ""
    steps: int | None = None
    t_end: float | None = None
    wall_time_s: float | None = None
    us_per_step: float | None = None
    max_position_violation: float | None = None
    max_velocity_violation: float | None = None
    max_quaternion_norm_error: float | None = None
    energy_drift: float | None = None
    outputs: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The row as a dict in field order (``dataclasses.asdict`` without its deep copies,
        which cost seconds for 100,000 rows; the values are only read)."""
        return dict(zip(_ROW_FIELDS, _row_values(self), strict=True))

    def set_summary(self, summary: dict[str, Any]) -> None:
        for key in SUMMARY_KEYS:
            setattr(self, key, summary.get(key))
        self.outputs = output_summaries(summary)

    @property
    def asserts_held(self) -> bool:
        return all(a["passed"] for a in self.assertions)


@dataclass
class SweepResult:
    """The whole sweep: its settings, the rows in case order, notes, and how it ended."""

    scene: str
    scene_file: str
    outdir: str
    overrides: list[str]
    params: list[dict[str, Any]]
    zipped: bool
    cluster: str
    retries: int
    assertions: list[str]
    rows: list[SweepRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    signum: int | None = None  # the signal that interrupted the sweep
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    wall_time_s: float = 0.0

    @property
    def exit_code(self) -> int:
        """128 + N when signal N interrupted it (130 for SIGINT), else 3 when a case failed, else 4
        when an assertion failed, else 0."""
        if self.interrupted:
            return errors.signal_exit_code(self.signum) if self.signum else EXIT_CODES["interrupted"]
        if any(r.status != "completed" for r in self.rows):
            return EXIT_CODES["simulation"]
        if any(not r.asserts_held for r in self.rows):
            return EXIT_CODES["assertion"]
        return EXIT_CODES["done"]

    def counts(self) -> dict[str, int]:
        rows = self.rows
        return {
            "cases": len(rows),
            "completed": sum(r.status == "completed" for r in rows),
            "failed": sum(r.status == "failed" for r in rows),
            "interrupted": sum(r.status == "interrupted" for r in rows),
            "resumed": sum(r.source == "resumed" for r in rows),
            "run": sum(r.source == "run" for r in rows),
            "retried": sum(r.retried for r in rows),
            "assertions_failed": sum(not r.asserts_held for r in rows),
        }

    def to_dict(self, rows: bool = True) -> dict[str, Any]:
        """The sweep as JSON values (``sweep.json``); ``rows=False`` leaves the rows out (an
        empty list), for writing them one at a time (:func:`render_chunks`)."""
        return json_ready(
            {
                "format": SWEEP_FORMAT,
                "format_version": SWEEP_FORMAT_VERSION,
                "mbsim_version": mbsim.__version__,
                "created": self.created,
                "scene": self.scene,
                "scene_file": self.scene_file,
                "outdir": self.outdir,
                "overrides": self.overrides,
                "params": self.params,
                "zip": self.zipped,
                "cluster": self.cluster,
                "retries": self.retries,
                "assertions": self.assertions,
                "machine": {
                    "platform": platform.platform(),
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                },
                "wall_time_s": self.wall_time_s,
                "interrupted": self.interrupted,
                "interrupted_by": errors.signal_name(self.signum) if self.interrupted and self.signum else None,
                "exit_code": self.exit_code,
                "counts": self.counts(),
                "rows": [r.to_dict() for r in self.rows] if rows else [],
                "notes": self.notes,
            }
        )


# (row key, table header, csv header, number format)
_COLUMNS = (
    ("status", "status", "status", ""),
    ("source", "source", "source", ""),
    ("attempts", "tries", "attempts", "d"),
    ("wall_time_s", "wall s", "wall_s", ".3g"),
    ("steps", "steps", "steps", "d"),
    ("max_position_violation", "max pos. violation", "max_position_violation", ".2e"),
    ("energy_drift", "energy drift", "energy_drift", ".2e"),
)
_CSV_EXTRA = (
    ("retried", "retried"),
    ("t_end", "t_end"),
    ("us_per_step", "us_per_step"),
    ("max_velocity_violation", "max_velocity_violation"),
    ("max_quaternion_norm_error", "max_quaternion_norm_error"),
)


_CSV_FIXED = ",".join([*(c[2] for c in _COLUMNS), *(c[1] for c in _CSV_EXTRA)])


def is_sweep_csv_header(line: str) -> bool:
    """Whether ``line`` is the header row of a sweep.csv: ``case,file,``, the parameters (dotted
    paths: no commas), the fixed columns, the assertions, ``message,history``."""
    return line.startswith("case,file,") and f",{_CSV_FIXED}," in line and line.endswith(",message,history")


# the table files in OUTDIR and the mark by which mbsim knows it wrote each
TABLES: dict[str, Mark] = {
    "sweep.json": json_mark(SWEEP_FORMAT, "an mbsim sweep table"),
    "sweep.csv": csv_mark(
        "an mbsim sweep table (CSV)",
        is_sweep_csv_header,
        f"starts with a sweep's header row (case,file,...,{_CSV_FIXED},...)",
    ),
    "sweep.md": markdown_mark("sweep", "an mbsim sweep report"),
}


def _output_columns(result: SweepResult) -> list[str]:
    """The outputs' summaries as columns, after the standard ones: every row's, in the order first
    met (the cases share one scene, so one set of outputs unless a parameter changes them)."""
    return list(dict.fromkeys(k for row in result.rows for k in row.outputs))


def _cell(value: Any, fmt: str) -> str:
    if isinstance(value, float) and math.isfinite(value) and not fmt:
        return format(value, ".6g")
    return cell(value, fmt)


def _param_cell(value: Any) -> str:
    if isinstance(value, float):
        return format(value, ".6g")
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _assert_cell(row: SweepRow, k: int) -> str:
    if k >= len(row.assertions):
        return "n/a"
    return "held" if row.assertions[k]["passed"] else "FAILED"


def _notes(result: SweepResult) -> list[str]:
    lines = []
    for row in result.rows:
        if row.status == "failed":
            lines.append(f"case {row.case}: failed: {row.message}")
        for k, a in enumerate(row.assertions):
            if not a["passed"]:
                values = ", ".join(f"{n} = {_cell(v, '.6g')}" for n, v in a["values"].items())
                lines.append(f"case {row.case}: assertion {k + 1} failed: {a['expression']} ({values})")
        if row.retried:
            lines.append(f"case {row.case}: retried ({row.attempts} attempts): " + "; ".join(row.history))
    counts = result.counts()
    if counts["resumed"]:
        lines.append(f"{counts['resumed']} of {counts['cases']} cases resumed from completed result files")
    if result.interrupted:
        by = f" by {errors.signal_name(result.signum)}" if result.signum else ""
        lines.append(f"interrupted{by}: {counts['interrupted']} cases not finished; run the same sweep again to finish")
    return lines + result.notes


def render(result: SweepResult, fmt: str) -> str:
    """The table as text: ``table`` (aligned), ``json`` (= sweep.json), ``csv`` or ``markdown``."""
    if fmt == "json":
        return "".join(_json_chunks(result))
    keys = [p["key"] for p in result.params]
    summaries = _output_columns(result)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        header = ["case", "file", *keys, *(c[2] for c in _COLUMNS), *(c[1] for c in _CSV_EXTRA), *summaries]
        header += [f"assert: {a}" for a in result.assertions] + ["message", "history"]
        writer.writerow(header)
        for row in result.rows:
            d = row.to_dict()
            cells: list[Any] = [row.case, row.file, *(_csv_value(row.parameters.get(k)) for k in keys)]
            cells += [_csv_value(d[c[0]]) for c in _COLUMNS] + [_csv_value(d[c[0]]) for c in _CSV_EXTRA]
            cells += [_csv_value(row.outputs.get(k)) for k in summaries]
            cells += [_assert_cell(row, k) for k in range(len(result.assertions))]
            writer.writerow([*cells, row.message, "; ".join(row.history)])
        return buf.getvalue().rstrip("\n")
    headers = ["case", *keys, *(c[1] for c in _COLUMNS), *summaries] + (["asserts"] if result.assertions else [])
    numeric = [True] + [False] * len(keys) + [bool(c[3]) for c in _COLUMNS] + [True] * len(summaries)
    numeric += [False] if result.assertions else []
    body = []
    for row in result.rows:
        d = row.to_dict()
        cells = [str(row.case), *(_param_cell(row.parameters.get(k)) for k in keys)]
        cells += [_cell(d[c[0]], c[3]) for c in _COLUMNS]
        cells += [_cell(row.outputs.get(k), ".6g") for k in summaries]
        if result.assertions:
            held = sum(a["passed"] for a in row.assertions)
            cells.append("n/a" if not row.assertions else ("held" if held == len(row.assertions) else "FAILED"))
        body.append(cells)
    notes = _notes(result)
    if fmt == "markdown":
        lines = [
            markdown_line("sweep"),  # how mbsim knows the file in OUTDIR as its own
            f"# mbsim sweep: {result.scene}",
            "",
            f"Scene `{result.scene_file}`"
            + (f" with `--set {' '.join(result.overrides)}`" if result.overrides else "")
            + f", {len(result.rows)} cases, {result.created}, mbsim {mbsim.__version__}. Ran on {result.cluster}.",
            "",
            *markdown_rows(headers, numeric, body),
        ]
        if result.assertions:
            lines += ["", "Assertions:", ""] + [f"{k + 1}. `{a}`" for k, a in enumerate(result.assertions)]
        if notes:
            lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
        return "\n".join(lines) + "\n"
    lines = aligned_rows(headers, numeric, body)
    if notes:
        lines += [""] + [f"note: {n}" for n in notes]
    return "\n".join(lines)


def _json_chunks(result: SweepResult) -> Iterator[str]:
    """``sweep.json`` in pieces: indented, but each row and each parameter on one line (the C
    encoder writes them: quick for 100,000 rows), the rows made one at a time (a list of 100,000
    dicts and the whole text at once would take hundreds of MB)."""
    data = result.to_dict(rows=False)
    marks = {key: f"@@{key}-{uuid.uuid4().hex}@@" for key in ("params", "rows")}
    params = data["params"]
    for key, mark in marks.items():
        data[key] = mark
    text = json.dumps(data, indent=2)
    head, _, rest = text.partition(json.dumps(marks["params"]))
    middle, _, tail = rest.partition(json.dumps(marks["rows"]))
    yield head
    yield "[\n" + ",\n".join("    " + json.dumps(p) for p in params) + "\n  ]" if params else "[]"
    yield middle
    if not result.rows:
        yield "[]"
    else:
        yield "[\n"
        last = len(result.rows) - 1
        for k, row in enumerate(result.rows):
            yield "    " + _json_row(row.to_dict()) + (",\n" if k < last else "\n  ]")
    yield tail


def _json_row(row: dict[str, Any]) -> str:
    """One row as strict JSON. Most rows hold only finite floats and plain text, which the C
    encoder writes as they are; a row with NaN, numpy scalars or an escaped byte of a file name
    (a lone surrogate, written as ``\\udcXX``) goes through :func:`json_ready`."""
    try:
        text = json.dumps(row, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(json_ready(row))
    return text if "\\ud" not in text else json.dumps(json_ready(row))


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def write_atomic(path: str | Path, data: bytes | Iterable[str]) -> None:
    """Write ``path`` (bytes, or pieces of UTF-8 text) through a temporary name and a rename,
    without looking at what is there (:func:`write_tables` checks the marks)."""
    write_report(path, data, None)


def render_chunks(result: SweepResult, fmt: str) -> Iterator[str]:
    """:func:`render` in pieces (``json`` made piece by piece; the others in one)."""
    if fmt == "json":
        yield from _json_chunks(result)
    else:
        yield render(result, fmt)


def write_tables(result: SweepResult) -> None:
    """sweep.json, sweep.csv and sweep.md into OUTDIR, each replacing only a table mbsim wrote.

    Raises:
        OutputError: (exit 2) a table's path holds something else, or cannot be written.
    """
    out = Path(result.outdir)
    write_report(out / "sweep.json", (*_json_chunks(result), "\n"), TABLES["sweep.json"])
    write_report(out / "sweep.csv", (render(result, "csv") + "\n").encode("utf-8"), TABLES["sweep.csv"])
    write_report(out / "sweep.md", render(result, "markdown").encode("utf-8"), TABLES["sweep.md"])


_ROW_FIELDS = tuple(f.name for f in fields(SweepRow))
_row_values = operator.attrgetter(*_ROW_FIELDS)

__all__ = [
    "FORMATS",
    "TABLES",
    "SweepResult",
    "SweepRow",
    "is_sweep_csv_header",
    "render",
    "render_chunks",
    "write_atomic",
    "write_tables",
]
