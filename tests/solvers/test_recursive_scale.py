"""Method ``recursive`` at scale: the memory a run's buffers take grows linearly with the links.

A 3,000-link chain once peaked at 4 GB: the compiled step carried the body-coordinate model's dense
constraint Jacobian (nc x nv), minv_jt and S (nc x nc), and the result writer kept 18,000 datasets
open. Measured here (CPython 3.11, numpy 2.4, h5py 3.16): building the solver of a 400-link chain
traces 6 kB per link beside the recorded rows' buffer (16 MB at most), where the dense matrices
alone were 108 MB.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import h5py
import numpy as np
import pytest

from mbsim.model.compile import compile_model
from mbsim.scene.spec import load_scene
from mbsim.simulate import run
from mbsim.solvers import recursive


@pytest.fixture
def chain(benchmark_module):
    """``chain(directory, n, **kwargs)``: the scene of benchmarks/chain.py's N-link chain under recursive."""

    def make(directory: Path, n: int, **kwargs):
        path = benchmark_module("chain").write_chain_scene(directory, n, **kwargs)
        return load_scene(str(path), ["solver.method=recursive"])

    return make


def _traced_create(spec) -> tuple[recursive.Solver, int]:
    """The solver of ``spec`` and the peak memory (bytes) tracemalloc saw while creating it."""
    model = compile_model(spec)
    tracemalloc.start()
    try:
        solver = recursive.create(model, spec.ctx, spec.solver)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return solver, peak


def test_the_compiled_buffers_grow_linearly_with_the_links(chain, tmp_path):
    """N = 400 (nc = 2,000 joint equations, 2,400 body velocities): no buffer of nc x nv or nc x nc
    entries, and at most 20 kB per link beside the rows' buffer (measured: 6 kB)."""
    (tmp_path / "warm").mkdir()
    _traced_create(chain(tmp_path / "warm", 3))  # first use: imports and caches, not the buffers
    n = 400
    solver, peak = _traced_create(chain(tmp_path, n))
    assert solver.block_stepping, solver.compiled_reason
    flat, _, rows, *_ = solver._compiled
    data, work = solver.data.flat, solver.data.tree
    assert (flat.nc, flat.nv) == (5 * n, 6 * n)
    assert data.J.size == data.minv_jt.size == data.S.size == 0  # the joint equations go row by row
    assert work.jrows.shape == (flat.nc, 12)
    assert rows.nbytes <= recursive.ROWS_BYTES
    assert peak - rows.nbytes < 20_000 * n, f"{(peak - rows.nbytes) / n / 1e3:.1f} kB per link"


def test_a_result_flushed_every_few_rows_equals_one_flushed_once(chain, tmp_path, monkeypatch):
    """The writer closes the per-body and per-joint datasets after a flush and appends to them
    through HDF5's own calls later (mbsim.output.hdf5): the same file as one written in one flush."""
    assert run(chain(tmp_path, 4, steps=40, every=1), tmp_path / "once.h5").status == "completed"
    from mbsim.output import hdf5

    init = hdf5.ResultWriter.__init__

    def often(self, *args, **kwargs):
        init(self, *args, **{**kwargs, "flush_rows": 7})

    monkeypatch.setattr(hdf5.ResultWriter, "__init__", often)
    summary = run(chain(tmp_path, 4, steps=40, every=1), tmp_path / "often.h5")
    assert summary.status == "completed" and summary.recorded == 41
    with h5py.File(tmp_path / "once.h5") as a, h5py.File(tmp_path / "often.h5") as b:
        paths: list[str] = []
        a.visititems(lambda name, obj: paths.append(name) if isinstance(obj, h5py.Dataset) else None)
        assert "bodies/link3/position" in paths and "joints/hinge2/reaction_body" in paths
        for path in paths:
            if path == "scene":
                continue
            assert b[path].shape == a[path].shape, path
            np.testing.assert_array_equal(b[path][()], a[path][()], err_msg=path)
