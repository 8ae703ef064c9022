"""Reading result files back: the summary of ``mbsim info`` and time series by name."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from mbsim.errors import UsageError, did_you_mean
from mbsim.names import member, member_names, readable_path, shown
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

        # the run measures the position violation after every step and writes its maximum when it
        # ends (the figure `run` prints); the rows hold only the recorded steps, which can miss it
        over_steps = _attr(f, "max_position_violation")
        out["max_position_violation"] = None if over_steps is None else float(over_steps)
        out["max_position_violation_recorded"] = max_of("diagnostics/constraints/position_violation")
        out["max_velocity_violation"] = max_of("diagnostics/constraints/velocity_violation")
        if "diagnostics/constraints/quaternion_norm_error" in f:
            out["max_quaternion_norm_error"] = max_of("diagnostics/constraints/quaternion_norm_error")
        out["energy_drift"] = energy_drift(f)
        for key in ("residual", "iterations", "stable"):  # mbsim equilibrium's one-row file (CONTRACT §9)
            if key in f.attrs:
                out[key] = _attr(f, key)
        if "events" in f and "kind" in f["events"]:  # event_driven: how many of each kind
            kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in f["events/kind"][()]]
            out["events"] = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) or "none"
        out["bodies"] = sorted(member_names(f.get("bodies")))  # the users' names (mbsim.names)
        out["joints"] = sorted(member_names(f.get("joints")))
        if "outputs" in f:  # CONTRACT §8: the scene's outputs over the recorded rows, as run's summary has them
            out["outputs"] = [{"name": n, **_extremes(member(f["outputs"], n))} for n in group_members(f, "outputs")]
        if "actuators" in f:
            out["actuators"] = [
                {
                    "name": n,
                    "final_force": _final(member(f["actuators"], n).get("force")),
                    "final_power": _final(member(f["actuators"], n).get("power")),
                }
                for n in group_members(f, "actuators")
            ]
        datasets: list[str] = []
        f.visititems(
            lambda name, obj: (
                datasets.append(f"{readable_path(name)} {obj.shape}") if isinstance(obj, h5py.Dataset) else None
            )
        )
        out["datasets"] = datasets
    return out


def _final(dataset: h5py.Dataset | None) -> float | None:
    """The last recorded value of a series (None for none)."""
    return float(dataset[-1]) if dataset is not None and len(dataset) else None


def _extremes(dataset: h5py.Dataset) -> dict[str, float | None]:
    """final, min and max of a recorded output, as ``run`` summarises it (NaN rows skipped)."""
    values = dataset[:]
    if not len(values):
        return {"final": None, "min": None, "max": None}
    return {"final": float(values[-1]), "min": float(np.fmin.reduce(values)), "max": float(np.fmax.reduce(values))}


def energy_drift(f: h5py.File) -> float:
    """Relative energy drift as mbsim.diagnostics defines it, from the recorded series."""
    err = np.abs(relative_energy_error(f))
    err[np.isnan(err)] = np.inf  # an energy that overflowed: an unbounded error (as the run counts it)
    return float(np.max(err)) if len(err) else float("nan")


def relative_energy_error(f: h5py.File) -> np.ndarray:
    """((total - work)(t) - (total - work)(0)) / scale at each recorded time (0: the original start of
    a continued run), with the run's energy scale (root attribute ``energy_scale``, fixed by the
    initial state: mbsim.diagnostics); files
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
    start = conserved[0]
    # a continued run (mbsim run --from) measures from the original start (mbsim.output.restart)
    if "continued_from" in f.attrs and "restart" in f and "energy0" in f["restart"].attrs:
        start = float(f["restart"].attrs["energy0"])
    err = conserved - start
    return err / scale if scale > 0 else err


_NAMED_SERIES = {
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


def _labels(dataset: h5py.Dataset, quantity: str) -> list[str]:
    """The names of a body's or joint's series' columns (``x``, ``fx``, ``w`` ...)."""
    width = dataset.shape[1] if len(dataset.shape) > 1 else 1
    if quantity == "reaction" and width == 3:
        return ["fx", "fy", "torque"]
    return {3: ["x", "y", "z"], 2: ["x", "y"], 4: ["w", "x", "y", "z"], 6: ["fx", "fy", "fz", "tx", "ty", "tz"]}.get(
        width, [str(k) for k in range(width)]
    )


def _owner(f: h5py.File, item: str, strict: bool = False) -> tuple[str, str, list[str]] | None:
    """``BODY[.quantity[.component]]`` or ``JOINT[...]`` -> (group, the name, the rest split at
    dots), or None. Names may hold dots (``.``, ``a.b``): the longest name of the file that
    leaves a quantity it has (or nothing) wins; else the longest name at all (its error says
    which quantities it has) unless ``strict``."""
    cuts = [len(item)] + [k for k in range(len(item) - 1, 0, -1) if item[k] == "."]
    loose = None
    for k in cuts:
        name, rest = item[:k], item[k + 1 :]
        if k < len(item) and not rest:  # a trailing dot ends no name here
            continue
        for group in ("bodies", "joints"):
            stored = member(f[group], name) if group in f else None
            if not isinstance(stored, h5py.Group):
                continue
            parts = rest.split(".") if rest else []
            if not parts or (
                parts[0] in stored and (len(parts) == 1 or ".".join(parts[1:]) in _labels(stored[parts[0]], parts[0]))
            ):
                return group, name, parts
            loose = loose or (group, name, parts)
    return None if strict else loose


# --what items over the scene's named members (CONTRACT §8): GROUP draws one panel per quantity
# with a line per member (``outputs``: a panel per output), GROUP/NAME the panels of one member
_GROUP_PANELS: dict[str, tuple[tuple[str, str], ...]] = {
    "outputs": (("", ""),),
    "actuators": (("force", "actuator force, N or N m"), ("power", "actuator power, W")),
    "joints": (("position", "joint position, rad or m"), ("velocity", "joint velocity, rad/s or m/s")),
}


_MEMBER = {"outputs": "output", "actuators": "actuator", "joints": "joint with a coordinate"}


def group_members(f: h5py.File, group: str) -> list[str]:
    """The names of ``group``'s members that carry its plotted quantities (every output; the
    actuators; the joints with a coordinate: /joints/NAME/position), in the file's order."""
    stored = f.get(group)
    if not isinstance(stored, h5py.Group):
        return []
    quantity = _GROUP_PANELS[group][0][0]
    return [n for n in member_names(stored) if not quantity or quantity in member(stored, n)]


def _group_item(f: h5py.File, item: str) -> tuple[str, str | None] | None:
    """``outputs``, ``actuators``, ``joints`` -> (group, None); ``GROUP/NAME`` of a member of the
    file -> (group, NAME); else None (a body or joint may be called so: it is looked up next)."""
    if item in _GROUP_PANELS:
        return item, None
    group, slash, name = item.partition("/")
    if slash and group in _GROUP_PANELS and name in group_members(f, group):
        return group, name
    return None


def resolves(f: h5py.File, item: str) -> bool:
    """Whether ``item`` names a series of this file (``mbsim plot --what``)."""
    return (
        item in _NAMED_SERIES
        or item.startswith(("q:", "v:"))
        or _group_item(f, item) is not None
        or _owner(f, item, strict=True) is not None
    )


def plot_items(f: h5py.File) -> list[str]:
    """Every ``--what`` item this file can draw but components and columns: the candidates of
    "did you mean"."""
    out = [*_NAMED_SERIES, *_GROUP_PANELS]
    out += [f"{g}/{n}" for g in _GROUP_PANELS for n in group_members(f, g)]
    return out + member_names(f.get("bodies")) + member_names(f.get("joints"))


def panels(f: h5py.File, item: str) -> list[tuple[str, np.ndarray, list[str]]]:
    """The panels of one ``--what`` item: (title, values (n, k), labels) each. ``outputs`` is a
    panel per output, ``actuators`` a force and a power panel (a line per actuator), ``joints``
    a position and a velocity panel (a line per joint with a coordinate), ``GROUP/NAME`` the same
    for one member; any other item is one panel (:func:`series`).

    Raises:
        UsageError: the file has none of the group's members, or no member of that name (exit 2,
            with "did you mean").
    """
    found = _group_item(f, item)
    group, slash, name = item.partition("/")
    if found is None and slash and group in _GROUP_PANELS and _owner(f, item, strict=True) is None:
        names = group_members(f, group)
        have = f"it has {', '.join(shown(n) for n in names)}" if names else f"it has no {group}"
        raise UsageError(
            f"no {_MEMBER[group]} '{shown(name)}' in this result file; {have}",
            file="--what",
            hint=did_you_mean(name, names),
        )
    if found is None:
        return [series(f, item)]
    group, name = found
    names = [name] if name is not None else group_members(f, group)
    if not names:
        what = {"outputs": "outputs (the scene has no outputs: list)", "actuators": "actuators"}.get(
            group, "joint coordinates (/joints/NAME/position: the scene has no one-coordinate joint)"
        )
        raise UsageError(f"'{item}': this result file has no {what}", file="--what")
    stored = f[group]
    if group == "outputs":
        return [(n, member(stored, n)[:][:, None], [n]) for n in names]
    out = []
    for quantity, title in _GROUP_PANELS[group]:
        have = [n for n in names if quantity in member(stored, n)]
        if have:
            values = np.column_stack([member(stored, n)[quantity][:] for n in have])
            out.append((title if name is None else f"{name}.{quantity}", values, have))
    return out


def split_items(f: h5py.File, what: str) -> list[str]:
    """``--what``'s comma-separated items; commas and spaces inside a body's or joint's name are
    kept (the longest run of pieces that names something of the file wins)."""
    pieces = what.split(",")
    out, i = [], 0
    while i < len(pieces):
        for j in range(len(pieces), i, -1):
            text = ",".join(pieces[i:j])
            found = next((t for t in (text, text.strip()) if t and resolves(f, t)), None)
            if found is not None:
                out.append(found)
                i = j
                break
        else:
            if pieces[i].strip():
                out.append(pieces[i].strip())  # unknown: series() says so
            i += 1
    return out


def series(f: h5py.File, item: str) -> tuple[str, np.ndarray, list[str]]:
    """A named quantity against time: (title, values (n, k), labels); see ``mbsim plot --what``.
    Bodies and joints are found by their names as the scene gave them (mbsim.names)."""
    if item in _NAMED_SERIES:
        paths, title = _NAMED_SERIES[item]
        present = [p for p in paths if p in f]
        if not present:
            raise UsageError(f"'{item}' is not in this result file", file="--what")
        return title, np.column_stack([f[p][:] for p in present]), [p.rsplit("/", 1)[1] for p in present]
    if item.startswith(("q:", "v:")):
        which, name = item.split(":", 1)
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f[which].attrs["names"]]
        if name not in names:
            raise UsageError(
                f"no coordinate '{shown(name)}' in /{which}; expected one of {', '.join(names[:12])}...",
                file="--what",
            )
        return item, f[which][:, names.index(name)][:, None], [name]
    found = _owner(f, item)
    if found is None:
        raise UsageError(
            f"unknown plot item '{shown(item)}': not a quantity, output, actuator, body or joint of this file",
            file="--what",
            hint=did_you_mean(item, plot_items(f)),
        )
    group, owner, parts = found
    stored = member(f[group], owner)
    quantity = parts[0] if parts else ("position" if group == "bodies" else "reaction")
    if quantity not in stored:
        has = ", ".join(stored.keys())
        raise UsageError(f"'{shown(owner)}' has no '{shown(quantity)}'; it has {has}", file="--what")
    data = stored[quantity][:]
    data = data[:, None] if data.ndim == 1 else data
    labels = _labels(stored[quantity], quantity)
    if len(parts) > 1:
        component = ".".join(parts[1:])
        if component not in labels:
            raise UsageError(
                f"'{shown(item)}': component '{shown(component)}' not in {', '.join(labels)}", file="--what"
            )
        k = labels.index(component)
        return item, data[:, k : k + 1], [component]
    return f"{owner}.{quantity}", data, labels
