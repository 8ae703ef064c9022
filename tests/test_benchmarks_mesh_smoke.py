"""benchmarks/mesh_contact.py: its smallest quick piece (box-box) runs and is correct.

Correctness checks only; nothing here looks at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("mesh_contact")


def test_quick_box_box(bench, tmp_path):
    plan = dict(bench.QUICK, end={"box-box": 0.15}, window_small={"bb_a": 5, "bb_b": 20})
    with bench._cache_dir(tmp_path / "cache"):
        res = bench.bench_pair("box-box", plan, tmp_path)
    c, b, a = res.runs["c"], res.runs["b"], res.runs["a"]
    assert c.status == b.status == a.status == "completed"
    # the cube lands within the run: contact points found, the same by both field variants
    assert c.contact_steps > 0 and c.max_points > 0
    assert (b.steps, b.small_steps, b.contact_steps, b.max_points) == (
        c.steps,
        c.small_steps,
        c.contact_steps,
        c.max_points,
    )
    # the octree culls exactly: (b) and (c) take the same trajectory to the last bit
    assert bench.max_difference(b, c)[:2] == (0.0, 0.0)
    # the (a) window starts from a recorded state of (c) and is compared with it at common times
    assert a.t_offset > 0.0 and bench.max_difference(a, c)[2] >= 1
    assert a.steps == 5 and a.small_steps == 5
    assert res.totals["c"].kind == res.totals["b"].kind == "measured"
    assert res.totals["a"].kind == "projected (window)" and res.totals["a"].seconds > 0.0
    assert c.brute is not None and c.brute["per_point"] > 0.0
    table = bench.pair_table(res)
    rows = [line for line in table if line.startswith("| (")]
    assert [r.split("|")[1].strip() for r in rows] == ["(a) brute force", "(b) SDF", "(c) SDF + octree"]
    assert "(projected)" in rows[0] and "(projected)" not in rows[2]


def test_torus_cell_gives_128_nodes(bench):
    from mbsim.model.contact.sdf import _grid_for

    mesh = bench.torus_mesh((48, 24))
    cell = bench.torus_cell(mesh, 127)
    _, shape = _grid_for(np.asarray(mesh.bounds), cell, bench.TORUS_PADDING)
    assert int(max(shape)) == 128
