"""augmented_lagrangian factors M + alpha J^T J with its bodies in reverse Cuthill-McKee order when the
model's order spreads the envelope (mbsim.solvers.augmented_lagrangian.body_order). Checked against the
closed-form kinematics of the IFToMM A02 N four-bar, whose scene lists every crank before every
coupler (the order that gets permuted), away from its folds and near one, and in 3D against lagrange's
solve on a chain listed out of order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare
from mbsim.solvers.augmented_lagrangian import body_order

PROBLEMS = Path(__file__).resolve().parents[2] / "mbsim" / "verify" / "problems"


def four_bar_state(n: int, phi: float, w: float, w_dot: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, v and v_dot (x, y, angle per body: cranks 0..n, then couplers 0..n-1) of the N four-bar
    when every crank stands at angle phi from +x, turning at w with angular acceleration w_dot:
    crank i hinged at (i, 0), its centre half-way to its tip; coupler i joins the tips of cranks i
    and i + 1, so it translates with them at angle 0."""
    c, s = np.cos(phi), np.sin(phi)
    tip = np.array([c, s])
    tip_v = w * np.array([-s, c])
    tip_a = w_dot * np.array([-s, c]) - w * w * tip
    q, v, a = [], [], []
    for i in range(n + 1):
        q += [i + 0.5 * tip[0], 0.5 * tip[1], phi]
        v += [*(0.5 * tip_v), w]
        a += [*(0.5 * tip_a), w_dot]
    for i in range(n):
        q += [i + 0.5 + tip[0], tip[1], 0.0]
        v += [*tip_v, 0.0]
        a += [*tip_a, 0.0]
    return np.array(q), np.array(v), np.array(a)


@pytest.mark.parametrize("n", [4, 40])
@pytest.mark.parametrize("phi", [1.0, 0.01])
def test_n_four_bar_accelerations_in_reverse_cuthill_mckee_order(n, phi):
    """The one-coordinate model (tests/solvers/test_singular.n_four_bar_reference): I phi'' =
    -k cos(phi), I = (N + 1)/3 + N, k = g ((N + 1)/2 + N); every body's acceleration follows from
    phi'' by the kinematics above. At phi = 0.01 rad the loops approach their fold and the multiplier
    iteration takes 24 iterations (N = 40) instead of 3. Measured: 1e-8 m/s^2 in either order, the
    two orders 1.5e-9 apart. (At 1e-3 rad, N = 40, the stall test drops a direction and both orders
    are 9e-3 off the one-coordinate model: the method's documented loss, not the order's.)"""
    scene = PROBLEMS / ("A02_n_four_bar" if n == 40 else f"A02_n_four_bar_n{n}") / "scene.yaml"
    model, solver = prepare(load_scene(str(scene), ["solver.method=augmented_lagrangian"]))
    position = body_order(solver._flat)
    assert sorted(position) == list(range(2 * n + 1)) and np.any(position != np.arange(2 * n + 1))
    inertia, k = (n + 1) / 3 + n, 9.81 * ((n + 1) / 2 + n)
    w = -1.3
    w_dot = -k * np.cos(phi) / inertia
    q, v, expected = four_bar_state(n, phi, w, w_dot)
    np.testing.assert_allclose(model.q0[: 3 * (n + 1)][2::3], np.pi / 2)  # the layout assumed above
    vdot, _ = solver.acceleration(0.0, q, v)
    np.testing.assert_allclose(vdot, expected, rtol=0, atol=1e-7 * abs(k / inertia))


def test_scrambled_3d_chain_matches_lagrange(tmp_path: Path):
    """A 3D chain of ten links on spherical joints, hanging tilted and spinning rigidly about z, its
    bodies listed odd links first (so the model's order spreads the envelope and the chain order is
    taken): the accelerations equal lagrange's (the Schur-complement solve, full rank here) to the
    iteration's tolerance. Measured: 8e-10 of 5.7 m/s^2 (1.1e-9 in the model's order)."""
    n, h, tilt, spin = 10, 0.5, 0.6, 0.8
    axis = np.array([np.sin(tilt), 0.0, -np.cos(tilt)])
    bodies = []
    for i in [*range(1, n, 2), *range(0, n, 2)]:
        centre = (2 * i + 1) * h * axis
        bodies.append({
            "name": f"link{i}", "mass": 1.0 + 0.1 * i, "inertia": [0.3, 0.2 + 0.01 * i, 0.1],
            "position": centre.tolist(), "velocity": np.cross([0, 0, spin], centre).tolist(),
            "angular_velocity": [0, 0, spin],
        })  # fmt: skip
    joints = [
        {"name": f"j{i}", "type": "spherical", "body1": "ground" if i == 0 else f"link{i - 1}",
         "body2": f"link{i}", "point": (2 * i * h * axis).tolist()}
        for i in range(n)
    ]  # fmt: skip
    scene = {"mbsim": 1, "name": "scrambled chain", "dimension": 3, "gravity": [0, 0, -9.81],
             "time": {"end": 1.0, "step": 0.001}, "solver": {"method": "lagrange", "integrator": "rk4"},
             "bodies": bodies, "joints": joints}  # fmt: skip
    path = tmp_path / "chain.yaml"
    path.write_text(yaml.safe_dump(scene))
    vdot = {}
    for method in ("lagrange", "augmented_lagrangian"):
        model, solver = prepare(load_scene(str(path), [f"solver.method={method}"]))
        if method == "augmented_lagrangian":
            assert np.any(body_order(solver._flat) != np.arange(n))
        vdot[method], _ = solver.acceleration(0.0, model.q0.copy(), model.v0.copy())
    scale = np.max(np.abs(vdot["lagrange"]))
    np.testing.assert_allclose(vdot["augmented_lagrangian"], vdot["lagrange"], rtol=0, atol=1e-8 * scale)
