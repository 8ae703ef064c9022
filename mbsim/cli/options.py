"""Options shared by several commands, and the one place where errors become exit codes."""

from __future__ import annotations

import functools
import json
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from mbsim import interrupts
from mbsim.errors import Interrupted, MbsimError

set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a scene value by its dotted path (repeatable), e.g. solver.method=lagrange.",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout and nothing else.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar and no notes on stderr.")
export_option = click.option(
    "--export",
    "export_to",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE.glb|FILE.html",
    help="At the end, also write the motion as a glTF binary or a page that plays it (as mbsim export).",
)
debug_option = click.option("--debug", is_flag=True, help="Show Python tracebacks of errors.")
assert_option = click.option(
    "--assert",
    "assertions",
    multiple=True,
    metavar="EXPR",
    help="A condition on the run summary that must hold (repeatable), e.g. 'energy_drift < 1e-4'; "
    "names: steps, t_end, wall_time_s, us_per_step, max_position_violation, max_velocity_violation, "
    "max_quaternion_norm_error, energy_drift; exit 4 when one fails.",
)
strict_option = click.option(
    "--strict", is_flag=True, help="Refuse an inconsistent start instead of assembling it (exit 2)."
)


def emit_json(obj: Any) -> None:
    """``obj`` as strict JSON on stdout: a number that is not finite (the energy drift of a run
    whose state overflowed) is ``null``, as in compare.json and sweep.json, so that jq and every
    other strict reader take it."""
    from mbsim.output.tables import json_ready  # numpy: not before a command needs it

    click.echo(json.dumps(json_ready(obj), indent=2, default=_json_default, allow_nan=False))


def _json_default(value: Any) -> Any:
    import numpy as np

    from mbsim.output.tables import json_ready

    if isinstance(value, np.generic):
        return json_ready(value.item())
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    return str(value)


def handle_errors(func: Callable) -> Callable:
    """Map mbsim's errors to CONTRACT §2 exit codes: 2 scene/command line, 3 simulation,
    1 anything else; no traceback unless --debug."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = kwargs.get("debug", False)
        as_json = kwargs.get("as_json", False)
        try:
            value = func(*args, **kwargs)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except MbsimError as exc:
            _report(exc, exc.label, exc.exit_code, debug, as_json)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:  # SIGINT before mbsim's handler was installed, or a second one
            exc = Interrupted(interrupts.received() or signal.SIGINT)
            _report(exc, exc.label, exc.exit_code, debug, as_json)
            sys.exit(exc.exit_code)
        except Exception as exc:  # anything unforeseen: exit 1, traceback only with --debug
            _report(exc, "internal error", 1, debug, as_json)
            sys.exit(1)
        signum = interrupts.received()
        if signum is not None:  # a signal after the last poll still ends the command with 128 + N
            exc = Interrupted(signum)
            _report(exc, exc.label, exc.exit_code, debug, False)  # --json: its one object is out already
            sys.exit(exc.exit_code)
        return value

    return wrapper


def _report(exc: BaseException, label: str, code: int, debug: bool, as_json: bool) -> None:
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    text = str(exc)
    click.echo(f"mbsim: {text if text.startswith(label) else f'{label}: {text}'}", err=True)
    if as_json:
        emit_json({"status": "error", "exit_code": code, "error": label, "message": str(exc)})
