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
def bench(benchmark_module):
    return benchmark_module("run")


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


@pytest.mark.slow
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
        "## 5. Contact: a pile of spheres, Lemke against PGS",
        "### A pile of 27 spheres (PGS)",
        "### Lemke against PGS",
        "## 12. First run: every cache empty",
        "## 15. Adaptive steps: DOP853 against RK4",
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


def test_pile_scene_starts_apart_inside_the_box(bench, tmp_path):
    """The generated pile: n^3 spheres with the asked mass properties, no overlap at the start, all
    inside the box, and the one contact entry resolving to ground-sphere and sphere-sphere pairs."""
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import prepare

    spec = load_scene(str(bench.write_pile_scene(tmp_path, 3)))
    assert len(spec.bodies) == 27 and [b.name for b in spec.bodies][:2] == ["ball1", "ball2"]
    r, m = 0.05, 0.1
    body = spec.bodies[0]
    assert body.mass == pytest.approx(m)
    np.testing.assert_allclose(body.inertia.diagonal(), [0.4 * m * r * r] * 3, rtol=1e-12)
    centres = np.array([b.position for b in spec.bodies])
    gaps = np.linalg.norm(centres[:, None] - centres[None], axis=2) + np.eye(27)
    assert gaps.min() > 2 * r  # no two spheres overlap
    half = 0.5 * 3 * bench.PILE_SPACING
    assert np.all(np.abs(centres[:, :2]) + r < half) and np.all(centres[:, 2] - r > 0)
    assert spec.solver.method == "timestepping"
    model, solver = prepare(spec)
    pairs = model.contact_pairs
    ground = model.nbody
    entry = pairs.entry(np.array([ground, 0, 0, 5]), np.array([3, 1, 0, 26]))
    assert entry.tolist() == [0, 0, -1, 0]  # ground-ball, ball-ball, never a ball with itself
    assert solver.pgs["iterations"] == 100 and solver.pgs["warm_start"] is True
    with pytest.raises(ValueError, match="jitter"):
        bench.pile_scene(2, jitter=0.006)
    with pytest.raises(ValueError, match="n_side >= 1"):
        bench.pile_scene(0)


def test_contact_section_short_run(bench, tmp_path):
    """Section 5 on short runs: 27 spheres for 0.06 s (30 steps), the two LCP scenes for 0.05 s;
    the pile lands and stays in the box, every solver setting runs, the timers are taken off, and
    the section is reported."""
    import mbsim.solvers.numerics.cone as cone_module
    import mbsim.solvers.numerics.contact_lcp as contact_lcp_module
    import mbsim.solvers.timestepping as ts_module

    kernels = (contact_lcp_module.solve_cone, ts_module._schur_product, cone_module.cone_sweeps)
    pile = bench.bench_pile(3, t_end=0.06, measure_from=0.03, variant_steps=1, profile_steps=1, workdir=tmp_path)
    assert (contact_lcp_module.solve_cone, ts_module._schur_product, cone_module.cone_sweeps) == kernels
    assert pile.status == "completed", pile.message
    assert pile.n == 27 and len(pile.t) == 30 and int(pile.window.sum()) == 15
    assert pile.t[-1] == pytest.approx(0.06)
    assert np.all(pile.wall > 0) and np.isfinite(pile.s_per_step)
    # the bottom layer lands (1 cm above the floor: after about 0.045 s) and nothing leaves the box
    assert pile.touching[-1] > 0 and pile.sweeps[-1] > 0 and pile.lcp_rows[-1] % 3 == 0
    assert np.all(pile.escaped == 0) and pile.max_extent < 0.5 * pile.width
    assert pile.penetration.max() < 2e-3
    # the parts of the split are times inside the step and add up to it
    split = dict(pile.split())
    assert all(v >= 0 for k, v in split.items() if not k.startswith("the rest"))
    assert sum(split.values()) == pytest.approx(pile.s_per_step)
    assert np.all(pile.parts["kernel"] <= pile.parts["pgs"]) and np.all(pile.parts["pgs"] <= pile.parts["solve"])
    labels = [v.label for v in pile.variants]
    assert labels == [
        "50 sweeps",
        "100 sweeps",
        "200 sweeps",
        "500 sweeps (mbsim default)",
        "100 sweeps, no warm start",
    ]
    for v in pile.variants:
        assert len(v.s_per_step) == 1 and 1 <= v.sweeps[0] <= v.iterations and np.isfinite(v.dx)
    assert pile.variants[3].dx == 0.0  # the reference
    assert pile.profile_steps == 1 and pile.profile and pile.profile_total_s > 0

    lcp = bench.bench_lcp(repeats=1, t_end=0.05, workdir=tmp_path)
    assert [(r.scene, r.lcp) for r in lcp.runs] == [
        (scene, solver) for scene, _, _ in bench.LCP_SCENES for solver in ("pgs", "lemke")
    ]
    for r in lcp.runs:
        assert len(r.loop_s) == 1 and r.t_asked == pytest.approx(0.05)
        if r.lcp == "pgs" or r.scene.startswith("four-bar"):
            assert r.status == "completed", (r.scene, r.lcp, r.message)
            assert r.t_end == pytest.approx(0.05)
        else:  # Lemke may fail on the stack; then the failure is reported, not raised
            assert r.status == "completed" or "Lemke" in r.message
        assert r.diag_iterations.size == r.steps and r.lcp_iterations.size == r.lcp_steps.size
        assert r.centres.shape[0] == r.time.size and r.max_penetration < 1e-3
    four_pgs, four_lemke = lcp.pair("four-bar against a wall (2D)")
    t, last, worst = bench.lcp_difference(four_pgs, four_lemke)
    assert t == pytest.approx(0.05) and worst < 1e-6  # frictionless 2D: the same LCP, solved twice
    # nothing left behind in the work directory
    assert list(tmp_path.iterdir()) == []

    text = "\n".join(bench.contact_section(pile, lcp))
    assert "## 5. Contact: a pile of spheres, Lemke against PGS" in text
    assert "### A pile of 27 spheres (PGS)" in text and "says nothing about the target" in text
    assert "#### Where a step's time goes" in text and "PGS sweeps (compiled kernel" in text
    assert "| **100 sweeps** |" in text and "#### Profile" in text
    assert "### Lemke against PGS" in text and "| four-bar against a wall (2D) | lemke |" in text
    assert "| box stack (3D) | pgs | completed |" in text
    assert "Not run." in "\n".join(bench.contact_section(None, None))


@pytest.mark.slow
def test_events_section_quick_run(benchmark_module, tmp_path):
    """Section 11 on short runs: every row has its numbers, event_driven's impact times are exact
    to 1e-9 s on the ball and the ratio line is there; the figure is written."""
    events = benchmark_module("events")
    m = events.measure(quick=True)
    ball = {(r[0], r[1]): r for r in m["ball"]}
    assert all(np.isfinite(r[4]) for r in m["ball"])
    assert max(r[4] for r in m["ball"] if r[0] == "event_driven") < 1e-9
    assert min(r[4] for r in m["ball"] if r[0] == "timestepping") > 1e-6  # first order at impacts
    assert len(ball) == 4 and len(m["four_bar"]) == 3
    events.figure(m["curves"], tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 10_000


@pytest.mark.slow
def test_export_section_quick_run(benchmark_module):
    """Section 11 on a 1,001-row result: both outputs timed and sized, the bounds stated."""
    lines = benchmark_module("export").section(quick=True)
    text = "\n".join(lines)
    assert lines[0] == "## Export: `mbsim export` to .glb and .html"
    assert "| .glb (glTF 2.0 binary" in text and "| .html (the page" in text and "20 MB:" in text


@pytest.mark.slow  # ~1 s of benchmark scaffolding (CI runs it)
def test_recording_section_short_run(benchmark_module):
    """The recording section on one short case: both runs time the same steps, the ratio is theirs, the
    table and the verdict say it; a case that fails to load is reported in its row, not raised."""
    rec = benchmark_module("recording")
    cases = (("lagrange", "pendulum_2d.yaml", ("time.end=0.05",)), ("lagrange", "no_such_scene.yaml", ()))
    good, broken = rec.measure(1, cases=cases, log=lambda _: None)
    assert good.failure == "" and good.steps > 0
    assert good.every_step_s[0] > 0 and good.sparse_s[0] > 0
    assert good.ratio == pytest.approx(good.every_step_s[0] / good.sparse_s[0])
    assert broken.failure and not broken.every_step_s
    text = "\n".join(rec.markdown([good, broken], 1))
    assert text.startswith("## Recording: every step against every 100th")
    assert f"| lagrange | `scenes/pendulum_2d.yaml` (`time.end=0.05`) | {good.steps} |" in text
    assert "| lagrange | `scenes/no_such_scene.yaml` | - | - | - | - | - |" in text
    assert "Target: recording every step at most 1.3x recording every 100th" in text
    assert all((rec.SCENES / scene).is_file() for _, scene, _ in rec.CASES)


@pytest.mark.slow  # ~2 s of benchmark scaffolding (CI runs it)
def test_cold_start_section_short_run(benchmark_module):
    """The first-run section on one short case: the run and `mbsim validate` each go twice through a
    fresh process (an empty cache, then warm), CPU and wall are measured, and the section reports
    them with the targets' verdicts; a failing command is reported with its last error line."""
    cold = benchmark_module("cold_start")
    res = cold.measure(1, cases=(("lagrange", "pendulum_2d.yaml", ("time.end=0.05",)),), log=lambda _: None)
    (r,) = res.runs
    assert r.failure == "" and res.validate.failure == ""
    for t in (*r.cold, *r.warm, *res.validate.cold, *res.validate.warm):
        assert t.ok and t.cpu > 0 and t.wall > 0
    text = "\n".join(cold.markdown(res))
    assert text.startswith("## First run: every cache empty")
    assert "| lagrange | `scenes/pendulum_2d.yaml` (`time.end=0.05`) |" in text
    assert "first run <= 3 s CPU" in text and "within 1.5 s CPU of warm" in text and "Targets: a first run" in text
    assert "Target: `mbsim validate` of a small scene at most 0.3 s" in text
    assert "Not measured in this run" in text  # --install is off by default
    # every case of the full section is a shipped scene
    assert all((cold.SCENES / scene).is_file() for _, scene, _ in cold.CASES)

    failed = cold.timed([sys.executable, "-c", "import sys; sys.exit('boom')"], {}, ROOT)
    assert failed.code == 1 and failed.tail == "boom" and not failed.ok
    steps = [cold.Step("git clone", failed), cold.Step("pip install -e .", None)]
    assert cold.install_lines(steps)[-1] == "The install did not complete: no verdict."
    done = [cold.Step(label, cold.Timed(1.0, 2.0, 0)) for label in ("clone", "venv", "install", "run")]
    assert (
        "Targets: fresh clone, fresh venv, install and the flagship run at most 6 min wall"
        in cold.install_lines(done)[-1]
    )


def test_adaptive_loosest_rung_is_met_by_every_tighter_rung(benchmark_module):
    """The equal-accuracy tolerance: the loosest rung whose error, and every tighter rung's, is at most
    the accuracy asked (an error at one time is not monotone in the tolerance)."""
    adaptive = benchmark_module("adaptive")
    errors = {1e-6: 2.5e-5, 1e-7: 2.9e-4, 1e-8: 2.1e-5, 1e-9: 2.1e-6, 1e-10: 1.4e-7, 1e-11: 1.1e-8}
    ladder = [adaptive.Run(f"{tol:g}", (), tol=tol, error=err) for tol, err in errors.items()]
    assert adaptive.loosest(ladder, 9.2e-6).tol == 1e-9
    assert adaptive.loosest(ladder, 1.5e-7).tol == 1e-10
    assert adaptive.loosest(ladder, 1e-3).tol == 1e-6
    assert adaptive.loosest(ladder, 1e-9) is None
    # a loose rung that lands near the reference by chance is not chosen past a tighter one that misses
    lucky = [adaptive.Run("a", (), tol=1e-6, error=1e-7), adaptive.Run("b", (), tol=1e-8, error=1e-5)]
    assert adaptive.loosest(lucky, 1e-6) is None
    # a failed rung ends the search like a missed one
    ladder[-2].failure = "failed: boom"
    assert adaptive.loosest(ladder, 9.2e-6).tol == 1e-11


@pytest.mark.slow  # ~3 s of benchmark scaffolding (CI runs it)
def test_adaptive_section_short_run(benchmark_module):
    """The adaptive section on 0.5 s of the four-box chain: mbsim's DOP853 reference agrees with MuJoCo
    RK4 (an independent code) as MuJoCo's step shrinks, DOP853 spends at least its 12 evaluations per
    step, its error falls with the tolerance, every run is timed, and the section says all of it."""
    pytest.importorskip("mujoco")
    adaptive = benchmark_module("adaptive")
    res = adaptive.measure(1, 0.5, (1e-6, 1e-10), (2, 4), log=lambda _: None)
    assert res.t_end == 0.5 and res.step == 0.002 and res.shortened
    # MuJoCo RK4 converges to mbsim's reference: at least 2nd order (4x per halving) and within 1e-8 m
    (k2, e2), (k4, e4) = res.refined
    assert (k2, k4) == (2, 4) and e4 < 1e-8 and res.mujoco.error > 4 * e2 > 16 * e4
    assert res.refined_convergence == pytest.approx(e2, rel=0.5)  # h/2 to h/4 is mostly h/2's error
    assert res.rk4.steps == res.mujoco.steps == 250
    for run in (res.dop853, *res.ladder):
        assert run.failure == "" and 0 < run.steps < 250
        assert run.nfev >= 12 * run.steps  # DOP853: 12 stages per accepted step, first same as last
    loose, tight = res.ladder
    assert tight.error < 1e-3 * loose.error and tight.error < 1e-10
    for run in (res.rk4, res.dop853, res.rk4_short, res.dop853_short, *res.ladder):
        assert len(run.wall_s) == len(run.cpu_s) == 1 and run.wall_s[0] > 0
    assert res.rk4_short.steps == 5 and len(res.mujoco.wall_s) == len(res.mujoco.cpu_s) == 1

    text = "\n".join(adaptive.markdown(res))
    assert text.startswith("## Adaptive steps: DOP853 against RK4")
    assert "### Cost of a step: DOP853 against RK4" in text and "Target: a DOP853 step at most 3x" in text
    assert "| rk4 (as shipped) | 250 | 4" in text  # 4 evaluations per step
    assert "### Whole run at equal accuracy against MuJoCo RK4 (t = 0.5 s)" in text
    assert "| MuJoCo RK4, h = 0.002 | 250 |" in text and "| mbsim scipy:DOP853, rtol = atol = 1e-10 | " in text
    assert "At MuJoCo RK4's error at h = 0.002" in text and "At the issue's 1.5e-7 m" in text
