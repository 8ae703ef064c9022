"""Issue 30 items 3-4 under the LCP methods (timestepping, event_driven): joint limits as
unilateral rows with Newton restitution, joint Coulomb friction as box-bounded rows, against
closed forms a run does not produce: constant angular speed between two stops, the pendulum's
energy at its stop, the static moments of an arm resting on its stops, and a block's
stick-then-slide under a ramp force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from quick_loop import quick

G = 9.81
I_HINGE = 0.1 + 2.0 * 0.5**2  # a 2 kg bar of inertia 0.1 about its centre, hinged 0.5 m from it


def _names(values) -> list[str]:
    return [k.decode() if isinstance(k, bytes) else str(k) for k in values]


def _pendulum(method: str, end: float, gravity: float, w0: float, limits: str, step: float = 1e-3) -> dict:
    solver = {"method": method}
    if method == "event_driven":
        solver.update(rtol=1e-12, atol=1e-12)
    return {
        "mbsim": 1,
        "name": "bar against its stops",
        "dimension": 2,
        "gravity": [0.0, -gravity],
        "time": {"end": end, "step": step},
        "solver": solver,
        "bodies": [
            {
                "name": "bar",
                "mass": 2.0,
                "inertia": 0.1,
                "position": [0.5, 0.0],
                "velocity": [0.0, 0.5 * w0],
                "angular_velocity": w0,
            },
        ],  # fmt: skip
        "joints": [
            {
                "name": "hinge",
                "type": "revolute",
                "body1": "ground",
                "body2": "bar",
                "point": [0.0, 0.0],
                "limits": limits,
            },
        ],  # fmt: skip
    }


def _rebounds(t: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows right after each reversal of the rate (an impulse at a stop): times, rates."""
    after = np.flatnonzero(np.sign(qd[:-1]) * np.sign(qd[1:]) < 0) + 1
    return t[after], qd[after]


@pytest.mark.parametrize("method", quick(["event_driven", "timestepping"], keep="event_driven"))
def test_bar_between_two_stops_rebounds_with_e_to_the_k(run_scene, method) -> None:
    """No gravity: the bar turns at 1 rad/s into an upper stop at 0.3 rad, rebounds at e = 0.5 to
    the lower one at -0.3 rad, ...: constant speeds e^k between hits at t = 0.3, 1.5, 3.9 s
    (0.6 rad at 0.5, then at 0.25 rad/s). event_driven: `limit` events there, to 1e-9;
    timestepping (h = 1e-3): rebound speeds to 1 %, hits within a step, and the stops passed by
    at most half a step's travel, h/2 |qd|."""
    e, w0, h = 0.5, 1.0, 1e-3
    limits = {"lower": -0.3, "upper": 0.3, "restitution": e}
    _, res = run_scene(_pendulum(method, 4.0, 0.0, w0, limits, h))
    t, q, qd = res.time, res["joints/hinge/position"], res["joints/hinge/velocity"]
    hits = np.array([0.3, 1.5, 3.9])
    speeds = w0 * e ** np.arange(1, 4) * np.array([-1.0, 1.0, -1.0])
    if method == "event_driven":
        times, kinds = res["events/time"], _names(res["events/kind"])
        assert kinds == ["limit"] * 3 and _names(res["events/contact"]) == ["hinge"] * 3
        assert np.max(np.abs(times - hits)) < 1e-9, times - hits
        after = np.searchsorted(t, times)  # the row of each event holds the state after it
        assert np.max(np.abs(qd[after] - speeds)) < 1e-9, qd[after] - speeds
        excursion = max(q.max() - 0.3, -0.3 - q.min())
        assert excursion < 1e-12, f"max excursion past a stop {excursion:.3g} rad"
    else:
        times, rates = _rebounds(t, qd)
        assert len(times) == 3, times
        assert np.max(np.abs(rates / speeds - 1.0)) < 0.01, rates / speeds - 1.0
        # the impulse acts in the step whose midpoint (or end) reaches the stop
        assert np.all((times - hits > 0.0) & (times - hits <= 2.0 * h + 1e-12)), times - hits
        excursion = max(q.max() - 0.3, -0.3 - q.min())
        assert excursion <= 0.5 * h * w0, f"max excursion past a stop {excursion:.3g} rad > h/2 |qd|"
    # the stop's force is an impulse: nothing at the recorded states between hits
    assert np.all(res["joints/hinge/limit_force"][np.abs(q) < 0.29] == 0.0)


@pytest.mark.parametrize("method", quick(["event_driven", "timestepping"], keep="event_driven"))
def test_pendulum_falls_onto_its_stop_and_comes_to_rest(run_scene, method) -> None:
    """Gravity: the bar falls from horizontal onto a lower stop at -1 rad (restitution 0.5); it
    meets the stop at w0 = sqrt(2 m g d sin 1 / I) every time (energy), so its rebound speeds are
    e^k w0 (event_driven to 1e-9 w0, timestepping to 1 % for the first four, while a flight spans
    many steps); the bounces accumulate (event_driven: an `accumulation` event) and the bar rests
    on the stop, which holds it with the gravity moment m g d cos 1."""
    e, lower = 0.5, -1.0
    _, res = run_scene(_pendulum(method, 3.0, G, 0.0, {"lower": lower, "restitution": e}))
    t, q, qd = res.time, res["joints/hinge/position"], res["joints/hinge/velocity"]
    w0 = math.sqrt(2.0 * 2.0 * G * 0.5 * math.sin(1.0) / I_HINGE)
    moment = 2.0 * G * 0.5 * math.cos(1.0)
    if method == "event_driven":
        times, kinds = res["events/time"], _names(res["events/kind"])
        assert kinds[-1] == "accumulation" and set(kinds[:-1]) == {"limit"}, kinds
        after = np.searchsorted(t, times[:12])
        expected = w0 * e ** np.arange(1, 13)
        assert np.max(np.abs(qd[after] - expected)) < 1e-9 * w0, (qd[after] - expected) / w0
        assert q.min() - lower > -1e-12, f"max excursion past the stop {lower - q.min():.3g} rad"
        assert q[-1] == pytest.approx(lower, abs=1e-12) and abs(qd[-1]) < 1e-12
        assert res["joints/hinge/limit_force"][-1] == pytest.approx(moment, rel=1e-9)
        drift = res["diagnostics/energy/total"] - res["diagnostics/energy/work"]
        assert np.max(np.abs(drift - drift[0])) < 1e-9 * 0.5 * I_HINGE * w0**2
    else:
        _, rates = _rebounds(t, qd)
        rates = rates[rates > 0]
        assert np.max(np.abs(rates[:4] / (w0 * e ** np.arange(1, 5)) - 1.0)) < 0.01, rates[:4]
        assert q[-1] == pytest.approx(lower, abs=1e-9) and abs(qd[-1]) < 1e-9
        assert res["joints/hinge/limit_force"][-1] == pytest.approx(moment, rel=1e-9)


ARM = {
    "mbsim": 1,
    "name": "three links on their stops",
    "dimension": 2,
    "gravity": [0.0, -G],
    "time": {"end": 2.0, "step": 1e-3},
    "bodies": [
        {"name": "l1", "mass": 1.0, "inertia": 0.02, "position": [0.25, 0.0]},
        {"name": "l2", "mass": 1.0, "inertia": 0.02, "position": [0.75, 0.0]},
        {"name": "l3", "mass": 0.5, "inertia": 0.01, "position": [1.2, 0.0]},
    ],
    "joints": [
        {
            "name": "j1",
            "type": "revolute",
            "body1": "ground",
            "body2": "l1",
            "point": [0.0, 0.0],
            "limits": {"lower": -0.6, "upper": 0.6, "restitution": 0.3},
        },
        {
            "name": "j2",
            "type": "revolute",
            "body1": "l1",
            "body2": "l2",
            "point": [0.5, 0.0],
            "limits": {"lower": -0.4, "upper": 0.4, "restitution": 0.2},
        },
        {
            "name": "j3",
            "type": "revolute",
            "body1": "l2",
            "body2": "l3",
            "point": [1.0, 0.0],
            "limits": {"lower": -0.3, "upper": 0.3},
        },
    ],  # fmt: skip
}
ARM_LIMITS = {"j1": (-0.6, 0.6), "j2": (-0.4, 0.4), "j3": (-0.3, 0.3)}


@pytest.mark.parametrize(
    "method, lcp",
    quick([("event_driven", "lemke"), ("timestepping", "pgs"), ("event_driven", "pgs"), ("timestepping", "lemke")],
          keep=[0], ids=["event_driven", "timestepping", "event_driven-pgs", "timestepping-lemke"]),
)  # fmt: skip
def test_arm_stays_within_its_limits_and_rests_on_them(run_scene, method, lcp) -> None:
    """Three links fall from horizontal onto their lower stops (-0.6, -0.4, -0.3 rad: absolute
    angles -0.6, -1.0, -1.3): event_driven stays within the stops to 1e-9 rad, timestepping within
    its midpoint's bound, half a step's travel h/2 max |qd| of that joint. At rest the stops hold
    the gravity moments of the links beyond each joint (statics: sum of m g times the lever arm)."""
    solver = {"method": method, "lcp": lcp}
    if method == "event_driven":
        solver.update(rtol=1e-10, atol=1e-10)
    _, res = run_scene({**ARM, "solver": solver})
    h = ARM["time"]["step"]
    for name, (lower, upper) in ARM_LIMITS.items():
        q, qd = res[f"joints/{name}/position"], res[f"joints/{name}/velocity"]
        excursion = max(q.max() - upper, lower - q.min())
        bound = 1e-9 if method == "event_driven" else 0.5 * h * np.abs(qd).max()
        assert excursion <= bound, f"{method}: {name} passed its stop by {excursion:.3g} rad (bound {bound:.3g})"
        assert q[-1] == pytest.approx(lower, abs=1e-9)
    # statics on the stops: the joints at x = 0, 0.5 cos 0.6, ..., the centres half a link on
    angles = np.array([-0.6, -1.0, -1.3])
    lengths, masses = np.array([0.5, 0.5, 0.4]), np.array([1.0, 1.0, 0.5])
    joint_x = np.concatenate(([0.0], np.cumsum(lengths * np.cos(angles))[:-1]))
    centre_x = joint_x + 0.5 * lengths * np.cos(angles)
    for j, name in enumerate(ARM_LIMITS):
        moment = float(np.sum(masses[j:] * G * (centre_x[j:] - joint_x[j])))
        assert res[f"joints/{name}/limit_force"][-1] == pytest.approx(moment, rel=1e-8), name


def _block(method: str, coulomb: float, rate: float, end: float, friction: dict | None = None) -> dict:
    solver = {"method": method}
    if method == "event_driven":
        solver.update(rtol=1e-12, atol=1e-12)
    return {
        "mbsim": 1,
        "name": "block under a ramp force",
        "dimension": 2,
        "gravity": [0.0, -G],
        "time": {"end": end, "step": 1e-3},
        "solver": solver,
        "bodies": [{"name": "block", "mass": 2.0, "inertia": 0.1, "position": [0.0, 0.0]}],
        "joints": [
            {
                "name": "slide",
                "type": "prismatic",
                "body1": "ground",
                "body2": "block",
                "point": [0.0, 0.0],
                "axis": [1.0, 0.0],
                "friction": friction or {"coulomb": coulomb},
            },
        ],  # fmt: skip
        "actuators": [{"name": "push", "joint": "slide", "type": "force", "value": f"{rate}*t"}],
    }


@pytest.mark.parametrize(
    "method, rate",
    quick([("event_driven", 4.1), ("timestepping", 4.0), ("timestepping", 4.1)], keep=[0, 1],
          ids=["event_driven", "timestepping-on-a-step", "timestepping-within-a-step"]),
)  # fmt: skip
def test_block_sticks_until_the_ramp_beats_coulomb_then_slides(run_scene, method, rate) -> None:
    """F = a t against Coulomb friction F_c = 3 N on a 2 kg block: it sticks (qd = 0 exactly, the
    friction force -F) until t_b = F_c / a, then slides with m qdd = a t - F_c:
    qd = (a (t^2 - t_b^2) / 2 - F_c (t - t_b)) / m. event_driven: a `slip` event at t_b (1e-12 s)
    and the rates to 1e-12 (the motion is a polynomial its integrator follows to round-off).
    timestepping takes the ramp's impulse at each step's midpoint, which is exact for a linear
    force: with t_b on a step boundary (a = 4) the rates are exact to 1e-12; within a step the
    breakaway step misses at most a h^2 / 8 of impulse, so |qd error| <= a h^2 / (8 m). Its
    recorded friction force is the step's impulse over h (the start row, before any step, has 0)."""
    coulomb, m, h = 3.0, 2.0, 1e-3
    _, res = run_scene(_block(method, coulomb, rate, 1.0))
    t, qd = res.time, res["joints/slide/velocity"]
    tb = coulomb / rate
    exact = np.where(t > tb, (0.5 * rate * (t**2 - tb**2) - coulomb * (t - tb)) / m, 0.0)
    assert np.all(qd[t <= tb - h] == 0.0)
    friction = res["joints/slide/friction_force"]
    sticking, sliding = t < tb - h, t > tb + h
    if method == "event_driven":
        tol = 1e-12
        assert _names(res["events/kind"]) == ["slip"] and res["events/time"][0] == pytest.approx(tb, abs=1e-12)
        assert np.max(np.abs(friction[sticking] + rate * t[sticking])) < 1e-12
    else:
        tol = 1e-12 if rate == 4.0 else rate * h**2 / (8 * m) + 1e-12
        # the step's mean force: -a t at the step's midpoint, t - h/2 (none at the start: no step yet)
        sticking &= t > 0.0
        assert np.max(np.abs(friction[sticking] + rate * (t[sticking] - 0.5 * h))) < 1e-9
    assert np.max(np.abs(qd - exact)) <= tol, np.max(np.abs(qd - exact))
    assert np.all(friction[sliding] == pytest.approx(-coulomb, abs=1e-12))
    drift = res["diagnostics/energy/total"] - res["diagnostics/energy/work"]
    assert np.max(np.abs(drift)) < 1e-9


@pytest.mark.parametrize("method", quick(["event_driven", "timestepping"], keep="event_driven"))
def test_block_breaks_away_at_the_static_force(run_scene, method) -> None:
    """A Stribeck curve (static 4 N, Coulomb 3 N, v_st 0.05 m/s): held until the ramp 4 t reaches
    the breakaway force F_s = 4 N at t = 1 s (event_driven: the slip event to 1e-12 s; timestepping:
    the first moving step within a step of it), and sliding fast it feels F_c (friction at 2 s,
    qd >> v_st, within 1e-9 of -F_c)."""
    friction = {"coulomb": 3.0, "static": 4.0, "stribeck_velocity": 0.05}
    _, res = run_scene(_block(method, 3.0, 4.0, 2.0, friction))
    t, qd = res.time, res["joints/slide/velocity"]
    if method == "event_driven":
        assert _names(res["events/kind"]) == ["slip"] and res["events/time"][0] == pytest.approx(1.0, abs=1e-12)
        assert np.all(qd[t <= 1.0] == 0.0) and np.all(qd[t > 1.0] > 0.0)
    else:
        moving = t[np.flatnonzero(qd > 0.0)[0]]
        assert 1.0 <= moving <= 1.0 + 1e-3 + 1e-12
    assert res["joints/slide/friction_force"][-1] == pytest.approx(-3.0, abs=1e-9)


@pytest.mark.parametrize("method", quick(["event_driven", "timestepping"], keep="event_driven"))
def test_pendulum_with_joint_friction_meets_its_stop_with_the_work_left(run_scene, method) -> None:
    """3D hinge with Coulomb friction F_c = 0.2 N m falling 1 rad onto its stop (e = 0.5): it meets
    the stop at w1 = sqrt(2 (m g d sin 1 - F_c 1) / I) (the friction's work over the fall) and
    rebounds at e w1 (event_driven 1e-9, timestepping 1 %); it comes to rest on the stop, which
    then holds the whole gravity moment (the friction, statically indeterminate beside the stop's
    force, is taken as 0), and total - work stays constant (event_driven, 1e-8 relative)."""
    scene = _pendulum(method, 2.0, G, 0.0, {"lower": -1.0, "restitution": 0.5})
    scene["dimension"] = 3
    scene["gravity"] = [0.0, -G, 0.0]
    scene["bodies"][0].update(inertia=[0.1, 0.1, 0.1], position=[0.5, 0.0, 0.0], velocity=[0.0, 0.0, 0.0])
    del scene["bodies"][0]["angular_velocity"]
    scene["joints"][0].update(point=[0.0, 0.0, 0.0], axis=[0.0, 0.0, 1.0], friction={"coulomb": 0.2})
    _, res = run_scene(scene)
    t, q, qd = res.time, res["joints/hinge/position"], res["joints/hinge/velocity"]
    w1 = math.sqrt(2.0 * (2.0 * G * 0.5 * math.sin(1.0) - 0.2 * 1.0) / I_HINGE)
    if method == "event_driven":
        times, kinds = res["events/time"], _names(res["events/kind"])
        assert kinds[0] == "limit"
        assert qd[np.searchsorted(t, times[0])] == pytest.approx(0.5 * w1, abs=1e-9 * w1)
        drift = res["diagnostics/energy/total"] - res["diagnostics/energy/work"]
        assert np.max(np.abs(drift - drift[0])) < 1e-8 * 0.5 * I_HINGE * w1**2
    else:
        _, rates = _rebounds(t, qd)
        assert rates[0] == pytest.approx(0.5 * w1, rel=0.01)
    assert q[-1] == pytest.approx(-1.0, abs=1e-9) and abs(qd[-1]) < 1e-9
    assert res["joints/hinge/limit_force"][-1] == pytest.approx(2.0 * G * 0.5 * math.cos(1.0), rel=1e-9)
    assert res["joints/hinge/friction_force"][-1] == 0.0
