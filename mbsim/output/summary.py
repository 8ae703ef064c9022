"""Reading result files back: the summary of ``mbsim info`` and time series by name."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from mbsim.errors import UsageError
from mbsim.output.safety import FORMAT, describe_writer, is_locked


def check_result_path(path: str | Path) -> None:
    """Refuse (exit 2) a path that cannot be a result file: missing, a directory, a device, a FIFO
    (opening one of those could block or read forever)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"result file not found: {path}", file=str(path))
    if p.is_dir():
        raise UsageError("is a directory; expected an mbsim result file (.h5)", file=str(path))
    if not p.is_file():
        raise UsageError("is not a regular file; expected an mbsim result file (.h5)", file=str(path))


def open_result(path: str | Path) -> h5py.File:
    """Open a result file for reading, a live one too (its writer holds no HDF5 lock; an open
    that meets the writer in the middle of a flush is tried again)."""
    for attempt in range(5):
        try:
            f = h5py.File(path, "r", locking=False)
            break
        except OSError as exc:
            if attempt == 4 or not is_locked(path):
                raise UsageError(f"not a readable HDF5 file: {exc}", file=str(path)) from None
            time.sleep(0.2)
    found = f.attrs.get("format")
    if found != FORMAT:
        f.close()
        raise UsageError(f"not an mbsim result file (format attribute is {found!r})", file=str(path))
    return f


def writer_state(path: str | Path, status: str | None) -> tuple[str, bool | None, str]:
    """(status to show, whether a live process writes the file, who) for ``mbsim info``: a file
    whose status says ``running`` is either being written (its writer's lock is held) or belongs
    to a run that died (SIGKILL, a crash, a power cut) and will never be finished."""
    if status != "running":
        return str(status), None, ""
    if is_locked(path):
        return "running", True, describe_writer(path)
    return "died (the file says running, but no live process is writing it)", False, ""


def _attr(f: h5py.File, key: str, default: Any = None) -> Any:
    value = f.attrs.get(key, default)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_info(path: str | Path) -> dict[str, Any]:
    """Summary of a result file: attributes, time span, maxima of the diagnostics, contents. A read
    of a live file that meets its writer in the middle of a flush (HDF5: "addr overflow") is tried
    again, as the open is."""
    for attempt in range(5):
        try:
            return _read_info_once(path)
        except (OSError, RuntimeError):
            if attempt == 4 or not is_locked(path):
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def _read_info_once(path: str | Path) -> dict[str, Any]:
    with open_result(path) as f:
        times = f["time"][:] if "time" in f else np.zeros(0)
        out: dict[str, Any] = {"file": str(path)}
        for key in (
            "scene_name",
            "status",
            "message",
            "method",
            "integrator",
            "dimension",
            "steps",
            "wall_time_s",
            "mbsim_version",
            "created",
        ):
            out[key] = _attr(f, key)
        shown, live, writer = writer_state(path, out["status"])
        out["status"] = shown
        if live is not None:
            out["file_status"] = "running"
            out["live"] = live
        if writer:
            out["writer"] = writer
        out["recorded"] = int(len(times))
        out["t_start"] = float(times[0]) if len(times) else float("nan")
        out["t_last"] = float(times[-1]) if len(times) else float("nan")

        def max_of(name: str) -> float:
            return float(np.max(f[name][:])) if name in f and len(f[name]) else float("nan")

        out["max_position_violation"] = max_of("diagnostics/constraints/position_violation")
        out["max_velocity_violation"] = max_of("diagnostics/constraints/velocity_violation")
        if "diagnostics/constraints/quaternion_norm_error" in f:
            out["max_quaternion_norm_error"] = max_of("diagnostics/constraints/quaternion_norm_error")
        out["energy_drift"] = energy_drift(f)
        if "events" in f and "kind" in f["events"]:  # event_driven: how many of each kind
            kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in f["events/kind"][()]]
            out["events"] = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) or "none"
        out["bodies"] = sorted(f["bodies"].keys()) if "bodies" in f else []
        out["joints"] = sorted(f["joints"].keys()) if "joints" in f else []
        datasets: list[str] = []
        f.visititems(
            lambda name, obj: datasets.append(f"{name} {obj.shape}") if isinstance(obj, h5py.Dataset) else None
        )
        out["datasets"] = datasets
    return out


def energy_drift(f: h5py.File) -> float:
    """Relative energy drift as mbsim.diagnostics defines it, from the recorded series."""
    err = relative_energy_error(f)
    return float(np.max(np.abs(err))) if len(err) else float("nan")


def relative_energy_error(f: h5py.File) -> np.ndarray:
    """((total - work)(t) - (total - work)(0)) / scale at each recorded time, with the run's energy
    scale (root attribute ``energy_scale``, fixed by the initial state: mbsim.diagnostics); files
    without it (older ones, or a run cut short before it was stored) use the same formula's
    fallback, the largest |work|, else the absolute error."""
    if "diagnostics/energy/total" not in f or len(f["diagnostics/energy/total"]) == 0:
        return np.zeros(0)
    total = f["diagnostics/energy/total"][:]
    work = f["diagnostics/energy/work"][:]
    n = min(len(total), len(work))
    conserved = total[:n] - work[:n]
    scale = float(f.attrs.get("energy_scale", 0.0) or 0.0)
    if not scale > 0:
        scale = float(np.max(np.abs(work[:n]))) if n else 0.0
    err = conserved - conserved[0]
    return err / scale if scale > 0 else err


def series(f: h5py.File, item: str) -> tuple[str, np.ndarray, list[str]]:
    """A named quantity against time: (title, values (n, k), labels); see ``mbsim plot --what``."""
    named = {
        "energy": (
            [
                "diagnostics/energy/kinetic",
                "diagnostics/energy/potential",
                "diagnostics/energy/total",
                "diagnostics/energy/work",
            ],
            "energy, J",
        ),
        "violation": (
            ["diagnostics/constraints/position_violation", "diagnostics/constraints/velocity_violation"],
            "constraint violation",
        ),
        "quaternion": (["diagnostics/constraints/quaternion_norm_error"], "quaternion norm error"),
        "iterations": (["diagnostics/solver/iterations"], "solver iterations"),
        "step_size": (["diagnostics/solver/step_size"], "step size, s"),
        "contacts": (["diagnostics/contacts/count", "diagnostics/contacts/max_penetration"], "contacts"),
    }
    if item in named:
        paths, title = named[item]
        present = [p for p in paths if p in f]
        if not present:
            raise UsageError(f"'{item}' is not in this result file", file="--what")
        return title, np.column_stack([f[p][:] for p in present]), [p.rsplit("/", 1)[1] for p in present]
    if item.startswith(("q:", "v:")):
        which, name = item.split(":", 1)
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f[which].attrs["names"]]
        if name not in names:
            raise UsageError(
                f"no coordinate '{name}' in /{which}; expected one of {', '.join(names[:12])}...", file="--what"
            )
        return item, f[which][:, names.index(name)][:, None], [name]
    parts = item.split(".")
    owner = parts[0]
    group = next((g for g in ("bodies", "joints") if g in f and owner in f[g]), None)
    if group is None:
        raise UsageError(f"unknown plot item '{item}': not a quantity, body or joint of this file", file="--what")
    quantity = parts[1] if len(parts) > 1 else ("position" if group == "bodies" else "reaction")
    if quantity not in f[group][owner]:
        raise UsageError(f"'{owner}' has no '{quantity}'; it has {', '.join(f[group][owner].keys())}", file="--what")
    data = f[group][owner][quantity][:]
    data = data[:, None] if data.ndim == 1 else data
    labels = {3: ["x", "y", "z"], 2: ["x", "y"], 4: ["w", "x", "y", "z"], 6: ["fx", "fy", "fz", "tx", "ty", "tz"]}.get(
        data.shape[1], [str(k) for k in range(data.shape[1])]
    )
    if quantity == "reaction" and data.shape[1] == 3:
        labels = ["fx", "fy", "torque"]
    if len(parts) > 2:
        if parts[2] not in labels:
            raise UsageError(f"'{item}': component '{parts[2]}' not in {', '.join(labels)}", file="--what")
        k = labels.index(parts[2])
        return item, data[:, k : k + 1], [parts[2]]
    return f"{owner}.{quantity}", data, labels
