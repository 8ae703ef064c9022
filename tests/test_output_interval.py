"""``output.interval`` (CONTRACT §8): rows at t = k * interval from the adaptive integrators' dense
output, the event instants of ``event_driven``, fixed-step methods at whole multiples of their step.

References: the closed-form flights of a bouncing ball (restitution e, no friction), a pendulum
ODE written here and solved by scipy's solve_ivp at rtol 1e-12, the kinetic energy recomputed from
the recorded velocities, and the same run recorded with ``output.every``.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from quick_loop import quick

G = 9.81
E = 0.8  # the ball's restitution

BALL = """
mbsim: 1
name: bouncing ball
gravity: [0, 0, -9.81]
time: {{end: {end}, step: 2.0e-4}}
solver: {{method: event_driven}}
output: {{interval: {interval}}}
ground:
  shapes:
    - {{type: plane, point: [0, 0, 0], normal: [0, 0, 1]}}
bodies:
  - name: ball
    mass: 1.0
    inertia: [0.004, 0.004, 0.004]
    position: [0, 0, 1.1]
    shapes: [{{type: sphere, radius: 0.1}}]
contacts:
  - {{name: floor, type: rigid, body1: ground, body2: ball, restitution: 0.8, friction: 0.0}}
"""

PENDULUM = """
mbsim: 1
name: pendulum
dimension: 2
gravity: [0, -9.81]
time: {{end: {end}, step: 0.01}}
solver: {{method: {method}, integrator: "{integrator}"}}
output: {{{output}}}
bodies:
  - name: bob
    mass: 1.0
    inertia: 1.0e-6
    position: ["sin(2.5)", "-cos(2.5)"]
    orientation: 2.5
joints:
  - {{name: pivot, type: revolute, body1: ground, body2: bob, point: [0, 0]}}
"""


def ball_height(t: np.ndarray) -> np.ndarray:
    """The ball's centre height (m) in closed form: dropped from 1.1 m (radius 0.1 m), its k-th
    flight leaves the floor at T_k with the speed e^k sqrt(2 g 1.0)."""
    v0 = np.sqrt(2 * G * 1.0)
    impacts, speeds = [np.sqrt(2 * 1.0 / G)], [v0]
    while impacts[-1] < t.max():
        speeds.append(E * speeds[-1])
        impacts.append(impacts[-1] + 2 * speeds[-1] / G)
    z = 1.1 - 0.5 * G * t**2
    for k in range(1, len(impacts)):
        s = t - impacts[k - 1]
        inside = (t >= impacts[k - 1]) & (t < impacts[k])
        z = np.where(inside, 0.1 + speeds[k] * s - 0.5 * G * s**2, z)
    return z


def read(path: Path, *names: str) -> list[np.ndarray]:
    with h5py.File(path, "r") as f:
        return [f[n][:] for n in names]


def test_bouncing_ball_rows_follow_the_parabolas_between_the_events(mbsim, write_scene, tmp_path) -> None:
    """event_driven (scipy:DOP853, rtol 1e-8, event_tol 1e-13): a row at each multiple of 0.01 s
    whose time is that product, plus one row at each impact holding the state after it; the
    heights match the closed-form flights to 1e-8 m (the integrator's tolerance on a 1 m drop;
    measured 9e-14), where ``output.every`` gave one row per flight."""
    out = tmp_path / "ball.h5"
    r = mbsim("run", write_scene(BALL.format(end=3.0, interval=0.01)), "-q", "-o", out)
    assert r.exit_code == 0, r.output
    time, q, v, events = read(out, "time", "q", "v", "events/time")
    multiples = 0.01 * np.arange(301)
    inside = np.isin(time, multiples)
    # every multiple, as the product k * 0.01 (not a sum of steps), then each event instant
    np.testing.assert_array_equal(time[inside], multiples)
    np.testing.assert_array_equal(np.sort(time[~inside]), np.unique(events[events <= 3.0]))
    assert len(events[events <= 3.0]) == 6 and np.all(np.diff(time) > 0)
    # heights on the parabolas (the event rows too: they sit at the floor, z = radius)
    np.testing.assert_allclose(q[:, 2], ball_height(time), rtol=0, atol=1e-8)
    # an event row holds the state after the impact: rising at e times the approach speed
    first = time[~inside][0]
    np.testing.assert_allclose(v[~inside, 2][0], E * G * first, rtol=1e-9)
    assert np.isclose(first, np.sqrt(2 / G), rtol=0, atol=1e-12)


def test_the_exported_animation_keys_are_the_rows_and_fly_the_parabola(mbsim, write_scene, tmp_path) -> None:
    """``mbsim export`` of the interval result: its key times are the rows (float32) and the ball's
    translation keys follow the closed-form flights (float32 rounding)."""
    from output.export_scenes import Glb

    out = tmp_path / "ball.h5"
    assert mbsim("run", write_scene(BALL.format(end=2.0, interval=0.01)), "-q", "-o", out).exit_code == 0
    glb = tmp_path / "ball.glb"
    r = mbsim("export", out, "-o", glb)
    assert r.exit_code == 0, r.output
    (time,) = read(out, "time")
    doc = Glb(glb)
    keys, values, _ = doc.channels(doc.node("ball", 0))["translation"]
    np.testing.assert_array_equal(keys, time.astype(np.float32))
    assert len(keys) > 200  # a key every 0.01 s, not one a flight
    np.testing.assert_allclose(values[:, 2], ball_height(time), rtol=0, atol=1e-6)


def pendulum_reference(t: np.ndarray) -> np.ndarray:
    """The pendulum's angle from the downward vertical: (m L^2 + I) theta'' = -m g L sin(theta),
    m = 1 kg, L = 1 m, I = 1e-6 kg m^2, theta(0) = 2.5, at rtol 1e-12."""
    from scipy.integrate import solve_ivp

    inertia = 1.0 + 1e-6
    sol = solve_ivp(
        lambda _, y: [y[1], -G * np.sin(y[0]) / inertia], (0, t.max()), [2.5, 0.0], rtol=1e-12, atol=1e-12,
        dense_output=True,
    )  # fmt: skip
    return sol.sol(t)[0]


def pendulum_angle(method: str, q: np.ndarray) -> np.ndarray:
    # recursive records the joint coordinate from its start; the body methods the body's angle
    return q[:, 0] + 2.5 if method == "recursive" else q[:, 2]


CASES = [
    (m, i)
    for m in ("lagrange", "null_space", "augmented_lagrangian", "gauss", "recursive")
    for i in ("scipy:DOP853", "scipy:RK45", "scipy:Radau", "scipy:BDF")
]


@pytest.mark.parametrize(("method", "integrator"), quick(CASES, keep=0))
def test_pendulum_rows_at_multiples_match_the_reference(mbsim, write_scene, tmp_path, method, integrator) -> None:
    """Rows at k * 0.037 s (not a multiple of any step) from the dense output: their angle agrees
    with the reference as closely as the run's own step ends do, within 3x plus the run's rtol
    1e-8 (Radau's interpolant is of lower order than its steps: 7e-10 against 1.6e-10 under
    lagrange; DOP853 within 1e-7 rad absolutely, measured 1.1e-8), and each row is computed at its
    state: the kinetic energy column equals 1/2 (m |v|^2 + I omega^2) of the recorded velocities."""
    text = {"end": 3.0, "method": method, "integrator": integrator}
    out, steps = tmp_path / "interval.h5", tmp_path / "steps.h5"
    for output, path in (("interval: 0.037", out), ("every: 1", steps)):
        r = mbsim("run", write_scene(PENDULUM.format(output=output, **text), path.stem + ".yaml"), "-q", "-o", path)
        assert r.exit_code == 0, r.output
    time, q, kinetic = read(out, "time", "q", "diagnostics/energy/kinetic")
    body_v = read(out, "bodies/bob/velocity", "bodies/bob/angular_velocity")
    k = np.arange(len(time) - 1)
    np.testing.assert_array_equal(time[:-1], 0.037 * k)  # the multiples, then the end
    assert time[-1] == 3.0 and 0.037 * k[-1] < 3.0 < 0.037 * (k[-1] + 1)
    error = np.max(np.abs(pendulum_angle(method, q) - pendulum_reference(time)))
    t_steps, q_steps = read(steps, "time", "q")
    error_steps = np.max(np.abs(pendulum_angle(method, q_steps) - pendulum_reference(t_steps)))
    assert error <= 3 * error_steps + 1e-8, (error, error_steps)
    if integrator == "scipy:DOP853":
        assert error < 1e-7
    velocity, omega = body_v
    expected = 0.5 * np.sum(velocity**2, axis=1) + 0.5 * 1e-6 * omega.reshape(len(time), -1)[:, -1] ** 2
    np.testing.assert_allclose(kinetic, expected, rtol=1e-12, atol=1e-14)


def test_rk4_interval_of_five_steps_records_the_rows_of_every_five(mbsim, write_scene, tmp_path) -> None:
    """A fixed step: output.interval = 5 time.step records the very states of output.every: 5, at
    the times k * interval."""
    text = {"end": 1.0, "method": "lagrange", "integrator": "rk4"}
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    for output, path in (("interval: 0.05", a), ("every: 5", b)):
        r = mbsim("run", write_scene(PENDULUM.format(output=output, **text), path.stem + ".yaml"), "-q", "-o", path)
        assert r.exit_code == 0, r.output
    ta, qa, va = read(a, "time", "q", "v")
    tb, qb, vb = read(b, "time", "q", "v")
    assert len(ta) == len(tb) == 21
    np.testing.assert_array_equal(qa, qb)
    np.testing.assert_array_equal(va, vb)
    np.testing.assert_array_equal(ta, 0.05 * np.arange(21))
    np.testing.assert_allclose(tb, ta, rtol=0, atol=1e-13)  # every's times: sums of steps


@pytest.mark.parametrize(
    ("output", "method", "integrator", "words"),
    [
        ("interval: 0.015", "lagrange", "rk4", ["output.interval", "time.step = 0.01", "1.5 steps"]),
        ("interval: 0.025", "variational", "rk4", ["output.interval", "time.step", "fixed steps"]),
        ("{interval: 0.05, every: 5}", "lagrange", "scipy:DOP853", ["output.every", "output.interval", "give one"]),
        ("interval: 1.0e-10", "lagrange", "scipy:DOP853", ["output.interval", "rows", "solver.max_steps"]),
    ],
)
def test_an_interval_that_cannot_hold_is_a_scene_error(mbsim, write_scene, output, method, integrator, words) -> None:
    """Exit 2 naming the file, the line of output and the keys: an interval that is no whole multiple
    of a fixed step, an interval with output.every, an interval past solver.max_steps rows."""
    text = PENDULUM.format(end=1.0, method=method, integrator=integrator, output="")
    text = text.replace("output: {}", f"output: {output}" if output.startswith("{") else f"output: {{{output}}}")
    path = write_scene(text)
    r = mbsim("run", path, "-q", "-o", path.with_suffix(".h5"))
    assert r.exit_code == 2, r.output
    line = 1 + text.splitlines().index(next(s for s in text.splitlines() if s.startswith("output:")))
    assert f"{path}:{line}:" in r.stderr
    for word in words:
        assert word in r.stderr
    assert not path.with_suffix(".h5").exists()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["lagrange", "recursive"])
def test_interpolated_rows_of_the_four_box_chain_keep_unit_quaternions_and_energy(mbsim, tmp_path, method) -> None:
    """The four-box chain (spherical joints, quaternions) under DOP853 with rows every 0.01 s: the
    interpolated rows hold unit quaternions, the joints (lagrange projects them as its steps) and
    the energy (conservative: total - work constant to the integrator's 1e-8 tolerance)."""
    scene = Path(__file__).resolve().parents[1] / "scenes" / "four_box_chain.yaml"
    out = tmp_path / "chain.h5"
    sets = ["output.every=null", "output.interval=0.01", "solver.integrator=scipy:DOP853", f"solver.method={method}"]
    r = mbsim("run", scene, "-q", "-o", out, "--set", sets[0], "--set", sets[1], "--set", sets[2], "--set", sets[3])
    assert r.exit_code == 0, r.output
    names = ["time", "diagnostics/constraints/quaternion_norm_error", "diagnostics/constraints/position_violation"]
    time, quat, violation = read(out, *names)
    total, work = read(out, "diagnostics/energy/total", "diagnostics/energy/work")
    np.testing.assert_array_equal(time, 0.01 * np.arange(1001))
    assert np.max(quat) < 1e-15
    assert np.max(violation) < 1e-12
    drift = (total - work) - (total[0] - work[0])
    assert np.max(np.abs(drift)) < 1e-6 * np.max(np.abs(total))
