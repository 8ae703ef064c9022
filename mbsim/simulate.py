"""The run loop: scene -> model -> solver -> result file; returns a RunSummary.

NaN, divergence (position violation past ``solver.max_violation``) and solver failures end
the run with status ``failed``; SIGINT ends it cleanly with status ``failed`` and message
``interrupted``. In every case the file keeps every recorded step up to the end.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mbsim.diagnostics import RunStats, record_row
from mbsim.errors import AssemblyError, Interrupted, SimulationError
from mbsim.model.compile import compile_model
from mbsim.model.constraints import constraint_residual
from mbsim.model.dynamics import reset_spring_references, update_spring_references
from mbsim.model.model import Model, State
from mbsim.output.hdf5 import ResultWriter
from mbsim.scene.spec import SceneSpec
from mbsim.solvers import get_solver
from mbsim.solvers.base import StepInfo
from mbsim.solvers.projection import assemble


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

    def to_dict(self) -> dict:
        return asdict(self)


def default_output(scene_file: str) -> Path:
    return Path("outputs") / (Path(scene_file).stem + ".h5")


def prepare(spec: SceneSpec, strict: bool = False):
    """Compile, assemble and pick the solver: every scene error surfaces here (exit 2)."""
    model = compile_model(spec)
    solver = get_solver(spec, model)
    try:
        assemble(model, strict=strict)
    except AssemblyError as exc:  # locate the joint in the scene file
        path = next((j.path for j in spec.joints if j.name == exc.joint), ("joints",))
        raise spec.raw.error(path, exc.reason) from None
    return model, solver


class _SigintFlag:
    """Turns SIGINT into a flag the loop polls, so that no write is cut in half."""

    def __init__(self) -> None:
        self.raised = False
        self._old = None

    def __enter__(self):
        try:
            self._old = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: leave the default handler
            self._old = None
        return self

    def _handle(self, signum, frame) -> None:
        self.raised = True

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def run(
    spec: SceneSpec,
    output: str | Path | None = None,
    strict: bool = False,
    progress: Callable[[float, float], None] | None = None,
    prepared: tuple[Model, object] | None = None,
) -> RunSummary:
    """Simulate a checked scene and write its result file.

    Raises:
        SceneError: before anything is written, for every problem of the scene.
    Returns:
        The summary; ``status`` says whether the run completed or failed (and why).
    """
    model, solver = prepared or prepare(spec, strict)
    path = Path(output) if output else (Path(spec.output_file) if spec.output_file else default_output(spec.raw.file))
    integrator = getattr(solver, "integrator_label", spec.solver.integrator)  # methods with their own scheme
    attrs = {"scene_name": spec.name, "method": spec.solver.method, "integrator": integrator}
    # a method in coordinates of its own (joint coordinates: recursive) names the columns of /q
    # and /v, gives its start state and converts its states to the model's body coordinates
    own = hasattr(solver, "body_coordinates")
    writer = ResultWriter(path, model, attrs, coordinates=solver.coordinate_names() if own else None)
    reset_spring_references(model)
    stats = RunStats()
    state = solver.initial_state() if own else State(0.0, model.q0.copy(), model.v0.copy(), 0.0)

    def body(s: State) -> tuple[np.ndarray, np.ndarray]:
        return solver.body_coordinates(s) if own else (s.q, s.v)

    t_end, every, max_violation = model.t_end, model.output_every, spec.solver.max_violation
    status, message, steps = "failed", "", 0
    start = time.perf_counter()
    last_progress = start

    extra_names = getattr(solver, "extra_diagnostics", ())

    def record(s: State, info: StepInfo) -> None:
        ev = solver.evaluate(s)
        row = record_row(model, s, ev, info, stats)
        for name in extra_names:  # every row has every column, NaN where a step has no value
            path = f"diagnostics/{name}" if "/" in name else f"diagnostics/solver/{name}"
            row[path] = info.extra.get(name, np.nan)
        writer.append(row)

    try:
        with _SigintFlag() as sigint, np.errstate(all="ignore"):
            record(state, StepInfo())
            h = model.step
            # the paper's step control: the small step while compliant bounding boxes overlap
            fine = model.contact_step if model.compliant is not None else None
            adaptive = bool(getattr(solver, "adaptive", False))
            while t_end - state.t > 1e-12 * max(1.0, t_end):
                if sigint.raised:
                    raise Interrupted("interrupted")
                h_try = min(h, t_end - state.t)
                if t_end - (state.t + h_try) < 1e-9 * h_try:  # land exactly on t_end
                    h_try = t_end - state.t
                if fine is not None and fine < h_try:
                    f = model.frames(*body(state))
                    if model.compliant.near(f, h_try):
                        h_try = fine
                new, info, h_next = solver.step(state, h_try)
                # a fixed-step run goes back to the large step; an adaptive one keeps its proposal
                h = h_next if (fine is None or adaptive or h_next != h_try) else model.step
                if not (np.all(np.isfinite(new.q)) and np.all(np.isfinite(new.v)) and np.isfinite(new.work)):
                    raise SimulationError(
                        "the state is not finite (NaN or inf): the solution diverged", step=steps + 1, t=new.t
                    )
                steps += 1  # completed steps only
                state = new
                if model.springs:
                    update_spring_references(model, body(state)[0], state.t)
                last = t_end - state.t <= 1e-12 * max(1.0, t_end)
                recorded = steps % every == 0 or last
                if recorded:
                    record(state, info)
                    violation = stats.max_position_violation
                else:
                    violation = info.position_violation
                    if violation is None:
                        phi = constraint_residual(model, body(state)[0], state.t) if model.nc else np.zeros(1)
                        violation = float(np.max(np.abs(phi)))
                    stats.max_position_violation = max(stats.max_position_violation, violation)
                if violation > max_violation:
                    if not recorded:  # keep the offending state in the file
                        record(state, info)
                    raise SimulationError(
                        f"position violation {violation:.3g} passed solver.max_violation = {max_violation:g}",
                        step=steps,
                        t=state.t,
                    )
                if progress is not None and time.perf_counter() - last_progress > 0.1:
                    progress(state.t, t_end)
                    last_progress = time.perf_counter()
        status = "completed"
    except SimulationError as exc:
        message = str(exc) if exc.step is not None else str(SimulationError(exc.reason, step=steps + 1, t=state.t))
    except Interrupted:
        message = "interrupted"
    except Exception as exc:  # an internal error still leaves a truthful file, then propagates
        message = f"internal error: {type(exc).__name__}: {exc}"
        raise
    finally:
        wall = time.perf_counter() - start
        writer.close(
            status,
            message,
            steps=steps,
            wall_time_s=wall,
            max_position_violation=stats.max_position_violation,
            max_velocity_violation=stats.max_velocity_violation,
            energy_drift=stats.energy_drift,
        )
    return RunSummary(
        scene=spec.name,
        file=str(path),
        method=spec.solver.method,
        integrator=integrator,
        status=status,
        message=message,
        steps=steps,
        recorded=writer.rows,
        t_end=state.t,
        wall_time_s=wall,
        us_per_step=1e6 * wall / max(steps, 1),
        max_position_violation=stats.max_position_violation,
        max_velocity_violation=stats.max_velocity_violation,
        max_quaternion_norm_error=stats.max_quaternion_norm_error,
        energy_drift=stats.energy_drift,
        assembly=model.assembly_report,
    )
