"""The ``mbsim`` console script: signal handlers first, then the command line.

This module imports nothing but :mod:`mbsim.interrupts` before it installs the handlers, so that
a SIGINT, SIGTERM or SIGHUP during start-up (click, numpy, h5py, numba imports) is recorded and
honoured like one during a run, rather than killing the process or printing a traceback.
"""

from __future__ import annotations

from mbsim import interrupts


def main() -> None:
    interrupts.install()
    try:
        from mbsim.cli.main import cli

        cli(prog_name="mbsim")
    except KeyboardInterrupt:  # raised by a library that installed its own SIGINT handler
        raise SystemExit(interrupts.exit_code(interrupts.received() or 2)) from None
    signum = interrupts.received()
    if signum is not None:  # came while click itself was starting: not one command polled it
        raise SystemExit(interrupts.exit_code(signum))
