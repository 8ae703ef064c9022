"""The ``mbsim`` console script: standard streams and signal handlers first, then the command line.

This module imports nothing but :mod:`mbsim.interrupts` before it installs the handlers, so that
a SIGINT, SIGTERM or SIGHUP during start-up (click, numpy, h5py imports) is recorded and
honoured like one during a run, rather than killing the process or printing a traceback.

Before that, the standard streams are made safe for any way a shell or a scheduler starts mbsim:

- a closed descriptor 0, 1 or 2 (``2>&-``) is reopened on /dev/null, so that the result file
  opened next cannot become "stderr" and receive the messages; what goes to a closed stream is
  dropped silently and the command runs as usual;
- stdout and stderr never raise on text: an ASCII (C/POSIX) locale's streams become UTF-8 (what
  click does to its own output anyway), a file name's undecodable bytes are written back as they
  were, and a character the stream cannot encode is written as a backslash escape;
- a failed write (a full device, a reader that went away) never ends the command half-way or
  prints a traceback: the rest of that stream's output is dropped, the command finishes its
  files, and the exit code says that its output was lost (:func:`lost_output_code`).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import signal
import sys

from mbsim import errors, interrupts

STREAM_ERRORS = "mbsim-text"  # the codec error handler of the standard streams (_encode_error)
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE  # 141: what a shell shows for a writer whose reader left
LOST_OUTPUT_EXIT = 2  # CONTRACT §2: an output that cannot be written


def _encode_error(exc: UnicodeError) -> tuple[str | bytes, int]:
    """A file name's undecodable bytes (U+DC80..U+DCFF, Python's surrogateescape) go out as the
    bytes they were; any other character the stream cannot encode becomes a backslash escape."""
    if isinstance(exc, UnicodeEncodeError):
        text = exc.object[exc.start : exc.end]
        if all("\udc80" <= c <= "\udcff" for c in text):
            return bytes(ord(c) - 0xDC00 for c in text), exc.end
        return codecs.backslashreplace_errors(exc)
    raise exc


class _Output(io.TextIOWrapper):
    """stdout or stderr: the first failed write is kept in ``lost`` (see the module's notes);
    later output goes to /dev/null, so that nothing (Python's own flush at exit included) fails
    again or reports it."""

    lost: OSError | None = None

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                return super().write(text)
            except OSError as exc:
                self._lose(exc)
        return len(text)

    def flush(self) -> None:
        if self.lost is None:
            try:
                super().flush()
            except OSError as exc:
                self._lose(exc)

    def _lose(self, exc: OSError) -> None:
        self.lost = exc
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self.fileno())
        os.close(null)
        with contextlib.suppress(OSError, ValueError):
            super().flush()  # the buffered rest now goes to /dev/null


def _open_std_descriptors() -> None:
    """Descriptors 0, 1 and 2 that are closed are reopened on /dev/null."""
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, mode)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _text_output(fd: int, old: io.TextIOBase | None, line_buffering: bool) -> _Output:
    encoding = getattr(old, "encoding", None) or "utf-8"
    if codecs.lookup(encoding).name == "ascii":  # a C/POSIX locale: see the module's notes
        encoding = "utf-8"
    return _Output(
        io.open(fd, "wb", closefd=False),  # noqa: UP020 -- a binary buffer on the descriptor itself
        encoding=encoding,
        errors=STREAM_ERRORS,
        line_buffering=line_buffering or bool(getattr(old, "line_buffering", False)),
    )


def prepare_streams() -> None:
    """Make the standard streams safe (the module's notes); done once, first thing."""
    if isinstance(sys.stdout, _Output):
        return
    codecs.register_error(STREAM_ERRORS, _encode_error)
    _open_std_descriptors()
    for stream in (sys.stdout, sys.stderr):  # nothing written yet is lost in the swap
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    sys.stdout = _text_output(1, sys.stdout, line_buffering=False)
    sys.stderr = _text_output(2, sys.stderr, line_buffering=True)


def lost_output_code(code: int | str | None) -> int | str | None:
    """The exit code once the command is done: a command that succeeded but could not write its
    standard output exits 141 when the reader went away (as if killed by SIGPIPE, like a C tool),
    else 2 (an unwritable output, CONTRACT §2); a message is attempted on stderr. Other codes stay."""
    out = sys.stdout
    if isinstance(out, _Output):
        out.flush()
    lost = getattr(out, "lost", None)
    if lost is None or code not in (0, None):
        return code
    if lost.errno == errno.EPIPE:
        return BROKEN_PIPE_EXIT
    sys.stderr.write(f"mbsim: output error: cannot write to standard output: {lost.strerror or lost}\n")
    sys.stderr.flush()
    return LOST_OUTPUT_EXIT


def main() -> None:
    prepare_streams()
    interrupts.install()
    code: int | str | None = 0
    try:
        from mbsim.cli.main import cli

        cli(prog_name="mbsim")
    except SystemExit as exc:  # click ends every command this way
        code = exc.code
    except KeyboardInterrupt:  # raised by a library that installed its own SIGINT handler
        code = errors.signal_exit_code(interrupts.received() or signal.SIGINT)
    finally:
        # The command is done. Python's finalization puts the default handlers back, and a signal
        # during it (the libraries take a moment to tear down) would kill the process by that
        # signal; blocked, it is looked at once here and otherwise dropped with the process.
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.HANDLED)
    pending = sorted(set(signal.sigpending()) & set(interrupts.HANDLED))
    signum = interrupts.received() or (pending[0] if pending else None)
    if signum is not None and code in (0, None):  # came after the last poll (or while click started)
        code = errors.signal_exit_code(signum)
    code = lost_output_code(code)
    if interrupts.abandoned():
        # set-up work that a signal cut short (building a distance field) still runs in a helper thread: leave
        # now rather than wait for it, or for its libraries' exit hooks, at interpreter shutdown
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code if isinstance(code, int) else 1)
    raise SystemExit(code)
