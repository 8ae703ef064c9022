"""The HDF5 result file of CONTRACT §3, written as the run goes.

Rows are buffered in memory and appended to chunked, resizable datasets at least every
``flush_seconds`` of wall time (and every ``flush_rows`` rows), then the file is flushed, so
that a killed run leaves a readable file with every recorded step up to that point. The root
attribute ``status`` is ``running`` until :meth:`ResultWriter.close` sets ``completed`` or
``failed``.

A full disk or a file taken away under the run (mbsim.output.guard) never reaches the HDF5
library as a failed write: the header is built in memory and written in one piece (exit 2 with
nothing left behind when it does not fit), every flush first reserves the space it needs past
the end of the file (keeping enough for the close), and writes only the rows that fit when the
disk is full; the run then fails (exit 3) with ``no space left on device`` and the file keeps
every row written so far, readable, with status ``failed``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import math
import os
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import mbsim
from mbsim.diagnostics import placeholder_names
from mbsim.errors import OutputError
from mbsim.model.model import Model
from mbsim.names import NAMED_GROUPS, hdf5_name, name_from_hdf5
from mbsim.output.geometry import write_geometry
from mbsim.output.guard import (
    CLOSE_RESERVE,
    NO_SPACE,
    FileIdentity,
    ResultFileError,
    SpaceReservation,
    is_no_space,
    megabytes,
)
from mbsim.output.safety import FORMAT, ResultClaim, claim_result, writer_stamp

FORMAT_VERSION = 1
_LIBVER = ("v108", "latest")
_FLUSH_OVERHEAD = 64 * 1024  # object headers, chunk indexes and attributes a flush may touch
_EXTEND_MARGIN = 8 * 1024 * 1024  # the most a flush lengthens the file past its estimate ...
_ROOMY = 1024 * 1024 * 1024  # ... on a disk with at least this much free (_extend_past_writes)
# the per-body and per-joint datasets of a model with at most this many stay open between flushes
_KEEP_OPEN = 64
__all__ = ["FORMAT", "FORMAT_VERSION", "ResultWriter", "open_for_writing", "write_stub"]


def open_for_writing(claim: ResultClaim) -> h5py.File:
    """The header of the claimed file, in memory: :func:`write_header` puts it on disk.

    The 1.8 file format (with the newest object headers: attributes beyond 64 KiB, the column
    names of /q for thousands of bodies, are stored densely) and no HDF5 file lock: a plain
    ``h5py.File(path, "r")`` in another process (``mbsim info``, a notebook) opens the live file
    and reads every row flushed so far, with no environment variable and no SWMR flag. (The
    writer's own lock, mbsim.output.safety, keeps a second writer out.)
    """
    # in memory first: a header that does not fit on the disk is found before a byte is written
    return h5py.File(f"{claim.path}.header", "w", driver="core", backing_store=False, libver=_LIBVER, locking=False)


def write_header(claim: ResultClaim, header: h5py.File) -> tuple[h5py.File, SpaceReservation, FileIdentity]:
    """Write the in-memory ``header`` (closed here) into the claimed file, with the space its
    close needs reserved past its end, and open it there for the rows.

    Raises:
        OutputError: (exit 2) the header does not fit on the disk or cannot be written; the
            claimed path is removed again (nothing at all is left) and the claim released.
        ResultFileError: (exit 3) the file was deleted, replaced, truncated or overwritten between
            the header's write and its opening for the rows: taken away under the run (a file in its
            place, or what a truncation left, is left alone).
    """
    header.flush()
    image = header.id.get_file_image()
    header.close()
    fd = claim.fd
    space = SpaceReservation(fd)
    need = len(image) + CLOSE_RESERVE
    try:
        os.ftruncate(fd, 0)
        if not space.ensure(need):
            raise OSError(errno.ENOSPC, NO_SPACE)
        view = memoryview(image)
        while view:  # pwrite may write less than asked
            view = view[os.pwrite(fd, view, len(image) - len(view)) :]
    except OSError as exc:
        if is_no_space(exc):
            why = (
                f"{NO_SPACE}: its header and the room to close it need {megabytes(need)}, "
                f"{megabytes(space.free())} are free; nothing was written"
            )
        else:
            why = f"cannot write the result file: {exc.strerror or exc}"
        with contextlib.suppress(OSError):  # nothing of the run is in it: leave nothing behind
            if os.stat(claim.path).st_ino == os.fstat(fd).st_ino:
                os.unlink(claim.path)
        claim.release()
        raise OutputError(why, file=str(claim.path)) from None
    # reopened by its path for HDF5; deleted, replaced, truncated or overwritten between the write
    # and this open, it was taken away under the run (exit 3, as at any later flush; a file now at
    # the path is left alone), not a file that could not be written
    identity = FileIdentity(claim.path, fd)
    identity.size = len(image)
    problem = identity.problem()  # before the open too: HDF5 opens an emptied file as a new one
    if problem is not None:
        claim.release()
        raise ResultFileError(problem[1])
    try:
        f = h5py.File(claim.path, "r+", libver=_LIBVER, locking=False)
    except OSError as exc:
        problem = identity.problem()
        if problem is None:  # still ours, HDF5 refused it: nothing of the run is in it, as above
            with contextlib.suppress(OSError):
                os.unlink(claim.path)
        claim.release()
        if problem is not None:
            raise ResultFileError(problem[1]) from None
        raise OutputError(f"cannot open the result file again: {exc}", file=str(claim.path)) from None
    problem = identity.problem()
    if problem is None and os.fstat(f.id.get_vfd_handle()).st_ino != identity.key[1]:
        problem = ("replaced", f"the result file {claim.path} was replaced under the run")
    if problem is not None:
        raise _abandon(f, claim, problem)
    identity.written()
    return f, space, identity


def _abandon(f: h5py.File, claim: ResultClaim, problem: tuple[str, str]) -> ResultFileError:
    """Close a just-opened file that was taken away under the run (FileIdentity.problem) and
    release the claim: the error that ends the run (exit 3)."""
    _detach(f)  # what another process left there stays as it is
    with contextlib.suppress(OSError, RuntimeError):
        f.close()
    if problem[0] == "truncated":  # emptied just before the open: HDF5 wrote a new superblock
        os.ftruncate(claim.fd, 0)
    claim.release()
    return ResultFileError(problem[1])


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
        f = open_for_writing(claim)
        _start_file(f, scene_text, attrs, status, message)
        f.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8")
        for name in ("q", "v"):
            f.create_dataset(name, shape=(0, 0), maxshape=(None, None), dtype="f8")
        disk, space, _ = write_header(claim, f)
        disk.close()
        space.release()
    except OutputError:  # a full disk: the signal that ended the run is what the user hears of
        pass
    finally:
        claim.release()


def _chunk_rows(row_bytes: int) -> int:
    """Rows per chunk of a dataset whose rows take ``row_bytes``: chunks of about 64 kB, at most 256 rows."""
    return max(1, min(256, 2**16 // max(8, row_bytes)))


def _stored_bytes(data: Any) -> int:
    """About what ``data`` takes in the file: its bytes, or per string its length and a heap entry."""
    array = np.asarray(data)
    if array.dtype == object:
        return sum(len(str(x).encode("utf-8")) + 32 for x in array.ravel())
    return array.nbytes


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
        columns: list[tuple[str, tuple[int, ...]]] | None = None,
    ) -> None:
        """``claim``: the right to write the file (:func:`mbsim.output.safety.claim_result`; a
        path is claimed here). ``coordinates``: names of the columns of /q and /v when the
        method's own coordinates are not the model's body coordinates (default
        ``model.coordinate_names()``). ``columns``: (key, shape of one row) of the datasets every
        row has (mbsim.diagnostics.row_columns), created with the header; a key not among them
        gets its datasets at the first flush that has rows of it."""
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
        # the names a placeholder of a row's key stands for (mbsim.diagnostics.placeholder_names)
        self._placeholders = placeholder_names(model)
        self._datasets: dict[str, h5py.Dataset] = {}  # the datasets kept open between flushes
        # every dataset's rows, chunk rows and chunk bytes (what a flush writes and reserves)
        self._sizes: dict[str, tuple[int, int, int]] = {}
        # the per-body and per-joint datasets are not kept open between flushes when there are many
        # (an open HDF5 dataset holds ~85 kB: 1.5 GB for a 3,000-link chain's 18,000); a small
        # model's are (opening and closing one for each flush costs about as much as its write)
        names = self._placeholders
        per_name = (4 * len(names[("bodies", "{body}")]) + 3 * len(names[("joints", "{joint}")])
                    + 2 * len(names[("joints", "{coordinate}")]) + len(names[("joints", "{limited}")])
                    + len(names[("joints", "{frictional}")]) + 2 * len(names[("actuators", "{actuator}")])
                    + len(names[("outputs", "{output}")]))  # fmt: skip
        self._keep_open = per_name <= _KEEP_OPEN
        self._named: set[str] = set()  # the groups of bodies, joints, ... whose name attribute is set
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
        # the other datasets of every row too: created in memory with the header, they cost the
        # set-up, not the first flush of the run's loop (the same datasets a flush would create);
        # not a large model's, whose thousands of headers in the in-memory image would double the
        # peak memory (a 3,000-link chain: 250 -> 460 MB): its datasets come with the first flush
        for key, shape in columns if columns and self._keep_open else ():
            if key not in self._datasets:
                self._create_targets(key, np.zeros((1, *shape)))
        # on disk in one piece, readable (status "running") from the start, with the space of its
        # close reserved: a header that does not fit is exit 2 with nothing left behind
        self.file, self.space, self.identity = write_header(self.claim, self.file)
        try:
            self._datasets = {path: self.file[path] for path in self._datasets}
        except (OSError, RuntimeError, KeyError) as exc:
            # the header read back from a file taken away since the open (truncated: zeros)
            problem = self.identity.problem()
            if problem is None:
                raise
            self.space.release()
            raise _abandon(self.file, self.claim, problem) from exc
        self.failure: str | None = None  # why the file takes no more rows (a full disk, a file taken away)
        self._lost: str | None = None  # how the file was taken away under the run (FileIdentity.problem)

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
        group, _, rest = key.partition("/")
        placeholder = rest.partition("/")[0]
        names = self._placeholders.get((group, placeholder))
        if names is None:
            yield key, block
            return
        for k, name in enumerate(names):
            yield key.replace(placeholder, hdf5_name(name), 1), block[:, k]

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
        group = path.rpartition("/")[0]
        named, _, link = group.rpartition("/")
        # a user-named group: its exact name (looked at once per group: a body has four datasets)
        if named in NAMED_GROUPS and group not in self._named:
            self._named.add(group)
            if "name" not in ds.parent.attrs:
                ds.parent.attrs["name"] = name_from_hdf5(link)
        self._datasets[path] = ds
        self._sizes[path] = (0, chunk_rows, chunk_rows * math.prod(chunks) * 8)
        return ds

    def _create_target(self, key: str, path: str, data: np.ndarray) -> None:
        """The dataset ``path`` of ``key`` for rows like ``data`` (n, ...); one of a body's or
        joint's is closed again unless the model's are kept open."""
        ds = self._create(path, data.shape[1:], _chunk_rows(data[0].nbytes))
        if path != key and not self._keep_open:
            del self._datasets[path]
            ds.id.close()

    def _create_targets(self, key: str, block: np.ndarray) -> None:
        """The datasets of ``key`` for rows like ``block`` (as a flush creates them)."""
        for path, data in self._targets(key, block):
            if data.ndim > 1 and data.shape[1] == 0:
                continue
            self._create_target(key, path, data)

    def _new_bytes(self, rows: int) -> int:
        """An upper bound of what writing the first ``rows`` buffered rows adds to the file (whole
        chunks, each new one with its index entry; new datasets' headers), plus what the close needs."""
        total = CLOSE_RESERVE + _FLUSH_OVERHEAD
        for key, values in self._buffer.items():
            if not values or not rows:
                continue
            for path, data in self._targets(key, values[0][:1]):
                if path in self._sizes:
                    n, chunk_rows, chunk_bytes = self._sizes[path]
                elif data.ndim > 1 and data.shape[1] == 0:
                    continue
                else:
                    n, chunk_rows = 0, _chunk_rows(data[0].nbytes)
                    chunk_bytes = chunk_rows * max(8, data[0].nbytes)
                    total += 3072  # its object header, attributes and new groups (measured: 1 to 2 kB)
                chunks_before, chunks_after = math.ceil(n / chunk_rows), math.ceil((n + rows) / chunk_rows)
                # each new chunk, and the nodes of the chunk index (a v1 B-tree of about 2 kB a node:
                # the root with the first chunk; at most 64 entries a node, at least 32 after a
                # split, which may add a root too) every 32 chunks
                nodes = math.ceil(chunks_after / 32) - math.ceil(chunks_before / 32)
                index = 3072 * nodes if chunks_before == 0 else 6144 * nodes
                total += (chunks_after - chunks_before) * (chunk_bytes + 256) + index
        return total

    def _rows_that_fit(self) -> int:
        """The most buffered rows whose space can be reserved now (0 when not even one's)."""
        lo, hi = 0, self._pending - 1  # the whole buffer did not fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.space.ensure(self._new_bytes(mid)):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _stop(self, message: str, kind: str | None = None) -> ResultFileError:
        """Take no more rows: the error that ends the run (exit 3, status failed)."""
        self.failure = message
        self._lost = kind or self._lost
        return ResultFileError(message)

    def _write_failed(self, exc: Exception) -> ResultFileError:
        """The HDF5 library failed a read or write: the file was taken away or damaged under the
        run (it reads the metadata it evicted back from the file), the space reserved was not
        enough, an I/O error. The file is then closed without another write (see close)."""
        problem = self.identity.problem()
        if problem is not None:
            return self._stop(problem[1], problem[0])
        self._lost = "broken"
        if is_no_space(exc):
            return self._stop(
                f"{NO_SPACE}: the disk filled while rows were being written; the rows of the last flush may be lost"
            )
        return self._stop(f"writing the result file failed: {exc}")

    def flush(self) -> None:
        """Write the buffered rows (as many as the disk takes) and flush the file.

        Raises:
            ResultFileError: the disk is full (the rows that fit are written first), or the file was
                deleted, replaced or truncated under the run; from then on nothing more is written.
        """
        if self.failure is not None:
            raise ResultFileError(self.failure)
        problem = self.identity.problem()
        if problem is not None:
            raise self._stop(problem[1], problem[0])
        pending = self._pending
        rows = pending
        if pending and not self.space.ensure(self._new_bytes(pending)):
            rows = self._rows_that_fit()
            # what the disk could not give, for the message
            need, left = self._new_bytes(rows + 1), self.space.available()
        try:
            self._extend_past_writes(self._new_bytes(rows) if rows else _FLUSH_OVERHEAD)
            if pending:
                for key, values in self._buffer.items():
                    block = np.concatenate(values)[:rows] if values else None
                    values.clear()
                    if block is None or not len(block):
                        continue
                    for path, data in self._targets(key, block):
                        if path not in self._sizes:
                            if data.ndim > 1 and data.shape[1] == 0:
                                continue
                            self._create_target(key, path, data)
                        self._append(path, data)
                self._pending = 0
                self.rows -= pending - rows  # rows that did not fit are not in the file
                self.file.attrs["steps_recorded"] = self.rows
            self.file.flush()
        except (OSError, RuntimeError) as exc:  # h5py's errors of a failed write
            raise self._write_failed(exc) from None
        self.identity.written()
        self._last_flush = time.perf_counter()
        if rows < pending:
            raise self._stop(
                f"{NO_SPACE}: the result file keeps the {self.rows} rows recorded before the disk filled "
                f"(row {self.rows + 1} needed about {megabytes(need)} with the room to close the file; "
                f"{megabytes(left)} were left)"
            )

    def _append(self, path: str, data: np.ndarray) -> None:
        """Append rows to a dataset: extended and written by HDF5's own calls (a third of h5py's
        Dataset object's cost); one that is not kept open is opened for it and closed again."""
        data = np.ascontiguousarray(data, dtype=float)
        ds = self._datasets.get(path)
        dsid = ds.id if ds is not None else h5py.h5d.open(self.file.id, path.encode())
        try:
            n = dsid.shape[0]
            dsid.set_extent((n + len(data), *dsid.shape[1:]))
            if data.size:
                target = dsid.get_space()
                target.select_hyperslab((n,) + (0,) * (data.ndim - 1), data.shape)
                dsid.write(h5py.h5s.create_simple(data.shape), target, data)
        finally:
            if ds is None:
                dsid.close()
        _, chunk_rows, chunk_bytes = self._sizes[path]
        self._sizes[path] = (n + len(data), chunk_rows, chunk_bytes)

    def write_events(self, times: np.ndarray, kinds: list[str], contacts: list[str]) -> None:
        """/events/time, kind, contact (CONTRACT §3, event_driven): all events so far, replacing
        what an earlier call wrote. Written only where the disk takes them (else the run fails)."""
        text = h5py.string_dtype()
        events = {
            "time": np.asarray(times, dtype=float),
            "kind": np.array(list(kinds), dtype=text),
            "contact": np.array(list(contacts), dtype=text),
        }
        self.write_group("events", events, {}, required=True)

    def write_group(
        self,
        name: str,
        datasets: dict[str, np.ndarray],
        attrs: dict[str, Any],
        dataset_attrs: dict[str, dict[str, Any]] | None = None,
        required: bool = False,
    ) -> bool:
        """The group ``name`` ("/": the root) with ``attrs`` and ``datasets`` (relative paths, their
        own dtypes; ``dataset_attrs``: path -> its attributes), replacing the datasets an earlier
        call wrote, after the rows (flushed first). Written as a flush writes: past the file's end
        within blocks reserved besides the close, then flushed. Where the disk does not take it:
        ``required`` (an analysis' results: /modes, /linearize) ends the run, the file's status
        saying what was lost; otherwise (/restart: mbsim.output.restart) it is left out and the
        rows and the run's status are kept. Returns whether it was written."""
        if self.failure is not None:
            return False
        size = sum(_stored_bytes(a) + 4096 for a in datasets.values()) + 256 * len(attrs) + 4096
        need = CLOSE_RESERVE + _FLUSH_OVERHEAD + 2 * size
        if required and self._pending:
            try:
                self.flush()
            except ResultFileError:
                return False
        if self._pending or self.identity.problem() is not None or not self.space.ensure(need):
            if required and self.failure is None:
                self._stop(f"{NO_SPACE}: {', '.join(datasets)} did not fit in the result file")
            return False
        try:
            self._extend_past_writes(need)
            group = self.file.require_group(name)
            for key, value in attrs.items():
                group.attrs[key] = value
            for key, value in datasets.items():
                if key in group:
                    del group[key]
                group.create_dataset(key, data=np.asarray(value))
                for attr, value in (dataset_attrs or {}).get(key, {}).items():
                    group[key].attrs[attr] = value
            self.file.flush()
        except (OSError, RuntimeError) as exc:
            self._write_failed(exc)
            return False
        self.identity.written()
        return True

    def set_attrs(self, **attrs: Any) -> None:
        """Root attributes; a failure (a file taken away under the run) ends the run at the next flush."""
        if self.failure is not None:
            return
        try:
            for key, value in attrs.items():
                self.file.attrs[key] = value
        except (OSError, RuntimeError) as exc:
            self._write_failed(exc)

    def close(self, status: str, message: str, **attrs: Any) -> tuple[str, str]:
        """Write the remaining rows, the final status and close the file.

        Returns:
            The final (status, message): ``failed`` with the reason when the file could not take
            every row (a full disk) or is no longer the run's (deleted, replaced, truncated).
        """
        if not self.file:
            return status, message
        defect = None
        try:
            self.flush()
        except ResultFileError:
            pass  # self.failure says why
        except Exception as exc:  # a defect of mbsim: the file must not claim success, and it goes on
            defect = exc
            self.failure = f"writing the result file failed: {type(exc).__name__}: {exc}"
        if self.failure is not None:
            if status == "completed" or not message:
                message = self.failure
            elif self.failure not in message:  # the run's own failure first, then what the file lost
                message = f"{message}; then {self.failure}"
            status = "failed"
        try:
            self._finish(status, message, attrs)
        finally:
            self.space.release()
            self.claim.release()
        if defect is not None:
            raise defect
        return status, message

    def _extend_past_writes(self, nbytes: int) -> None:
        """Make the file on disk ``nbytes`` longer than HDF5's allocated end before a flush writes:
        a reader opening the live file mid-flush would otherwise meet a superblock that states an
        end the data writes have not reached yet ("truncated file"). HDF5's flush cuts the file back
        to its allocated end; the blocks are reserved already (SpaceReservation: no space taken).

        On a disk with room to spare, a quarter of the file more (at most _EXTEND_MARGIN), reserved
        too: a flush allocates transiently past what it leaves (its final end stays within the
        estimate, but a reader met a superblock stating up to 2 MB more, mid-flush, on files of 20
        to 300 MB); on a nearly full disk the estimate alone stands, so that no row is given up."""
        if self._lost is not None:  # a file taken away or broken under the run is not touched
            return
        size = self.file.id.get_filesize()
        if self.space.free() > _ROOMY:
            margin = min(_EXTEND_MARGIN, size // 4)
            if margin and self.space.ensure(nbytes + margin):
                nbytes += margin
        size += nbytes
        if os.fstat(self.space.fd).st_size < size:
            os.ftruncate(self.space.fd, size)

    def _finish(self, status: str, message: str, attrs: dict[str, Any]) -> None:
        """The final status into the file, and the HDF5 file closed without ever being left to the
        garbage collector half-open (whose failed writes print "Exception ignored" or crash)."""
        if self._lost in ("truncated", "overwritten", "broken"):
            # not ours to repair: what another process left there (or the last good flush) stays
            _detach(self.file)
        try:
            self._extend_past_writes(_FLUSH_OVERHEAD)
            for key, value in {"status": status, "message": message, **attrs}.items():
                self.file.attrs[key] = value
            self.file.flush()
            self.file.close()
        except (OSError, RuntimeError):  # the file cannot take its status: left as the last flush left it
            _detach(self.file)
            with contextlib.suppress(OSError, RuntimeError):
                self.file.close()


def _detach(f: h5py.File) -> None:
    """Point the HDF5 library's descriptor of ``f`` at an anonymous file, so that whatever it still
    writes (its metadata at close) goes nowhere and the file on disk stays as it is."""
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        handle = f.id.get_vfd_handle()
        if hasattr(os, "memfd_create"):
            nowhere = os.memfd_create("mbsim-detached")
        else:
            import tempfile

            with tempfile.TemporaryFile() as anonymous:
                nowhere = os.dup(anonymous.fileno())
        os.dup2(nowhere, handle)
        os.close(nowhere)
