"""Error tree of mbsim and the exit codes it maps to (CONTRACT §2).

Only ``mbsim.cli`` turns these exceptions into exit codes; everything below it raises.
"""

from __future__ import annotations

import difflib
import re
import signal
from collections.abc import Iterable

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # escaped in messages, which are one line


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def interrupted_message(signum: int) -> str:
    """The status message of a run ended by ``signum``: ``interrupted (SIGTERM)``."""
    return f"interrupted ({signal_name(signum)})"


def signal_exit_code(signum: int) -> int:
    """The shell's convention for a process ended by a signal: 128 + its number (130, 143, 129)."""
    return 128 + int(signum)


class MbsimError(Exception):
    """Base of every error mbsim raises on purpose; ``label`` heads its message on stderr."""

    exit_code = 1
    label = "error"


class SceneError(MbsimError):
    """The scene file or the command line is wrong (exit code 2).

    The message always has the form ``FILE:LINE:COL: KEY.PATH: what (expected ..., got ...)``
    so that a user can jump to the offending line.
    """

    exit_code = 2
    label = "scene error"

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        key_path: str = "",
        hint: str = "",
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.column = column
        self.key_path = key_path
        self.hint = hint
        super().__init__(self.format())

    def format(self) -> str:
        where = self.file or "<scene>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = f"{where}: "
        if self.key_path:
            text += f"{self.key_path}: "
        text += self.reason
        if self.hint:
            text += f" ({self.hint})"
        return text


class OutputError(SceneError):
    """A result or picture file cannot be written where asked (exit code 2): it belongs to another
    live run, exists and is not mbsim's, or its location is not writable (CONTRACT §4)."""

    label = "output error"


class UsageError(SceneError):
    """An option of the command line is wrong (exit code 2), e.g. ``--what`` or ``--scheduler``."""

    label = "command-line error"


class AssemblyError(SceneError):
    """The initial state cannot be assembled (or --strict forbids it); ``joint`` is the worst one."""

    def __init__(self, reason: str, joint: str | None = None) -> None:
        self.joint = joint
        super().__init__(reason, key_path="joints")


class SimulationError(MbsimError):
    """The simulation failed: NaN, divergence, a solve that did not converge (exit code 3)."""

    exit_code = 3
    label = "simulation failed"

    def __init__(self, reason: str, *, step: int | None = None, t: float | None = None) -> None:
        self.reason = reason
        self.step = step
        self.t = t
        where = ""
        if step is not None and t is not None:
            where = f"step {step}, t = {t:.6g} s: "
        super().__init__(where + reason)


class StateError(MbsimError, ValueError):
    """A state given to the Python API (``sim.state = ...``, ``run(start=...)``) does not fit the
    simulation: wrong sizes, non-finite values (exit code 2)."""

    exit_code = 2
    label = "state error"


class AssertionFailed(MbsimError):
    """An ``--assert`` condition on the run summary did not hold (exit code 4)."""

    exit_code = 4
    label = "assertion failed"


class Interrupted(MbsimError):
    """SIGINT, SIGTERM or SIGHUP ended the command (exit code 128 + the signal's number).

    A result file being written is closed with status failed and ``str(self)`` as its message,
    ``interrupted (SIGTERM)`` (mbsim.interrupts).
    """

    exit_code = 130  # SIGINT's; an instance carries the code of its own signal
    label = "interrupted"

    def __init__(self, signum: int = 2) -> None:
        self.signum = int(signum)
        self.exit_code = signal_exit_code(self.signum)
        super().__init__(interrupted_message(self.signum))


EXIT_CODES = {
    "done": 0,
    "other": 1,
    "scene": SceneError.exit_code,
    "simulation": SimulationError.exit_code,
    "assertion": AssertionFailed.exit_code,
    "interrupted": Interrupted.exit_code,
}


def did_you_mean(found: str, choices: Iterable[str]) -> str:
    """A ``did you mean 'x'?`` hint for a misspelt name, or an empty string."""
    close = difflib.get_close_matches(str(found), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 body``, ``2 bodies``, ``1 degree of freedom``: a count with its noun in agreement."""
    return f"{count} {singular if count == 1 else (plural_form or singular + 's')}"


def shorten(text: str, limit: int = 60) -> str:
    """``text`` for a message: on one line (control characters escaped), cut to ``limit`` characters."""
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} characters)"
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def path_text(text: str) -> str:
    """A file name (or a command line) as text for a UTF-8 file, JSON or a message.

    Python decodes file names and arguments with the locale's encoding and keeps each byte it
    cannot decode as a lone surrogate (U+DC80..U+DCFF); under an ASCII locale (LANG=C) that is
    every byte of ``Pendel-ö.yaml``'s ö. Those bytes are read again as UTF-8 (the ö comes back);
    bytes that are not UTF-8 either become ``\\xff`` escapes.
    """
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")
