"""SIGINT, SIGTERM and SIGHUP as one flag that the long loops poll (CONTRACT §4, Signals).

``mbsim``'s entry point installs the handlers before it imports anything heavy, so that a
signal at any moment of a command (start-up, set-up, the first step, the last row)
is recorded instead of killing the process half-way through a write or printing a traceback.
The handler only records the first signal; the run loop, ``prepare``, ``compare`` and ``sweep``
poll it between units of work (a step, a solver, a case) and end the command the same way for
all three: the current unit finishes, the result file is closed with status ``failed`` and the
message ``interrupted (SIGTERM)``, and the process exits with 128 + the signal number.

Nothing here imports numpy or more of mbsim than its errors, so that it is cheap to install first.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from mbsim.errors import Interrupted

# the signals a user, ``timeout``, a CI runner's cancellation or a batch scheduler sends
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
T = TypeVar("T")

_received: list[int] = []  # signal numbers in the order they came (the first one decides)
_installed = False


_abandoned: list[threading.Thread] = []  # set-up threads a signal left running (see `polled`)


def _handle(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)


def install() -> bool:
    """Route the handled signals to the flag; returns False when not on the main thread
    (Python only lets the main thread install handlers; the defaults then stay)."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return False
    for sig in HANDLED:
        signal.signal(sig, _handle)
    _installed = True
    return True


def installed() -> bool:
    return _installed


def received() -> int | None:
    """The number of the first handled signal received since the last ``reset``, or None."""
    return _received[0] if _received else None


def count() -> int:
    """How many handled signals came since the last ``reset``."""
    return len(_received)


def reset() -> None:
    """Forget received signals (a new command in the same process: tests, in-process runs)."""
    _received.clear()


def record(signum: int) -> None:
    """Record a signal as if it had been delivered (KeyboardInterrupt seen by a caller)."""
    _received.append(int(signum))


def check() -> None:
    """Raise :class:`mbsim.errors.Interrupted` if a handled signal came."""
    signum = received()
    if signum is not None:
        raise Interrupted(signum)


def polled(work: Callable[[], T]) -> T:
    """``work()``, run in a helper thread while the main thread polls the signal flag: a signal
    ends the wait at once with :class:`mbsim.errors.Interrupted` instead of after ``work``
    returns. For long set-up that polls nothing and cannot take an exception raised into it:
    a signed distance field's grid built in compiled code (seconds to minutes for a fine one).
    The abandoned thread dies with the process (:func:`abandoned`: the entry point then exits
    without waiting for it). ``work`` must write no file. Off the main thread, or where the
    handlers are not routed to the flag, it simply calls ``work()``."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not _handle:
        return work()
    check()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the main thread as it is
            box["error"] = exc

    thread = threading.Thread(target=run, name="mbsim-set-up", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.05)
        if received() is not None and thread.is_alive():
            _abandoned.append(thread)
            check()
    if "error" in box:
        raise box["error"]
    return box["value"]


def abandoned() -> bool:
    """Whether a signal left set-up work running in a helper thread (:func:`polled`)."""
    return any(thread.is_alive() for thread in _abandoned)


class handling:  # noqa: N801 - used as a context manager, like contextlib's
    """Within the block, the handled signals set the flag even when mbsim's entry point did not
    install the handlers (mbsim used as a library from a script's main thread); on exit the
    handlers that were there before come back. Inside the ``mbsim`` command it changes nothing."""

    def __init__(self) -> None:
        self._old: dict[int, object] = {}

    def __enter__(self) -> handling:
        if not _installed and threading.current_thread() is threading.main_thread():
            for sig in HANDLED:
                self._old[sig] = signal.signal(sig, _handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
