"""The ``mbsim`` console script: signal handlers first, then the command line.

This module imports nothing but :mod:`mbsim.interrupts` before it installs the handlers, so that
a SIGINT, SIGTERM or SIGHUP during start-up (click, numpy, h5py, numba imports) is recorded and
honoured like one during a run, rather than killing the process or printing a traceback.
"""

from __future__ import annotations

import signal

from mbsim import interrupts


def main() -> None:
    interrupts.install()
    code: int | str | None = 0
    try:
        from mbsim.cli.main import cli

        cli(prog_name="mbsim")
    except SystemExit as exc:  # click ends every command this way
        code = exc.code
    except KeyboardInterrupt:  # raised by a library that installed its own SIGINT handler
        code = interrupts.exit_code(interrupts.received() or signal.SIGINT)
    finally:
        # The command is done. Python's finalization puts the default handlers back, and a signal
        # during it (numba and LLVM take a moment to tear down) would kill the process by that
        # signal; blocked, it is looked at once here and otherwise dropped with the process.
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.HANDLED)
    pending = sorted(set(signal.sigpending()) & set(interrupts.HANDLED))
    signum = interrupts.received() or (pending[0] if pending else None)
    if signum is not None and code in (0, None):  # came after the last poll (or while click started)
        code = interrupts.exit_code(signum)
    raise SystemExit(code)
