"""CONTRACT §4, signals: SIGINT, SIGTERM and SIGHUP end a run, a compare or a sweep the same way
at any moment: the current step finishes, the file closes with status failed and the message
``interrupted (SIGNAME)``, the exit code is 128 + N, never a traceback. Only SIGKILL leaves
``running``, and ``mbsim info`` then says the run died. Reproduces issue 12's item 5 (SIGTERM
and SIGHUP left ``running`` with 0 steps; SIGINT during compilation was lost or a traceback)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from cli_process import CHAIN, PENDULUM, root_attrs, run_mbsim
from quick_loop import quick

SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]


def assert_truthful(path: Path, sig: int) -> int:
    """The file says the run failed because of ``sig``, with whole rows; returns the rows."""
    with h5py.File(path, "r") as f:
        assert f.attrs["status"] == "failed"
        assert f.attrs["message"] == f"interrupted ({signal.Signals(sig).name})"
        t = f["time"][:]
        assert len(f["q"]) == len(f["v"]) == len(t)
        assert np.all(np.diff(t) > 0)
        if len(t):
            assert f.attrs["steps"] >= len(t) - 1
        return len(t)


@pytest.mark.parametrize(("sig", "code"), quick(SIGNALS, keep=0), ids=lambda v: getattr(v, "name", str(v)))
def test_a_signal_during_the_run(tmp_path: Path, background, sig: int, code: int) -> None:
    out = tmp_path / "run.h5"
    run = background("run", CHAIN, "-o", out, "--set", "time.end=1000", "--quiet")
    rows = run.wait_rows(out, 2)
    run.signal(sig)
    exit_code, stdout, stderr = run.finish(timeout=30)
    assert exit_code == code, stderr
    assert "Traceback" not in stderr
    assert f"interrupted ({signal.Signals(sig).name})" in stderr
    assert "status     failed: interrupted" in stdout  # the summary says it too
    assert assert_truthful(out, sig) >= rows


@pytest.mark.slow
# four moments: interpreter start, imports, scene loading and set-up, the first steps
@pytest.mark.parametrize("delay", [0.0, 0.4, 1.2, 3.0])
@pytest.mark.parametrize(("sig", "code"), SIGNALS, ids=lambda v: getattr(v, "name", str(v)))
def test_a_signal_at_any_moment_of_start_up(tmp_path: Path, background, sig: int, code: int, delay: float) -> None:
    """From interpreter start through imports, scene loading, set-up and the first steps."""
    out = tmp_path / "run.h5"
    run = background("run", CHAIN, "-o", out, "--quiet", "--set", "time.end=3000")  # ~30 s of stepping
    time.sleep(delay)
    run.signal(sig)
    exit_code, _, stderr = run.finish(timeout=60)
    if delay == 0.0 and exit_code == -sig:  # it came before the interpreter ran a line of Python:
        return  # the default action ended the process, which a shell reports as 128 + N as well
    if delay == 0.0 and sig == signal.SIGINT and "init_import_site" in stderr:
        return  # Python's own SIGINT handler, while it imports `site` before any of mbsim runs
    assert exit_code == code, stderr
    assert "Traceback" not in stderr
    if out.exists():  # before the scene is loaded there is no file yet; after, it tells the truth
        assert_truthful(out, sig)


@pytest.mark.slow
def test_compare_ends_on_sigterm_with_truthful_files(tmp_path: Path, background) -> None:
    outdir = tmp_path / "cmp"
    run = background(
        "compare", CHAIN, "--solvers", "lagrange,null_space", "-o", outdir, "--set", "time.end=1000", "--quiet"
    )
    run.wait_rows(outdir / "lagrange.h5", 1)
    run.signal(signal.SIGTERM)
    exit_code, stdout, stderr = run.finish(timeout=60)
    assert exit_code == 143, stderr
    assert "Traceback" not in stderr
    assert_truthful(outdir / "lagrange.h5", signal.SIGTERM)
    assert not (outdir / "null_space.h5").exists()  # skipped, not started
    data = json.loads((outdir / "compare.json").read_text())
    assert data["interrupted"] is True
    assert [r["status"] for r in data["rows"]] == ["failed", "skipped"]


@pytest.mark.slow
def test_sigkill_leaves_running_and_info_says_the_run_died(tmp_path: Path, background) -> None:
    out = tmp_path / "killed.h5"
    run = background("run", CHAIN, "-o", out, "--set", "time.end=1000", "--quiet")
    run.wait_rows(out, 1)
    # rows can show while the writer is still inside that flush (the file is not SWMR); a
    # SIGKILL in the middle of a flush leaves metadata half-written, which no format can undo
    # without SWMR: kill between two flushes (they come every 2 s)
    time.sleep(0.5)
    run.kill()
    assert root_attrs(out)["status"] == "running"
    code, stdout, stderr = run_mbsim("info", out)
    assert code == 0, stderr
    assert "no live process is writing it" in stdout
    code, stdout, _ = run_mbsim("info", out, "--json")
    info = json.loads(stdout)
    assert info["live"] is False and info["file_status"] == "running" and info["status"].startswith("died")
    # a dead run's file is an mbsim result: a new run may overwrite it
    code, _, stderr = run_mbsim("run", PENDULUM, "-o", out, "--quiet")
    assert code == 0, stderr


@pytest.mark.slow
def test_verify_ends_on_sigterm_with_truthful_files(tmp_path: Path, background) -> None:
    """mbsim verify: the run under way closes its file as interrupted, the rest are not started, the
    JSON says interrupted, exit 143."""
    outdir = tmp_path / "verify"
    run = background("verify", "A01", "--json", "-o", outdir, "--quiet")  # 2000 s of pendulum: ~20 s per method
    run.wait_rows(outdir / "A01" / "lagrange.h5", 1)
    run.signal(signal.SIGTERM)
    exit_code, stdout, stderr = run.finish(timeout=60)
    assert exit_code == 143, stderr
    assert "Traceback" not in stderr
    assert_truthful(outdir / "A01" / "lagrange.h5", signal.SIGTERM)
    assert not (outdir / "A01" / "null_space.h5").exists()  # not started
    data = json.loads(stdout)
    assert data["interrupted"] is True
    assert [(r["method"], r["outcome"]) for r in data["rows"]] in ([], [("lagrange", "fail")])
