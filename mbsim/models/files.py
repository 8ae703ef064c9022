"""Reading a model file, and the files it names, without trusting them.

A model file (and every file it includes or names: MJCF includes, meshes, textures, URDF meshes)
comes from elsewhere. Nothing read here may block mbsim (a FIFO, a device, a directory put where
a file is expected), expand entities, or reach the network, and whatever is wrong is exit 2 naming
the file, the element and the line:

- :func:`not_regular` says what a path is when it is not a regular file (``os.stat`` only, which
  never blocks), for paths handed to another reader (MuJoCo's compiler, trimesh);
- :func:`read_regular` reads a file opened with ``O_NONBLOCK`` and checked on the open descriptor,
  so a FIFO swapped in after the check cannot block the read either;
- :func:`parse_xml` parses with lxml without entity expansion or network access, and refuses
  entity declarations (ROS's URDF parser and MuJoCo's know none either).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mbsim.errors import SceneError

MAX_BYTES = 64 * 2**20  # a model file or include larger than this is refused (real ones are < 10 MiB)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as a file ("not found", "is a FIFO (named pipe), not a regular
    file", ...), or None when it is a regular file. Only stats: never blocks."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "not found"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    except ValueError:  # a NUL in the path
        return "not a valid path"
    if stat.S_ISREG(mode):
        return None
    return f"is {_kind(mode)}, not a regular file"


def exists(path: str | Path) -> bool:
    """Whether anything (a file, a folder, a FIFO ...) is at ``path``; never blocks."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def read_regular(path: str | Path, *, label: str | None = None, element: str = "", line: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, or exit 2 naming it (as ``label``, the file whose
    ``element`` at ``line`` names it, when it is a referenced file).

    Opened with O_NONBLOCK and checked on the descriptor: a FIFO or device never blocks the open
    or the read, even one swapped in after an earlier check."""
    where = {"file": label or str(path), "key_path": element, "line": line}
    prefix = "" if label is None else f"{path}: "
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise SceneError(f"{prefix}not found", **where) from None
    except OSError as exc:
        raise SceneError(f"{prefix}cannot be read: {exc.strerror or exc}", **where) from None
    except ValueError:
        raise SceneError(f"{prefix}not a valid path", **where) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SceneError(f"{prefix}is {_kind(info.st_mode)}, not a regular file", **where)
        if info.st_size > MAX_BYTES:
            raise SceneError(
                f"{prefix}is {info.st_size / 2**20:.0f} MiB; model files up to {MAX_BYTES // 2**20} MiB are read",
                **where,
            )
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):  # a file that grows while read stops at the limit
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_BYTES:
                raise SceneError(f"{prefix}grew past {MAX_BYTES // 2**20} MiB while being read", **where)
        return b"".join(chunks)
    except OSError as exc:
        raise SceneError(f"{prefix}cannot be read: {exc.strerror or exc}", **where) from None
    finally:
        os.close(fd)


def parse_xml(text: bytes, file: str):
    """The root element of an XML model file (lxml): no entity expansion, no network, no DTD
    loading; entity declarations are refused (no model format uses them)."""
    from lxml import etree

    # huge_tree: nesting up to 2048 (MuJoCo takes bodies nested ~500 deep; lxml's default stops at
    # 256); the entity amplification guard stays, and the file is at most MAX_BYTES
    parser = etree.XMLParser(
        remove_comments=True, remove_pis=True, resolve_entities=False, no_network=True, load_dtd=False,
        huge_tree=True,
    )  # fmt: skip
    try:
        root = etree.fromstring(text, parser=parser)
    except etree.XMLSyntaxError as exc:
        line = exc.position[0] if exc.position else None
        reason = exc.msg.split(", use XML_PARSE_HUGE")[0]  # a limit of the parser, not an option of mbsim
        raise SceneError(f"not a well-formed XML file: {reason}", file=file, line=line) from None
    except ValueError as exc:  # lxml: e.g. an encoding it does not know
        raise SceneError(f"not a readable XML file: {exc}", file=file) from None
    if root is None:
        raise SceneError("not an XML file: no root element", file=file)
    dtd = root.getroottree().docinfo.internalDTD
    names = [e.name for e in dtd.iterentities()] if dtd is not None else []
    if names:
        raise SceneError(
            f"the file declares XML entities ({', '.join(repr(n) for n in names[:5])}); model files may not "
            "(ROS's URDF parser and MuJoCo know none): write their values out",
            file=file,
            line=1,
            key_path="<!DOCTYPE>",
        )
    return root
