"""The Model / Data split (issue 13): compile and assembly produce a Model that nothing writes
afterwards; everything a run changes -- joint-spring references, compliant-contact counters and
detection buffers -- lives in the Data of that run's solver, so one Model serves two runs at once."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import yaml

from mbsim.model.model import State
from mbsim.scene.spec import load_scene
from mbsim.simulate import prepare, run
from mbsim.solvers import get_solver


def ball_on_block() -> dict:
    """A sphere pressed into a box (compliant SDF contact) hanging from a torsion spring wound past
    half a turn: both kinds of per-run state."""
    return {
        "mbsim": 1,
        "name": "ball on block",
        "time": {"end": 0.02, "step": 1e-4},
        "bodies": [
            {"name": "block", "density": 1000, "position": [0, 0, -0.1],
             "shapes": [{"type": "box", "size": [1, 1, 0.2]}]},
            {"name": "ball", "density": 1000, "position": [0.01, 0.02, 0.097], "velocity": [0.3, 0, -0.5],
             "angular_velocity": [0, 0, 2.0], "shapes": [{"type": "sphere", "radius": 0.1}]},
        ],
        "joints": [{"name": "twist", "type": "cylindrical", "body1": "ground", "body2": "ball",
                    "point": [0.01, 0.02, 0.097], "axis": [0, 0, 1],
                    "spring": {"stiffness": 0.5, "damping": 0.0, "rest": -3.0}}],
        "contacts": [{"type": "compliant", "body1": "block", "body2": "ball", "stiffness": 1e6, "damping": 10,
                      "friction": {"static": 0.3, "dynamic": 0.2}}],
    }  # fmt: skip


@pytest.fixture
def scene_path(tmp_path):
    path = tmp_path / "ball.yaml"
    path.write_text(yaml.safe_dump(ball_on_block(), sort_keys=False), encoding="utf-8")
    return path


def _arrays(obj, prefix="") -> dict[str, np.ndarray]:
    """Every array reachable from the model's attributes (lists, dicts, objects one level down)."""
    out = {}
    for name, value in vars(obj).items():
        key = f"{prefix}{name}"
        if isinstance(value, np.ndarray):
            out[key] = value.copy()
        elif isinstance(value, (list, tuple)):
            for k, item in enumerate(value):
                if isinstance(item, np.ndarray):
                    out[f"{key}[{k}]"] = item.copy()
                elif hasattr(item, "__dict__") and not prefix:
                    out.update(_arrays(item, f"{key}[{k}]."))
        elif hasattr(value, "__dict__") and not prefix and not callable(value):
            out.update(_arrays(value, f"{key}."))
    return out


def test_the_model_is_frozen_after_compile_and_a_run_writes_nothing_into_it(scene_path, tmp_path):
    model, solver = prepare(load_scene(str(scene_path)))
    with pytest.raises(AttributeError, match="frozen"):
        model.q0 = model.q0 * 2
    before = _arrays(model)
    assert len(before) > 20 and any("pairs" in k for k in before)  # the contact pairs' arrays are watched too
    summary = run(load_scene(str(scene_path)), tmp_path / "out.h5", prepared=(model, solver))
    assert summary.status == "completed" and summary.steps == 200
    after = _arrays(model)
    assert after.keys() == before.keys()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    with h5py.File(tmp_path / "out.h5") as f:
        assert f["diagnostics/contacts/count"][()].max() > 0  # from the run's Data


def test_one_model_serves_two_runs_at_once(scene_path):
    """Two solvers of one model stepped in turn, from different states and at different steps, each
    give the trajectory and the contact counts they give alone (bit-equal)."""
    spec = load_scene(str(scene_path))
    model, first = prepare(spec)
    second = get_solver(spec, model)
    lifted = model.q0.copy()
    lifted[2] -= 0.05  # the second run's block starts 5 cm lower: no contact
    starts = (State(0.0, model.q0.copy(), model.v0.copy(), 0.0), State(0.0, lifted, model.v0.copy(), 0.0))
    steps = (1e-4, 2.5e-5)

    def alone(k: int):
        solver = get_solver(spec, model)
        state, counts = starts[k], []
        for _ in range(60):
            state, _, _ = solver.step(state, steps[k])
            solver.evaluate(state)
            counts.append(solver.data.contacts.count)
        return state, counts

    expected = [alone(0), alone(1)]
    states, counts = list(starts), [[], []]
    solvers = (first, second)
    for _ in range(60):
        for k, solver in enumerate(solvers):
            states[k], _, _ = solver.step(states[k], steps[k])
        for k, solver in enumerate(solvers):
            solver.evaluate(states[k])
        for k, solver in enumerate(solvers):  # read after both evaluated: a shared counter would show
            counts[k].append(solver.data.contacts.count)
    for k in range(2):
        np.testing.assert_array_equal(states[k].q, expected[k][0].q)
        np.testing.assert_array_equal(states[k].v, expected[k][0].v)
        assert counts[k] == expected[k][1]
    assert counts[0][0] > 0 and counts[1][0] == 0  # they differ: nothing was shared
