"""The Python API (issue 32 item 3, CONTRACT §9), through its public names only: ``mbsim.load``,
``Simulation``, ``Result``, ``State`` and the error classes.

References independent of the code under test: the result file read with h5py (not through the
API's collector), the exact large-amplitude pendulum period T = 4 sqrt(L/g) K(sin^2(theta0/2)),
the rod's length |position| = L, energy conservation, and the interpreter's module table.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from quick_loop import quick
from scipy.special import ellipk

import mbsim

ROOT = Path(__file__).resolve().parents[2]
PENDULUM = ROOT / "scenes" / "pendulum_2d.yaml"
G = 9.81


def exact_period(length: float, theta0: float) -> float:
    """The pendulum's period at amplitude theta0 (complete elliptic integral, parameter m = k^2)."""
    return 4.0 * np.sqrt(length / G) * ellipk(np.sin(theta0 / 2.0) ** 2)


def zero_crossings(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Times where x changes sign, linearly interpolated between rows."""
    i = np.nonzero(np.sign(x[:-1]) * np.sign(x[1:]) < 0)[0]
    return t[i] - x[i] * (t[i + 1] - t[i]) / (x[i + 1] - x[i])


def measured_period(result: mbsim.Result) -> float:
    """Twice the time between the first two zero crossings of the bob's angle."""
    crossings = zero_crossings(result.time, result.body("bob").orientation)
    return 2.0 * (crossings[1] - crossings[0])


def row_datasets(path: Path) -> dict[str, np.ndarray]:
    """Every dataset of rows of a result file (one row per recorded time), read with h5py."""
    out: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as f:
        n = f["time"].shape[0]

        def visit(name: str, obj: object) -> None:
            if isinstance(obj, h5py.Dataset) and obj.ndim >= 1 and obj.shape[0] == n and not name.startswith("events"):
                out[name] = obj[()]

        f.visititems(visit)
    return out


# -- runs in memory and into a file --------------------------------------------------------------

CHAIN_3D = {
    "mbsim": 1,
    "name": "two links 3d",
    "gravity": [0, 0, -9.81],
    "time": {"end": 0.5, "step": 0.005},
    "solver": {"method": "lagrange", "integrator": "rk4"},
    "bodies": [
        {"name": "upper", "mass": 1.0, "inertia": [0.01, 0.01, 0.001], "position": [0.25, 0, 0]},
        {"name": "lower", "mass": 0.5, "inertia": [0.005, 0.005, 0.0005], "position": [0.75, 0, 0]},
    ],
    "joints": [
        {"name": "shoulder", "type": "revolute", "body1": "ground", "body2": "upper", "point": [0, 0, 0],
         "axis": [0, 1, 0]},
        {"name": "elbow", "type": "revolute", "body1": "upper", "body2": "lower", "point": [0.5, 0, 0],
         "axis": [0, 1, 0]},
    ],
    "actuators": [{"name": "m1", "joint": "shoulder", "type": "torque", "value": "0.5*sin(3*t)"}],
    "outputs": [{"name": "tip_height", "value": "lower.z"}],
}  # fmt: skip


SCENES = {  # (scene, overrides): each method family's run loop (compiled blocks, Python steps, events)
    "pendulum_2d": (PENDULUM, {"time.end": 0.5}),
    "chain_3d": (CHAIN_3D, {}),
    "ur5_recursive": (ROOT / "scenes" / "ur5_arm.yaml", {"time.end": 0.2}),
    "ball_timestepping": (ROOT / "scenes" / "bouncing_ball.yaml", {"time.end": 1.0}),
    "door_event_driven": (
        ROOT / "scenes" / "door_stop.yaml",
        {"solver.method": "event_driven", "time.end": 2.0, "time.step": 1e-3},
    ),
}


@pytest.mark.parametrize("case", quick(SCENES, keep=["pendulum_2d", "chain_3d"]))
def test_run_in_memory_equals_the_file_row_for_row(case, tmp_path):
    """Every dataset of rows the file has (read with h5py) is in the in-memory result with the same
    values, and the in-memory result has nothing the file lacks; the file's run reads back the same."""
    scene, overrides = SCENES[case]
    sim = mbsim.load(scene, set=overrides)
    in_memory = sim.run()
    assert in_memory.status == "completed" and in_memory.file is None
    out = tmp_path / "out.h5"
    on_file = sim.run(file=out)
    assert on_file.status == "completed" and on_file.file == out
    stored = row_datasets(out)
    assert set(stored) == set(in_memory.paths)
    n = len(stored["time"])
    assert n == in_memory.summary.recorded > 10
    for name, values in stored.items():
        assert in_memory[name].shape == values.shape, name
        np.testing.assert_array_equal(in_memory[name], values, err_msg=name)
        np.testing.assert_array_equal(on_file[name], values, err_msg=name)
    with h5py.File(out, "r") as f:
        assert f.attrs["format"] == "mbsim-result"
        assert f.attrs["status"] == "completed"
        assert int(f.attrs["steps"]) == in_memory.summary.steps
        assert [str(x) for x in f["q"].attrs["names"]] == in_memory.q_names
        for body in in_memory.body_names:
            motion = in_memory.body(body)
            np.testing.assert_array_equal(motion.position, f[f"bodies/{body}/position"][()])
            np.testing.assert_array_equal(motion.velocity, f[f"bodies/{body}/velocity"][()])
        if "events" in f:  # the door reaches its stop at t = 1.49 s (the scene's own derivation)
            times, kinds, contacts = in_memory.events
            np.testing.assert_array_equal(times, f["events/time"][()])
            assert kinds == [k.decode() for k in f["events/kind"][()]] == ["limit"]
            assert times[0] == pytest.approx(1.49, abs=0.01)


def test_result_arrays_against_the_exact_pendulum():
    """The API's arrays are the pendulum's motion: the period of the exact large-amplitude
    solution, the rod's length from position against the angle, the energy conserved."""
    result = mbsim.load(PENDULUM).run()  # 10 s, rk4 at 0.01 s: about 3 periods
    bob = result.body("bob")
    n = len(result.time)
    assert result.q.shape == (n, 3) and result.v.shape == (n, 3)
    assert bob.position.shape == (n, 2) and bob.orientation.shape == (n,) and bob.angular_velocity.shape == (n,)
    assert measured_period(result) == pytest.approx(exact_period(1.0, 2.5), rel=1e-4)
    # the bob hangs at L (sin angle, -cos angle) from the pivot (its own axes turn with the rod)
    angle = bob.orientation
    np.testing.assert_allclose(bob.position, np.column_stack([np.sin(angle), -np.cos(angle)]), atol=1e-6)
    np.testing.assert_allclose(bob.velocity[:, 0], np.cos(angle) * bob.angular_velocity, atol=1e-6)
    total = result.diagnostics["energy/total"]
    assert np.ptp(total) < 1e-6 * G
    assert set(result.joint("pivot")) >= {"reaction", "position", "velocity"}


def test_outputs_and_actuators_are_recorded():
    """CONTRACT §8's outputs by name: ``tip_height`` is the lower body's z; the actuator's power
    is its torque times the joint's rate."""
    result = mbsim.load(CHAIN_3D).run()
    np.testing.assert_array_equal(result.outputs["tip_height"], result.body("lower").position[:, 2])
    motor, shoulder = result.actuator("m1"), result.joint("shoulder")
    np.testing.assert_allclose(motor["force"], 0.5 * np.sin(3 * result.time), atol=1e-12)
    np.testing.assert_allclose(motor["power"], motor["force"] * shoulder["velocity"], atol=1e-12)
    assert result.body("upper").orientation.shape == (len(result.time), 4)


# -- overrides and dict scenes ----------------------------------------------------------------


def test_set_overrides_change_the_physics():
    """``set=`` as --set takes it: a parameter doubled lengthens the period as the exact solution says;
    the list form of KEY=VALUE texts and ``run(end=, every=)`` are the same overrides."""
    result = mbsim.load(PENDULUM, set={"parameters.L": 2.0, "parameters.theta0": 1.0}).run()
    assert measured_period(result) == pytest.approx(exact_period(2.0, 1.0), rel=1e-4)
    assert np.allclose(np.hypot(*result.body("bob").position.T), 2.0, atol=1e-6)
    short = mbsim.load(PENDULUM, set=["time.end=0.5", "output.every=5"]).run()
    np.testing.assert_allclose(short.time, np.linspace(0.0, 0.5, 11), atol=1e-12)
    same = mbsim.load(PENDULUM).run(end=0.5, every=5)
    np.testing.assert_array_equal(same.q, short.q)
    by_name = mbsim.load(PENDULUM, set={"bodies.bob.mass": 3.0}).run(end=0.2)
    assert by_name.diagnostics["energy/potential"][0] == pytest.approx(3.0 * G * -np.cos(2.5), rel=1e-9)


def test_a_dict_scene_is_the_yaml_scene(tmp_path):
    """The scene file's content as a dict (numpy arrays and tuples for lists) runs as the file does."""
    data = yaml.safe_load(PENDULUM.read_text())
    data["gravity"] = np.array([0.0, -9.81])
    data["bodies"][0]["position"] = tuple(data["bodies"][0]["position"])
    from_dict = mbsim.load(data, set={"time.end": 1.0}).run()
    from_file = mbsim.load(PENDULUM, set={"time.end": 1.0}).run()
    np.testing.assert_array_equal(from_dict.q, from_file.q)
    np.testing.assert_array_equal(from_dict.time, from_file.time)
    # written to a file, the dict scene's /scene is its YAML text, which loads as the same scene
    out = tmp_path / "dict.h5"
    mbsim.load(data).run(end=0.1, file=out)
    with h5py.File(out, "r") as f:
        text = f["scene"][()].decode()
    assert yaml.safe_load(text)["gravity"] == [0.0, -9.81]


# -- errors -----------------------------------------------------------------------------------


def test_a_misspelt_key_of_a_dict_scene_is_a_scene_error_naming_it():
    data = yaml.safe_load(PENDULUM.read_text())
    data["bodies"][0]["mas"] = data["bodies"][0].pop("mass")
    with pytest.raises(mbsim.SceneError) as caught:
        mbsim.load(data)
    error = caught.value
    assert error.file == "<dict>" and error.line is None
    assert "bodies[0]" in error.key_path and "mas" in str(error)
    assert "mass" in str(error)  # did you mean


def test_scene_errors_of_files_and_overrides():
    with pytest.raises(mbsim.SceneError) as caught:
        mbsim.load(PENDULUM, set={"time.ned": 2.0})
    assert caught.value.file == "--set" and "unknown key 'ned'" in str(caught.value) and "end" in str(caught.value)
    with pytest.raises(mbsim.SceneError) as caught:
        mbsim.load(PENDULUM, set={"time.step": "fast"})
    assert caught.value.key_path == "time.step"
    with pytest.raises(mbsim.SceneError, match="object"):
        mbsim.load({"bodies": [object()]})
    with pytest.raises(mbsim.SceneError, match="not found"):
        mbsim.load(PENDULUM.with_name("no_such_scene.yaml"))
    with pytest.raises(mbsim.SceneError) as caught:
        mbsim.load(PENDULUM).run(every=0)
    assert caught.value.key_path == "output.every"


def test_hostile_dict_scenes_are_scene_errors():
    """A mapping that contains itself, or more values than a scene file may expand to, is refused
    as the file's text would be (no RecursionError, no hang)."""
    loop: dict = {"mbsim": 1}
    loop["parameters"] = loop
    with pytest.raises(mbsim.SceneError, match="nested more than"):
        mbsim.load(loop)
    with pytest.raises(mbsim.SceneError, match="values"):
        mbsim.load({"mbsim": 1, "bodies": [[0.0] * 1000] * 1001})
    with pytest.raises(mbsim.SceneError, match="values"):
        mbsim.load({"mbsim": 1, "gravity": np.zeros(10**7)})
    with pytest.raises(mbsim.SceneError, match="text keys"):
        mbsim.load({"mbsim": 1, 3: "x"})


def test_state_of_the_wrong_size_is_refused():
    sim = mbsim.load(PENDULUM)
    state = sim.state
    assert state.q.shape == (3,) and state.v.shape == (3,) and state.t == 0.0
    with pytest.raises(mbsim.StateError, match="q has 2 values; this simulation's q has 3"):
        sim.state = (0.0, state.q[:2], state.v)
    with pytest.raises(mbsim.StateError, match="v has 4 values"):
        sim.run(start=(0.0, state.q, np.zeros(4)))
    with pytest.raises(ValueError, match="finite"):  # a StateError is a ValueError too
        sim.state = (0.0, state.q, np.array([np.nan, 0.0, 0.0]))
    with pytest.raises(mbsim.StateError, match="expected a State"):
        sim.state = "start"
    np.testing.assert_array_equal(sim.state.q, state.q)  # a refused state changes nothing


# -- state, step and run from a state -----------------------------------------------------------


def test_step_then_run_continues_the_motion():
    """step(n) takes n steps of time.step: 100 steps reach t = 1 s at the uninterrupted run's state
    (rk4 steps of the same size), with the energy conserved; run(start=sim.state) continues from it
    to time.end through the uninterrupted run's rows; run() alone still starts at t = 0."""
    sim = mbsim.load(PENDULUM, set={"time.end": 2.0})
    whole = sim.run()
    initial = sim.state
    stepped = sim.step(100)
    assert stepped.t == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_array_equal(sim.state.q, stepped.q)
    row = int(np.argmin(np.abs(whole.time - 1.0)))
    np.testing.assert_allclose(stepped.q, whole.q[row], atol=1e-12)
    np.testing.assert_allclose(stepped.v, whole.v[row], atol=1e-12)
    # energy from q = (x, y, angle), v = (vx, vy, w): m = 1 kg, I = 1e-6 kg m^2, the same as at release
    energy = lambda s: 0.5 * (s.v[0] ** 2 + s.v[1] ** 2) + 0.5e-6 * s.v[2] ** 2 + G * s.q[1]  # noqa: E731
    assert energy(stepped) == pytest.approx(energy(initial), abs=1e-7)
    rest = sim.run(start=sim.state)
    assert rest.time[0] == pytest.approx(1.0, abs=1e-12) and rest.time[-1] == pytest.approx(2.0)
    np.testing.assert_allclose(rest.q, whole.q[row:], atol=1e-10)
    assert sim.state.t == stepped.t  # a run does not move sim.state
    assert sim.run().time[0] == 0.0
    sim.step(10_000)  # never past time.end
    assert sim.state.t == pytest.approx(2.0, abs=1e-12)


METHODS = ["lagrange", "null_space", "gauss", "augmented_lagrangian", "variational", "recursive", "timestepping",
           "event_driven"]  # fmt: skip


@pytest.mark.parametrize("method", quick(METHODS, keep="recursive"))
def test_step_reaches_the_state_of_the_run(method):
    """Under every method, 20 steps of sim.step() (one Python step at a time) reach the state the
    run recorded at that time (its compiled blocks, where it has them), in the method's coordinates."""
    sim = mbsim.load(ROOT / "scenes" / "four_box_chain.yaml", set={"solver.method": method, "time.end": 0.2})
    whole = sim.run()
    state = sim.step(20)
    assert state.t == pytest.approx(0.04, abs=1e-12)
    row = int(np.argmin(np.abs(whole.time - 0.04)))
    np.testing.assert_allclose(state.q, whole.q[row], rtol=0, atol=1e-12)
    np.testing.assert_allclose(state.v, whole.v[row], rtol=0, atol=1e-10)


def test_state_set_then_step():
    """A state set by hand is where step() starts: the pendulum at rest hanging down stays there."""
    sim = mbsim.load(PENDULUM)
    hanging = (0.0, np.array([0.0, -1.0, 0.0]), np.zeros(3))
    sim.state = hanging
    after = sim.step(50)
    assert after.t == pytest.approx(0.5)
    np.testing.assert_allclose(after.q, hanging[1], atol=1e-12)
    np.testing.assert_allclose(after.v, 0.0, atol=1e-12)


# -- files only when asked ----------------------------------------------------------------------


def test_a_file_only_when_asked(tmp_path, monkeypatch):
    """run() writes nothing, neither next to the scene nor in the working directory; run(file=)
    writes that file only, and refuses to overwrite one that is not an mbsim result."""
    folder = tmp_path / "scenes"
    folder.mkdir()
    scene = folder / "pendulum.yaml"
    shutil.copy(PENDULUM, scene)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    sim = mbsim.load(scene, set={"time.end": 0.2})
    sim.run()
    sim.step(3)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["pendulum.yaml", "scenes", "work"]
    result = sim.run(file="out.h5")
    assert sorted(p.name for p in work.iterdir()) == ["out.h5"]
    assert result.file == Path("out.h5")
    with pytest.raises(mbsim.OutputError, match="pendulum.yaml"):
        sim.run(file=scene)
    assert scene.read_text() == PENDULUM.read_text()


_CTRL_C = """
import os, signal, sys, threading
import h5py
import mbsim

sim = mbsim.load(sys.argv[1], set={"time.end": 1.0e5, "output.every": 1000})
sim.prepare()
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    sim.run(file=sys.argv[2])
    print("returned")
except KeyboardInterrupt:
    with h5py.File(sys.argv[2], "r") as f:
        print("KeyboardInterrupt", f.attrs["status"], f.attrs["message"], len(f["time"]) > 1)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def test_ctrl_c_ends_the_run_with_its_file_closed_then_reaches_the_caller(tmp_path):
    """SIGINT during a run (a script's own process): the run stops after its step, its file is
    closed with status failed and the signal's message, then KeyboardInterrupt reaches the
    script, whose SIGINT handler is Python's again."""
    out = tmp_path / "out.h5"
    done = subprocess.run(
        [sys.executable, "-c", _CTRL_C, str(PENDULUM), str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["KeyboardInterrupt failed interrupted (SIGINT) True", "True"]


# -- import cost ----------------------------------------------------------------------------------

_HEAVY = ("numpy", "h5py", "scipy", "yaml", "mbsim.simulate", "mbsim.model", "mbsim.solvers")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.split()
    return set(out)


def test_import_mbsim_loads_no_numerics():
    """``import mbsim`` and its public names load neither numpy nor h5py (the API starts quickly)."""
    for code in ("import mbsim", "import mbsim; mbsim.load; mbsim.Simulation; mbsim.Result; mbsim.SceneError"):
        loaded = _modules_after(code)
        heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in _HEAVY))
        assert heavy == [], f"{code!r} imports {heavy}"
    names = _modules_after("import mbsim; print(*dir(mbsim))")
    assert {"load", "Simulation", "Result", "State", "SceneError", "SimulationError", "StateError"} <= names


# -- the user guide's example ----------------------------------------------------------------------


def guide_examples() -> str:
    """The Python code blocks of the user guide's "Python API" chapter, in order."""
    text = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    chapter = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"```python\n(.*?)```", chapter, flags=re.DOTALL))


def test_the_user_guide_example_runs(tmp_path, monkeypatch):
    """The chapter's code runs as written (matplotlib on Agg) and its sweep finds the exact periods."""
    pytest.importorskip("matplotlib")
    (tmp_path / "scenes").mkdir()
    shutil.copy(PENDULUM, tmp_path / "scenes" / "pendulum_2d.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    code = guide_examples()
    assert "mbsim.load" in code and "savefig" in code
    namespace: dict = {}
    exec(compile(code, "docs/user-guide.md", "exec"), namespace)  # noqa: S102 (our own documentation)
    assert (tmp_path / "pendulum.png").stat().st_size > 1000
    periods = namespace["periods"]
    for theta0, period in periods.items():
        assert period == pytest.approx(exact_period(1.0, theta0), rel=1e-3), theta0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pendulum.png", "scenes"]


# a bob (mass m, inertia ic) on an arm of length l with a torsion spring k whose rest angle is
# ``rest`` from hanging down, under gravity g
SPRING = {"m": 1.5, "ic": 0.01, "l": 0.8, "k": 20.0, "rest": 1.0, "g": 9.81}


def _spring_pendulum() -> dict:
    p = SPRING
    return {
        "mbsim": 1, "name": "spring pendulum", "dimension": 2, "gravity": [0, -p["g"]],
        "time": {"end": 1.0, "step": 0.001},
        "bodies": [{"name": "bob", "mass": p["m"], "inertia": p["ic"], "position": [0.0, -p["l"]], "orientation": 0.0}],
        "joints": [{"name": "pivot", "type": "revolute", "body1": "ground", "body2": "bob", "point": [0, 0],
                    "spring": {"stiffness": p["k"], "rest": p["rest"]}}],
    }  # fmt: skip


def test_equilibrium_modes_and_linearize_of_a_spring_pendulum():
    """sim.equilibrium(): k (rest - theta) = m g l sin theta (brentq here); sim.modes("equilibrium"):
    omega^2 = (k + m g l cos theta) / (ic + m l^2); sim.linearize("equilibrium"): A's eigenvalues +-i
    omega; about the hanging start (not an equilibrium) the modes are still one per degree of freedom."""
    from scipy.optimize import brentq

    p = SPRING
    sim = mbsim.load(_spring_pendulum())
    found = sim.equilibrium()
    theta = brentq(lambda th: p["k"] * (p["rest"] - th) - p["m"] * p["g"] * p["l"] * np.sin(th), 0.0, p["rest"])
    assert found.converged and found.stable and found.residual < 1e-10
    np.testing.assert_allclose(found.q[:2], [p["l"] * np.sin(theta), -p["l"] * np.cos(theta)], atol=1e-9)
    omega = np.sqrt((p["k"] + p["m"] * p["g"] * p["l"] * np.cos(theta)) / (p["ic"] + p["m"] * p["l"] ** 2))
    modes = sim.modes("equilibrium")
    assert modes.frequency_hz.shape == (1,)
    assert modes.frequency_hz[0] == pytest.approx(omega / (2 * np.pi), rel=1e-8)
    space = sim.linearize("equilibrium")
    assert space.A.shape == (2, 2)
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(space.A).imag), [-omega, omega], rtol=1e-8)
    assert len(sim.modes("initial").frequency_hz) == 1
    with pytest.raises(mbsim.StateError):
        sim.modes((np.zeros(2), np.zeros(3)))


def test_modes_about_a_steady_orbit_in_its_turning_frame():
    """A planar body on a spring orbiting the origin (m Omega^2 r = k (r - L0)): sim.modes() finds
    the frame turning with it and gives the epicyclic frequency kappa^2 = k / m + 3 Omega^2; the
    same frame given explicitly gives the same; world axes (frame_rate 0) do not."""
    m, k, rest, r = 2.0, 50.0, 0.6, 1.0
    rate = np.sqrt(k * (r - rest) / (m * r))
    scene = {
        "mbsim": 1, "name": "orbit", "dimension": 2, "gravity": [0.0, 0.0], "time": {"end": 1.0, "step": 0.001},
        "bodies": [{"name": "bob", "mass": m, "inertia": 0.1, "position": [r, 0.0], "velocity": [0.0, rate * r]}],
        "forces": [{"type": "spring_damper", "body1": "ground", "body2": "bob", "point1": [0.0, 0.0],
                    "point2": [r, 0.0], "stiffness": k, "rest_length": rest}],
    }  # fmt: skip
    sim = mbsim.load(scene)
    kappa = np.sqrt(k / m + 3 * rate**2)
    assert 2 * np.pi * sim.modes().frequency_hz[-1] == pytest.approx(kappa, rel=1e-8)
    given = sim.modes(frame_rate=[0.0, 0.0, rate])
    assert 2 * np.pi * given.frequency_hz[-1] == pytest.approx(kappa, rel=1e-8)
    world = sim.modes(frame_rate=[0.0, 0.0, 0.0])
    assert abs(2 * np.pi * world.frequency_hz[-1] - kappa) > 0.1 * kappa


def test_no_equilibrium_is_reported_not_raised_and_modes_there_raise():
    """A free body under gravity: equilibrium() says why there is none; modes at it is a SimulationError."""
    scene = {"mbsim": 1, "name": "falling", "gravity": [0, 0, -9.81], "time": {"end": 1.0, "step": 0.01},
             "bodies": [{"name": "box", "mass": 1.0, "inertia": [0.1, 0.1, 0.1], "position": [0, 0, 1]}]}  # fmt: skip
    sim = mbsim.load(scene)
    found = sim.equilibrium()
    assert not found.converged and found.reason
    with pytest.raises(mbsim.SimulationError, match="no static equilibrium"):
        sim.modes("equilibrium")
