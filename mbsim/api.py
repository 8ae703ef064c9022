"""The Python API: ``mbsim.load(scene)`` -> :class:`Simulation`; ``sim.run()`` -> :class:`Result`.

``mbsim run`` goes through it too: a run in memory and a run into a result file are the same
loop (mbsim.simulate.run) with a different sink for its rows (mbsim.output.memory.RowCollector
or mbsim.output.hdf5.ResultWriter).

Units are SI throughout: s, m, rad, kg, N, J. Arrays are numpy float64 with one row per
recorded time (n rows); the columns of ``q`` and ``v`` are the method's own coordinates
(``Result.q_names``, ``Result.v_names``).

Nothing heavy is imported here at module level: ``import mbsim`` and ``mbsim.load`` stay cheap
(numpy, h5py and the compiled kernels load with the first scene).
"""

from __future__ import annotations

import copy
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mbsim.errors import Interrupted, StateError, did_you_mean

if TYPE_CHECKING:
    import numpy as np

    from mbsim.analysis.equilibrium import Equilibrium
    from mbsim.analysis.modes import Linearization, Modes, StateSpace
    from mbsim.model.model import Model, State
    from mbsim.output.restart import Continuation
    from mbsim.output.safety import ResultClaim
    from mbsim.scene.load import RawScene
    from mbsim.scene.spec import SceneSpec
    from mbsim.simulate import RunSummary


def load(
    scene: str | Path | Mapping[str, Any],
    set: Mapping[str, Any] | Iterable[str] | None = None,  # noqa: A002 (the name --set has)
    strict: bool = False,
) -> Simulation:
    """Read and check a scene: a YAML file's path, or the same content as a Python mapping.

    Args:
        scene: path of a scene file, or a dict of the keys a scene file has (numpy arrays and
            tuples allowed for lists); meshes of a dict scene are relative to the working directory.
        set: overrides as ``mbsim run --set`` takes them: a mapping of dotted keys to Python
            values (``{"bodies.bob.mass": 2.0, "solver.method": "gauss"}``), or a sequence of
            ``"KEY=VALUE"`` texts whose values are read as YAML.
        strict: as ``--strict``: every key must be known, no initial assembly.

    Returns:
        The :class:`Simulation`; nothing is compiled yet (the first run, step or ``state`` does).

    Raises:
        SceneError: the scene (file or mapping) or an override is wrong; the message names the
            file (``<dict>`` for a mapping, ``--set`` for an override), the line where there is
            one and the dotted key.
    """
    from mbsim.scene.load import load_raw_scene, raw_scene_from_data

    overrides = override_texts(set)
    if isinstance(scene, Mapping):
        raw = raw_scene_from_data(dict(scene), overrides)
    else:
        raw = load_raw_scene(scene, overrides)
    return Simulation(raw, strict=strict)


def override_texts(overrides: Mapping[str, Any] | Iterable[str] | None) -> list[str]:
    """``set=`` of :func:`load` as ``--set`` texts ``KEY=VALUE`` (values as YAML text)."""
    from mbsim.errors import SceneError
    from mbsim.scene.load import plain_data, yaml_text

    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{key}={yaml_text(plain_data(value, '--set', (str(key),)))}" for key, value in overrides.items()]
    if isinstance(overrides, str):  # one text is not a sequence of them
        raise SceneError(f"expected a mapping or a list of KEY=VALUE texts, got the text '{overrides}'", file="--set")
    return [str(text) for text in overrides]


def _pass_on_signal(sim: Simulation) -> None:
    """A signal that ended a run or its set-up delivered again, once the run's file is closed, to
    the handlers the caller has (Ctrl-C: KeyboardInterrupt; SIGTERM by default ends the process);
    not inside the ``mbsim`` command (``passes_on_signals`` False), which exits 128 + N itself."""
    from mbsim import interrupts

    signum = interrupts.received()
    if signum is None or interrupts.installed() or not sim.passes_on_signals:
        return
    interrupts.reset()
    signal.raise_signal(signum)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


@dataclass
class BodyMotion:
    """One body's recorded motion (the result file's ``/bodies/NAME/...``), n rows.

    Attributes:
        name: the body's name.
        position: (n, 3) centre of mass in world axes, m (planar: (n, 2)).
        orientation: (n, 4) quaternion w, x, y, z of the body axes in world axes (planar: the
            angle (n,), rad).
        velocity: (n, 3) velocity of the centre of mass, m/s (planar: (n, 2)).
        angular_velocity: (n, 3) in world axes, rad/s (planar: (n,)).
    """

    name: str
    position: np.ndarray
    orientation: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray


class Result:
    """What a run recorded: arrays by the dataset paths of the result file (CONTRACT §3, §8).

    A run into a file (``run(file=...)``) reads its arrays from that file when first asked;
    a run in memory holds them.

    Attributes:
        summary: the run's summary (what ``mbsim run --json`` prints): steps, wall time,
            violations, energy drift, ``max_NAME`` ... of the outputs.
        status: ``completed`` or ``failed``; message: why it failed ('' when it completed).
        file: the result file, or None for a run in memory.
    """

    def __init__(
        self,
        summary: RunSummary,
        arrays: dict[str, np.ndarray] | None = None,
        names: dict[str, list[str]] | None = None,
        events: tuple[np.ndarray, list[str], list[str]] | None = None,
    ) -> None:
        """``arrays``, ``names`` (of q's and v's columns), ``events``: a run's in memory; None: read
        from ``summary.file`` when first asked."""
        self.summary = summary
        self.status: str = summary.status
        self.message: str = summary.message
        self.file: Path | None = Path(summary.file) if summary.file else None
        self._arrays = arrays
        self._names: dict[str, list[str]] | None = names
        self._events = events

    def __repr__(self) -> str:
        where = f", file={str(self.file)!r}" if self.file else ""
        return f"<Result {self.summary.scene!r}: {self.status}, {self.summary.recorded} rows{where}>"

    def _load(self) -> dict[str, np.ndarray]:
        """The arrays, read from the result file when the run wrote one (every dataset of rows)."""
        if self._arrays is None:
            import h5py
            import numpy as np

            arrays: dict[str, np.ndarray] = {}
            names: dict[str, list[str]] = {}
            events = None
            with h5py.File(self.file, "r") as f:
                n = f["time"].shape[0]

                def visit(path: str, obj: Any) -> None:
                    # the datasets of rows are the resizable ones (geometry, events and /scene are not)
                    rows = isinstance(obj, h5py.Dataset) and obj.maxshape and obj.maxshape[0] is None
                    if rows and obj.shape[0] == n:
                        arrays[path] = obj[()]

                f.visititems(visit)
                for key in ("q", "v"):
                    names[key] = [_text(x) for x in f[key].attrs.get("names", [])]
                if "events" in f:
                    group = f["events"]
                    decode = [[_text(x) for x in group[k][()]] for k in ("kind", "contact")]
                    events = (np.asarray(group["time"][()], dtype=float), *decode)
            self._arrays, self._names, self._events = arrays, names, events
        return self._arrays

    @property
    def paths(self) -> list[str]:
        """The dataset paths of every recorded quantity (``bodies/bob/position``, ...)."""
        return sorted(self._load())

    def __getitem__(self, path: str) -> np.ndarray:
        """The recorded quantity at a dataset path of the result file, e.g. ``joints/pivot/reaction``."""
        arrays = self._load()
        key = path.strip("/")
        if key not in arrays:
            hint = did_you_mean(key, arrays)
            raise KeyError(f"no recorded quantity '{path}'" + (f"; {hint}" if hint else ""))
        return arrays[key]

    @property
    def time(self) -> np.ndarray:
        """(n,) times of the recorded rows, s."""
        return self["time"]

    @property
    def q(self) -> np.ndarray:
        """(n, nq) generalized positions in the method's coordinates (columns: ``q_names``)."""
        return self["q"]

    @property
    def v(self) -> np.ndarray:
        """(n, nv) generalized velocities in the method's coordinates (columns: ``v_names``)."""
        return self["v"]

    @property
    def q_names(self) -> list[str]:
        """The name of each column of ``q`` (``bob.x``, ``pivot.angle``, ...)."""
        self._load()
        return list(self._names["q"])

    @property
    def v_names(self) -> list[str]:
        """The name of each column of ``v``."""
        self._load()
        return list(self._names["v"])

    def _group_names(self, group: str) -> list[str]:
        from mbsim.names import name_from_hdf5

        prefix = group + "/"
        return sorted(
            {name_from_hdf5(p[len(prefix) :].rpartition("/")[0]) for p in self._load() if p.startswith(prefix)}
        )

    def _group(self, group: str, name: str) -> dict[str, np.ndarray]:
        from mbsim.names import hdf5_name

        prefix = f"{group}/{hdf5_name(name)}/"
        found = {
            p[len(prefix) :]: a for p, a in self._load().items() if p.startswith(prefix) and "/" not in p[len(prefix) :]
        }
        if not found:
            names = self._group_names(group)
            hint = did_you_mean(name, names)
            raise KeyError(f"no {group[:-1]} '{name}' in the result" + (f"; {hint}" if hint else f" (it has {names})"))
        return found

    @property
    def body_names(self) -> list[str]:
        """The names of the bodies recorded."""
        return self._group_names("bodies")

    def body(self, name: str) -> BodyMotion:
        """The motion of body ``name`` (:class:`BodyMotion`: position, orientation, velocity,
        angular velocity as the result file stores them; planar orientation is the angle).

        Raises:
            KeyError: no body of that name (with a did-you-mean).
        """
        found = self._group("bodies", name)
        orientation = found["orientation"] if "orientation" in found else found["angle"]
        return BodyMotion(name, found["position"], orientation, found["velocity"], found["angular_velocity"])

    def joint(self, name: str) -> dict[str, np.ndarray]:
        """The recorded quantities of joint ``name`` by dataset name: ``reaction`` (n, 6) force then
        torque in world axes, N and N m (planar (n, 3)); ``position``, ``velocity`` (n,) of a
        one-coordinate joint; ``drive_force``, ``limit_force``, ``friction_force`` where present."""
        return self._group("joints", name)

    def actuator(self, name: str) -> dict[str, np.ndarray]:
        """``force`` (n,) N or N m and ``power`` (n,) W of actuator ``name``."""
        return self._group("actuators", name)

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        """The scene's ``outputs`` (CONTRACT §8) by name: (n,) each."""
        from mbsim.names import name_from_hdf5

        prefix = "outputs/"
        return {name_from_hdf5(p[len(prefix) :]): a for p, a in self._load().items() if p.startswith(prefix)}

    @property
    def diagnostics(self) -> dict[str, np.ndarray]:
        """``/diagnostics/...`` by the path below it, (n,) each: ``energy/kinetic``, ``energy/potential``,
        ``energy/total``, ``energy/work`` (J), ``constraints/position_violation`` (m),
        ``constraints/velocity_violation`` (m/s), ``solver/iterations``, ``contacts/count``, ..."""
        prefix = "diagnostics/"
        return {p[len(prefix) :]: a for p, a in self._load().items() if p.startswith(prefix)}

    @property
    def events(self) -> tuple[np.ndarray, list[str], list[str]] | None:
        """event_driven: each event's time (s), kind and contact name; None for other methods."""
        self._load()
        return self._events


class Simulation:
    """A checked scene, ready to run (:func:`load` makes one).

    The model is compiled on first need (``run``, ``step``, ``state``, :meth:`prepare`) and once:
    every run starts a fresh solver on it, so that two runs of one Simulation are the same run.

    ``sim.state`` is a state of the simulation's own, which :meth:`step` advances; :meth:`run`
    starts from the scene's initial state unless given ``start=`` (e.g. ``start=sim.state``).
    """

    def __init__(self, raw: RawScene, strict: bool = False) -> None:
        from mbsim.scene.spec import build_spec

        self._raw = raw  # the scene as given, before its models are expanded: with_changes copies it
        self.spec: SceneSpec = build_spec(raw)
        self.strict = strict
        self._prepared: tuple[Model, Any] | None = None
        self._fresh = False  # the prepared solver has not run yet
        self._state: State | None = None
        self._stepper: Any = None  # the solver that step() advances
        self._h: float | None = None  # step()'s next proposal (adaptive integrators)
        # a signal that ends a run reaches the caller's handlers after it (KeyboardInterrupt);
        # the mbsim command, which ends with exit code 128 + N itself, sets this False
        self.passes_on_signals = True

    def __repr__(self) -> str:
        return f"<Simulation {self.spec.name!r}: {self.spec.solver.method}, {self.spec.dimension}D>"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def model(self) -> Model:
        """The compiled model (compiled now if it was not yet)."""
        return self.prepare()[0]

    @property
    def notes(self) -> tuple[str, ...]:
        """What the user should know about the method's set-up (``mbsim run`` prints them)."""
        return tuple(self.prepare()[1].notes)

    @property
    def assembly(self) -> list[dict]:
        """How far the initial state was moved onto the joints: per body, distance (m) and rotation (rad)."""
        return self.prepare()[0].assembly_report

    def prepare(self, claim: ResultClaim | None = None) -> tuple[Model, Any]:
        """Compile the model and the solver now (otherwise the first run, step or state does).

        ``claim``: the result file the next run writes, taken already (``mbsim run`` takes it
        before compiling, so that a second writer is refused at once): a signal during the
        compilation leaves it with status failed.

        Raises:
            SceneError: a scene error found while compiling (assembly, solver options, ...).
        """
        if self._prepared is None:
            from mbsim import interrupts
            from mbsim.simulate import prepare, prepare_claimed

            if claim is not None:
                self._prepared = prepare_claimed(self.spec, claim, self.strict)
            else:
                try:
                    with interrupts.handling():
                        self._prepared = interrupts.polled(lambda: prepare(self.spec, self.strict))
                except Interrupted:
                    _pass_on_signal(self)
                    raise
            self._fresh = True
        return self._prepared

    def _solver(self) -> Any:
        """A solver that has not stepped yet: the prepared one the first time, else a new one."""
        model, solver = self.prepare()
        if self._fresh:
            self._fresh = False
            return solver
        from mbsim.solvers import get_solver

        return get_solver(self.spec, model, self.strict)

    # ------------------------------------------------------------------ about one state

    def equilibrium(self, tol: float = 1e-10, max_iterations: int = 100) -> Equilibrium:
        """The static equilibrium nearest the scene's (assembled) start under gravity, springs,
        constant actuator values and loads at t = 0, as ``mbsim equilibrium`` finds it
        (mbsim.analysis.equilibrium.solve_equilibrium).

        Returns:
            An Equilibrium: ``converged`` (whether one was found; ``reason`` says why not), ``q``
            (nq,) body coordinates, ``residual`` (max |Q - J^T lambda|, N and N m), ``iterations``,
            ``stable`` (the reduced stiffness is positive definite), ``smallest_eigenvalue``.
        """
        from mbsim.analysis.equilibrium import solve_equilibrium

        return solve_equilibrium(self.model, tol=tol, max_iterations=max_iterations)

    def linearize(
        self, at: str | tuple[np.ndarray, np.ndarray] = "initial", frame_rate: np.ndarray | None = None
    ) -> StateSpace:
        """The state-space matrices about a state, as ``mbsim linearize`` writes them: z_dot = A z +
        B u, y = C z + D u, z the mechanism's independent coordinates and their rates, u the
        actuators' forces, y the scene's outputs (mbsim.analysis.modes.state_space).

        Args:
            at: ``"initial"`` (the scene's assembled start), ``"equilibrium"`` (:meth:`equilibrium`;
                a SimulationError when there is none) or (q, v) in body coordinates ((nq,), (nv,)).
            frame_rate: about a moving state, (3,) the angular velocity (rad/s, world) of the frame
                in which the motion is steady (a top's precession); None finds it from the state
                and falls back to world axes (user guide, "Modes and linearisation").
        """
        from mbsim.analysis.modes import state_space

        return state_space(self._linearization(at, frame_rate))

    def modes(self, at: str | tuple[np.ndarray, np.ndarray] = "initial", frame_rate: np.ndarray | None = None) -> Modes:
        """Natural frequencies (Hz), damping ratios, eigenvalues and mode shapes about a state
        (``at`` and ``frame_rate`` as :meth:`linearize` takes them), as ``mbsim modes`` writes them:
        one per degree of freedom, sorted by frequency, rigid-body (zero) modes included
        (mbsim.analysis.modes)."""
        from mbsim.analysis.modes import modes

        return modes(self._linearization(at, frame_rate))

    def _linearization(self, at: str | tuple[np.ndarray, np.ndarray], frame_rate=None) -> Linearization:
        import numpy as np

        from mbsim.analysis.modes import linearize

        model = self.model
        if isinstance(at, str):
            if at == "initial":
                return linearize(model, model.q0.copy(), model.v0.copy(), frame_rate=frame_rate)
            if at == "equilibrium":
                from mbsim.analysis.equilibrium import require_equilibrium

                return linearize(model, require_equilibrium(model, 'at="equilibrium"').q, np.zeros(model.nv))
            raise ValueError(f"at: expected 'initial', 'equilibrium' or (q, v), got {at!r}")
        q, v = (np.asarray(x, dtype=float) for x in at)
        if q.shape != (model.nq,) or v.shape != (model.nv,):
            raise StateError(f"at: expected q of ({model.nq},) and v of ({model.nv},), got {q.shape} and {v.shape}")
        return linearize(model, q, v, frame_rate=frame_rate)

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> State:
        """A copy of the current state: ``t`` (s), ``q`` (nq,), ``v`` (nv,) in the method's own
        coordinates (the columns of ``Result.q``, ``Result.v``), ``work`` (J, done so far by
        non-conservative forces). It starts as the scene's initial state (assembled onto the joints).

        Set it to a State or a (t, q, v) tuple: the sizes must be those of the method (a
        StateError otherwise); the state is taken as it is, not projected onto the constraints;
        a tuple starts ``work`` at 0.
        """
        if self._state is None:
            self._stepper = self._solver()
            self._state = self._stepper.initial_state()
        return self._state.copy()

    @state.setter
    def state(self, value: State | tuple) -> None:
        self._state = self._checked(value)
        self._stepper, self._h = None, None  # a solver's memory (warm starts, multipliers) is of the old state

    def _checked(self, value: Any) -> State:
        import numpy as np

        from mbsim.model.model import State

        if isinstance(value, State):
            t, q, v, work = value.t, value.q, value.v, value.work
        elif isinstance(value, (tuple, list)) and len(value) == 3:
            (t, q, v), work = value, 0.0
        else:
            raise StateError(f"expected a State or a tuple (t, q, v), got {type(value).__name__}")
        names = self.prepare()[1].coordinate_names()
        try:
            t, work = float(t), float(work)
            q, v = (np.array(x, dtype=float).reshape(-1) for x in (q, v))
        except (TypeError, ValueError) as exc:
            raise StateError(f"expected a number t and arrays q, v of numbers: {exc}") from None
        for label, x, columns in (("q", q, names[0]), ("v", v, names[1])):
            if len(x) != len(columns):
                shown = ", ".join(columns[:8]) + (", ..." if len(columns) > 8 else "")
                raise StateError(f"{label} has {len(x)} values; this simulation's {label} has {len(columns)} ({shown})")
        if not (np.isfinite(t) and np.isfinite(work) and np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            raise StateError("expected finite numbers, got NaN or inf in the state")
        return State(t, q, v, work)

    def step(self, n: int = 1) -> State:
        """Advance ``sim.state`` by ``n`` steps of the method (time.step each; an adaptive
        integrator takes n steps of its own control), never past time.end (it stops there).

        Returns:
            The new state (a copy; ``sim.state`` is it too).

        Raises:
            SimulationError: the state became non-finite (``sim.state`` stays the last finite one).
        """
        from mbsim.simulate import take_step

        state = self.state  # compiles and makes the stepper on first use
        model = self.model
        if self._stepper is None:
            self._stepper = self._solver()
        self._stepper.load_compiled()
        h = self._h or model.step
        for number in range(1, int(n) + 1):
            if model.t_end - state.t <= 1e-12 * max(1.0, model.t_end):
                break
            state, _, _, h = take_step(model, self._stepper, state, h, model.t_end, number)
            self._state, self._h = state, h
        return self.state

    # ------------------------------------------------------------------ runs

    def with_changes(self, overrides: Mapping[str, Any]) -> Simulation:
        """A new Simulation of this scene with more overrides (as ``load(..., set=...)``)."""
        from mbsim.scene.load import apply_override

        raw = copy.deepcopy(self._raw)
        for text in override_texts(overrides):
            apply_override(raw, text)
        return Simulation(raw, strict=self.strict)

    def run(
        self,
        end: float | None = None,
        every: int | None = None,
        file: str | Path | ResultClaim | None = None,
        start: State | tuple | None = None,
        progress: Callable[[float, float], None] | None = None,
        continued: Continuation | None = None,
    ) -> Result:
        """Simulate from the scene's initial state (or ``start``) to time.end (or ``end``).

        Args:
            end: the end time, s (``time.end``; an absolute time, also with ``start``).
            every: record every n-th step (``output.every``).
            file: write the result file there too, exactly as ``mbsim run -o FILE`` does
                (CONTRACT §3, §4: an existing file that is not an mbsim result is refused);
                None: nothing is written anywhere.
            start: the state to start from (``sim.state``, a State, or (t, q, v)); default the
                scene's initial state. ``sim.state`` is not changed by a run.
            progress: called as ``progress(t, t_end)`` now and then during the run.
            continued: a recorded row of an earlier result file of this scene to go on from
                (mbsim.output.restart.read_continuation; ``mbsim run --from``); with ``file`` only.

        Returns:
            The :class:`Result`; a run that fails (NaN, divergence, violation past
            solver.max_violation) returns too, with ``status`` ``failed`` and the ``message``,
            holding every row up to the failure. A signal (Ctrl-C) ends the run after its
            current step and closes its file (status failed, ``interrupted (SIGINT)``), then
            reaches the caller's handler: KeyboardInterrupt.

        Raises:
            SceneError: ``end`` or ``every`` not valid for the scene; OutputError: ``file`` not writable
            or not ours; StateError: ``start`` of the wrong sizes.
        """
        changes = {key: value for key, value in (("time.end", end), ("output.every", every)) if value is not None}
        if changes:
            return self.with_changes(changes).run(file=file, start=start, progress=progress, continued=continued)
        if continued is not None and (file is None or start is not None):
            raise ValueError("continued: a run from a file's row writes a file (file=) and takes no start=")
        from mbsim import interrupts, simulate
        from mbsim.output.safety import ResultClaim, claim_result

        if not interrupts.installed():  # a signal that ended an earlier run in this process is done with
            interrupts.reset()
        initial = None if start is None else self._checked(start)
        if file is None:
            from mbsim.output.memory import RowCollector

            sinks: list[RowCollector] = []

            def collect(*args: Any, **kwargs: Any) -> RowCollector:
                sinks.append(RowCollector(*args, **kwargs))
                return sinks[0]

            prepared = (self.model, self._solver())
            summary = simulate.run(self.spec, None, self.strict, progress, prepared, sink=collect, initial=initial)
            _pass_on_signal(self)
            collector = sinks[0]
            return Result(summary, collector.arrays(), collector.names, collector.events)
        claim = file if isinstance(file, ResultClaim) else claim_result(Path(file))
        self.prepare(claim)  # a scene error gives the claim up (a file it created is removed again)
        prepared = (self.model, self._solver())
        summary = simulate.run(self.spec, claim, self.strict, progress, prepared, initial=initial, continued=continued)
        _pass_on_signal(self)
        return Result(summary)
