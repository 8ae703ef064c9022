"""Run verification problems and tabulate one row per (problem, solver spec) (CONTRACT §6).

Every (problem, spec) is checked first (the scene loaded with the quick overrides and the spec's
options, the model compiled and the solver prepared), so that a wrong problem or spec is exit 2
before anything runs. A row's outcome is

- ``pass``: the run completed and every check is within its tolerance;
- ``expected``: the problem lists the spec under ``expected_failures`` and the run failed with a
  message containing the listed text (lagrange refusing Bricard's mechanism); not a pass, not a fail;
- ``fail``: anything else (a check out of tolerance, a failed run, an expected failure that did
  not come or came with another message).

A row shows its first failing check, or its first (the problem's main quantity) when all pass;
``--json`` has every check.
This module is the library; it neither prints nor exits (``mbsim.cli.verify`` does both).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import mbsim
from mbsim import interrupts
from mbsim.compare import check_choice, file_stem, parse_solver_spec, scene_for, unique_stem
from mbsim.errors import Interrupted, MbsimError, OutputError, SceneError, UsageError
from mbsim.names import dataset_path
from mbsim.output.outdir import check_outdir, check_result, open_outdir
from mbsim.output.tables import aligned_rows, cell, json_ready, markdown_rows
from mbsim.scene.load import apply_override, load_raw_scene
from mbsim.scene.spec import SceneSpec, build_spec
from mbsim.simulate import RunSummary, prepare, run
from mbsim.verify.problem import Check, Problem

VERIFY_FORMAT = "mbsim-verify"
VERIFY_FORMAT_VERSION = 1
FORMATS = ("table", "json", "markdown")
TIME_MATCH = 1e-9  # a reference time matches a recorded one within this, relative to max(1, |t|)


@dataclass
class CheckResult:
    quantity: str
    label: str
    error: float | None
    tolerance: float
    passed: bool
    note: str = ""


@dataclass
class VerifyRow:
    problem: str
    title: str
    source: str
    method: str  # the solver spec as written in the problem
    quantity: str
    error: float | None
    tolerance: float | None
    outcome: str  # pass | expected | fail
    wall_time_s: float | None
    status: str = ""
    message: str = ""
    steps: int | None = None
    t_end: float | None = None
    file: str = ""
    overrides: list[str] = field(default_factory=list)  # the run's own scene overrides
    checks: list[CheckResult] = field(default_factory=list)


@dataclass
class Planned:
    problem: Problem
    spec_text: str
    spec: SceneSpec
    file: Path
    prepared: tuple | None
    expected: str | None
    overrides: list[str] = field(default_factory=list)


@dataclass
class Verification:
    rows: list[VerifyRow]
    quick: bool
    outdir: str
    created: str = ""
    interrupted: bool = False
    error: SceneError | None = None  # a problem found wrong by its run (a group as quantity): exit 2

    @property
    def failed(self) -> int:
        return sum(r.outcome == "fail" for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return json_ready(
            {
                "format": VERIFY_FORMAT,
                "format_version": VERIFY_FORMAT_VERSION,
                "mbsim_version": mbsim.__version__,
                "created": self.created,
                "quick": self.quick,
                "outdir": self.outdir,
                "machine": {
                    "platform": platform.platform(),
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                    "numpy": np.__version__,
                },
                "passed": sum(r.outcome == "pass" for r in self.rows),
                "expected": sum(r.outcome == "expected" for r in self.rows),
                "failed": self.failed,
                "interrupted": self.interrupted,
                "rows": [asdict(r) for r in self.rows],
            }
        )


def plan(
    problems: list[Problem], methods: tuple[str, ...], quick: bool, outdir: Path, note: Callable[[str], None]
) -> list[Planned]:
    """Check every (problem, spec) before anything runs.

    Raises:
        SceneError: a wrong problem scene or spec (exit 2), naming the problem.
        UsageError: ``--method`` names a method no problem runs.
    """
    out: list[Planned] = []
    wanted = set(methods)
    for problem in problems:
        runs = problem.runs(quick)
        runs += [(s, []) for s in problem.expected_failures if s not in [text for text, _ in runs]]
        base = load_raw_scene(problem.scene, problem.quick_set if quick else [])
        taken: set[str] = set()
        for text, own in runs:
            where = f"{problem.folder / 'problem.yaml'}: spec '{text}'"
            choice = parse_solver_spec(text, source=where)
            if wanted and choice.method not in wanted:
                continue
            check_choice(choice)
            check_outdir(outdir / problem.id, "verification")  # a file in the way: refused before any run
            file = outdir / problem.id / f"{unique_stem(file_stem(choice), taken)}.h5"
            check_result(file)
            try:
                raw, _ = scene_for(base, choice)
                for assignment in own:
                    apply_override(raw, assignment)
                spec = build_spec(raw)
                prepared = prepare(spec)
            except SceneError as exc:
                raise SceneError(str(exc), file=f"problem {problem.id}, spec '{text}'") from None
            out.append(Planned(problem, text, spec, file, prepared, problem.expected_failures.get(text), own))
        note(f"{problem.id}: {sum(p.problem is problem for p in out)} run(s) checked")
    if wanted and not out:
        raise UsageError(f"no problem runs method {', '.join(sorted(wanted))}", key_path="--method")
    if out:  # a read-only or unwritable OUTDIR is exit 2 before anything runs, not a failed row
        open_outdir(outdir, "verification")
    return out


class WrongQuantity(Exception):
    """A check's quantity that is no time series of the result file (a group, text, a table of
    another length): a mistake of the problem file, reported at its key (exit 2)."""


def _dataset(result: h5py.File, check: Check) -> tuple[np.ndarray, np.ndarray]:
    name = dataset_path(result, check.quantity)  # bodies/NAME/... with the scene's names (mbsim.names)
    if name is None:
        raise KeyError(f"the result file has no dataset '{check.quantity.strip('/')}'")
    node = result[name]
    times = np.asarray(result["time"][()], dtype=float)
    if isinstance(node, h5py.Group):
        members = ", ".join(sorted(node)[:8]) or "nothing"
        raise WrongQuantity(f"'{name}' is a group of the result file (holding {members}); expected a dataset")
    if not isinstance(node, h5py.Dataset) or node.dtype.kind not in "iuf" or node.ndim == 0:
        raise WrongQuantity(f"'{name}' is not a numeric time series of the result file ({node.dtype}, {node.shape})")
    if node.shape[0] != len(times):
        raise WrongQuantity(
            f"'{name}' has {node.shape[0]} rows, the result file {len(times)} recorded times; expected a time series"
        )
    values = np.asarray(node[()], dtype=float)
    values = values.reshape(len(values), -1)
    if check.columns is not None:
        if max(check.columns) >= values.shape[1]:
            raise KeyError(f"'{name}' has {values.shape[1]} columns; the check names column {max(check.columns)}")
        values = values[:, check.columns]
    return times, values


def _differences(
    check: Check, times: np.ndarray, values: np.ndarray, quick: bool, result: CheckResult
) -> np.ndarray | None:
    """|value - reference| (relative if asked) at the compared times, or None with a note."""
    from scipy.interpolate import CubicSpline  # here: scipy.interpolate costs every verify process ~0.3 s of CPU

    assert check.times is not None and check.values is not None
    if check.match == "interpolate":
        inside = (times >= check.times[0] - TIME_MATCH) & (times <= check.times[-1] + TIME_MATCH)
        at, got = times[inside], values[inside]
        want = CubicSpline(check.times, check.values, axis=0)(at) if len(check.times) > 1 else check.values
    elif check.match == "interpolate_result":
        slack = TIME_MATCH * max(1.0, abs(times[-1]))
        inside = (check.times >= times[0] - slack) & (check.times <= times[-1] + slack)
        at, want = check.times[inside], check.values[inside]
        if len(times) < 2:
            got = np.repeat(values[:1], len(at), axis=0)
        else:
            got = CubicSpline(times, values, axis=0)(np.clip(at, times[0], times[-1]))
    else:
        keep = check.times <= times[-1] + TIME_MATCH * max(1.0, abs(times[-1]))
        at, want = check.times[keep], check.values[keep]
        after = np.searchsorted(times, at)
        before, after = np.clip(after - 1, 0, len(times) - 1), np.clip(after, 0, len(times) - 1)
        index = np.where(np.abs(times[before] - at) <= np.abs(times[after] - at), before, after)  # nearest
        off = np.abs(times[index] - at) > TIME_MATCH * np.maximum(1.0, np.abs(at))
        if np.any(off):
            result.note = f"reference time {at[off][0]:g} s is not a recorded time (time.step, output.every)"
            return None
        got = values[index]
    if len(at) == 0:
        result.note = "no reference time within the run" + (" (skipped by --quick)" if quick else "")
        result.passed = quick
        return None
    diffs = np.linalg.norm(got - want, axis=1)
    if check.error == "relative":
        diffs = diffs / np.maximum(np.linalg.norm(want, axis=1), np.finfo(float).tiny)
    return diffs


def evaluate(check: Check, summary: RunSummary, path: Path, quick: bool = False) -> CheckResult:
    """The error of one check on a completed run. Under ``quick`` a reference table none of whose
    times the shortened run reaches is skipped (passed, error None, a note says so)."""
    result = CheckResult(check.quantity, check.label, None, check.tolerance, False)
    if check.summary_field is not None:
        value = getattr(summary, check.summary_field)
        result.error = float(value) if value is not None else None
    else:
        try:
            with h5py.File(path, "r") as f:
                times, values = _dataset(f, check)
        except KeyError as exc:
            result.note = str(exc.args[0])
            return result
        except WrongQuantity as exc:
            if check.locate is None:
                raise SceneError(str(exc), key_path=check.quantity) from None
            raise check.locate(str(exc)) from None
        diffs = _differences(check, times, values, quick, result)
        if diffs is None:
            return result
        result.error = float(np.max(diffs))
    result.passed = result.error is not None and np.isfinite(result.error) and result.error <= check.tolerance
    return result


def run_one(item: Planned, note: Callable[[str], None], quick: bool = False) -> VerifyRow:
    problem = item.problem
    row = VerifyRow(
        problem=problem.id,
        title=problem.title,
        source=problem.source,
        method=item.spec_text,
        quantity=problem.checks[0].label,
        error=None,
        tolerance=problem.checks[0].tolerance,
        outcome="fail",
        wall_time_s=None,
        file=str(item.file),
        overrides=list(item.overrides),
    )
    note(f"{problem.id} {item.spec_text}: running...")
    start = time.perf_counter()
    prepared, item.prepared = item.prepared, None
    try:
        summary = run(item.spec, item.file, prepared=prepared)
    except (Interrupted, OutputError):
        raise  # an output that cannot be written is exit 2 (the rows so far are shown), not a failed row
    except MbsimError as exc:
        row.status, row.message = "failed", str(exc)
        summary = None
    except Exception as exc:  # one problem must not end the verification
        row.status, row.message = "failed", f"internal error: {type(exc).__name__}: {exc}"
        summary = None
    row.wall_time_s = time.perf_counter() - start
    if summary is not None:
        row.status, row.message = summary.status, summary.message
        row.steps, row.t_end = summary.steps, summary.t_end
    if item.expected is not None:
        row.quantity, row.tolerance = "refuses (exit 3)", None
        if row.status == "failed" and item.expected.lower() in row.message.lower():
            row.outcome = "expected"
        else:
            row.message = f"expected a failure with '{item.expected}'; got status {row.status}" + (
                f": {row.message}" if row.message else ""
            )
        return row
    if summary is None or summary.status != "completed":
        return row
    row.checks = [evaluate(c, summary, item.file, quick) for c in problem.checks]
    # the first failing check, or else the first that was compared (the problem's main quantity)
    worst = next((r for r in row.checks if not r.passed), None)
    worst = worst or next((r for r in row.checks if r.error is not None), row.checks[0])
    row.quantity, row.error, row.tolerance = worst.label, worst.error, worst.tolerance
    row.outcome = "pass" if all(r.passed for r in row.checks) else "fail"
    out_of_tolerance = [f"{r.label} {r.error:.3g} > {r.tolerance:g}" for r in row.checks if not r.passed and r.error]
    row.message = "; ".join([worst.note] if worst.note else out_of_tolerance)
    return row


def verify(
    problems: list[Problem],
    methods: tuple[str, ...] = (),
    quick: bool = False,
    outdir: str | Path | None = None,
    note: Callable[[str], None] = lambda _: None,
) -> Verification:
    """Run every (problem, spec) and return the rows (the result files stay in ``outdir``)."""
    out = Path(outdir) if outdir is not None else Path("outputs") / ("verify-quick" if quick else "verify")
    if out.exists() and not out.is_dir():
        raise UsageError("is not a directory; expected the output directory of verify", file=str(out))
    planned = plan(problems, methods, quick, out, note)
    result = Verification(
        rows=[], quick=quick, outdir=str(out), created=_dt.datetime.now().isoformat(timespec="seconds")
    )
    for item in planned:
        try:
            interrupts.check()
            row = run_one(item, note, quick)
        except Interrupted:
            result.interrupted = True
            break
        except SceneError as exc:  # the problem file is wrong (the table so far is still shown)
            result.error = exc
            break
        result.rows.append(row)
        note(f"  {row.outcome}: {row.quantity} error {cell(row.error, '.3g')} (tolerance {cell(row.tolerance, 'g')})"
             + (f"; {row.message}" if row.message and row.outcome == "fail" else ""))  # fmt: skip
    return result


HEADERS = ["problem", "source", "method", "quantity", "error", "tolerance", "outcome", "wall [s]"]
NUMERIC = [False, False, False, False, True, True, False, True]


def render(result: Verification, fmt: str) -> str:
    import json

    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2) + "\n"
    body = [
        [r.problem, r.source, r.method + (f" ({', '.join(r.overrides)})" if r.overrides else ""), r.quantity,
         cell(r.error, ".2e"), cell(r.tolerance, ".0e"), r.outcome, cell(r.wall_time_s, ".1f")]
        for r in result.rows
    ]  # fmt: skip
    lines = (markdown_rows if fmt == "markdown" else aligned_rows)(HEADERS, NUMERIC, body)
    passed = sum(r.outcome == "pass" for r in result.rows)
    expected = sum(r.outcome == "expected" for r in result.rows)
    lines.append("")
    lines.append(f"{passed} passed, {expected} failed as expected, {result.failed} failed")
    for r in result.rows:
        if r.outcome == "fail" and r.message:
            lines.append(f"{r.problem} {r.method}: {r.message}")
    return "\n".join(lines) + "\n"


__all__ = ["FORMATS", "Verification", "VerifyRow", "render", "verify"]
