"""Compliant contacts (papers/sdf-octree-contact-dynamics.txt): the Hertz force from the
master's signed distance field, against the elastic-impact outcome and the friction law."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mbsim.model.contact.compliant import friction_coefficient

SCENES = Path(__file__).resolve().parents[2] / "scenes"


def test_blocks_elastic_velocities_after_impact(run_scene):
    """The paper's validation: 1 kg at -5 m/s into 4 kg at rest, elastic: +3 and -2 m/s after
    (measured within 0.02 %); momentum conserved throughout."""
    _, res = run_scene(SCENES / "blocks_elastic.yaml")
    v1 = res["bodies/block1/velocity"][:, 0]
    v2 = res["bodies/block2/velocity"][:, 0]
    assert v1[-1] == pytest.approx(3.0, rel=5e-3)
    assert v2[-1] == pytest.approx(-2.0, rel=5e-3)
    momentum = 1.0 * v1 + 4.0 * v2
    assert np.max(np.abs(momentum + 5.0)) < 1e-9
    assert np.max(np.abs(res["bodies/block1/velocity"][:, 1:])) < 1e-9  # a head-on impact stays head-on


def test_blocks_elastic_under_every_smooth_method(run_scene):
    for method in ("null_space", "variational"):
        _, res = run_scene(SCENES / "blocks_elastic.yaml", [f"solver.method={method}"])
        assert res["bodies/block1/velocity"][-1, 0] == pytest.approx(3.0, rel=5e-3), method


def test_friction_law_of_eq_38():
    mu_s, mu_d, v_s, v_d = 0.3, 0.2, 5e-3, 1e-2
    v = np.array([0.0, v_s / 2, v_s, (v_s + v_d) / 2, v_d, 1.0])
    mu = friction_coefficient(v, mu_s, mu_d, v_s, v_d)
    np.testing.assert_allclose(mu[[0, 2, 4, 5]], [0.0, mu_s, mu_d, mu_d], atol=1e-15)
    assert 0.0 < mu[1] < mu_s and mu_d < mu[3] < mu_s
    # smooth: continuous at the switch speeds
    for x in (v_s, v_d):
        left, right = friction_coefficient(np.array([x - 1e-12, x + 1e-12]), mu_s, mu_d, v_s, v_d)
        assert abs(left - right) < 1e-9


def test_compliant_contact_needs_one_solid_body_on_each_side(run_scene, tmp_path):
    from click.testing import CliRunner

    from mbsim.cli.main import cli

    result = CliRunner().invoke(
        cli, ["validate", str(SCENES / "blocks_elastic.yaml"), "--set", "contacts[0].body2=ground"]
    )
    assert result.exit_code == 2
    assert "contacts[0].body2" in result.output


def test_octree_culling_gives_the_same_forces_as_querying_every_point(tmp_path, monkeypatch):
    """A mesh sphere (642 sample points, above the octree threshold) pressed into a box: the
    culled evaluation equals the brute-force one."""
    import yaml

    from mbsim.model.contact import compliant
    from mbsim.model.dynamics import applied_forces
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    scene = {
        "mbsim": 1,
        "name": "ball on block",
        "time": {"end": 0.01, "step": 1e-4},
        "bodies": [
            {"name": "block", "density": 1000, "position": [0, 0, -0.1],
             "shapes": [{"type": "box", "size": [1, 1, 0.2]}]},
            {"name": "ball", "density": 1000, "position": [0.01, 0.02, 0.097],
             "orientation": {"axis_angle": {"axis": [1, 2, 3], "angle": 0.4}}, "velocity": [0.3, 0, -0.5],
             "shapes": [{"type": "sphere", "radius": 0.1}]},
        ],
        "contacts": [{"type": "compliant", "body1": "block", "body2": "ball", "stiffness": 1e6, "damping": 10,
                      "friction": {"static": 0.3, "dynamic": 0.2}}],
    }  # fmt: skip
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    model, solver = prepare(load_scene(str(path)))
    pair = model.forces[-1].pairs[0]
    assert len(pair.points) > compliant.OCTREE_ABOVE and pair.tree is not None
    frames = model.frames(model.q0, model.v0)
    culled = applied_forces(model, solver.data, frames, model.v0, 0.0)
    assert solver.data.contacts.count > 0  # the ball is pressed in
    monkeypatch.setattr(compliant, "OCTREE_ABOVE", 10**9)
    brute = applied_forces(model, solver.data, frames, model.v0, 0.0)
    np.testing.assert_allclose(culled.conservative, brute.conservative, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(culled.nonconservative, brute.nonconservative, rtol=1e-12, atol=1e-9)


def test_surface_samples_add_points_and_keep_the_elastic_outcome(run_scene):
    _, res = run_scene(SCENES / "blocks_elastic.yaml", ["contacts[0].samples=200"])
    assert res["bodies/block1/velocity"][-1, 0] == pytest.approx(3.0, rel=5e-3)
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    model, _ = prepare(load_scene(str(SCENES / "blocks_elastic.yaml"), ["contacts[0].samples=200"]))
    assert len(model.forces[-1].pairs[0].points) > 8 + 100  # vertices plus the spread points
