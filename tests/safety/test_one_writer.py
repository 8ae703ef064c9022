"""CONTRACT §4, one writer: a second run, compare or scene that targets a file a live mbsim
process writes stops before touching it (exit 2, naming the file and the process); the first
run's file is intact and finishes normally. Reproduces issue 12's item 1: the second run used
to truncate the file before failing to lock it, leaving the first one's groups unreadable."""

from __future__ import annotations

import signal
from pathlib import Path

import h5py
import numpy as np
import pytest
from cli_process import CHAIN, PENDULUM, root_attrs, run_mbsim


def test_a_second_run_is_refused_and_the_first_file_survives(tmp_path: Path, background) -> None:
    out = tmp_path / "same.h5"
    first = background("run", CHAIN, "-o", out, "--set", "time.end=1000", "--quiet")
    rows = first.wait_rows(out, 2)

    code, stdout, stderr = run_mbsim("run", PENDULUM, "-o", out)
    assert code == 2, stderr
    assert "output error" in stderr and str(out) in stderr
    assert f"process {first.proc.pid}" in stderr  # names the process that writes it
    assert "Traceback" not in stderr and stdout == ""

    first.wait_rows(out, rows + 1)  # the first run goes on writing its own file
    first.signal(signal.SIGINT)
    code, _, stderr = first.finish()
    assert code == 130, stderr
    with h5py.File(out, "r") as f:  # every group opens: nothing was truncated under the writer
        assert f.attrs["scene_name"] == "four-box chain"
        assert f.attrs["status"] == "failed"
        t = f["time"][:]
        assert len(t) > rows and np.all(np.diff(t) > 0)
        assert "four-box chain" in f["scene"][()].decode()
        assert len(f["bodies/box4/position"]) == len(t)
        assert len(f["diagnostics/energy/total"]) == len(t)
        assert f["bodies/box1"].attrs["mass"] > 0


@pytest.mark.slow
def test_compare_and_a_scene_output_are_refused_too(tmp_path: Path, background) -> None:
    outdir = tmp_path / "cmp"
    out = outdir / "lagrange.h5"  # the file compare would write for the solver 'lagrange'
    first = background("run", CHAIN, "-o", out, "--set", "time.end=1000", "--quiet")
    first.wait_rows(out, 1)

    code, _, stderr = run_mbsim("compare", CHAIN, "--solvers", "lagrange", "-o", outdir, "--set", "time.end=0.01")
    assert code == 2, stderr
    assert "is being written by" in stderr and "lagrange.h5" in stderr
    assert not (outdir / "compare.json").exists()  # refused before anything ran

    scene = tmp_path / "scene.yaml"
    scene.write_text(PENDULUM.read_text().replace("mbsim: 1", f"mbsim: 1\noutput: {{file: {out}}}", 1))
    code, _, stderr = run_mbsim("run", scene)
    assert code == 2 and "is being written by" in stderr

    first.signal(signal.SIGTERM)
    assert first.finish()[0] == 143
    assert root_attrs(out)["message"] == "interrupted (SIGTERM)"
    code, _, stderr = run_mbsim("run", PENDULUM, "-o", out, "--quiet")  # free again: a result of ours
    assert code == 0, stderr
    assert root_attrs(out)["scene_name"] == "pendulum 2d"
