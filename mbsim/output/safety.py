"""Who may write a result file (CONTRACT §4: one writer, no clobbering, a dead run told from a live one).

- **No clobbering.** An existing path is written only if it is a regular file holding an mbsim
  result (HDF5 with root attribute ``format="mbsim-result"``); anything else (the scene itself, a
  text file a scene's ``output.file`` points at, another program's HDF5 file, a directory, a
  device) is refused with exit 2 naming it, before a byte of it changes.
- **One writer.** The writer holds a lock on its result file for the whole run: an *open file
  description* lock (Linux ``F_OFD_SETLK``; POSIX ``lockf`` elsewhere) on one byte far past the
  end of the file. It is not the ``flock`` that HDF5 itself takes on open, so readers (``mbsim
  info``, h5py, a notebook) open a live file as usual, while a second mbsim that wants to write
  the same file sees the lock and stops before touching it. The kernel drops the lock when the
  process dies in any way, SIGKILL included: a file whose status says ``running`` but whose lock
  is free belongs to a run that died.
- **Who.** The writer stamps its process id, host, start time and command line on the file's
  root (``writer_pid``, ``writer_host``, ``writer_started``, ``writer_command``) so that a
  refusal can name the process.

The lock is taken before the HDF5 library opens the file for writing (which truncates it), so
a refused second run has changed nothing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import os
import stat
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mbsim.errors import OutputError, path_text

FORMAT = "mbsim-result"
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# one byte far past any real file end: locking it never conflicts with HDF5's own (flock) lock
_LOCK_OFFSET = 1 << 62
_FLOCK = "hhqqi4x"  # struct flock on Linux x86_64/aarch64: l_type, l_whence, l_start, l_len, l_pid
_OFD = hasattr(fcntl, "F_OFD_SETLK")


def _lock_request(kind: int) -> bytes:
    return struct.pack(_FLOCK, kind, os.SEEK_SET, _LOCK_OFFSET, 1, 0)


def _try_lock(fd: int) -> bool:
    """Take the writer's lock on ``fd`` (open for writing); False if another process holds it."""
    try:
        if _OFD:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _lock_request(fcntl.F_WRLCK))
        else:  # per-process POSIX lock: dropped if this process closes any descriptor of the file
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _LOCK_OFFSET)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def is_locked(path: str | Path) -> bool:
    """Whether a live process holds the writer's lock on ``path`` (False when it cannot tell)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if _OFD:
            answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _lock_request(fcntl.F_WRLCK))
        else:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, _lock_request(fcntl.F_WRLCK))
        return struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK
    except OSError:
        return False
    finally:
        os.close(fd)


def has_hdf5_signature(path: str | Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(8) == HDF5_SIGNATURE
    except OSError:
        return False


def read_root_attrs(path: str | Path) -> dict[str, Any] | None:
    """The root attributes of an HDF5 file, read without HDF5's file lock (a live file opens
    too); None when it is not a readable HDF5 file."""
    if not has_hdf5_signature(path):
        return None
    import h5py

    try:
        with h5py.File(path, "r", locking=False) as f:
            return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    except Exception:  # truncated, half-written, not HDF5 after all
        return None


def is_result_file(path: str | Path) -> bool:
    attrs = read_root_attrs(path)
    return attrs is not None and attrs.get("format") == FORMAT


def writer_stamp() -> dict[str, Any]:
    """Root attributes that name this process as the file's writer."""
    import socket  # here, not at module level: only a run that writes needs it (mbsim validate starts faster)

    command = " ".join(Path(sys.argv[0]).name if i == 0 else a for i, a in enumerate(sys.argv))
    command = path_text(command)  # the attribute is UTF-8 text, whatever the locale decoded
    return {
        "writer_pid": os.getpid(),
        "writer_host": socket.gethostname(),
        "writer_started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "writer_command": command[:500],
    }


def describe_writer(path: str | Path) -> str:
    """``process 4711 on host (mbsim run ..., since ...)`` from the file's stamp, as far as it is readable."""
    attrs = read_root_attrs(path) or {}
    pid = attrs.get("writer_pid")
    if pid is None:
        return "another process"
    text = f"process {int(pid)}"
    if attrs.get("writer_host"):
        text += f" on {attrs['writer_host']}"
    extra = [str(attrs[k]) for k in ("writer_command",) if attrs.get(k)]
    if attrs.get("writer_started"):
        extra.append(f"since {attrs['writer_started']}")
    return text + (f" ({', '.join(extra)})" if extra else "")


class ResultClaim:
    """The right to write one result file: the open descriptor that holds the writer's lock.

    Made by :func:`claim_result`; released by :meth:`release` (closing the descriptor) after the
    HDF5 file is closed. While it lives, no other mbsim process writes the same file.
    """

    def __init__(self, path: Path, fd: int, created: bool = False) -> None:
        self.path = path
        self.fd = fd
        self.created = created  # this claim made the (empty) file

    def abandon(self) -> None:
        """Release without writing: a file this claim created and nothing wrote is removed again,
        so that a run refused after its claim (a scene error) leaves nothing behind."""
        if self.fd >= 0 and self.created:
            with contextlib.suppress(OSError):
                if os.fstat(self.fd).st_size == 0:
                    os.unlink(self.path)
        self.release()

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> ResultClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()


def _refuse(path: Path, reason: str) -> OutputError:
    return OutputError(reason, file=str(path))


# a result path that is a symbolic link: writing through it would change a file elsewhere
_LINK = "is a symbolic link; mbsim does not write a result through a link (give the file it leads to, or another name)"


def _busy(path: Path) -> OutputError:
    return _refuse(path, f"is being written by {describe_writer(path)}; wait for it or choose another output")


def check_target(path: str | Path, read: bool = True) -> None:
    """Refuse ``path`` as a result file (exit 2) unless it is absent or an mbsim result that no
    live process writes; touches nothing. ``read=False`` looks only for HDF5's signature instead
    of opening the file (a sweep checks 100,000 case files in seconds; a case whose HDF5 file is
    not mbsim's is refused when it comes up)."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _refuse(p, f"cannot use this path for the result file: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(p, _LINK)
    if stat.S_ISDIR(st.st_mode):
        raise _refuse(p, "is a directory; expected the path of a result file (.h5)")
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(p, "is not a regular file; mbsim writes results only to regular files")
    if is_locked(p):
        raise _busy(p)
    if not (is_result_file(p) if read else has_hdf5_signature(p)):
        raise _refuse(
            p,
            "exists and is not an mbsim result file; mbsim overwrites only its own result files "
            "(choose another output, or move the file away)",
        )


def claim_result(path: str | Path) -> ResultClaim:
    """Take the right to (over)write ``path`` as a result file, creating it (and its folder) if absent.

    Raises:
        OutputError: (exit 2) the path is another live run's file, exists and is not an mbsim
            result, is not a regular file, or cannot be created or written.
    """
    p = Path(path)
    for _ in range(3):  # a file created or removed between two looks: look again
        try:
            st = os.stat(p)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise _refuse(p, f"cannot use this path for the result file: {exc.strerror}") from None
        if st is None:
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _refuse(p, f"cannot create the folder {p.parent}: {exc.strerror or exc}") from None
            try:
                fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _refuse(p, f"cannot create the result file: {exc.strerror or exc}") from None
            if not _try_lock(fd):  # another run created it an instant ago
                os.close(fd)
                raise _busy(p)
            return ResultClaim(p, fd, created=True)
        check_target(p)  # refuses links, directories, devices, live files, files that are not results
        try:
            fd = os.open(p, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a link since check_target looked
                raise _refuse(p, _LINK) from None
            raise _refuse(p, f"cannot write the result file: {exc.strerror or exc}") from None
        if not _try_lock(fd):
            os.close(fd)
            raise _busy(p)
        # locked: look once more, now that nobody can start writing it
        if not stat.S_ISREG(os.fstat(fd).st_mode) or not is_result_file(p):
            os.close(fd)
            check_target(p)
            raise _refuse(p, "exists and is not an mbsim result file")
        if os.fstat(fd).st_nlink > 1:
            # other names of this file (a `cp -al` or `ln` backup) keep their contents: the run
            # writes a new file under this name instead of truncating the shared one
            os.close(fd)
            try:
                os.unlink(p)
            except OSError as exc:
                raise _refuse(p, f"cannot replace the result file: {exc.strerror or exc}") from None
            continue
        return ResultClaim(p, fd)
    raise _refuse(p, "the path keeps changing under mbsim (created and removed by another process)")


# what an existing file must start with for mbsim to overwrite it with a picture of that kind
PICTURE_SIGNATURES = {".png": (b"\x89PNG\r\n\x1a\n",), ".pdf": (b"%PDF",), ".svg": (b"<?xml", b"<svg")}


# what an existing file must hold for `mbsim export` to overwrite it: mbsim's generator name in
# a glTF binary's JSON chunk (asset.generator), or the generator line of a page mbsim wrote
EXPORT_SIGNATURES = {".glb": b'"generator":"mbsim export"', ".html": b'<meta name="generator" content="mbsim export">'}
_GLB_JSON_LIMIT = 64 * 1024 * 1024  # a JSON chunk larger than this is not one mbsim wrote


def _export_head(p: Path, suffix: str) -> bytes:
    """The part of an existing file that says who wrote it: a .glb's JSON chunk, a page's start."""
    with open(p, "rb") as f:
        if suffix != ".glb":
            return f.read(512)
        header = f.read(20)
        if len(header) < 20 or header[:4] != b"glTF" or header[16:20] != b"JSON":
            return b""
        length = int.from_bytes(header[12:16], "little")
        return f.read(length) if length <= _GLB_JSON_LIMIT else b""


def check_export_target(path: str | Path) -> Path:
    """An export's output: ``.glb`` or ``.html``; an existing file is overwritten only if it is an
    export of that kind already (CONTRACT §4, no clobbering). Raises OutputError (exit 2)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in EXPORT_SIGNATURES:
        raise OutputError(
            f"cannot export to a '{suffix or 'suffix-less'}' file; expected a name ending in .glb "
            "(glTF 2.0 binary) or .html (a page that plays the motion)",
            file=str(p),
        )
    if os.path.lexists(p):
        if not p.is_file():
            raise _refuse(p, "exists and is not a regular file")
        try:
            head = _export_head(p, suffix)
        except OSError as exc:
            raise _refuse(p, f"cannot read the existing file: {exc.strerror}") from None
        if EXPORT_SIGNATURES[suffix] not in head:
            raise _refuse(p, f"exists and is not an mbsim {suffix[1:]} export; mbsim does not overwrite it")
    return p


@contextlib.contextmanager
def written_atomically(out: Path, what: str) -> Iterator[str]:
    """A temporary name next to ``out`` to write into; renamed to ``out`` when the block ends
    without an error (a half-written file never carries the final name), removed otherwise.
    OSError becomes OutputError naming ``what`` (exit 2)."""
    import tempfile  # here, not at module level: only commands that write need it (validate starts faster)

    try:
        if out.parent.exists() and not out.parent.is_dir():
            raise OutputError(f"cannot write {what}: {out.parent} is not a directory", file=str(out))
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
        os.close(fd)
        try:
            yield tmp
            mask = os.umask(0)  # mkstemp's file is private (0600); the result gets a new file's mode
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        raise OutputError(f"cannot write {what}: {exc.strerror or exc}", file=str(out)) from None


def check_picture_target(path: str | Path) -> Path:
    """A plot's output: ``.png``, ``.pdf`` or ``.svg``; an existing file is overwritten only if it is
    a picture of that kind already (CONTRACT §4, no clobbering). Raises OutputError (exit 2)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in PICTURE_SIGNATURES:
        raise OutputError(
            f"cannot write a plot to a '{suffix or 'suffix-less'}' file; expected a name ending in "
            + ", ".join(PICTURE_SIGNATURES),
            file=str(p),
        )
    if os.path.lexists(p):
        if not p.is_file():
            raise _refuse(p, "exists and is not a regular file")
        try:
            with open(p, "rb") as f:
                head = f.read(64).lstrip()
        except OSError as exc:
            raise _refuse(p, f"cannot read the existing file: {exc.strerror}") from None
        if not head.startswith(PICTURE_SIGNATURES[suffix]):
            raise _refuse(p, f"exists and is not a {suffix[1:].upper()} picture; mbsim does not overwrite it")
    return p
