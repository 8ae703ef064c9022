"""``mbsim run``: simulate a scene and write its result file."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from mbsim import errors, interrupts
from mbsim.assertions import check_output_names, evaluate_all, parse_assertions
from mbsim.cli.options import (
    assert_option,
    debug_option,
    emit_json,
    export_option,
    handle_errors,
    json_option,
    quiet_option,
    set_option,
    strict_option,
)
from mbsim.errors import EXIT_CODES
from mbsim.output.safety import check_export_target, claim_result, is_result_file

if TYPE_CHECKING:
    from mbsim.simulate import RunSummary


class ProgressBar:
    """A one-line progress display on stderr, shown once a run has taken a second."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.shown = False

    def __call__(self, t: float, t_end: float) -> None:
        elapsed = time.perf_counter() - self.start
        if elapsed < 1.0:
            return
        frac = min(1.0, t / t_end) if t_end > 0 else 1.0
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        eta = elapsed * (1 - frac) / frac if frac > 0 else 0.0
        sys.stderr.write(f"\r[{bar}] {100 * frac:5.1f}%  t = {t:.4g} / {t_end:.4g} s  eta {eta:5.1f} s ")
        sys.stderr.flush()
        self.shown = True

    def close(self, reached: tuple[float, float] | None = None) -> None:
        """End the line, drawn once more at ``reached`` = (t, t_end): 100 % for a run that got there."""
        if self.shown:
            if reached is not None:
                self(*reached)
            sys.stderr.write("\n")
            sys.stderr.flush()


def format_summary(s: RunSummary) -> str:
    lines = [
        f"scene      {s.scene}",
        f"method     {s.method} / {s.integrator}",
        f"status     {s.status}" + (f": {s.message}" if s.message else ""),
        *([f"continued  from {s.continued_from} at t = {s.continued_at:.10g} s"] if s.continued_from else []),
        f"steps      {s.steps} (t = {s.t_end:.6g} s, {s.recorded} recorded)",
        f"wall time  {s.wall_time_s:.3f} s ({s.us_per_step:.1f} us/step)",
        f"max position violation  {s.max_position_violation:.3e}",
        f"max velocity violation  {s.max_velocity_violation:.3e}",
        f"energy drift (relative) {s.energy_drift:.3e}",
        f"result     {s.file}",
    ]
    return "\n".join(lines)


def continuation(scene: str, spec, source: str, at: float | None, to: float | None, output: str | None):
    """The row of ``source`` the run starts from (``spec``: the scene with time.end set by --to).

    Raises:
        SceneError: (exit 2) a source that cannot be continued (mbsim.output.restart), an end not
            after the row's time, or an output that is the source itself.
    """
    from mbsim.output.restart import read_continuation, same_file
    from mbsim.simulate import output_path

    continued = read_continuation(source, spec.raw.to_yaml(), at)
    if not spec.t_end > continued.recorded_time * (1 + 1e-12):
        where = "--to" if to is not None else "time.end"
        raise errors.UsageError(
            f"the end {spec.t_end:g} s is not after the row's time {continued.recorded_time:.10g} s: "
            "nothing to continue",
            file=scene,
            key_path=where,
            hint="--to T_END past the row (or --time of an earlier row)",
        )
    target = output_path(spec, output)
    if same_file(target, source):
        raise errors.UsageError(
            f"the result file {target} is the file the run continues from: it would be overwritten",
            file=str(target),
            key_path="-o",
            hint="-o NEW.h5",
        )
    return continued


@click.command()
@click.argument("scene", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Result file (default: output.file of the scene, else outputs/<scene stem>.h5).",
)
@click.option(
    "--from",
    "source",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="OUT.h5",
    help="Continue from a recorded row of this completed or failed result file of the same scene "
    "(its last row, or the row at --time); the new file starts at that row.",
)
@click.option(
    "--time", "at", type=float, default=None, metavar="T", help="With --from: the time of the row to continue from, s."
)
@click.option(
    "--to",
    "to",
    type=float,
    default=None,
    metavar="T_END",
    help="With --from: the new end time, s (default the scene's time.end; after the row's time).",
)
@set_option
@assert_option
@quiet_option
@json_option
@strict_option
@export_option
@debug_option
@handle_errors
def run(
    scene: str,
    output: str | None,
    source: str | None,
    at: float | None,
    to: float | None,
    overrides: tuple[str, ...],
    assertions: tuple[str, ...],
    quiet: bool,
    as_json: bool,
    strict: bool,
    export_to: str | None,
    debug: bool,
) -> None:
    """Simulate SCENE and write the HDF5 result file.

    With --assert, each condition on the run summary is checked after the run: exit 4 when one
    does not hold (3 if the run itself failed), naming the condition and the values it used.

    With --from OUT.h5, the run continues from a recorded row of an earlier run of the same scene
    (its last row, or the row at --time T) up to --to T_END (default the scene's time.end); the
    new result file starts at that row and records continued_from and continued_at. A fixed-step
    method continues as if never interrupted; an adaptive integrator restarts its step control.
    """
    checks = parse_assertions(assertions)
    if export_to is not None:
        check_export_target(export_to)  # a wrong name is refused before the run, not after it
    # through the Python API (mbsim.api): the command is a thin shell over load() and run()
    from mbsim.api import load

    if to is not None and source is not None:  # the end of the run is the scene's time.end (the solvers read it)
        overrides = (*overrides, f"time.end={float(to)!r}")
    sim = load(scene, set=overrides, strict=strict)
    sim.passes_on_signals = False  # a signal ends the command with exit 128 + N (below)
    spec = sim.spec
    continued = None
    if source is not None:
        continued = continuation(scene, spec, source, at, to, output)
    elif at is not None or to is not None:
        raise errors.UsageError(
            "--time and --to continue a run: they need --from OUT.h5", file=scene, key_path="--time/--to"
        )
    check_output_names(checks, [item.get("name") for item in spec.outputs if isinstance(item, dict)])
    # here, not at module level: the solvers and the model compiler cost ~0.2 s of CPU that a
    # scene refused while loading does not need
    from mbsim.simulate import output_path

    interrupts.check()
    # the result file is claimed before the (possibly long) preparation: a second writer or a
    # file that is not ours is refused at once, before anything is compiled
    claim = claim_result(output_path(spec, output))
    model, solver = sim.prepare(claim)
    if not (quiet or as_json):
        for note in solver.notes:
            click.echo(f"mbsim: note: {note}", err=True)
    if model.assembly_report and not quiet and not as_json:
        moved = ", ".join(f"{r['body']} {r['distance']:.3g} m / {r['rotation']:.3g} rad" for r in model.assembly_report)
        click.echo(f"mbsim: the initial state was assembled onto the joints: {moved}", err=True)
    if model.equilibrium is not None and not quiet and not as_json:  # initial: equilibrium
        found = model.equilibrium
        kind = "stable" if found.stable else "not stable"
        click.echo(
            f"mbsim: the start is the static equilibrium (residual {found.residual:.3g} after "
            f"{found.iterations} iterations, {kind})",
            err=True,
        )
    progress = ProgressBar() if (sys.stderr.isatty() and not quiet) else None
    summary = None
    try:
        summary = sim.run(file=claim, progress=progress, continued=continued).summary
    finally:
        if progress:
            progress.close((summary.t_end, model.t_end) if summary else None)
    outcomes = evaluate_all(checks, summary.to_dict())
    signum = interrupts.received()
    exported = None
    if export_to is not None and signum is None and summary.recorded > 0:
        # a failed run's motion up to where it stopped is exported too: that is where to look
        from mbsim.output.export import export_results  # motion, geometry: only when --export asks

        exported = export_results([(summary.file, None)], export_to)
    if as_json:
        extra = {"assertions": [o.to_dict() for o in outcomes]} if checks else {}
        extra |= {"export": str(exported.file)} if exported else {}
        emit_json(summary.to_dict() | extra)
    else:  # --quiet hides the progress bar and the notes, not the summary
        click.echo(format_summary(summary))
        for outcome in outcomes:
            click.echo(f"assert     {'held' if outcome.passed else 'FAILED'}: {outcome.describe()}")
        if exported:
            click.echo(f"export     {exported.file} ({exported.bytes / 1e6:.2f} MB)")
            for note in [] if quiet else exported.notes:
                click.echo(f"mbsim: note: {note}", err=True)
    if summary.status != "completed":
        if not as_json:
            what = summary.message if signum is not None else f"simulation failed: {summary.message}"
            # a file deleted or replaced under the run is not where the partial results are
            kept = f" (partial results in {summary.file})" if is_result_file(summary.file) else ""
            click.echo(f"mbsim: {what}{kept}", err=True)
        sys.exit(errors.signal_exit_code(signum) if signum is not None else EXIT_CODES["simulation"])
    failed = [o for o in outcomes if not o.passed]
    if failed:
        if not as_json:
            for outcome in failed:
                click.echo(f"mbsim: assertion failed: {outcome.describe()}", err=True)
        sys.exit(EXIT_CODES["assertion"])
