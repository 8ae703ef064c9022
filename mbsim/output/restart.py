"""Continuing a run from a recorded row of its result file (``mbsim run SCENE --from OUT.h5``).

What every result file keeps for it (a choice of ours, CONTRACT §9 is silent; docs/user-guide.md
"Continuing a run"):

- ``/restart/step`` (n,): per recorded row, the number of steps taken up to it (the step counter
  that decides which steps are recorded rows, ``output.every``);
- ``/restart`` attrs ``energy0``, ``total0``, ``energy_scale``, ``fall`` (2,): the energy
  bookkeeping of the original start (total - work there, the total, the drift's scale, the free-fall
  supply of the divergence test), so that a continued run measures its drift from the original start;
- ``/restart/carry``: written at the close, the method's state beyond (t, q, v, work) at the file's
  last recorded row (attrs ``row``, ``time`` (the state's time unstamped), ``step``): the joint
  coordinates' unwrapping references, timestepping's warm-start impulses, the ODE methods' rank cut.
  A row before the last is continued without it (see the user guide for what that changes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import OutputError, UsageError
from mbsim.names import name_from_hdf5
from mbsim.output.safety import FORMAT, describe_writer, is_locked, read_root_attrs
from mbsim.scene.load import parse_yaml_text

GROUP = "restart"
# scene keys a continued run may change: the end (--to) and where and how often it records
IGNORED = (("time", "end"), ("output",))


@dataclass
class Continuation:
    """The recorded row a run continues from, read from its source file.

    Attributes:
        source: the source file's path as given on the command line.
        row: the row's index in the source file; time: its time, s (the unstamped step's time
            when the carry is the row's).
        q, v: (nq,), (nv,) the method's coordinates at the row (columns of /q and /v);
        work: J, the energy bookkeeping's work done so far; step: steps taken up to the row.
        carry: the method's state beyond these at the row (None when the file has it only for a
            later row).
        energy: energy0, total0, energy_scale, fall of the original start (mbsim.diagnostics.RunStats).
        max_work: J, the largest work up to the row (the divergence test's supply).
        names: the names of the columns of /q and /v in the source.
        joint_positions: the one-coordinate joints' unwrapped coordinates at the row
            (/joints/NAME/position), by joint name: the turn a run from a row before the last
            unwraps its joint coordinates from (the carried references are the last row's only).
    """

    source: str
    row: int
    time: float
    recorded_time: float
    q: np.ndarray
    v: np.ndarray
    work: float
    step: int
    carry: dict[str, np.ndarray] | None
    energy: dict[str, Any]
    max_work: float
    names: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))
    joint_positions: dict[str, float] = field(default_factory=dict)


def _first_difference(a: Any, b: Any, path: tuple = ()) -> tuple | None:
    """The first key path where two loaded scenes differ (None: equal), skipping IGNORED."""
    if any(path[: len(p)] == p and len(path) >= len(p) for p in IGNORED):
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                if not any((*path, key)[: len(p)] == p for p in IGNORED):
                    return (*path, key)
                continue
            found = _first_difference(a[key], b[key], (*path, key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, (*path, i))
            if found is not None:
                return found
        return None
    return None if a == b else path


def _dotted(path: tuple) -> str:
    return (
        "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(path)) or "(top)"
    )


def _refuse(source: str, reason: str, hint: str = "") -> OutputError:
    return OutputError(f"cannot continue from it: {reason}", file=source, key_path="--from", hint=hint)


def read_continuation(source: str, scene_yaml: str, at: float | None) -> Continuation:
    """The row of ``source`` at time ``at`` (None: its last) of a completed or failed result file
    of the scene whose loaded YAML text is ``scene_yaml``. Of a run the simulation itself failed
    (root attribute ``failure = simulation``: diverged, constraints violated, a step that cannot
    be taken) only the rows before the last: the last is the state it failed at. A run ended by a
    signal or a full disk (``failure = interrupted``, or none) continues from any row.

    Raises:
        OutputError: (exit 2) not a readable mbsim result file, one a live run is writing or whose
            run died (``running``), another scene's, one without restart data, no rows, the last
            row of a run the simulation failed.
        UsageError: (exit 2) ``at`` past the file's end or not a recorded row.
    """
    if not os.path.isfile(source):
        raise _refuse(source, "no such file")
    attrs = read_root_attrs(source)
    if attrs is None or attrs.get("format") != FORMAT:
        raise _refuse(source, f"not an mbsim result file (HDF5 with format={FORMAT!r})")
    status = attrs.get("status")
    if status == "running":
        if is_locked(source):
            raise _refuse(source, f"its run is still writing it ({describe_writer(source)})", "wait for it to end")
        raise _refuse(source, "its status is running but no process writes it: the run died (killed)")
    if status not in ("completed", "failed"):
        raise _refuse(source, f"expected status completed or failed, found {status!r}")
    import h5py

    with h5py.File(source, "r", locking=False) as f:
        if "scene" not in f:
            raise _refuse(source, "it has no /scene")
        text = f["scene"][()]
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        # parsed as a scene file is (the loader's limits: a crafted file's alias bomb is exit 2)
        theirs = parse_yaml_text(text, f"{source}:/scene")[0]
        ours = parse_yaml_text(scene_yaml, "<scene>")[0]
        where = _first_difference(theirs, ours)
        if where is not None:
            name = attrs.get("scene_name", "?")
            raise _refuse(
                source,
                f"it is a result of another scene: its scene ({name!r}) differs from this one at {_dotted(where)}",
                "continue a result file of this scene, with the same --set values (time.end and output may differ)",
            )
        if GROUP not in f or "step" not in f[GROUP]:
            raise _refuse(source, f"it has no /{GROUP} data (written by an mbsim before {GROUP} was kept)")
        times = np.asarray(f["time"][()], dtype=float)
        group = f[GROUP]
        steps = np.asarray(group["step"][()], dtype=float)
        n = min(len(times), len(steps), len(f["q"]), len(f["v"]))
        if n == 0:
            raise _refuse(source, "it has no recorded rows")
        times = times[:n]
        if at is None:
            row = n - 1
        else:
            tol = 1e-9 * max(1.0, abs(at))
            row = int(np.argmin(np.abs(times - at)))
            if abs(times[row] - at) > tol:
                if at > times[-1]:
                    reason = f"--time {at:g} s is past the file's end (its last row is at {times[-1]:.10g} s)"
                else:
                    near = ", ".join(f"{t:.10g}" for t in times[max(row - 1, 0) : row + 2])
                    reason = f"--time {at:g} s is not a recorded row (rows near it: {near} s)"
                raise UsageError(reason, file=source, key_path="--time", hint="the time of a row of /time")
        if status == "failed" and attrs.get("failure") == "simulation" and row == n - 1:
            message = str(attrs.get("message", "")) or "no message"
            raise _refuse(
                source,
                f"its run failed ({message}), and its last row is the state the method failed at: continuing "
                "from it meets the same failure",
                f"continue from an earlier row with --time T (its rows end at {times[-1]:.10g} s)",
            )
        carry = None
        time = float(times[row])
        if "carry" in group and int(group["carry"].attrs.get("row", -1)) == row:
            c = group["carry"]
            carry = {key: np.asarray(c[key][()]) for key in _datasets(c)}
            time = float(c.attrs["time"])
        work = f["diagnostics/energy/work"][: row + 1] if "diagnostics/energy/work" in f else np.zeros(1)
        energy = {key: group.attrs[key] for key in ("energy0", "total0", "energy_scale", "fall") if key in group.attrs}
        if len(energy) < 4:
            raise _refuse(source, f"its /{GROUP} has no energy bookkeeping of its start")
        names = tuple(list(_names(f[key])) for key in ("q", "v"))
        joint_positions = {}
        for key, joint in f["joints"].items() if "joints" in f else ():
            if "position" in joint and len(joint["position"]) > row:
                name = joint.attrs.get("name", name_from_hdf5(key))
                joint_positions[name.decode() if isinstance(name, bytes) else str(name)] = float(joint["position"][row])
        return Continuation(
            source=source,
            row=row,
            time=time,
            recorded_time=float(times[row]),
            q=np.asarray(f["q"][row], dtype=float),
            v=np.asarray(f["v"][row], dtype=float),
            work=float(work[-1]),
            step=int(steps[row]),
            carry=carry,
            energy=energy,
            max_work=float(max(0.0, np.fmax.reduce(work))),
            names=names,
            joint_positions=joint_positions,
        )


def _names(ds: Any) -> list[str]:
    return [n.decode() if isinstance(n, bytes) else str(n) for n in ds.attrs.get("names", [])]


def _datasets(group: Any, prefix: str = "") -> list[str]:
    """The datasets under ``group`` as relative paths."""
    out = []
    for key, item in group.items():
        if hasattr(item, "keys"):
            out += _datasets(item, f"{prefix}{key}/")
        else:
            out.append(f"{prefix}{key}")
    return out


def check_columns(continued: Continuation, names: tuple[list[str], list[str]], source: str) -> None:
    """The source's /q and /v columns are those of this run's method (same scene, same method).

    Raises:
        OutputError: (exit 2) they differ.
    """

    def listed(names: list[str]) -> str:
        return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")

    for label, theirs, ours in (("q", continued.names[0], names[0]), ("v", continued.names[1], names[1])):
        if list(theirs) != list(ours):
            raise _refuse(
                source,
                f"its /{label} has {len(theirs)} columns ({listed(theirs)}), "
                f"this run's method has {len(ours)} ({listed(ours)})",
            )


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same existing file."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
