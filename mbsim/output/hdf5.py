"""The HDF5 result file of CONTRACT §3, written as the run goes.

Rows are buffered in memory and appended to chunked, resizable datasets at least every
``flush_seconds`` of wall time (and every ``flush_rows`` rows), then the file is flushed, so
that a killed run leaves a readable file with every recorded step up to that point. The root
attribute ``status`` is ``running`` until :meth:`ResultWriter.close` sets ``completed`` or
``failed``.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import mbsim
from mbsim.errors import OutputError
from mbsim.model.model import Model
from mbsim.names import NAMED_GROUPS, hdf5_name, name_from_hdf5
from mbsim.output.geometry import write_geometry
from mbsim.output.safety import FORMAT, ResultClaim, claim_result, writer_stamp

FORMAT_VERSION = 1
__all__ = ["FORMAT", "FORMAT_VERSION", "ResultWriter", "open_for_writing", "write_stub"]


def open_for_writing(claim: ResultClaim) -> h5py.File:
    """Create (truncate) the claimed file for writing.

    The 1.8 file format (with the newest object headers: attributes beyond 64 KiB, the column
    names of /q for thousands of bodies, are stored densely) and no HDF5 file lock: a plain
    ``h5py.File(path, "r")`` in another process (``mbsim info``, a notebook) opens the live file
    and reads every row flushed so far, with no environment variable and no SWMR flag. (The
    writer's own lock, mbsim.output.safety, keeps a second writer out.)
    """
    try:
        return h5py.File(claim.path, "w", libver=("v108", "latest"), locking=False)
    except OSError as exc:
        claim.release()
        raise OutputError(f"cannot write the result file: {exc}", file=str(claim.path)) from None


def _start_file(f: h5py.File, scene_text: str, attrs: dict[str, Any], status: str, message: str) -> None:
    """The root attributes of CONTRACT §3 (no steps yet), the writer's stamp, ``attrs`` and /scene."""
    root = f.attrs
    root["format"] = FORMAT
    root["format_version"] = FORMAT_VERSION
    root["mbsim_version"] = mbsim.__version__
    root["status"] = status
    root["message"] = message
    root["steps"] = 0
    root["wall_time_s"] = 0.0
    root["created"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    for key, value in {**writer_stamp(), **attrs}.items():
        root[key] = value
    f.create_dataset("scene", data=scene_text, dtype=h5py.string_dtype())


def write_stub(claim: ResultClaim, scene_text: str, attrs: dict[str, Any], status: str, message: str) -> None:
    """A result file for a run that ended before its model existed (a signal during start-up):
    the root attributes, /scene and empty /time, /q, /v; the claim is released."""
    try:
        with open_for_writing(claim) as f:
            _start_file(f, scene_text, attrs, status, message)
            f.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8")
            for name in ("q", "v"):
                f.create_dataset(name, shape=(0, 0), maxshape=(None, None), dtype="f8")
    finally:
        claim.release()


class ResultWriter:
    """Appends recorded rows to the result file.

    A row is a mapping ``dataset path -> array`` (one time step); paths may contain the
    placeholder ``{body}`` / ``{joint}`` / ``{driven}`` for arrays whose first axis runs over
    bodies / joints / driven joints; they are split into one dataset each (``bodies/box1/position``).
    """

    def __init__(
        self,
        claim: ResultClaim | str | Path,
        model: Model,
        attrs: dict[str, Any],
        flush_seconds: float = 2.0,
        flush_rows: int = 2000,
        coordinates: tuple[list[str], list[str]] | None = None,
    ) -> None:
        """``claim``: the right to write the file (:func:`mbsim.output.safety.claim_result`; a
        path is claimed here). ``coordinates``: names of the columns of /q and /v when the
        method's own coordinates are not the model's body coordinates (default
        ``model.coordinate_names()``)."""
        self.claim = claim if isinstance(claim, ResultClaim) else claim_result(claim)
        self.path = self.claim.path
        self.model = model
        self.file = open_for_writing(self.claim)
        _start_file(self.file, model.scene_text, {"dimension": model.dimension, **attrs}, "running", "")
        for b, name in enumerate(model.body_names):  # mass properties as the run used them (derived ones too)
            group = self.file.require_group(f"bodies/{hdf5_name(name)}")  # one link per name (mbsim.names)
            group.attrs["name"] = name
            group.attrs["mass"] = float(model.body_mass[b])
            inertia = np.asarray(model.body_inertia[b], dtype=float)
            group.attrs["inertia"] = float(inertia.reshape(-1)[0]) if model.dimension == 2 else inertia
        # what the bodies look like, so that the result exports without its scene (CONTRACT §7)
        write_geometry(self.file, model.shapes, model.body_names, np.asarray(model.gravity, dtype=float))
        self._buffer: dict[str, list[np.ndarray]] = {}
        self._datasets: dict[str, h5py.Dataset] = {}
        self._last_flush = time.perf_counter()
        self.flush_seconds = flush_seconds
        self.flush_rows = flush_rows
        self.rows = 0
        self._pending = 0
        qn, vn = coordinates if coordinates is not None else model.coordinate_names()
        self._names = {"q": qn, "v": vn}
        # the core datasets exist from the start, so that a run that fails before its first
        # row still leaves the layout of CONTRACT §3 (with zero rows)
        for path, width in (("time", None), ("q", len(qn)), ("v", len(vn))):
            self._create(path, () if width is None else (width,), 256)
        self.file.flush()  # readable (status "running") from the start, before the first rows

    def append(self, row: dict[str, np.ndarray | float]) -> None:
        """One row: key -> value of one time step."""
        self.append_rows({key: np.asarray(value, dtype=float)[None] for key, value in row.items()})

    def append_rows(self, rows: dict[str, np.ndarray]) -> None:
        """A block of rows: key -> array (n, ...) over n time steps (copied)."""
        n = 0
        for key, block in rows.items():
            self._buffer.setdefault(key, []).append(np.array(block, dtype=float))
            n = len(block)
        self.rows += n
        self._pending += n
        if self._pending >= self.flush_rows or time.perf_counter() - self._last_flush >= self.flush_seconds:
            self.flush()

    def _targets(self, key: str, block: np.ndarray):
        """(dataset path, data) pairs of a buffered block (n, ...)."""
        # the placeholders stand first in mbsim's own keys; a contact named "{body}" is not one
        if key.startswith("bodies/{body}/"):
            for b, name in enumerate(self.model.body_names):
                yield key.replace("{body}", hdf5_name(name)), block[:, b]
        elif key.startswith("joints/{driven}/"):
            driven = [j for j in self.model.joints if j.drive_row is not None]
            for j, joint in enumerate(driven):
                yield key.replace("{driven}", hdf5_name(joint.name)), block[:, j]
        elif key.startswith("joints/{joint}/"):
            for j, joint in enumerate(self.model.joints):
                yield key.replace("{joint}", hdf5_name(joint.name)), block[:, j]
        else:
            yield key, block

    def _create(self, path: str, row_shape: tuple[int, ...], chunk_rows: int) -> h5py.Dataset:
        # a method may have no coordinates at all (joint coordinates of welded bodies): chunks must
        # not be empty, so an empty dimension is left resizable
        maxshape = tuple(n if n else None for n in row_shape)
        chunks = tuple(n if n else 1 for n in row_shape)
        ds = self.file.create_dataset(
            path, shape=(0, *row_shape), maxshape=(None, *maxshape), chunks=(chunk_rows, *chunks), dtype="f8"
        )
        if path in self._names:
            ds.attrs["names"] = self._names[path]
        named, _, link = path.rpartition("/")[0].rpartition("/")
        if named in NAMED_GROUPS and "name" not in ds.parent.attrs:  # a user-named group: its exact name
            ds.parent.attrs["name"] = name_from_hdf5(link)
        self._datasets[path] = ds
        return ds

    def flush(self) -> None:
        if self._pending:
            for key, values in self._buffer.items():
                block = np.concatenate(values)
                for path, data in self._targets(key, block):
                    if data.ndim > 1 and data.shape[1] == 0 and path not in self._datasets:
                        continue
                    ds = self._datasets.get(path)
                    if ds is None:
                        ds = self._create(path, data.shape[1:], max(1, min(256, 2**16 // max(8, data[0].nbytes))))
                    n = ds.shape[0]
                    ds.resize(n + len(data), axis=0)
                    ds[n:] = data
                values.clear()
            self._pending = 0
            self.file.attrs["steps_recorded"] = self.rows
        self.file.flush()
        self._last_flush = time.perf_counter()

    def write_events(self, times: np.ndarray, kinds: list[str], contacts: list[str]) -> None:
        """/events/time, kind, contact (CONTRACT §3, event_driven): all events so far, replacing
        what an earlier call wrote."""
        group = self.file.require_group("events")
        text = h5py.string_dtype()
        for name, data, dtype in (
            ("time", np.asarray(times, float), "f8"),
            ("kind", kinds, text),
            ("contact", contacts, text),
        ):
            if name in group:
                del group[name]
            group.create_dataset(name, data=np.array(data, dtype=object if dtype is text else float), dtype=dtype)

    def set_attrs(self, **attrs: Any) -> None:
        for key, value in attrs.items():
            self.file.attrs[key] = value

    def close(self, status: str, message: str, **attrs: Any) -> None:
        """Write the remaining rows, the final status and close the file."""
        if not self.file:
            return
        try:
            self.flush()
        except Exception as exc:  # the file must not claim success when its last rows were lost
            status, message = "failed", f"writing the result file failed: {exc}"
            raise
        finally:
            try:
                self.set_attrs(status=status, message=message, **attrs)
                self.file.flush()
                self.file.close()
            finally:
                self.claim.release()
