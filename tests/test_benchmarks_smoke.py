"""The benchmark suite (benchmarks/run.py): its chain-scene generator is correct, and --quick runs.

Correctness checks only; nothing here looks at a time.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    """benchmarks/run.py imported by path (the benchmarks folder is not an installed package)."""
    name = "mbsim_benchmarks_run"
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)


def test_chain_scene_starts_consistent_and_keeps_its_joints(bench, tmp_path):
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import run

    path = bench.write_chain_scene(tmp_path, 3, steps=20, every=1)
    spec = load_scene(str(path))
    assert [j.type for j in spec.joints] == ["revolute"] * 3
    summary = run(spec, tmp_path / "chain.h5")
    assert summary.status == "completed", summary.message
    assert summary.steps == 20
    # the generated start satisfies the joints, so nothing was assembled
    assert summary.assembly == []
    assert summary.max_position_violation < 1e-10
    with h5py.File(tmp_path / "chain.h5", "r") as f:
        q = f["q"][...]
        z = f["bodies/link3/position"][:, 2]
    # the chain is released off vertical, so it swings (and falls towards vertical)
    assert np.max(np.abs(q[-1] - q[0])) > 1e-6
    assert z[-1] < z[0]


def test_chain_scene_geometry(bench, tmp_path):
    from mbsim.scene.spec import load_scene

    tilt = 0.1
    spec = load_scene(str(bench.write_chain_scene(tmp_path, 4, tilt=tilt)))
    down = np.array([0.0, np.sin(tilt), -np.cos(tilt)])
    for k, body in enumerate(spec.bodies):
        np.testing.assert_allclose(body.position, (2 * k + 1) * 0.25 * down, atol=1e-15)
    # solid 1 kg box 0.05 x 0.05 x 0.5 m: (b^2 + c^2) / 12, (a^2 + c^2) / 12, (a^2 + b^2) / 12
    expected = np.array([0.0025 + 0.25, 0.0025 + 0.25, 0.0025 + 0.0025]) / 12
    np.testing.assert_allclose(spec.bodies[0].inertia.diagonal(), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="n >= 1"):
        bench.chain_scene(0)


def test_quick_run_writes_a_report(bench, tmp_path, capsys):
    out = tmp_path / "BENCHMARKS.md"
    assert bench.main(["--quick", "--sizes", "3", "--output", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    for heading in (
        "## Machine",
        "## 1. Four-box chain",
        "## 2. N-link revolute chain",
        "## 3. Slider-crank through singular positions",
        "## 4. Four-box chain with the variational integrator",
    ):
        assert heading in text
    assert "| 3 | 18 | 15 | dense |" in text
    assert "numpy" in text and "scipy" in text
    assert "wrote" in capsys.readouterr().out


def test_slider_reference_is_the_tests_reference(bench):
    """The benchmarks' private copy of the one-coordinate slider-crank agrees with the tests' original."""
    name = "mbsim_test_singular_for_bench"
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "solvers" / "test_singular.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    t = np.linspace(0.0, 10.0, 501)
    np.testing.assert_allclose(bench._slider_reference(t), module.slider_crank_reference(t), rtol=0, atol=1e-12)
    assert bench._slider_reference(np.zeros(1))[0] == pytest.approx(2.0)


def test_slider_section_short_run(bench, tmp_path):
    """Section 3 on a 0.04 s run (20 steps), one repeat: every method and case runs and is reported."""
    res = bench.bench_slider(repeats=1, t_end=0.04, workdir=tmp_path)
    assert res.t_end == pytest.approx(0.04) and res.repeats == 1
    assert [r.label for r in res.methods] == [label for label, _ in bench.SLIDER_METHODS]
    assert [r.label for r in res.paper] == [label for label, _, _ in bench.SLIDER_PAPER_CASES]
    for r in (*res.methods, *res.paper):
        assert r.status == "completed", (r.label, r.message)
        assert r.steps == 20 and r.t_end == pytest.approx(0.04)
        assert len(r.loop_s) == 1 and r.loop_s[0] > 0
        assert r.max_slider_error < 1e-6, r.label  # 20 rk4 steps of 0.002 s away from any singular position
        assert r.max_position_violation < 1e-8, r.label
        assert r.off_reference_s is None, r.label
    # the options really reached the solvers: the swarm's and the KKT's diagnostics
    pso, kkt = res.get("gauss:pso"), res.get("gauss:kkt")
    assert pso.diagnostics["iterations"].shape == (20,) and np.all(pso.diagnostics["iterations"] >= 1)
    assert set(np.unique(pso.diagnostics["optimizer_result"])) <= {2.0, 3.0}
    assert np.all(kkt.diagnostics["optimizer_result"] == 0)
    assert "optimizer_result" not in res.get("lagrange").diagnostics
    assert res.paper[0].options == "mu=10, omega=1, projection off"
    # nothing left behind in the work directory
    assert list(tmp_path.iterdir()) == []

    text = "\n".join(bench.slider_section(res))
    assert "## 3. Slider-crank through singular positions" in text
    assert "shortened to 0.04 s" in text
    for label in ("lagrange", "null_space", "gauss:kkt", "gauss:slsqp", "gauss:pso", "augmented_lagrangian"):
        assert f"| {label} |" in text
    assert "| augmented_lagrangian case 2 | mu=5, omega=3, projection off | completed | 0.040 |" in text
    assert text.count("| never |") == len(bench.SLIDER_PAPER_CASES)
    assert "lagrange per step" in text and "gauss:kkt per step" in text
    assert f"Exudyn takes {bench.SLIDER_EXUDYN_S:g} s" in text and "not measured" in text
    assert "Swarm iterations per step" in text and "the local refinement (3)" in text
    assert "Not run." in "\n".join(bench.slider_section(None))


def test_slider_messages_are_shortened(bench):
    message = "step 2798, t = 5.594 s: the augmented Lagrangian multiplier iteration did not converge | " + "x" * 200
    short = bench._short(message, 60)
    assert short.startswith("the augmented Lagrangian") and len(short) == 60 and short.endswith("…")
    assert "|" not in short


def test_variational_section_short_run(bench, tmp_path):
    """Section 4 on short runs (0.1 s timed, 0.2 s long, 0.1 s at step 0.001): every run completes
    with its constraints at round-off, and the section is reported."""
    res = bench.bench_variational(repeats=1, t_end=0.1, long_t_end=0.2, fine_t_end=0.1, workdir=tmp_path)
    assert res.t_end == pytest.approx(0.1) and res.repeats == 1
    assert [r.label for r in res.timed] == ["variational", "lagrange + rk4"]
    assert [r.label for r in res.long] == ["variational", "lagrange + rk4"]
    runs = (*res.timed, res.every_step, *res.long, res.fine)
    for r in runs:
        assert r.status == "completed", (r.label, r.message)
        assert r.max_position_violation < 1e-12, r.label
        assert r.max_quaternion_norm_error < 1e-12, r.label
        assert len(r.loop_s) == 1 and r.loop_s[0] > 0
        assert r.max_energy_error() < 1e-4, r.label
    assert [r.steps for r in runs] == [50, 50, 50, 100, 100, 100]
    assert res.fine.step == pytest.approx(0.001) and res.fine.t_end == pytest.approx(0.1)
    # the methods really differ: variational records its Newton passes (>= 2: one solve and the check)
    assert res.every_step.iterations.shape == (50,) and np.all(res.every_step.iterations >= 2)
    assert res.timed[0].energy_error.max() != res.timed[1].energy_error.max()
    # the step-0.001 run shares the step-0.002 run's recorded times over its 0.1 s
    rows = bench.variational_scaling(res)
    assert [row[0] for row in rows] == pytest.approx([0.005, 0.01, 0.025, 0.05, 0.1])
    assert rows[-1][1] > rows[-1][2] > 0  # the smaller step has the smaller energy error
    assert res.window == pytest.approx(0.05)
    # nothing left behind in the work directory
    assert list(tmp_path.iterdir()) == []

    text = "\n".join(bench.variational_section(res))
    assert "## 4. Four-box chain with the variational integrator" in text
    assert "shortened to 0.1 s" in text
    assert "| variational |" in text and "| lagrange + rk4 |" in text
    assert "per step vs lagrange + rk4" in text and "Newton passes per step" in text
    assert "### Long runs" in text and "max over the last 0.05 s" in text
    assert "### Energy error against the step (h^2)" in text and "h^2 scaling gives 4x" in text
    assert "Exudyn" in text and "not measured" in text
    assert "Not run." in "\n".join(bench.variational_section(None))
