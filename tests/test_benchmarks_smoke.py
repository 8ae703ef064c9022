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
    for heading in ("## Machine", "## 1. Four-box chain", "## 2. N-link revolute chain"):
        assert heading in text
    assert "| 3 | 18 | 15 | dense |" in text
    assert "numpy" in text and "scipy" in text
    assert "wrote" in capsys.readouterr().out
