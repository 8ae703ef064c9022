"""Guards of a result file while its run writes it (CONTRACT §4): disk space, and the file itself.

**Disk space.** Once a write of the HDF5 library fails with ENOSPC, its metadata cache may be
inconsistent: closing the file can crash the process or leave it unreadable. So the writer never
lets HDF5 meet a full disk. Before each flush it *reserves* the blocks the flush can need, past
the end of the file (Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``: the blocks belong to the
result file, another process cannot take them, and the file's size does not change), always
keeping :data:`CLOSE_RESERVE` more for the final status. When the reservation fails, the writer
writes only the rows that fit, stops the run (``no space left on device``) and closes the file
in the space it kept. On a file system without ``fallocate`` the free space (``statvfs``) is
checked instead, with the same margin. What is left of the reservation is given back when the
file closes.

**The file itself.** At every flush and at close the writer checks that the path still is the
file it opened (same device and inode), that the file is no shorter than what it wrote, and
that it still starts with HDF5's signature. A file deleted, moved, replaced, truncated or
overwritten under the run fails the run (exit 3) with a message that says which.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

from mbsim.errors import SimulationError
from mbsim.output.safety import HDF5_SIGNATURE

NO_SPACE = "no space left on device"
# what the close needs past the end of the file: the final root attributes (status, message,
# statistics) and HDF5's own metadata; measured at about 1 kB, kept with a wide margin
CLOSE_RESERVE = 64 * 1024
_KEEP_SIZE, _PUNCH_HOLE = 0x01, 0x02  # FALLOC_FL_* of linux/falloc.h
_NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.ENODEV)


class ResultFileError(SimulationError):
    """Writing the result file failed during the run: the disk is full, or the file was deleted,
    replaced or truncated under the run (exit 3; the run's status becomes ``failed``)."""


def _load_fallocate():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):  # not Linux: the statvfs check stands in
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_fallocate_fn = _load_fallocate()


def _fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    if _fallocate_fn is None:
        raise OSError(errno.EOPNOTSUPP, "fallocate is not available")
    if _fallocate_fn(fd, mode, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def is_no_space(exc: BaseException) -> bool:
    """Whether an error (an OSError, or h5py's RuntimeError around one) says the disk is full."""
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS:
        return True
    text = str(exc).lower()
    return "no space left" in text or "disk quota exceeded" in text or "errno = 28" in text


def megabytes(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


class SpaceReservation:
    """Blocks kept past the end of one open file, so that its next writes cannot meet a full disk.

    Reservations only grow, by ranges that do not overlap the ones made before (a failed
    ``fallocate`` may undo the part of its range it was given, and on tmpfs that would include
    older reserved pages inside the same range).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.end = 0  # blocks in [file size, end) are reserved
        self.supported = _fallocate_fn is not None

    def ensure(self, nbytes: int) -> bool:
        """Reserve room for ``nbytes`` past the current end of the file; False when the disk (or
        the user's quota) cannot give it."""
        size = os.fstat(self.fd).st_size
        start, target = max(self.end, size), size + int(nbytes)
        if target <= start:
            return True
        if self.supported:
            try:
                _fallocate(self.fd, _KEEP_SIZE, start, target - start)
                self.end = target
                return True
            except OSError as exc:
                if exc.errno in _NO_SPACE_ERRNOS:
                    return False
                if exc.errno not in _UNSUPPORTED:
                    raise
                self.supported = False  # this file system cannot: look at its free space instead
        return self.free() >= nbytes

    def free(self) -> int:
        """Bytes this process may still write on the file's file system."""
        st = os.fstatvfs(self.fd)
        return st.f_bavail * st.f_frsize

    def available(self) -> int:
        """Bytes the file may still grow by: the free space and what is reserved past its end."""
        return self.free() + max(0, self.end - os.fstat(self.fd).st_size)

    def release(self) -> None:
        """Give back the reserved blocks past the end of the file (the file's content stays)."""
        if self.end <= 0:
            return
        self.end = 0
        try:
            size = os.fstat(self.fd).st_size
            _fallocate(self.fd, _PUNCH_HOLE | _KEEP_SIZE, size, 1 << 40)
        except OSError:  # no hole punching here: shrinking the file frees everything past its end
            try:
                size = os.fstat(self.fd).st_size
                os.ftruncate(self.fd, size + 1)
                os.ftruncate(self.fd, size)
            except OSError:
                pass


class FileIdentity:
    """The file a writer opened at ``path``: tells whether the path still is that file."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        st = os.fstat(fd)
        self.key = (st.st_dev, st.st_ino)
        self.size = 0  # what the writer has written so far (the file's size after its last flush)

    def written(self) -> None:
        """Call after each flush: the file is at least this long from now on."""
        self.size = os.fstat(self.fd).st_size

    def problem(self) -> tuple[str, str] | None:
        """(kind, message) when the path no longer is the file this run writes: ``deleted``,
        ``moved``, ``replaced``, ``truncated`` or ``overwritten``; None while it is."""
        own = os.fstat(self.fd)
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError:  # cannot look (permissions of a folder on the way): nothing to say
            return None
        if st is None or (st.st_dev, st.st_ino) != self.key:
            if own.st_nlink == 0:
                kind = "deleted" if st is None else "replaced"
                what = "deleted" if st is None else "deleted and replaced by another file"
                tail = "" if st is None else "; that file is left alone"
                return kind, (
                    f"the result file {self.path} was {what} under the run{tail}; nothing more is written, "
                    "and no new file is created in its place"
                )
            tail = "" if st is None else "; the file now at that path is left alone"
            return "moved", (
                f"the result file {self.path} was moved or renamed under the run{tail}; the file keeps the rows "
                "written so far and status failed"
            )
        if own.st_size < self.size:
            return "truncated", (
                f"the result file {self.path} was truncated under the run ({own.st_size} bytes left of "
                f"{self.size} written); it is left as it is"
            )
        if own.st_size >= len(HDF5_SIGNATURE) and os.pread(self.fd, len(HDF5_SIGNATURE), 0) != HDF5_SIGNATURE:
            return "overwritten", (
                f"the result file {self.path} was overwritten under the run (it no longer is an HDF5 file); "
                "it is left as it is"
            )
        return None


__all__ = [
    "CLOSE_RESERVE",
    "NO_SPACE",
    "FileIdentity",
    "ResultFileError",
    "SpaceReservation",
    "is_no_space",
    "megabytes",
]
