"""The run loop: scene -> model -> solver -> result file; returns a RunSummary.

NaN, divergence (energy past ``solver.divergence`` times what the scene can supply,
mbsim.diagnostics), a position violation past ``solver.max_violation``, solver failures, a full
disk and a result file deleted, replaced or truncated under the run (mbsim.output.guard) end
the run with status ``failed`` (exit 3); SIGINT, SIGTERM and SIGHUP end it after the current step
with status ``failed`` and the message ``interrupted (SIGTERM)`` (mbsim.interrupts). In every
case the file keeps every recorded step up to the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mbsim import interrupts
from mbsim.diagnostics import RunStats, coordinate_joints, record_row, split_rows
from mbsim.errors import AssemblyError, Interrupted, SimulationError, path_text
from mbsim.model.compile import compile_model
from mbsim.model.constraints import constraint_residual
from mbsim.model.dynamics import update_coordinate_references
from mbsim.model.flat import contacts_near
from mbsim.model.model import Model, State
from mbsim.output.restart import Continuation, check_columns
from mbsim.output.safety import ResultClaim, claim_result
from mbsim.scene.spec import SceneSpec
from mbsim.solvers import get_solver
from mbsim.solvers.base import StepInfo
from mbsim.solvers.numerics.projection import assemble


@dataclass
class RunSummary:
    """What ``mbsim run`` prints (and ``--json`` emits)."""

    scene: str
    file: str
    method: str
    integrator: str
    status: str
    message: str
    steps: int
    recorded: int
    t_end: float
    wall_time_s: float
    us_per_step: float
    max_position_violation: float
    max_velocity_violation: float
    max_quaternion_norm_error: float
    energy_drift: float
    assembly: list[dict] = field(default_factory=list)
    events: int | None = None  # event_driven: the number of events (/events)
    # why the result file could not keep the run (a full disk, the file taken away under the run):
    # a failure of the command's output, not of the physics (compare ends with exit 3 for it)
    file_failure: str | None = None
    # max_NAME, min_NAME, final_NAME of the scene's outputs over the recorded rows (CONTRACT §8)
    outputs: dict[str, float] = field(default_factory=dict)
    # run --from: the source file (as given) and the time of the row it went on from (CONTRACT §9)
    continued_from: str | None = None
    continued_at: float | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("events", "file_failure", "continued_from", "continued_at"):
            if out[key] is None:
                del out[key]
        out.update(out.pop("outputs"))  # names of their own, as --assert reads them
        return out


class RowSink(Protocol):
    """Where a run's rows go: the result file (mbsim.output.hdf5.ResultWriter) or memory
    (mbsim.output.memory.RowCollector); ``rows`` counts the rows taken, ``failure`` says why the
    sink took no more (None while it takes them)."""

    rows: int
    failure: str | None

    def append(self, row: dict[str, np.ndarray | float]) -> None: ...

    def append_rows(self, rows: dict[str, np.ndarray]) -> None: ...

    def set_attrs(self, **attrs: Any) -> None: ...

    def write_events(self, times: np.ndarray, kinds: list[str], contacts: list[str]) -> None: ...

    def flush(self) -> None: ...

    def write_group(self, name: str, datasets: dict[str, np.ndarray], attrs: dict[str, Any]) -> bool: ...

    def close(self, status: str, message: str, **attrs: Any) -> tuple[str, str]: ...


def default_output(scene_file: str) -> Path:
    return Path("outputs") / (Path(scene_file).stem + ".h5")


def output_path(spec: SceneSpec, output: str | Path | None = None) -> Path:
    """Where a run of ``spec`` writes: ``-o``, else the scene's ``output.file``, else outputs/<stem>.h5."""
    if output:
        return Path(output)
    return Path(spec.output_file) if spec.output_file else default_output(spec.raw.file)


def derived_output(spec: SceneSpec, tag: str) -> Path:
    """The result file of an analysis of the scene (``mbsim equilibrium``, ``modes``,
    ``linearize``): beside the run's (:func:`output_path`), never over it, with ``-TAG`` before
    its suffix: outputs/<stem>-equilibrium.h5, or output.file's name with -modes."""
    run = output_path(spec)
    return run.with_name(f"{run.stem}-{tag}{run.suffix or '.h5'}")


def prepare(spec: SceneSpec, strict: bool = False, initial: str | None = None):
    """Compile, assemble and pick the solver: every scene error surfaces here (exit 2).

    ``initial``: the start, ``given`` or ``equilibrium`` (default: the scene's ``initial``); from
    the static equilibrium (:func:`start_at_equilibrium`) a SimulationError (exit 3) when there is none.
    Polls the signal flag between its stages (Interrupted)."""
    interrupts.check()
    model = compile_model(spec)
    interrupts.check()
    solver = get_solver(spec, model, strict)
    interval_steps(spec, model, solver)
    try:
        assemble(model, strict=strict)
    except AssemblyError as exc:  # locate the joint in the scene file
        path = next((j.path for j in spec.joints if j.name == exc.joint), ("joints",))
        raise spec.raw.error(path, exc.reason) from None
    if (initial or spec.initial) == "equilibrium":
        interrupts.check()
        start_at_equilibrium(model)
    model.freeze()  # from here on nothing writes the model: a run's state is its solver's Data
    interrupts.check()
    return model, solver


def start_at_equilibrium(model: Model) -> None:
    """The start becomes the static equilibrium nearest the assembled one, at rest (the scene's
    ``initial: equilibrium``; mbsim.analysis.equilibrium), kept in ``model.equilibrium``.

    Raises:
        SimulationError: there is none, or Newton did not find it (the reason).
    """
    from mbsim.analysis.equilibrium import require_equilibrium  # here: only a start at equilibrium needs it

    found = require_equilibrium(model, "initial: equilibrium")
    model.equilibrium = found
    model.q0, model.v0 = found.q, np.zeros(model.nv)


def interval_steps(spec: SceneSpec, model: Model, solver) -> int | None:
    """output.interval as a number of steps for a method without dense output (a fixed-step
    integrator, timestepping, variational), whose rows are the steps that land on its multiples;
    None without an interval or for a method that interpolates its steps.

    Raises:
        SceneError: an interval that is not a whole multiple of time.step (to round-off), or one
            with compliant contacts' time.contact_step (the steps then vary in size).
    """
    interval = model.output_interval
    if interval is None or solver.interpolates:
        return None
    h, path = model.step, ("output", "interval")
    # a fixed step has no interpolant of its own order (and timestepping's velocities jump):
    # its rows are its steps, and steps shortened to land on the multiples would change its results
    why = f"{spec.solver.method} with {solver.integrator_label} takes fixed steps and records rows at its steps only"
    steps = round(interval / h)
    if steps < 1 or abs(steps * h - interval) > 1e-9 * interval:
        raise spec.raw.error(
            path,
            f"expected a whole multiple of time.step = {h:g} s, got {interval:g} s ({interval / h:.6g} steps): {why}",
            "a multiple of time.step, or an adaptive integrator (scipy:DOP853), whose dense output gives rows between",
        )
    if model.compliant is not None and model.contact_step is not None:
        raise spec.raw.error(
            path,
            f"time.contact_step makes the fixed steps vary in size, so they do not land on the multiples of "
            f"output.interval: {why}",
            "output.every, or an adaptive integrator (scipy:DOP853)",
        )
    return steps


def quietly(work: Callable[[], None]) -> None:
    """``work()`` with numpy's floating-point warnings off (numpy's error state is per thread)."""
    with np.errstate(all="ignore"):
        work()


def numerical_failure(exc: BaseException) -> SimulationError | None:
    """The SimulationError (exit 3) that an exception raised inside a step stands for, or None when
    it is a defect of mbsim (exit 1): a linear-algebra failure, or a library refusing non-finite
    numbers (a NaN force reaching an SVD or scipy's integrators)."""
    if isinstance(exc, SimulationError):
        return exc
    text = str(exc)
    if isinstance(exc, np.linalg.LinAlgError):
        return SimulationError(f"a linear solve failed ({text}): a NaN or inf force, or a singular system")
    if isinstance(exc, (ValueError, FloatingPointError, OverflowError, ZeroDivisionError)):
        lowered = text.lower()
        if any(word in lowered for word in ("nan", "inf", "finite", "overflow", "divide by zero")):
            return SimulationError(f"non-finite numbers in the solution ({text}): the solution diverged")
    return None


def prepare_claimed(
    spec: SceneSpec, claim: ResultClaim, strict: bool = False, initial: str | None = None
) -> tuple[Model, object]:
    """:func:`prepare` for a run whose result file is claimed already. A scene error releases the
    claim untouched (a file the claim created is removed again); a signal, or a start at a static
    equilibrium that does not exist, leaves a result file with status failed and the signal's
    message or the reason (the run ended before its first step), then raises Interrupted or
    SimulationError."""
    try:
        # compiling the model and the solver's kernels takes minutes on a cold cache: a signal ends
        # the wait at once (nothing here writes the result file; the stub below does)
        with interrupts.handling():
            return interrupts.polled(lambda: prepare(spec, strict, initial))
    except (Interrupted, SimulationError) as exc:
        attrs = {"scene_name": spec.name, "method": spec.solver.method, "integrator": spec.solver.integrator}
        from mbsim.output.hdf5 import write_stub  # here: h5py costs validate's start-up ~30 ms

        write_stub(claim, spec.raw.to_yaml(), attrs | {"dimension": spec.dimension}, "failed", str(exc))
        raise
    except BaseException:
        claim.abandon()
        raise


def take_step(
    model: Model, solver, state: State, h: float, t_end: float, number: int
) -> tuple[State, StepInfo, float, float]:
    """One step of ``solver`` from ``state`` (the run loop's, and the Python API's ``sim.step``).

    ``h`` is the proposed step, cut to land exactly on ``t_end`` and to time.contact_step while
    compliant bounding boxes overlap (the paper's step control); ``number`` is the step's number
    for a failure's message. Returns the new state, its StepInfo, the step taken and the next
    proposal (a fixed-step run goes back to the large step, an adaptive one keeps its own).

    Raises:
        SimulationError: the new state is not finite.
    """
    h_try = min(h, t_end - state.t)
    if t_end - (state.t + h_try) < 1e-9 * h_try:  # land exactly on t_end
        h_try = t_end - state.t
        # a whole step short of t_end by round-off of the time only: the step itself (as the
        # compiled blocks: the steps of a run that goes on; mbsim run --from)
        if abs(h_try - h) <= 1e-12 * max(1.0, t_end):
            h_try = h
    fine = model.contact_step if model.compliant is not None else None
    if fine is not None and fine < h_try and contacts_near(model, *solver.body_coordinates(state), h_try):
        h_try = fine
    new, info, h_next = solver.step(state, h_try)
    h_next = h_next if (fine is None or solver.adaptive or h_next != h_try) else model.step
    if not (np.all(np.isfinite(new.q)) and np.all(np.isfinite(new.v)) and np.isfinite(new.work)):
        raise SimulationError("the state is not finite (NaN or inf): the solution diverged", step=number, t=new.t)
    if model.joint_coordinates:
        update_coordinate_references(model, solver.data, solver.body_coordinates(new)[0], new.t)
    return new, info, h_try, h_next


def continue_from(continued: Continuation, solver, stats: RunStats) -> State:
    """The state of a continued run's first row, with the method's carried state and the energy
    bookkeeping of the original start restored (mbsim.output.restart)."""
    state = solver.state_from_row(continued.time, continued.q, continued.v, continued.work)
    if continued.carry is not None:
        solver.restore(continued.carry)
    elif solver.model.joint_coordinates:  # a row before the last: unwrapped from its recorded coordinates
        references = solver.data.coordinate_reference  # one table at most; in place: the compiled steps view it
        for joint in coordinate_joints(solver.model) if references else ():
            if joint.name in continued.joint_positions:
                references[0][joint.coordinate_row] = continued.joint_positions[joint.name]
        update_coordinate_references(solver.model, solver.data, solver.body_coordinates(state)[0], state.t)
    energy = continued.energy
    stats.energy0, stats.total0 = float(energy["energy0"]), float(energy["total0"])
    stats.scale, stats.fall = float(energy["energy_scale"]), tuple(float(x) for x in energy["fall"])
    stats.max_work = continued.max_work
    return state


def write_restart(writer, stats: RunStats, carry_row: tuple | None) -> None:
    """/restart of the result file (mbsim.output.restart): the energy bookkeeping of the start and
    the method's carried state at the last recorded row."""
    from mbsim.output.guard import ResultFileError

    if stats.energy0 is None:  # not a row recorded
        return
    try:  # the rows first: what /restart takes is not the space the close needs for them
        writer.flush()
    except ResultFileError:
        return  # a full disk, a file taken away: the close says so (writer.failure)
    fall = np.array(stats.fall, dtype=float)
    attrs = {"energy0": stats.energy0, "total0": stats.total0, "energy_scale": stats.scale, "fall": fall}
    writer.write_group("restart", {}, attrs)
    if carry_row is not None:
        row, t, step, carried = carry_row
        writer.write_group("restart/carry", carried, {"row": row, "time": t, "step": step})


def run(
    spec: SceneSpec,
    output: str | Path | ResultClaim | None = None,
    strict: bool = False,
    progress: Callable[[float, float], None] | None = None,
    prepared: tuple[Model, object] | None = None,
    sink: Callable[..., RowSink] | None = None,
    initial: State | None = None,
    continued: Continuation | None = None,
) -> RunSummary:
    """Simulate a checked scene and write its result file.

    ``output``: a path (claimed here: mbsim.output.safety), a claim already taken, or None for
    the scene's own (:func:`output_path`). ``sink``: instead of a result file, a factory called
    as ``sink(model, attrs, coordinates=..., columns=...)`` (ResultWriter's arguments after the
    claim) for the object the rows go to (mbsim.output.memory.RowCollector: the Python API's
    in-memory run); ``output`` is then ignored and nothing is claimed. ``initial``: the state to
    start from (the method's own coordinates; default the scene's initial state). ``continued``:
    the recorded row of an earlier run of the scene to start from (mbsim.output.restart; its
    file's first row, attrs ``continued_from`` and ``continued_at``); the run goes on to the
    scene's time.end.

    Raises:
        SceneError: before anything is written, for every problem of the scene.
        OutputError: the result file belongs to another live run, or is not an mbsim result.
    Returns:
        The summary; ``status`` says whether the run completed or failed (and why).
    """
    if sink is None:
        claim = output if isinstance(output, ResultClaim) else claim_result(output_path(spec, output))
        model, solver = prepared or prepare_claimed(spec, claim, strict)
        path = claim.path
    else:  # rows held in memory (the Python API): no file claimed, none written
        with interrupts.handling():
            model, solver = prepared or interrupts.polled(lambda: prepare(spec, strict))
        path = ""
    integrator = solver.integrator_label  # methods with a scheme of their own name it
    attrs = {"scene_name": spec.name, "method": spec.solver.method, "integrator": integrator}
    # a method in coordinates of its own (joint coordinates: recursive) names the columns of /q
    # and /v, gives its start state and converts its states to the model's body coordinates
    if sink is None:
        from mbsim.output.hdf5 import ResultWriter  # here: h5py costs validate's start-up ~30 ms

        def sink(*args, **kwargs) -> RowSink:
            return ResultWriter(claim, *args, **kwargs)

    columns = solver.row_columns()  # of the rows advance() records, and of every row: created with the header
    # and the step number, last in a compiled row: /restart/step (mbsim.output.restart)
    columns = [*columns, ("restart/step", ())]
    if continued is not None:
        try:  # the source's /q and /v are this method's columns: else nothing is written
            check_columns(continued, solver.coordinate_names(), continued.source)
        except BaseException:
            if path:  # a claimed result file: given up untouched
                claim.abandon()
            raise
    writer = sink(model, attrs, coordinates=solver.coordinate_names(), columns=columns)
    stats = RunStats()
    state = solver.initial_state() if initial is None else initial.copy()
    body = solver.body_coordinates

    t_end, every, max_violation = model.t_end, model.output_every, spec.solver.max_violation
    divergence, max_steps = spec.solver.divergence, spec.solver.max_steps
    # output.interval: rows at t = k * interval from each step's dense output, or (fixed steps)
    # every so many steps, stamped with k * interval
    interval = model.output_interval
    dense = interval is not None and solver.interpolates
    every = interval_steps(spec, model, solver) or every
    at_multiple = 1e-9 * interval if interval is not None else 0.0  # a step's end this close is that multiple
    next_multiple = 1  # k of the next row (t = 0 is the first)
    if interval is not None and initial is not None:  # a run from a later state: the multiples after it
        next_multiple = int(np.floor(state.t / interval + 1e-9)) + 1
    status, message, steps = "failed", "", 0
    ended: dict[str, str] = {}  # a failed run's root attribute `failure`: what ended it (user guide, "The result file")
    # the method's state beyond (t, q, v, work) at the last recorded row: (row, t, step, carried)
    carry_row: tuple[int, float, int, dict[str, np.ndarray]] | None = None
    if continued is not None:
        state, steps = continue_from(continued, solver, stats), continued.step
        writer.set_attrs(continued_from=path_text(continued.source), continued_at=continued.recorded_time)
    first_step = steps  # the step counter goes on from the source's row; the summary counts this run's
    if continued is not None and interval is not None:  # the next multiple after the row's
        next_multiple = int(np.floor(state.t / interval + 1e-9)) + 1
    start = time.perf_counter()
    last_progress = start

    extra_names = solver.extra_diagnostics
    output_names = [name for name, _ in model.outputs]

    def remember(t: float, step: int) -> None:
        """The method's carried state at the row just recorded (the solver's state at time t)."""
        nonlocal carry_row
        carried = solver.carried()  # copies (the Solver protocol)
        carry_row = (writer.rows - 1, t, step, carried)

    def record(s: State, info: StepInfo, exact: float | None = None) -> None:
        """One row of state ``s``; ``exact``: the solver's own time when ``s`` is its state at a
        stamped time (the carried state is that state's), None for an interpolated row."""
        # evaluated at the solver's own time (what its last step left is of that time), written at s.t
        ev = solver.evaluate(s if exact is None or exact == s.t else State(exact, s.q, s.v, s.work))
        row = record_row(model, solver.data, s, ev, info, stats)
        row["restart/step"] = float(steps)
        for name in extra_names:  # every row has every column, NaN where a step has no value
            path = f"diagnostics/{name}" if "/" in name else f"diagnostics/solver/{name}"
            row[path] = info.extra.get(name, np.nan)
        if "outputs/{output}" in row:
            stats.add_outputs(output_names, np.asarray(row["outputs/{output}"], dtype=float)[None])
        writer.append(row)
        if exact is not None:
            remember(exact, steps)

    def stamped(t: float, number: int) -> float:
        """The time of the row of fixed step ``number`` at t: k * interval when it lands on that
        multiple (output.interval), t otherwise; t_end when t is t_end to round-off (a last step
        short of t_end by round-off only is a whole step)."""
        if abs(t_end - t) <= 1e-12 * max(1.0, t_end):
            return t_end
        if interval is None or dense or number % every:
            return t
        tk = (number // every) * interval
        return tk if abs(tk - t) <= 1e-6 * model.step else t

    def record_dense(before: float, new: State, info: StepInfo, end: bool) -> bool:
        """output.interval's rows of the step from ``before`` to ``new``: at each multiple inside it
        from the step's dense output (NaN in the per-step diagnostics: not a step's end), at a
        multiple its end meets with the end's state, and the end itself when ``end`` (the last
        step, an event, a violation). Returns whether the end was recorded."""
        nonlocal next_multiple
        interpolant = None
        inside = StepInfo(iterations=info.iterations, h=info.h)
        while next_multiple * interval <= new.t + at_multiple:
            tk = next_multiple * interval
            next_multiple += 1
            if tk >= new.t - at_multiple:
                record(State(tk, new.q, new.v, new.work), info, new.t)
                return True
            if tk > before:  # (a multiple at the step's start was recorded with the previous step)
                interpolant = interpolant or solver.interpolant()
                record(interpolant(tk), inside)
        if end:
            record(new, info, new.t)
        return end

    def record_rows(rows: np.ndarray, end_step: int) -> int:
        """Compiled rows into the statistics and the file, up to the first that diverged; how many.
        ``end_step``: the number of the step the block ended with (its state is the solver's)."""
        if not len(rows):
            return 0
        if interval is not None:  # fixed steps landing on a multiple of output.interval: t = k * interval
            for row in rows:
                row[0] = stamped(float(row[0]), int(row[-1]))
        else:  # the last row: t_end
            rows[-1, 0] = stamped(float(rows[-1, 0]), int(rows[-1, -1]))
        blocks = split_rows(columns, rows)
        quaternion = blocks.get("diagnostics/constraints/quaternion_norm_error", np.zeros(len(rows)))
        kept = stats.add(
            blocks["time"],
            *(blocks[f"diagnostics/energy/{key}"] for key in ("kinetic", "potential", "work")),
            *(blocks[f"diagnostics/constraints/{key}_violation"] for key in ("position", "velocity")),
            quaternion,
            divergence,
        )
        if "outputs/{output}" in blocks:
            stats.add_outputs(output_names, blocks["outputs/{output}"][:kept])
        writer.append_rows({key: value[:kept] for key, value in blocks.items()})
        if kept == len(rows) and int(rows[-1, -1]) == end_step:  # the block ended at its last row
            remember(state.t, end_step)
        return kept

    def violated(violation: float, step: int, t: float) -> SimulationError:
        return SimulationError(
            f"position violation {violation:.3g} passed solver.max_violation = {max_violation:g}", step=step, t=t
        )

    def report(t: float, last: float) -> float:
        """Progress at most every 0.1 s of wall time; returns when it was last reported."""
        if progress is None or time.perf_counter() - last <= 0.1:
            return last
        progress(t, t_end)
        return time.perf_counter()

    def diverged(step: int, t: float) -> SimulationError:
        return SimulationError(
            f"the solution diverged: its energy error or kinetic energy is {stats.last_ratio:.3g} times "
            f"the energy its initial state and inputs can supply ({stats.drift_scale:.3g} J at the "
            f"start; solver.divergence = {divergence:g})",
            step=step,
            t=t,
        )

    try:
        with interrupts.handling(), np.errstate(all="ignore"):
            interrupts.polled(lambda: quietly(solver.load_compiled))  # set-up: a cold cache compiles for minutes
            start = last_progress = time.perf_counter()
            # a continued run's first row: the source's row (its time as recorded there)
            first = state if continued is None else State(continued.recorded_time, state.q, state.v, state.work)
            record(first, StepInfo(), state.t)
            writer.set_attrs(energy_scale=stats.scale)  # J; a live file's readers measure drift by it too
            h = model.step
            # the paper's step control: the small step while compliant bounding boxes overlap
            fine = model.contact_step if model.compliant is not None else None
            # fixed steps of a compiled method go in blocks up to the next recorded row (with the step
            # control of time.contact_step when the blocks take it themselves)
            blocks = solver.block_stepping and (fine is None or solver.contact_step_blocks)
            python_next = False  # a step the compiled block could not take goes through step()
            while t_end - state.t > 1e-12 * max(1.0, t_end):
                interrupts.check()
                if blocks and not python_next:
                    before = state.t
                    # with dense output one step a block and no row (a block allowed no step past
                    # ``steps`` takes one, which it never records): the rows come from its interpolant
                    block = solver.advance(state, h, steps, every, steps if dense else max_steps, t_end, max_violation)
                    python_next = block.status == "python"
                    if block.steps:
                        state, info = block.state, block.info
                        stats.max_position_violation = max(stats.max_position_violation, block.worst_violation)
                    if dense and block.steps:
                        last = t_end - state.t <= 1e-12 * max(1.0, t_end)
                        record_dense(before, state, info, last or block.status == "violation")
                    rows = block.rows
                    kept = record_rows(rows, steps + block.steps)
                    if kept < len(rows):  # diverged at that row: the run ends there
                        state.t = float(rows[kept - 1, 0])
                        steps = int(rows[kept - 1, -1])
                    else:
                        steps += block.steps
                    if steps > max_steps:
                        raise SimulationError(
                            f"more than solver.max_steps = {max_steps:g} steps (the step size is {h:.3g} s)",
                            step=steps,
                            t=state.t,
                        )
                    if block.status == "record":
                        record(State(stamped(state.t, steps), state.q, state.v, state.work), info, state.t)
                    if stats.last_ratio > divergence:
                        raise diverged(steps, state.t)
                    if block.status == "violation":
                        raise violated(block.worst_violation, steps, state.t)
                    last_progress = report(state.t, last_progress)
                    continue
                else:
                    python_next = False
                    before = state.t
                    new, info, h_try, h = take_step(model, solver, state, h, t_end, steps + 1)
                    steps += 1  # completed steps only
                    if steps > max_steps:  # an adaptive integrator that crawls: load checked end / step only
                        raise SimulationError(
                            f"more than solver.max_steps = {max_steps:g} steps (the step size fell to {h_try:.3g} s)",
                            step=steps,
                            t=new.t,
                        )
                    state = new
                    violation = info.position_violation
                    if violation is None:
                        phi = constraint_residual(model, body(state)[0], state.t) if model.nc else np.zeros(1)
                        violation = float(np.max(np.abs(phi)))
                    stats.max_position_violation = max(stats.max_position_violation, violation)
                last = t_end - state.t <= 1e-12 * max(1.0, t_end)
                if dense:  # an event's instant is recorded too: the state after it (the step's end)
                    recorded = record_dense(before, state, info, last or info.event or violation > max_violation)
                else:
                    recorded = steps % every == 0 or last
                    if recorded:
                        record(State(stamped(state.t, steps), state.q, state.v, state.work), info, state.t)
                if recorded:
                    violation = stats.max_position_violation
                if recorded and stats.last_ratio > divergence:
                    raise diverged(steps, state.t)
                if violation > max_violation:
                    if not recorded:  # keep the offending state in the file
                        record(state, info, state.t)
                    raise violated(violation, steps, state.t)
                last_progress = report(state.t, last_progress)
        status = "completed"
    except SimulationError as exc:
        message = str(exc) if exc.step is not None else str(SimulationError(exc.reason, step=steps + 1, t=state.t))
        ended = {"failure": "simulation"}
    except Interrupted as exc:
        message = str(exc)
        ended = {"failure": "interrupted"}
    except Exception as exc:
        failure = numerical_failure(exc)
        if failure is None:  # an internal error still leaves a truthful file, then propagates
            message = f"internal error: {type(exc).__name__}: {exc}"
            ended = {"failure": "internal"}
            raise
        message = str(SimulationError(failure.reason, step=steps + 1, t=state.t))
        ended = {"failure": "simulation"}
    finally:
        wall = time.perf_counter() - start
        table = solver.event_table()
        n_events = None
        if table is not None:  # event_driven: /events, also of a failed run
            n_events = len(table[0])
            writer.write_events(*table)
            writer.set_attrs(events=n_events)
        write_restart(writer, stats, carry_row)
        # a full disk or a file taken away under the run at the very end fails the run too
        status, message = writer.close(
            status,
            message,
            steps=steps - first_step,
            wall_time_s=wall,
            max_position_violation=stats.max_position_violation,
            max_velocity_violation=stats.max_velocity_violation,
            energy_drift=stats.energy_drift,
            energy_scale=stats.scale,
            **ended,
        )
    return RunSummary(
        scene=spec.name,
        file=str(path),
        method=spec.solver.method,
        integrator=integrator,
        status=status,
        message=message,
        steps=steps - first_step,
        recorded=writer.rows,
        t_end=stamped(state.t, -1) if interval is None or dense else state.t,
        wall_time_s=wall,
        us_per_step=1e6 * wall / max(steps - first_step, 1),
        max_position_violation=stats.max_position_violation,
        max_velocity_violation=stats.max_velocity_violation,
        max_quaternion_norm_error=stats.max_quaternion_norm_error,
        energy_drift=stats.energy_drift,
        assembly=model.assembly_report,
        events=n_events,
        file_failure=writer.failure,
        outputs=stats.output_summary(),
        continued_from=None if continued is None else path_text(continued.source),
        continued_at=None if continued is None else continued.recorded_time,
    )


def write_start(spec: SceneSpec, claim: ResultClaim, model: Model, solver, attrs: dict) -> tuple[str, str]:
    """A one-row result file of the prepared start state (mbsim equilibrium): the row a run records
    first, in the same layout (CONTRACT §3), status completed, ``attrs`` among the root attributes.

    Returns:
        The final (status, message): failed with the reason when a signal ended it or the file
        could not take the row.
    """
    from mbsim.output.hdf5 import ResultWriter  # here: h5py costs validate's start-up ~30 ms

    base = {"scene_name": spec.name, "method": spec.solver.method, "integrator": solver.integrator_label}
    writer = ResultWriter(claim, model, base, coordinates=solver.coordinate_names(), columns=solver.row_columns())
    stats = RunStats()
    status, message = "failed", ""
    start = time.perf_counter()
    try:
        with interrupts.handling(), np.errstate(all="ignore"):
            interrupts.polled(lambda: quietly(solver.load_compiled))
            state = solver.initial_state()
            row = record_row(model, solver.data, state, solver.evaluate(state), StepInfo(), stats)
            for name in solver.extra_diagnostics:  # the run's columns, NaN: no step was taken
                row[f"diagnostics/{name}" if "/" in name else f"diagnostics/solver/{name}"] = np.nan
            writer.append(row)
        status = "completed"
    except Interrupted as exc:
        message = str(exc)
    except Exception as exc:  # the method cannot evaluate the state (lagrange at a singular position)
        failure = numerical_failure(exc)
        if failure is None:
            message = f"internal error: {type(exc).__name__}: {exc}"
            raise
        message = f"the state cannot be evaluated by {spec.solver.method}: {failure.reason}"
    finally:
        status, message = writer.close(
            status,
            message,
            steps=0,
            wall_time_s=time.perf_counter() - start,
            max_position_violation=stats.max_position_violation,
            max_velocity_violation=stats.max_velocity_violation,
            energy_drift=0.0,
            energy_scale=stats.scale,
            **attrs,
        )
    return status, message
