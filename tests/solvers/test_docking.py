"""The rendezvous and docking of papers/sdf-octree-contact-dynamics.txt §4.3 (scenes/docking.yaml):
the latches capture, linear momentum is conserved through the whole run (every force is
internal), and afterwards both craft move at total momentum / total mass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

SCENES = Path(__file__).resolve().parents[2] / "scenes"
BODIES = ("active_craft", "active_ring", "passive_craft", "latch1", "latch2", "latch3")
MASSES = {"active_craft": 7.9e3, "active_ring": 47.5, "passive_craft": 8.6e3, "latch1": 0.063, "latch2": 0.063,
          "latch3": 0.063}  # fmt: skip
REST_RADIUS = 0.38  # latch centres at rest
PUSHED_IN = 0.355  # a latch centre this far in has been pushed aside by its catch

pytestmark = pytest.mark.slow  # the full 8 s docking: 80 s of simulation (CI runs it)


@pytest.fixture(scope="module")
def docking(simulate, tmp_path_factory):
    return simulate(SCENES / "docking.yaml", (), tmp_path_factory.mktemp("docking"))


def latch_radius(res, k: int) -> np.ndarray:
    return np.linalg.norm(res[f"bodies/latch{k}/position"][:, 1:], axis=1)


def capture_time(res) -> float:
    """The first time after which every latch, pushed in by its catch, is back out behind it."""
    t = res.time
    times = []
    for k in (1, 2, 3):
        r = latch_radius(res, k)
        pushed = np.nonzero(r < PUSHED_IN)[0]
        assert len(pushed), f"latch {k} was never pushed aside"
        back = pushed[-1] + np.nonzero(r[pushed[-1] :] > REST_RADIUS - 0.005)[0]
        assert len(back), f"latch {k} never snapped back out"
        times.append(t[back[0]])
    return max(times)


def test_latches_capture_and_hold(docking):
    _, res = docking
    t = res.time
    t_capture = capture_time(res)
    assert 2.0 < t_capture < 3.5
    # after capture the ring faces stay together: within the latch play (0.5 mm) plus contact
    # deflections, never apart again
    face_gap = res["bodies/passive_craft/position"][:, 0] - 5.0 - (res["bodies/active_ring/position"][:, 0] + 0.02)
    after = t > t_capture
    assert np.all(np.abs(face_gap[after]) < 2.5e-3)
    settled = t > t_capture + 0.3  # the latches ring on their springs right after snapping out
    for k in (1, 2, 3):
        assert np.all(np.abs(latch_radius(res, k)[settled] - REST_RADIUS) < 2e-3)


def test_momentum_is_conserved_and_the_craft_move_together(docking):
    _, res = docking
    momentum = sum(MASSES[b] * res[f"bodies/{b}/velocity"] for b in BODIES)
    p0 = momentum[0]
    assert p0[0] == pytest.approx(-344.0)
    assert np.max(np.linalg.norm(momentum - p0, axis=1)) / np.linalg.norm(p0) < 1e-6
    common = p0[0] / sum(MASSES.values())  # -20.79 mm/s
    t = res.time
    last = t > t[-1] - 0.5
    # after capture both move at the common velocity, with a vibration about it (the contacts are
    # undamped, as the paper's) that dies away: the mean over the last 0.5 s is the common velocity
    for body in ("active_craft", "passive_craft", "active_ring"):
        assert res[f"bodies/{body}/velocity"][last, 0].mean() == pytest.approx(common, rel=5e-3), body
    relative = res["bodies/active_craft/velocity"][:, 0] - res["bodies/passive_craft/velocity"][:, 0]
    t_capture = capture_time(res)
    early = (t > t_capture + 0.2) & (t < t_capture + 0.7)
    assert np.abs(relative[last]).max() < 0.5 * np.abs(relative[early]).max()
    # no tumbling: the head-on docking stays head-on
    assert np.abs(res["bodies/passive_craft/velocity"][:, 1:]).max() < 1e-4


def test_energy_and_contact_diagnostics(docking):
    summary, res = docking
    assert summary.energy_drift < 0.05  # total - work: what the integrator and the stick limiter lose
    for k in (1, 2, 3):
        classes = res[f"diagnostics/contacts/latch{k}_catch/class_counts"]
        count = res[f"diagnostics/contacts/latch{k}_catch/count"]
        np.testing.assert_array_equal(classes.sum(axis=1), count)
        assert count.max() > 0
    assert res["diagnostics/contacts/rings/count"].max() > 50  # the faces meet over their area
