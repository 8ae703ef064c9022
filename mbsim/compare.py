"""``mbsim compare``: run one scene with several solver specs and tabulate the results.

A solver spec is ``METHOD`` or ``METHOD:key=value,key=value`` (values read as YAML scalars,
dotted keys allowed: ``lagrange:integrator=euler,projection.position=false``). Each spec
becomes the overrides ``solver.method=METHOD`` and ``solver.KEY=VALUE`` applied on top of the
user's ``--set``. Every spec (and the reference) is checked by loading and preparing the scene
before anything runs, so a bad spec is a command-line error (exit 2) that names the spec. A run
that fails is a row with status ``failed``, never the end of the comparison.

This module is the library; it neither prints nor exits (``mbsim.cli.compare`` does both).
The table, the error against a reference and the file names are documented in
docs/user-guide.md, "Comparing solvers".
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import mbsim
from mbsim import interrupts
from mbsim.errors import MbsimError, OutputError, SceneError, UsageError, did_you_mean, path_text
from mbsim.names import member, member_names
from mbsim.output.compare_plots import PLOT_NAMES, PLOT_SOFTWARE, plot_comparison
from mbsim.output.outdir import (
    Mark,
    check_outdir,
    check_report,
    check_result,
    detach,
    install_result,
    json_mark,
    markdown_line,
    markdown_mark,
    open_outdir,
    png_mark,
    write_report,
)
from mbsim.output.summary import open_result
from mbsim.output.tables import aligned_rows, cell, json_ready, markdown_rows
from mbsim.scene.load import RawScene, apply_override, load_raw_scene
from mbsim.scene.spec import SOLVER_FIELDS, SceneSpec, build_spec
from mbsim.simulate import RunSummary, prepare, run
from mbsim.solvers import PLANNED, SOLVERS

FORMATS = ("table", "json", "csv", "markdown")
COMPARE_FORMAT = "mbsim-compare"
COMPARE_FORMAT_VERSION = 1
# the reports in OUTDIR and the mark by which mbsim knows it wrote each (mbsim.output.outdir)
_JSON_MARK = json_mark(COMPARE_FORMAT, "an mbsim compare table")
REPORTS: dict[str, Mark] = {
    "compare.json": _JSON_MARK,
    "compare.md": markdown_mark("compare", "an mbsim compare report"),
    **{name: png_mark(PLOT_SOFTWARE, "an mbsim compare plot", ("compare.json", _JSON_MARK)) for name in PLOT_NAMES},
}

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_METHOD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# ----------------------------------------------------------------------------- solver specs


@dataclass(frozen=True)
class SolverChoice:
    """One parsed solver spec.

    Attributes:
        text: the spec as written (whitespace around its parts removed), e.g. ``gauss:optimizer=pso``.
        method: the solver method.
        options: (dotted key, value text) pairs in the order given.
        source: the option it came from (``--solvers`` or ``--reference``), for messages.
    """

    text: str
    method: str
    options: tuple[tuple[str, str], ...] = ()
    source: str = "--solvers"

    @property
    def where(self) -> str:
        return f"{self.source} '{self.text}'"

    def overrides(self) -> list[str]:
        """The ``--set`` assignments this spec stands for."""
        return [f"solver.method={self.method}", *(f"solver.{k}={v}" for k, v in self.options)]

    def option_values(self) -> dict[str, Any]:
        return {k: yaml.safe_load(v) for k, v in self.options}

    def same_run(self, other: SolverChoice) -> bool:
        """True when both specs ask for the same method with the same option values."""

        def key(c: SolverChoice) -> tuple:
            values = c.option_values()
            return c.method, sorted((k, json.dumps(v, sort_keys=True, default=str)) for k, v in values.items())

        return key(self) == key(other)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets and quotes (so ``[1, 2]`` stays one value)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(0, depth - 1)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _starts_spec(token: str, previous: list[str] | None) -> bool:
    """A token starts a new spec unless it is a ``key=value`` continuing the previous one (or a
    bare option name after a spec with options: ``lagrange:integrator=euler,rtol`` is one bad spec)."""
    if "=" not in token:
        if previous and ":" in previous[0] and token not in SOLVERS and token not in PLANNED:
            option_names = {k for m in SOLVERS for k in accepted_keys(m)}
            return token.split(".")[0] not in option_names
        return True
    return ":" in token and token.index(":") < token.index("=")


def parse_solver_spec(text: str, source: str = "--solvers") -> SolverChoice:
    """Parse ``METHOD`` or ``METHOD:key=value,...``; checks only the syntax and option keys' form.

    Raises:
        UsageError: malformed text (exit 2); the message names the spec.
    """
    text = text.strip()
    method, colon, rest = text.partition(":")
    method = method.strip()
    where = f"{source} '{text}'"
    if not method:
        raise UsageError("expected METHOD or METHOD:key=value,...; the method name is missing", file=where)
    if not _METHOD.match(method):
        raise UsageError(f"expected a method name before ':', got '{method}'", file=where)
    options: list[tuple[str, str]] = []
    if colon:
        items = [p.strip() for p in split_top_level(rest)]
        if not any(items):
            raise UsageError(f"expected key=value options after '{method}:', got nothing", file=where)
        for item in items:
            if "=" not in item:
                raise UsageError(f"expected key=value, got '{item}' (an option needs a value)", file=where)
            key, _, value = (s.strip() for s in item.partition("="))
            if not _KEY.match(key):
                raise UsageError(
                    f"expected an option name (a dotted path such as projection.position), got '{key}'", file=where
                )
            if not value:
                raise UsageError(f"option '{key}' has no value (write {key}=VALUE; YAML null is 'null')", file=where)
            if key == "method":
                raise UsageError("the method is the part before ':'; 'method' cannot be an option", file=where)
            if any(k == key for k, _ in options):
                raise UsageError(f"option '{key}' is given twice", file=where)
            try:
                yaml.safe_load(value)
            except yaml.YAMLError as exc:
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                raise UsageError(f"cannot read the value '{value}' of option '{key}': {problem}", file=where) from None
            options.append((key, value))
    canonical = method + (":" + ",".join(f"{k}={v}" for k, v in options) if options else "")
    return SolverChoice(canonical, method, tuple(options), source)


def parse_solver_list(text: str, source: str = "--solvers") -> list[SolverChoice]:
    """Split ``lagrange,gauss,'augmented_lagrangian:omega=3,mu=5'`` into solver specs.

    The list and the options share the comma: a ``key=value`` piece (an ``=`` before any ``:``)
    continues the spec before it; anything else starts a new spec.

    Raises:
        UsageError: an empty list or a malformed spec (exit 2).
    """
    groups: list[list[str]] = []
    for token in (t.strip() for t in split_top_level(text)):
        if not token:
            continue
        if not groups or _starts_spec(token, groups[-1]):
            if not _starts_spec(token, None):
                raise UsageError(f"option '{token}' comes before any method; expected METHOD:key=value", file=source)
            groups.append([token])
        else:
            groups[-1].append(token)
    if not groups:
        raise UsageError("expected at least one solver spec, e.g. --solvers lagrange,gauss", file=source)
    return [parse_solver_spec(",".join(g), source) for g in groups]


def parse_reference(text: str) -> SolverChoice:
    """The ``--reference`` spec: exactly one solver spec.

    Raises:
        UsageError: malformed, or more than one spec (exit 2).
    """
    choices = parse_solver_list(text, "--reference")
    if len(choices) != 1:
        raise UsageError(
            f"expected one solver spec, got {len(choices)}: {', '.join(c.text for c in choices)}", file="--reference"
        )
    return choices[0]


def accepted_keys(method: str) -> tuple[str, ...]:
    """Option keys a method accepts: the general solver keys (but ``integrator`` for a method with
    a scheme of its own) and the method's OPTION_FIELDS."""
    module = SOLVERS[method]
    general = [k for k in SOLVER_FIELDS if k != "method"]
    if not module.CAPABILITIES.get("integrators"):
        general.remove("integrator")
    return (*general, *module.OPTION_FIELDS)


def check_choice(choice: SolverChoice) -> None:
    """The method exists and accepts every option the spec gives (no scene needed).

    Raises:
        UsageError: unknown method (with "did you mean") or an option the method does not take.
    """
    known = sorted(SOLVERS)
    if choice.method not in SOLVERS:
        if choice.method in PLANNED:
            raise UsageError(
                f"method '{choice.method}' is not available in this version; available: {', '.join(known)}",
                file=choice.where,
            )
        raise UsageError(
            f"unknown method '{choice.method}'; expected one of {', '.join(known)}",
            file=choice.where,
            hint=did_you_mean(choice.method, [*known, *PLANNED]),
        )
    allowed = accepted_keys(choice.method)
    for key, _ in choice.options:
        top = key.split(".")[0]
        if top not in allowed:
            raise UsageError(
                f"unknown option '{top}' of method '{choice.method}'; expected one of {', '.join(allowed)}",
                file=choice.where,
                hint=did_you_mean(top, allowed),
            )


def file_stem(choice: SolverChoice, limit: int = 120) -> str:
    """A filesystem-safe name from a spec: ``augmented_lagrangian:omega=3,mu=5`` ->
    ``augmented_lagrangian_omega-3_mu-5`` (letters, digits, ``. _ -`` only)."""
    stem = "_".join([choice.method, *(f"{k}-{v}" for k, v in choice.options)])
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem)
    stem = re.sub(r"-{2,}", "-", stem).strip("-.") or "solver"
    if len(stem) > limit:  # keep names short enough for every filesystem; the hash keeps them apart
        digest = hashlib.sha1(choice.text.encode()).hexdigest()[:8]
        stem = f"{stem[: limit - 9].rstrip('-.')}-{digest}"
    return stem


def unique_stem(stem: str, taken: set[str]) -> str:
    """``stem``, or ``stem-2``, ``stem-3``... if taken (compared without case, for macOS/Windows)."""
    name, k = stem, 2
    while name.lower() in taken:
        name, k = f"{stem}-{k}", k + 1
    taken.add(name.lower())
    return name


# ----------------------------------------------------------------------------- checking


@dataclass
class PreparedChoice:
    """A spec checked against the scene: its SceneSpec, the notes of checking, the result file."""

    choice: SolverChoice
    spec: SceneSpec
    file: Path
    notes: list[str] = field(default_factory=list)
    prepared: tuple | None = None  # (model, solver) of the check, reused by the first run


def scene_for(base: RawScene, choice: SolverChoice) -> tuple[RawScene, list[str]]:
    """The raw scene with the spec's overrides; scene-level options of another method dropped."""
    raw = copy.deepcopy(base)
    if raw.data.get("solver", {}) is None:  # an empty ``solver:`` section
        raw.data["solver"] = {}
    solver_section = raw.data.get("solver")
    scene_method = solver_section.get("method", "lagrange") if isinstance(solver_section, dict) else "lagrange"
    notes = []
    for assignment in choice.overrides():
        apply_override(raw, assignment)
    section = raw.data["solver"]
    if isinstance(section, dict) and choice.method != scene_method:
        # the scene's own method options (say optimizer for gauss) mean nothing to another method
        allowed = accepted_keys(choice.method)
        given = {k.split(".")[0] for k, _ in choice.options}
        for key in [k for k in section if k not in allowed and k != "method" and k not in given]:
            del section[key]
            notes.append(f"scene option solver.{key} dropped ('{choice.method}' has no such option)")
    return raw, notes


def _relocate(exc: SceneError, choice: SolverChoice) -> SceneError:
    """Name the spec in a scene error found while checking it."""
    own = ("solver.method", *(f"solver.{k}" for k, _ in choice.options))
    if exc.file == "--set":
        if any(exc.key_path == p or exc.key_path.startswith(p + ".") for p in own):
            return UsageError(exc.reason, file=choice.where, key_path=exc.key_path, hint=exc.hint)
        return exc  # the user's own --set: it names itself
    return SceneError(str(exc), file=choice.where)


def check_all(
    scene_file: str,
    choices: list[SolverChoice],
    reference: SolverChoice | None,
    overrides: tuple[str, ...] | list[str],
    outdir: Path,
) -> tuple[list[PreparedChoice], PreparedChoice | None]:
    """Check every spec against the scene (load, override, prepare) before anything runs.

    Raises:
        SceneError: the scene, an override or a spec is wrong (exit 2); nothing has been written.
    """
    for choice in [*choices, *([reference] if reference else [])]:
        check_choice(choice)
    base = load_raw_scene(scene_file, overrides)
    check_outdir(outdir, "comparison")
    taken: set[str] = set()
    out: list[PreparedChoice] = []
    for choice in [*choices, *([reference] if reference else [])]:
        stem = file_stem(choice)
        if choice is reference:
            stem = "reference-" + stem
        file = outdir / f"{unique_stem(stem, taken)}.h5"
        check_result(file)  # another live run's file, a link, or one that is not ours: refused before anything runs
        try:
            raw, notes = scene_for(base, choice)
            spec = build_spec(raw)
            prepared = prepare(spec)
        except SceneError as exc:
            if isinstance(exc, OutputError):
                raise
            raise _relocate(exc, choice) from None
        out.append(PreparedChoice(choice, spec, file, notes, prepared))
    for name, mark in REPORTS.items():  # every target is checked before anything is written
        check_report(outdir / name, mark)
    ref = out.pop() if reference else None
    return out, ref


# ----------------------------------------------------------------------------- running


@dataclass
class CompareRow:
    """One line of the table; None where a number does not exist (shown as n/a)."""

    solver: str
    method: str
    options: dict[str, Any]
    status: str
    message: str
    file: str
    repeats: int = 0
    wall_time_s: float | None = None  # median over the repeats
    wall_times_s: list[float] = field(default_factory=list)
    us_per_step: float | None = None
    steps: int | None = None
    t_end: float | None = None
    max_position_violation: float | None = None
    max_velocity_violation: float | None = None
    energy_drift: float | None = None
    events: str | None = None  # what the run saw of the contacts' events (event_summary)
    error_rms: float | None = None
    error_max: float | None = None
    notes: list[str] = field(default_factory=list)
    file_failure: str | None = None  # the run's result file was lost (full disk, taken away): exit 3
    # the scene's outputs (CONTRACT §8): max_NAME, min_NAME, final_NAME as the run's summary has them
    outputs: dict[str, float] = field(default_factory=dict)
    # NAME -> RMS over the reference's times of the output's difference to the reference's
    output_error_rms: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Comparison:
    """Everything ``compare`` found: written as compare.json and printed in the chosen format."""

    scene: str
    scene_file: str
    outdir: str
    overrides: list[str]
    repeat: int
    rows: list[CompareRow]
    reference: CompareRow | None = None
    notes: list[str] = field(default_factory=list)
    created: str = ""
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return json_ready(
            {
                "format": COMPARE_FORMAT,
                "format_version": COMPARE_FORMAT_VERSION,
                "mbsim_version": mbsim.__version__,
                "created": self.created,
                "scene": self.scene,
                "scene_file": self.scene_file,
                "outdir": self.outdir,
                "overrides": self.overrides,
                "repeat": self.repeat,
                "machine": {
                    "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                    "numpy": np.__version__,
                },
                "error_metric": ERROR_METRIC,
                "reference": asdict(self.reference) if self.reference else None,
                "rows": [asdict(r) for r in self.rows],
                "notes": self.notes,
                "interrupted": self.interrupted,
            }
        )


ERROR_METRIC = (
    "error_rms = sqrt(mean over the reference's times of sum over coordinates of (q - q_ref)^2) on the overlapping "
    "time span, /q of the solver interpolated (cubic spline, column by column) onto the reference's times when the "
    "grids differ, quaternion signs aligned with the reference; error_max = max |q - q_ref| over times and "
    "coordinates; output_error_rms[NAME] = sqrt(mean over the same times of (y - y_ref)^2) of /outputs/NAME, "
    "interpolated alike"
)


def _run_choice(item: PreparedChoice, repeat: int, note: Callable[[str], None], label: str) -> CompareRow:
    """Run one spec ``repeat`` times; a failure or an exception becomes a failed row."""
    choice = item.choice
    row = CompareRow(
        solver=choice.text,
        method=choice.method,
        options=choice.option_values(),
        status="failed",
        message="",
        file=str(item.file),
        notes=list(item.notes),
    )
    summaries: list[RunSummary] = []
    for k in range(repeat):
        note(f"running {label}" + (f", repeat {k + 1}/{repeat}" if repeat > 1 else "") + "...")
        prepared, item.prepared = item.prepared, None  # the checked (model, solver) serves the first run
        try:
            check_result(item.file)  # again: a link or a file of the user's put there since the check
            detach(item.file)  # a hard link's other names keep their contents
            summary = run(item.spec, item.file, prepared=prepared)
        except MbsimError as exc:
            row.message = str(exc)
            break
        except Exception as exc:  # one solver must not end the comparison
            row.message = f"internal error: {type(exc).__name__}: {exc}"
            break
        summaries.append(summary)
        if summary.status != "completed":  # a deterministic failure: repeating it says nothing new
            break
    if summaries:
        last = summaries[-1]
        walls = [s.wall_time_s for s in summaries]
        row.status, row.message = last.status, row.message or last.message
        if row.message and row.status == "completed":  # an exception in a later repeat
            row.status = "failed"
        row.repeats = len(summaries)
        row.wall_times_s = walls
        row.wall_time_s = statistics.median(walls)
        row.steps = last.steps
        row.us_per_step = 1e6 * row.wall_time_s / last.steps if last.steps else None
        row.t_end = last.t_end
        row.max_position_violation = last.max_position_violation
        row.max_velocity_violation = last.max_velocity_violation
        row.energy_drift = last.energy_drift
        row.events = event_summary(item.file)
        row.file_failure = last.file_failure
        row.outputs = dict(last.outputs)
    if row.status != "completed":
        note(f"  {choice.text}: failed: {row.message}")
    return row


def event_summary(path: str | Path) -> str | None:
    """What a result file says of contact events: event_driven's /events by kind (``3 impact, 1
    accumulation``); for timestepping, which does not locate them, the recorded rows where the
    number of touching contacts rose; None for the other methods."""
    try:
        with open_result(path) as f:
            if "events" in f and "kind" in f["events"]:
                kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in f["events/kind"][()]]
                if not kinds:
                    return "none"
                counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
                return ", ".join(f"{n} {k}" for k, n in counts.items())
            if "diagnostics/contacts/count" in f:
                count = f["diagnostics/contacts/count"][()]
                if f.attrs.get("method") == "timestepping":  # impacts fall within steps, unlocated
                    return f"not located; contact onsets in the records {int(np.sum(np.diff(count) > 0))}"
    except Exception:  # a file that cannot be read has no events to report
        return None
    return None


def read_positions(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(time (n,), /q (n, nq), column names) of a result file."""
    with open_result(path) as f:
        t = f["time"][:] if "time" in f else np.zeros(0)
        q = f["q"][:] if "q" in f else np.zeros((0, 0))
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["q"].attrs.get("names", [])]
    return t, q, names


def read_body_positions(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(time, body coordinates, names) from /bodies: NAME.x, y, z, qw, qx, qy, qz per body (3D)
    or NAME.x, y, angle (2D), in the file's body order: the common ground of methods whose own
    coordinates differ (joint coordinates of ``recursive`` against body coordinates)."""
    with open_result(path) as f:
        t = f["time"][:] if "time" in f else np.zeros(0)
        columns, names = [], []
        bodies = f.get("bodies", {})
        for body in bodies:
            group = bodies[body]
            pos = group["position"][:]
            columns.append(pos)
            names += [f"{body}.{a}" for a in "xyz"[: pos.shape[1]]]
            if "orientation" in group:
                columns.append(group["orientation"][:])
                names += [f"{body}.q{a}" for a in "wxyz"]
            elif "angle" in group:
                columns.append(group["angle"][:][:, None])
                names.append(f"{body}.angle")
    q = np.concatenate(columns, axis=1) if columns else np.zeros((len(t), 0))
    return t, q, names


def on_reference_times(t: np.ndarray, values: np.ndarray, t_ref: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``values`` (n, k) recorded at ``t``, at the reference's times ``t_ref`` where both have
    results: (values there, the mask of ``t_ref`` used), or None when they share fewer than two.
    Identical grids are taken as they are; otherwise a cubic spline per column (linear
    interpolation would add an error of order h^2 that hides a fourth-order method's accuracy)."""
    from scipy.interpolate import CubicSpline

    tol = 1e-12 * max(1.0, abs(t_ref[-1]))
    if len(t) == len(t_ref) and np.allclose(t, t_ref, rtol=0, atol=tol):
        return values, np.ones(len(t_ref), dtype=bool)
    inside = (t_ref >= t[0] - tol) & (t_ref <= t[-1] + tol)
    if inside.sum() < 2:
        return None
    t_eval = np.clip(t_ref[inside], t[0], t[-1])
    t_u, first = np.unique(t, return_index=True)
    return (CubicSpline(t_u, values[first], axis=0)(t_eval) if len(t_u) >= 2 else values[first]), inside


def read_outputs(path: str | Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(time (n,), NAME -> /outputs/NAME (n,)) of a result file (no outputs: an empty dict)."""
    with open_result(path) as f:
        t = f["time"][:] if "time" in f else np.zeros(0)
        return t, {n: member(f["outputs"], n)[:] for n in member_names(f.get("outputs"))}


def output_errors(path: str | Path, reference: str | Path) -> dict[str, float | None]:
    """NAME -> RMS over the reference's times of /outputs/NAME - the reference's, for every output
    both files have (:func:`on_reference_times`; None where they share too few rows)."""
    t, values = read_outputs(path)
    t_ref, ref_values = read_outputs(reference)
    out: dict[str, float | None] = {}
    for name in [n for n in values if n in ref_values]:
        sampled = on_reference_times(t, values[name], t_ref) if len(t) >= 2 and len(t_ref) >= 2 else None
        if sampled is None:
            out[name] = None
            continue
        y_at, inside = sampled
        out[name] = float(np.sqrt(np.mean((y_at - ref_values[name][inside]) ** 2)))
    return out


def position_error(path: str | Path, reference: str | Path) -> tuple[float | None, float | None, str]:
    """RMS over time of |q - q_ref| (Euclidean over coordinates) and max |q - q_ref|.

    The span is where both files have results. When the time grids differ (adaptive
    integrators, another step), the solver's /q is interpolated onto the reference's times by
    a cubic spline per column: linear interpolation would add an error of order h^2 that hides
    the accuracy of a fourth-order method. A quaternion (columns NAME.qw..qz) is compared
    after flipping its sign where it points away from the reference's (q and -q are the same
    rotation). When the two methods' coordinates differ (method ``recursive``'s joint
    coordinates), the bodies' positions and orientations from /bodies are compared instead.

    Returns:
        (error_rms, error_max, why not) -- the numbers are None when they cannot be computed.
    """
    t, q, names = read_positions(path)
    t_ref, q_ref, names_ref = read_positions(reference)
    if names != names_ref:  # another method's own coordinates: compare the bodies' instead
        t, q, names = read_body_positions(path)
        t_ref, q_ref, names_ref = read_body_positions(reference)
        if names != names_ref or not names:
            return None, None, "its bodies differ from the reference's; no error computed"
    if len(t) < 2 or len(t_ref) < 2:
        return None, None, "too few recorded steps for an error"
    sampled = on_reference_times(t, q, t_ref)
    if sampled is None:
        return None, None, "no overlap in time with the reference"
    q_at, inside = sampled
    q_r = q_ref[inside]
    for j, name in enumerate(names):
        if name.endswith(".qw") and j + 4 <= len(names):
            flip = np.sum(q_at[:, j : j + 4] * q_r[:, j : j + 4], axis=1) < 0
            q_at[flip, j : j + 4] *= -1.0
    dq = q_at - q_r
    rms = float(np.sqrt(np.mean(np.sum(dq**2, axis=1))))
    return rms, float(np.max(np.abs(dq))) if dq.size else 0.0, ""


def compare(
    scene_file: str,
    choices: list[SolverChoice],
    reference: SolverChoice | None = None,
    overrides: tuple[str, ...] | list[str] = (),
    repeat: int = 1,
    outdir: str | Path | None = None,
    note: Callable[[str], None] | None = None,
) -> Comparison:
    """Check every spec, run each ``repeat`` times, compute errors, write the files of OUTDIR.

    Args:
        scene_file: the scene.
        choices: the parsed ``--solvers`` specs (:func:`parse_solver_list`).
        reference: the parsed ``--reference`` spec, if any.
        overrides: the user's ``--set`` assignments, applied before each spec's own.
        repeat: runs per spec; the table shows the median wall time, the file is the last run's.
        outdir: default ``outputs/compare-<scene stem>``.
        note: receives progress notes (the CLI prints them on stderr).

    Raises:
        SceneError: a bad scene, override or spec, before anything runs (exit 2).
    Returns:
        The comparison; ``interrupted`` is set when SIGINT stopped a run (the rest are ``skipped``).
    """
    note = note or (lambda _: None)
    if not choices:
        raise UsageError("expected at least one solver spec", file="--solvers")
    if repeat < 1:
        raise UsageError(f"--repeat expects a positive count, got {repeat}", file="--repeat")
    out = Path(outdir) if outdir else Path("outputs") / f"compare-{Path(scene_file).stem}"
    items, ref_item = check_all(scene_file, choices, reference, tuple(overrides), out)
    open_outdir(out, "comparison")  # created if absent; a folder nothing can be written into is refused

    first = items[0].spec
    result = Comparison(
        scene=first.name,
        scene_file=path_text(str(scene_file)),  # shown in the reports: UTF-8 text whatever the locale
        outdir=str(out),
        overrides=list(overrides),
        repeat=repeat,
        rows=[],
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )
    model = items[0].prepared[0] if items[0].prepared else None
    if model is not None and model.assembly_report:
        moved = ", ".join(f"{r['body']} {r['distance']:.3g} m / {r['rotation']:.3g} rad" for r in model.assembly_report)
        result.notes.append(f"the initial state was assembled onto the joints: {moved}")

    total = len(items)
    for i, item in enumerate(items):
        if result.interrupted:
            result.rows.append(
                CompareRow(
                    item.choice.text,
                    item.choice.method,
                    item.choice.option_values(),
                    "skipped",
                    "not run: interrupted",
                    "",
                    notes=list(item.notes),
                )
            )
            continue
        row = _run_choice(item, repeat, note, f"{item.choice.text} ({i + 1}/{total})")
        result.rows.append(row)
        result.interrupted = interrupts.received() is not None

    if ref_item is not None and not result.interrupted:
        same = next((r for r, it in zip(result.rows, items, strict=True) if it.choice.same_run(ref_item.choice)), None)
        if same is not None and same.status in ("completed", "failed") and Path(same.file).is_file():
            install_result(ref_item.file, Path(same.file))  # reuse the run; the reference keeps its own file
            result.reference = copy.deepcopy(same)
            result.reference.file = str(ref_item.file)
            result.reference.notes.append(f"the run of solver '{same.solver}', not run again")
        else:
            result.reference = _run_choice(ref_item, 1, note, f"reference {ref_item.choice.text}")
        _errors(result)
    _write(result)
    return result


def _errors(result: Comparison) -> None:
    """Fill error_rms / error_max of every completed row from the reference's file."""
    ref = result.reference
    if ref is None:
        return
    if ref.status != "completed":
        result.notes.append(f"reference '{ref.solver}' {ref.status}: {ref.message}; no errors computed")
        return
    for row in result.rows:
        if row.status != "completed":
            row.notes.append("no error against the reference: the run did not complete")
            continue
        try:
            row.error_rms, row.error_max, why = position_error(row.file, ref.file)
        except (MbsimError, OSError, KeyError, ValueError) as exc:
            row.error_rms, row.error_max, why = None, None, f"cannot compute the error: {exc}"
        if why:
            row.notes.append(why)
        try:
            row.output_error_rms = output_errors(row.file, ref.file)
        except (MbsimError, OSError, KeyError, ValueError) as exc:
            row.notes.append(f"cannot compute the outputs' errors: {exc}")


def _write(result: Comparison) -> None:
    """compare.json, compare.md and the plots into OUTDIR."""
    out = Path(result.outdir)
    runs = [(r.solver, r.file, r.status) for r in result.rows if r.file]
    if result.reference is not None:
        runs.append((f"reference {result.reference.solver}", result.reference.file, result.reference.status))
    try:
        plot_comparison([(label, Path(f), s) for label, f, s in runs if Path(f).is_file()], out, REPORTS)
    except Exception as exc:  # a plot must not lose the table
        result.notes.append(f"plots not written: {type(exc).__name__}: {exc}")
    table = json.dumps(result.to_dict(), indent=2) + "\n"
    write_report(out / "compare.json", table.encode(), REPORTS["compare.json"])
    write_report(out / "compare.md", render(result, "markdown").encode(), REPORTS["compare.md"])


# ----------------------------------------------------------------------------- tables

_COLUMNS = (  # (key, table header, csv header, number format)
    ("solver", "solver", "solver", ""),
    ("status", "status", "status", ""),
    ("wall_time_s", "wall s", "wall_s", ".3g"),
    ("us_per_step", "µs/step", "us_per_step", ".1f"),
    ("steps", "steps", "steps", "d"),
    ("max_position_violation", "max pos. violation", "max_position_violation", ".2e"),
    ("max_velocity_violation", "max vel. violation", "max_velocity_violation", ".2e"),
    ("energy_drift", "max rel. energy drift", "energy_drift", ".2e"),
    ("events", "events", "events", ""),
)
_ERROR_COLUMNS = (
    ("error_rms", "RMS error q", "error_rms", ".2e"),
    ("error_max", "max |dq|", "error_max", ".2e"),
)


def _columns(result: Comparison) -> tuple:
    """The standard columns, the errors of /q (with a reference), then the outputs' summaries,
    one column each (the outputs of the scene: every row's, in the order first met), and their
    errors against the reference. An output's key is a tuple: it never meets a standard key."""
    summaries = list(dict.fromkeys(k for row in result.rows for k in row.outputs))
    cols = _COLUMNS + (_ERROR_COLUMNS if result.reference is not None else ())
    cols += tuple((("outputs", k), k, k, ".6g") for k in summaries)
    if result.reference is not None:
        names = list(dict.fromkeys(n for row in result.rows for n in row.output_error_rms))
        order = [k[len("max_") :] for k in summaries if k.startswith("max_")]  # the scene's
        names.sort(key=lambda n: order.index(n) if n in order else len(order))
        cols += tuple((("output_error_rms", n), f"RMS error {n}", f"error_rms_{n}", ".2e") for n in names)
    return cols


def _values(row: CompareRow) -> dict[Any, Any]:
    """A row's cells by column key (:func:`_columns`)."""
    out: dict[Any, Any] = asdict(row)
    out.update({("outputs", k): v for k, v in row.outputs.items()})
    out.update({("output_error_rms", n): v for n, v in row.output_error_rms.items()})
    return out


def _notes(result: Comparison) -> list[str]:
    """Every note as one line: the failures and row notes by solver, then the general ones."""
    lines = []
    for row in result.rows:
        if row.status != "completed" and row.message:
            lines.append(f"{row.solver}: {row.status}: {row.message}")
        lines += [f"{row.solver}: {n}" for n in row.notes]
    if result.reference is not None:
        ref = result.reference
        text = f"reference: {ref.solver} ({ref.status}"
        text += f", {ref.steps} steps, {cell(ref.wall_time_s, '.3g')} s)" if ref.steps is not None else ")"
        text += "; error = RMS over time of |q - q_ref|, max |dq| over time and coordinates"
        if any(row.output_error_rms for row in result.rows):
            text += "; RMS error NAME = RMS over time of the output's difference to the reference's"
        lines.append(text)
        lines += [f"reference: {n}" for n in ref.notes]
    lines += result.notes
    if result.repeat > 1:
        lines.append(f"wall s: median of {result.repeat} runs")
    return lines


def _csv_cell(value: Any) -> Any:
    """Full precision (repr), an empty cell for a missing number."""
    return "" if value is None else (repr(value) if isinstance(value, float) else value)


def render(result: Comparison, fmt: str) -> str:
    """The table as text: ``table`` (aligned), ``json`` (= compare.json), ``csv`` or ``markdown``."""
    cols = _columns(result)
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2)
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([c[2] for c in cols] + ["message", "notes"])
        for row in result.rows:
            d = _values(row)
            cells = [_csv_cell(d.get(c[0])) for c in cols]
            writer.writerow(cells + [row.message, "; ".join(row.notes)])
        return buf.getvalue().rstrip("\n")
    cells = [[cell(d.get(c[0]), c[3]) for c in cols] for d in map(_values, result.rows)]
    headers = [c[1] for c in cols]
    numeric = [bool(c[3]) for c in cols]
    notes = _notes(result)
    if fmt == "markdown":
        lines = [
            markdown_line("compare"),  # how mbsim knows the file in OUTDIR as its own
            f"# mbsim compare: {result.scene}",
            "",
            f"Scene `{result.scene_file}`"
            + (f" with `--set {' '.join(result.overrides)}`" if result.overrides else "")
            + f", {result.created}, mbsim {mbsim.__version__}.",
            "",
            *markdown_rows(headers, numeric, [[f"`{row[0]}`", *row[1:]] for row in cells]),
        ]
        if notes:
            lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
        lines += ["", "Plots: ![position violation](violation.png) ![energy error](energy.png)"]
        return "\n".join(lines) + "\n"
    if fmt != "table":
        raise UsageError(f"unknown format '{fmt}'; expected one of {', '.join(FORMATS)}", file="--format")
    lines = aligned_rows(headers, numeric, cells)
    if notes:
        lines += [""] + [f"note: {n}" for n in notes]
    return "\n".join(lines)


__all__ = [
    "FORMATS",
    "CompareRow",
    "Comparison",
    "SolverChoice",
    "compare",
    "parse_reference",
    "parse_solver_list",
    "parse_solver_spec",
    "position_error",
    "render",
]
