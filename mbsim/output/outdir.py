"""The output folder of ``mbsim compare`` and ``mbsim sweep`` (OUTDIR): what mbsim may replace there.

CONTRACT §4 (no clobbering) for folders: mbsim replaces a file in OUTDIR only if mbsim wrote it.
Each kind of file carries its own mark, inside the file, so that it says who wrote it wherever
it is copied or moved (no side list to lose or get out of step):

==========================  ==================================================================
file                        replaced when it is
==========================  ==================================================================
result files ``*.h5``       HDF5 with the root attribute ``format="mbsim-result"``
                            (:mod:`mbsim.output.safety`) that no live mbsim process writes
``compare.json``,           a JSON object whose first key is ``"format"`` with the value
``sweep.json``              ``"mbsim-compare"`` / ``"mbsim-sweep"``
``compare.md``, ``sweep.md`` first line ``<!-- written by mbsim compare -->`` (``sweep``); files
                            of earlier versions: ``# mbsim compare: ...``, an empty line, then
                            ``Scene `...`, DATE, mbsim VERSION...``
``sweep.csv``               its header row is a sweep's: ``case,file,`` the parameters, then the
                            sweep's fixed columns ``status,source,attempts,...``, ending in
                            ``message,history``
``violation.png``,          a PNG whose ``Software`` text chunk is ``mbsim compare``; earlier
``energy.png``              versions: Matplotlib's, next to an mbsim ``compare.json``
==========================  ==================================================================

Anything else at one of these names -- a file of the user's or another program's, a symbolic
link (wherever it points: it is never followed, nor replaced), a directory, a FIFO, a device --
refuses the whole command with exit 2 naming it. Every target is checked before anything is
written, so a refused command leaves OUTDIR as it was. OUTDIR itself must be a directory (a
symbolic link to one is fine) that this process can write into, or a path where one can be
created.

Writing goes through a fresh temporary name in OUTDIR (created exclusively, never through a
link) and a rename, checked once more just before the rename: no half-written file ever carries
the final name, and a foreign file that appeared while the command ran is still not replaced.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from mbsim.errors import OutputError
from mbsim.output.safety import check_target, claim_result, written_atomically

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_HEAD = 64 * 1024  # how much of a file is read to find its mark


@dataclass(frozen=True)
class Mark:
    """How mbsim recognises a file it wrote: ``test(path, head)`` on the file's first bytes.

    Attributes:
        what: the kind of file, for messages (``an mbsim compare report``).
        how: what such a file of mbsim's does, for messages (``starts with the line ...``).
        test: True when the head (the first :data:`_HEAD` bytes) is one mbsim wrote.
    """

    what: str
    how: str
    test: Callable[[Path, bytes], bool]


def json_mark(fmt: str, what: str) -> Mark:
    """A JSON report whose first key is ``"format": fmt`` (json.dumps keeps the key order)."""
    pattern = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + re.escape(fmt.encode()) + rb'"')
    return Mark(what, f'has "format": "{fmt}" as its first key', lambda _p, head: pattern.match(head) is not None)


def markdown_line(command: str) -> str:
    """The first line of every markdown report ``mbsim COMMAND`` writes (invisible when rendered)."""
    return f"<!-- written by mbsim {command} -->"


def markdown_mark(command: str, what: str) -> Mark:
    first = markdown_line(command).encode()
    # the head of reports written before the marker line: title, empty line, the "Scene" line
    legacy = re.compile(rb"# mbsim " + re.escape(command.encode()) + rb": [^\n]*\n\nScene `[^\n]*, mbsim \d[^\n]*\n")

    def test(_path: Path, head: bytes) -> bool:
        return head.split(b"\n", 1)[0].rstrip(b"\r") == first or legacy.match(head) is not None

    return Mark(what, f"starts with the line {markdown_line(command)}", test)


def csv_mark(what: str, header_ok: Callable[[str], bool], how: str) -> Mark:
    """A CSV file recognised by its header row."""

    def test(_path: Path, head: bytes) -> bool:
        line = head.split(b"\n", 1)[0].rstrip(b"\r")
        try:
            return header_ok(line.decode("utf-8"))
        except UnicodeDecodeError:
            return False

    return Mark(what, how, test)


def png_software(head: bytes) -> str | None:
    """The ``Software`` text of a PNG (its chunks before the image data), None when it has none
    or is not a PNG."""
    if not head.startswith(PNG_SIGNATURE):
        return None
    at = len(PNG_SIGNATURE)
    while at + 8 <= len(head):
        length = int.from_bytes(head[at : at + 4], "big")
        kind = head[at + 4 : at + 8]
        if kind == b"IDAT" or at + 12 + length > len(head):
            return None
        if kind == b"tEXt":
            key, _, value = head[at + 8 : at + 8 + length].partition(b"\0")
            if key == b"Software":
                return value.decode("latin-1")
        at += 12 + length
    return None


def png_mark(software: str, what: str, legacy_sibling: tuple[str, Mark] | None = None) -> Mark:
    """A PNG picture whose ``Software`` text is ``software``; with ``legacy_sibling`` (name, mark)
    also a Matplotlib PNG next to a file of that name that carries that mark (what earlier
    versions wrote, before the picture carried its own mark)."""

    def test(path: Path, head: bytes) -> bool:
        written_by = png_software(head)
        if written_by == software:
            return True
        if legacy_sibling is None or written_by is None or not written_by.startswith("Matplotlib"):
            return False
        name, mark = legacy_sibling
        return is_marked(path.with_name(name), mark)

    return Mark(what, f"carries the PNG text Software = {software}", test)


def _head(path: Path) -> bytes:
    # O_NOFOLLOW and O_NONBLOCK: a link or a FIFO swapped in since the look is neither followed
    # nor waited on
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, _HEAD)
    finally:
        os.close(fd)


def is_marked(path: Path, mark: Mark) -> bool:
    """Whether ``path`` is a regular file (not a link) that carries ``mark``."""
    try:
        return mark.test(path, _head(path))
    except OSError:
        return False


def _refuse(path: Path, reason: str) -> OutputError:
    return OutputError(reason, file=str(path))


def _not_a_file(path: Path) -> str | None:
    """Why nothing may be written at ``path`` whatever it holds (a link, a directory, a FIFO,
    ...); None when it is absent or a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot look at it: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return (
            "is a symbolic link; mbsim neither writes through a link in its output folder nor replaces it "
            "(remove the link or choose another output folder)"
        )
    if stat.S_ISDIR(st.st_mode):
        return "is a directory where mbsim writes a file; move it away or choose another output folder"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, socket or device); mbsim writes only regular files there"
    return None


def check_report(path: str | Path, mark: Mark) -> None:
    """Refuse (exit 2) ``path`` unless it is absent or a regular file carrying ``mark``."""
    p = Path(path)
    why = _not_a_file(p)
    if why:
        raise _refuse(p, why)
    if os.path.lexists(p) and not is_marked(p, mark):
        raise _refuse(
            p,
            f"exists and was not written by mbsim ({mark.what} {mark.how}); mbsim does not overwrite it: "
            "move it away or choose another output folder",
        )


def check_result(path: str | Path, read: bool = True) -> None:
    """A result file's name in OUTDIR: absent, or an mbsim result no live process writes and not a
    link (:func:`mbsim.output.safety.check_target`; ``read=False`` looks only for HDF5's signature)."""
    p = Path(path)
    why = _not_a_file(p)
    if why:
        raise _refuse(p, why)
    check_target(p, read=read)


def check_outdir(out: str | Path, what: str) -> None:
    """Refuse (exit 2) an OUTDIR that exists and is no directory (a file, a FIFO, a link to
    neither); touches nothing."""
    p = Path(out)
    if os.path.lexists(p) and not p.is_dir():
        kind = "a symbolic link that leads to no directory" if p.is_symlink() else "not a directory"
        raise _refuse(p, f"is {kind}; expected the output directory of the {what}")
    above = p.absolute().parent
    while not os.path.lexists(p) and not os.path.lexists(above) and above != above.parent:
        above = above.parent
    if not os.path.lexists(p) and not above.is_dir():  # `-o afile/sub`: it could never be created
        raise _refuse(p, f"cannot create the output directory: {above} is not a directory")


def detach(path: str | Path) -> None:
    """Before a result file of OUTDIR is written in place (``mbsim run``'s writer truncates an
    existing result): if the file has other names too (hard links: a backup made with ``cp -al``),
    drop this name, so that the run writes a new file and the other names keep their contents.
    Call it after :func:`check_result` accepted the file."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        try:
            os.unlink(p)
        except OSError as exc:
            raise _refuse(p, f"cannot replace the result file: {exc.strerror or exc}") from None


def open_outdir(out: str | Path, what: str) -> Path:
    """Make sure OUTDIR is a directory this process can write into, creating it if absent.

    Raises:
        OutputError: (exit 2) it is a file, a link to one, a FIFO, a device; it cannot be
            created; nothing can be written into it (read-only, no permission).
    """
    p = Path(out)
    check_outdir(p, what)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(p, f"cannot create the output directory: {exc.strerror or exc}") from None
    probe = p / f".mbsim-probe.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
    except OSError as exc:
        raise _refuse(p, f"cannot write into the output directory: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return p


def write_report(path: str | Path, data: bytes | Iterable[str], mark: Mark | None) -> None:
    """Write a report file (bytes, or pieces of UTF-8 text) through a fresh temporary name and a
    rename; with a ``mark`` the target is checked once more just before the rename (a file that
    appeared meanwhile and is not ours stays).

    Raises:
        OutputError: (exit 2) the target is refused, or the write failed (nothing replaced).
    """
    p = Path(path)
    with written_atomically(p, p.name) as tmp:
        with open(tmp, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                for piece in data:
                    f.write(piece.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if mark is not None:
            check_report(p, mark)


def install_result(path: str | Path, data: bytes | Path) -> None:
    """Put a result file at ``path`` in OUTDIR: ``data`` (bytes, or a file to copy) goes into a
    fresh temporary name, then a hard link when the target is absent (fails if it appeared
    meanwhile) or, for an existing file, a rename made while holding the writer's lock on it
    (mbsim.output.safety), which refuses another live run's file and anything that is not an
    mbsim result. A link at the target is refused, never followed.

    Raises:
        OutputError: the target is refused or cannot be written; nothing of it changed.
    """
    p = Path(path)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise _refuse(p, f"cannot write the result file: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        try:
            with os.fdopen(fd, "wb") as f:
                if isinstance(data, bytes):
                    f.write(data)
                else:
                    with open(data, "rb") as src:
                        while chunk := src.read(1 << 20):
                            f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            mask = os.umask(0)  # mkstemp's file is private (0600); a result gets a new file's mode
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        except OSError as exc:
            raise _refuse(p, f"cannot write the result file: {exc.strerror or exc}") from None
        try:
            os.link(tmp, p)
            return
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system: claim it (created if absent)
            pass
        why = _not_a_file(p)
        if why:
            raise _refuse(p, why)
        claim = claim_result(p)
        try:
            os.replace(tmp, p)
        except OSError as exc:
            raise _refuse(p, f"cannot write the result file: {exc.strerror or exc}") from None
        finally:
            claim.release()
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


__all__ = [
    "Mark",
    "check_outdir",
    "check_report",
    "check_result",
    "detach",
    "csv_mark",
    "install_result",
    "is_marked",
    "json_mark",
    "markdown_line",
    "markdown_mark",
    "open_outdir",
    "png_mark",
    "png_software",
    "write_report",
]
