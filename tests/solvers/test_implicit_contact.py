"""The implicit contact step (solver.contact_integration: implicit): the Rosenbrock-W integrator
ROS34PW2 (mbsim.solvers.ode.integrate.rosenbrock_step) against its order and its stiff decay on
closed-form ODEs, the contact Jacobian it takes (mbsim.solvers.ode.stiff_kernels) against central
differences of the right-hand side, and a box on a floor as stiff as steel at the mechanism's own
step against the closed forms of Coulomb's stopping distance and Hertz's resting depth, where the
explicit step at that step size diverges."""

from __future__ import annotations

import numpy as np
import pytest

from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare
from mbsim.solvers.ode import integrate, ode_kernels

G = 9.81


def _prothero_robinson(lam: float):
    """y' = -lam (y - cos t) - sin t: the solution cos t from y(0) = 1, whatever the stiffness lam."""
    return lambda t, y: np.array([-lam * (y[0] - np.cos(t)) - np.sin(t)])


def _integrate(system, h: float, t_end: float, y0: np.ndarray) -> np.ndarray:
    work = integrate.Work(len(y0), integrate.INTEGRATORS["rk4"])
    y, t = y0.copy(), 0.0
    for _ in range(int(round(t_end / h))):
        y = integrate.rosenbrock_step_of(system, work, t, h, y)
        t += h
    return y


@pytest.mark.parametrize("jacobian", ["exact", "zero"])
def test_rosenbrock_w_is_third_order_with_any_jacobian(jacobian):
    """A W-method keeps its order whatever J it is given: on the forced pendulum-like system
    y1' = y2, y2' = -sin y1 - 0.1 y2 + 0.3 cos 1.3 t the error against scipy's DOP853 at 1e-13
    falls by 2^3 per halving of h, with the exact Jacobian and with J = 0 (measured orders 3.0)."""
    from scipy.integrate import solve_ivp

    def f(t, y):
        return np.array([y[1], -np.sin(y[0]) - 0.1 * y[1] + 0.3 * np.cos(1.3 * t)])

    def jac(t, y):
        return np.array([[0.0, 1.0], [-np.cos(y[0]), -0.1]])

    y0 = np.array([1.0, 0.0])
    exact = solve_ivp(f, (0, 2.0), y0, method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    errors = []
    for h in (0.04, 0.02, 0.01):
        system = integrate.PySystem(f, 2, 1, 1, jacobian=jac if jacobian == "exact" else None)
        errors.append(np.abs(_integrate(system, h, 2.0, y0) - exact).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 2.8) and np.all(orders < 3.6), orders


def test_rosenbrock_w_damps_a_stiff_mode_at_any_step():
    """L-stability with the exact Jacobian: Prothero-Robinson with lam = 1e9 (h lam = 1e7) from a
    start 1 off the slow solution: the fast mode is gone after one step and the slow one is
    followed to third order (error < 1e-6 at h = 0.01 over 1 s); explicit RK4 at that step
    overflows."""
    lam = 1e9
    f = _prothero_robinson(lam)
    system = integrate.PySystem(f, 1, 0, 0, jacobian=lambda t, y: np.array([[-lam]]))
    y = _integrate(system, 0.01, 1.0, np.array([2.0]))
    assert abs(y[0] - np.cos(1.0)) < 1e-6
    work = integrate.Work(1, integrate.INTEGRATORS["rk4"])
    explicit = integrate.PySystem(f, 1, 0, 0)
    y = np.array([2.0])
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(5):
            y = integrate.fixed_step_of(explicit, work, 0.01 * k, 0.01, y)
    assert not np.isfinite(y[0]) or abs(y[0]) > 1e10


def _box_scene(stiffness: float, mass: float, integration: str, v0: float = 1.0) -> dict:
    """A 0.1 m cube on a compliant floor (SDF of the ground's slab, Hertz k g^1.5 at its eight
    corners, damping 1e6 g dg/dt, Coulomb mu = 0.4), sliding at v0 from the Hertz resting depth."""
    depth = (mass * G / 4 / stiffness) ** (1 / 1.5)
    return {
        "mbsim": 1,
        "name": "box on a stiff floor",
        "gravity": [0, 0, -G],
        "time": {"end": 0.6, "step": 1e-3},
        "solver": {"method": "lagrange", "integrator": "rk4", "contact_integration": integration},
        "output": {"every": 10},
        "ground": {"shapes": [{"type": "box", "size": [2, 1, 0.04], "pose": {"position": [0.5, 0, -0.02]}}]},
        "bodies": [
            {
                "name": "box",
                "mass": mass,
                "inertia": [0.01, 0.01, 0.01],
                "position": [0, 0, 0.05 - depth],
                "velocity": [v0, 0, 0],
                "shapes": [{"type": "box", "size": [0.1, 0.1, 0.1]}],
            }
        ],
        "contacts": [
            {
                "name": "floor",
                "type": "compliant",
                "body1": "ground",
                "body2": "box",
                "stiffness": stiffness,
                "exponent": 1.5,
                "damping": 1e6,
                "damping_exponent": 1.0,
                "friction": 0.4,
            }
        ],
    }


@pytest.mark.parametrize("method", ["lagrange", "recursive"])
def test_box_on_a_steel_stiff_floor_at_the_mechanisms_step(run_scene, method):
    """k = 1e11 N/m^1.5 and a 0.5 kg box: sqrt(k'/m) h is about 3 at h = 1e-3, outside RK4's
    stability region (the explicit run leaves the floor at 1.9 km/s). The implicit step slides the box to Coulomb's
    v0^2 / (2 mu g) (to 1e-5; measured 8e-7) and rests it at Hertz's depth (m g / 4k)^(2/3)
    per corner (to 1e-6; 53 nm, measured 1e-9), at rest to 1e-9 m/s; in body coordinates (lagrange: U from M^-1)
    and in joint coordinates (recursive: B by the kinematics sweep, U by articulated-body solves)."""
    mass, k, v0 = 0.5, 1e11, 1.0
    _, res = run_scene(_box_scene(k, mass, "implicit", v0), [f"solver.method={method}"])
    p, v = res["bodies/box/position"], res["bodies/box/velocity"]
    assert p[-1, 0] == pytest.approx(v0**2 / (2 * 0.4 * G), rel=1e-5)
    depth = (mass * G / 4 / k) ** (1 / 1.5)
    assert 0.05 - p[-1, 2] == pytest.approx(depth, rel=1e-6)
    assert np.abs(v[-1]).max() < 1e-9


def test_contact_jacobian_matches_differences_of_the_right_hand_side(tmp_path):
    """The Jacobian the implicit step takes (the velocity rows: d v_dot / d(position, velocity))
    against central differences of the compiled right-hand side, on a box pressed 3 um into the
    floor while sliding at 0.2 m/s (friction sliding, four corners): the translational columns
    agree to 1e-4 relative to the largest entry (the rotational ones leave out the normal's turning
    and the moment arms' motion, the geometric terms: a W-method's J need not hold them)."""
    import yaml

    scene = _box_scene(1e9, 0.5, "implicit", 0.2)
    scene["bodies"][0]["position"] = [0, 0, 0.05 - 3e-6]
    path = tmp_path / "box.yaml"
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    model, solver = prepare(load_scene(str(path)))
    S = ode_kernels.system(solver._flat, solver.data.flat, solver._params)
    y = np.concatenate((model.q0, model.v0, [0.0]))
    _, J = ode_kernels.stiff_jacobian(S, 0.0, y)
    nq = model.nq
    rows = slice(nq, nq + 3)  # the linear accelerations
    slopes = []
    for col, step in [(2, 1e-9), (nq, 1e-7), (nq + 1, 1e-7), (nq + 2, 1e-7)]:
        plus, minus = y.copy(), y.copy()
        plus[col] += step
        minus[col] -= step
        diff = (ode_kernels.stiff_jacobian(S, 0.0, plus)[0] - ode_kernels.stiff_jacobian(S, 0.0, minus)[0]) / (2 * step)
        scale = np.abs(diff[rows]).max()
        assert np.abs(J[rows, col] - diff[rows]).max() <= 1e-4 * scale + 1e-9, (col, J[rows, col], diff[rows])
        slopes.append(scale)
    # the normal stiffness (z), and friction across the sliding direction (vy) are there; along it
    # (vx) sliding friction is constant: mu f_N
    assert slopes[0] > 1e7 and slopes[2] > 10.0 and slopes[1] < 1e-6 * slopes[2]


def test_implicit_contact_refuses_what_it_cannot_step(run_scene, write_scene, mbsim):
    """An adaptive integrator, a method without the compiled step, a misspelt value: exit 2 naming
    solver.contact_integration."""
    import yaml

    base = _box_scene(1e9, 0.5, "implicit")
    for change, words in [
        ({"integrator": "scipy:DOP853"}, "adaptive"),
        ({"method": "variational"}, "variational"),
        ({"contact_integration": "implict"}, "implicit"),
    ]:
        scene = dict(base, solver=dict(base["solver"], **change))
        path = write_scene(yaml.safe_dump(scene))
        result = mbsim("run", path, "-o", path.with_suffix(".h5"))
        assert result.exit_code == 2, result.output
        assert "contact_integration" in result.stderr and words in result.stderr, result.stderr


@pytest.mark.parametrize("method", ["lagrange", "recursive"])
def test_hinged_bar_rests_its_end_on_a_stiff_floor(run_scene, method):
    """A 1 m bar (2 kg) hinged at one end, its other end's two bottom corners on a floor as stiff as
    steel (k = 1e11): at rest the moment about the hinge gives each corner m g / 4, so the end sinks
    by Hertz's (m g / 4k)^(2/3) (58 nm) below the floor's face. The contact's Jacobian goes through the
    constrained inverse mass (lagrange: the hinge's Schur factor) or the articulated body (recursive);
    h = 1 ms, where the explicit step diverges. Measured: 3.0e-9 (lagrange), 3.1e-9 (recursive)."""
    L, T = 1.0, 0.04
    k, mass = 1e11, 2.0
    scene = {
        "mbsim": 1,
        "name": "hinged bar on a stiff floor",
        "gravity": [0, 0, -G],
        "time": {"end": 0.5, "step": 1e-3},
        "solver": {"method": method, "integrator": "rk4", "contact_integration": "implicit"},
        "output": {"every": 50},
        "ground": {"shapes": [{"type": "box", "size": [0.4, 0.4, 0.04], "pose": {"position": [L, 0, -0.02]}}]},
        "bodies": [
            {
                "name": "bar",
                "mass": mass,
                "inertia": [mass * T**2 / 6, mass * (L**2 + T**2) / 12, mass * (L**2 + T**2) / 12],
                "position": [L / 2, 0, T / 2],
                "shapes": [{"type": "box", "size": [L, T, T]}],
            }
        ],
        "joints": [
            {
                "name": "hinge",
                "type": "revolute",
                "body1": "ground",
                "body2": "bar",
                "point": [0, 0, T / 2],
                "axis": [0, 1, 0],
            }
        ],
        "contacts": [
            {
                "name": "floor",
                "type": "compliant",
                "body1": "ground",
                "body2": "bar",
                "stiffness": k,
                "exponent": 1.5,
                "damping": 1e6,
                "damping_exponent": 1.0,
                "friction": 0.4,
            }
        ],
    }
    _, res = run_scene(scene)
    # the explicit step at this h blows up, and the run says so (its dampers' work once hid it: exit 0
    # at 35 km/s); the centre (at L/2 from the hinge) sinks half as far as the end
    summary, _ = run_scene(scene, ["solver.contact_integration=explicit"], status="failed")
    assert "diverged" in summary.message
    sink = 2.0 * (T / 2 - res["bodies/bar/position"][-1, 2])
    assert sink == pytest.approx((mass * G / 4 / k) ** (2 / 3), rel=1e-6)
    assert np.abs(res["bodies/bar/velocity"][-1]).max() < 1e-7


def test_tilted_box_dropped_on_a_stiff_floor_against_small_explicit_steps(run_scene):
    """A tilted 1 kg box thrown onto a floor with k = 1e9 and damping 2e9 g^1.5 dg/dt lands on a
    corner, then an edge, then a face: impacts of a fraction of a millisecond, shorter than the step.
    The implicit step at h = 1 ms splits the steps its error estimate or a new contact's stiffness
    asks it to; against explicit RK4 at 1e-5 s near contact (time.contact_step): the largest upward
    speed after the impacts within 5 % (measured 2.6 %) and the place where it comes to rest within
    5 mm (measured 2.5 mm: a tumbling box's landing face amplifies differences); at rest on its
    largest face at Hertz's depth (m g / 4k)^(2/3) (1.8 um) to 1e-6 (measured 3e-11; the explicit
    run is still ringing at 7e-4). RK4 alone at 1 ms throws the box 0.9 m up."""
    scene = {
        "mbsim": 1,
        "name": "tilted box dropped on a stiff floor",
        "gravity": [0, 0, -G],
        "time": {"end": 1.0, "step": 1e-3},
        "solver": {"method": "lagrange", "integrator": "rk4", "contact_integration": "implicit"},
        "output": {"every": 10},
        "ground": {"shapes": [{"type": "box", "size": [2, 2, 0.1], "pose": {"position": [0, 0, -0.05]}}]},
        "bodies": [
            {
                "name": "box",
                "mass": 1.0,
                "inertia": [0.004, 0.006, 0.008],
                "position": [0, 0, 0.2],
                "orientation": {"euler": {"sequence": "XYZ", "angles": [0.3, 0.2, 0]}},
                "velocity": [0.3, 0, -1.0],
                "shapes": [{"type": "box", "size": [0.2, 0.15, 0.1]}],
            }
        ],
        "contacts": [
            {
                "name": "floor",
                "type": "compliant",
                "body1": "ground",
                "body2": "box",
                "stiffness": 1e9,
                "exponent": 1.5,
                "damping": 2e9,
                "damping_exponent": 1.5,
                "friction": 0.5,
            }
        ],
    }
    _, implicit = run_scene(scene)
    _, reference = run_scene(scene, ["solver.contact_integration=explicit", "time.contact_step=1e-5"])
    up = [res["bodies/box/velocity"][:, 2].max() for res in (implicit, reference)]
    assert up[0] == pytest.approx(up[1], rel=0.05)
    p, q = implicit["bodies/box/position"][-1], reference["bodies/box/position"][-1]
    assert np.linalg.norm(p[:2] - q[:2]) < 5e-3
    assert 0.05 - p[2] == pytest.approx((G / 4 / 1e9) ** (2 / 3), rel=1e-6)
    assert np.abs(implicit["bodies/box/velocity"][-1]).max() < 1e-9


def test_the_embedded_error_estimate_is_of_third_order():
    """ROS34PW2's embedded second-order solution: the estimate y_new - y_hat of one step falls by
    2^3 per halving of h (the local error of a second-order method), with any Jacobian."""

    def f(t, y):
        return np.array([y[1], -np.sin(y[0]) - 0.1 * y[1] + 0.3 * np.cos(1.3 * t)])

    y0 = np.array([1.0, 0.5])
    sizes = []
    for h in (0.04, 0.02, 0.01):
        system = integrate.PySystem(f, 2, 1, 1)
        work = integrate.Work(2, integrate.INTEGRATORS["rk4"])
        integrate.rosenbrock_step_of(system, work, 0.0, h, y0)
        sizes.append(np.abs(integrate.last_error_estimate(work)).max())
    orders = np.log2(np.array(sizes[:-1]) / np.array(sizes[1:]))
    assert np.all(np.abs(orders - 3.0) < 0.3), orders
