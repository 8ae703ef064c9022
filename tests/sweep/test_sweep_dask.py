"""``mbsim sweep`` on real Dask clusters, all on 127.0.0.1: an embedded two-worker LocalCluster,
an external ``dask scheduler`` with two ``dask worker`` processes started here, a worker killed
mid-sweep, Ctrl-C then a rerun, resume, retries of a failing case, and ``--assert``.

Cases are pendulum runs of at most a few thousand steps; every cluster and subprocess is torn
down by its fixture or ``finally`` even when a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import psutil
import pytest
from click.testing import CliRunner

from mbsim.cli.main import cli
from mbsim.scene.spec import load_scene
from mbsim.simulate import run as simulate_run

SCENES = Path(__file__).resolve().parents[2] / "scenes"
PENDULUM = SCENES / "pendulum_2d.yaml"
# six cases: two steps x three start angles, 0.3 s each
SIX = ["--set", "time.end=0.3", "--param", "time.step=0.01,0.02", "--param", "parameters.theta0=linspace(0.5,1.5,3)"]
STEMS = [f"step-{h}_theta0-{a}.h5" for h in ("0.01", "0.02") for a in ("0.5", "1", "1.5")]
# cases of about one and a half seconds each (98,304 compiled steps of 2^-14 s, exact in binary,
# a row every 128), for killing and interrupting mid-sweep: long enough that a worker killed
# 0.6 s after a case finished is certainly inside its next case
SLOW = ["--set", "time.end=6", "--set", "time.step=6.103515625e-05", "--set", "output.every=128"]
SLOW_STEPS = 98304
# Cases of ~2.5 s each (compiled), so that a worker killed 0.6 s after the first case ends is mid-case.
LONG = ["--set", "time.end=24", "--set", "time.step=6.103515625e-05", "--set", "output.every=512"]
LONG_STEPS = 4 * SLOW_STEPS


def sweep(*args: object):
    return CliRunner().invoke(cli, ["sweep", *(str(a) for a in args)], catch_exceptions=False)


def table(outdir: Path) -> dict:
    return json.loads((outdir / "sweep.json").read_text(encoding="utf-8"))


def comparable(row: dict) -> dict:
    """A row without what depends on the machine's timing or the worker that ran it."""
    return {k: v for k, v in row.items() if k not in ("wall_time_s", "us_per_step", "worker")}


def copy_results(outdir: Path, target: Path) -> Path:
    """The result files of a sweep copied into a new directory (tests that rerun work on copies)."""
    target.mkdir()
    for p in outdir.glob("*.h5"):
        target.joinpath(p.name).write_bytes(p.read_bytes())
    return target


def file_ids(outdir: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in outdir.glob("*.h5")}


# ----------------------------------------------------------------------------- the local cluster


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    outdir = tmp_path_factory.mktemp("sweep") / "local"
    result = sweep(PENDULUM, *SIX, "--workers", 2, "-o", outdir, "--format", "json")
    return result, outdir


@pytest.mark.slow
def test_local_cluster_runs_six_cases_into_six_files(local_sweep) -> None:
    result, outdir = local_sweep
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == table(outdir)
    assert data["cluster"] == "a local Dask cluster of 2 worker processes"
    assert sorted(p.name for p in outdir.glob("*.h5")) == sorted(STEMS)
    assert not list(outdir.glob(".*"))  # no temporary file left behind
    assert (outdir / "sweep.csv").read_text().count("\n") == 7
    assert "| case | time.step | parameters.theta0 |" in (outdir / "sweep.md").read_text()
    rows = data["rows"]
    assert [r["case"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["file"] for r in rows] == STEMS
    assert data["counts"]["completed"] == 6 and data["counts"]["run"] == 6 and data["counts"]["retried"] == 0
    # the table is what `mbsim run` with the same --set gives, number for number
    for row in rows:
        step, theta0 = row["parameters"]["time.step"], row["parameters"]["parameters.theta0"]
        assert (row["status"], row["source"], row["attempts"], row["retried"]) == ("completed", "run", 1, False)
        spec = load_scene(str(PENDULUM), ["time.end=0.3", f"time.step={step!r}", f"parameters.theta0={theta0!r}"])
        alone = simulate_run(spec, outdir.parent / "alone.h5")
        assert row["steps"] == alone.steps == round(0.3 / step)
        assert row["max_position_violation"] == alone.max_position_violation
        assert row["energy_drift"] == alone.energy_drift
        with h5py.File(outdir / row["file"], "r") as f, h5py.File(outdir.parent / "alone.h5", "r") as g:
            assert f.attrs["status"] == "completed"
            assert f.attrs["sweep_case_hash"] == row["case_hash"]
            assert f.attrs["sweep_case"] == row["case"]
            np.testing.assert_array_equal(f["q"][()], g["q"][()])
            assert f["scene"][()] == g["scene"][()]  # the scene as `mbsim run --set` loads it


@pytest.mark.slow
def test_rerun_skips_completed_cases_and_runs_the_rest(local_sweep, tmp_path: Path) -> None:
    _, outdir = local_sweep
    copy = copy_results(outdir, tmp_path / "copy")
    before = file_ids(copy)
    # everything completed: nothing runs, no cluster starts, nothing is rewritten
    again = sweep(PENDULUM, *SIX, "-o", copy, "--format", "json")
    assert again.exit_code == 0, again.output
    data = json.loads(again.stdout)
    assert {r["source"] for r in data["rows"]} == {"resumed"}
    assert data["cluster"] == "no cluster (every case was resumed)"
    assert file_ids(copy) == before
    assert [comparable(r) | {"source": "run", "attempts": 1} for r in data["rows"]] == [
        comparable(r) for r in table(outdir)["rows"]
    ]
    # a missing and a failed file run again; the other four are kept
    (copy / STEMS[0]).unlink()
    truncated = (copy / STEMS[1]).read_bytes()[:1000]
    (copy / STEMS[1]).write_bytes(truncated)
    with h5py.File(copy / STEMS[2], "a") as f:
        f.attrs["status"] = "failed"
    kept = {k: v for k, v in before.items() if k in STEMS[3:]}
    third = sweep(PENDULUM, *SIX, "-o", copy, "--workers", 2, "--format", "json")
    # a truncated file cannot be shown to be an mbsim result (CONTRACT §4, no clobbering): its
    # case fails naming it, and the file is left as it is
    assert third.exit_code == 3, third.output
    rows = json.loads(third.stdout)["rows"]
    assert [r["source"] for r in rows] == ["run", "none", "run"] + ["resumed"] * 3
    assert [r["status"] for r in rows] == ["completed", "failed"] + ["completed"] * 4
    assert rows[1]["message"].endswith(
        "exists and is not an mbsim result file; mbsim overwrites only its own "
        "result files (choose another output, or move the file away)"
    )
    assert (copy / STEMS[1]).read_bytes() == truncated
    assert {k: v for k, v in file_ids(copy).items() if k in STEMS[3:]} == kept
    for name in (STEMS[0], STEMS[2]):
        with h5py.File(copy / name, "r") as f:
            assert f.attrs["status"] == "completed"
    # moved away, it runs
    (copy / STEMS[1]).unlink()
    fourth = sweep(PENDULUM, *SIX, "-o", copy, "--workers", 1, "--format", "json")
    assert fourth.exit_code == 0, fourth.output
    assert [r["source"] for r in json.loads(fourth.stdout)["rows"]] == ["resumed", "run"] + ["resumed"] * 4


def test_a_failing_assertion_exits_4_naming_it_and_the_value(local_sweep, tmp_path: Path) -> None:
    outdir = copy_results(local_sweep[1], tmp_path / "copy")
    result = sweep(PENDULUM, *SIX, "-o", outdir, "--assert", "energy_drift < 1e-7", "--assert", "steps > 0")
    assert result.exit_code == 4, result.output
    data = table(outdir)
    failed = [r["case"] for r in data["rows"] if not all(a["passed"] for a in r["assertions"])]
    assert failed == [6]  # the largest step and angle drift most
    drift = data["rows"][5]["energy_drift"]
    assert f"mbsim: assertion failed: case 6: energy_drift < 1e-7 (energy_drift = {drift:.6g})" in result.stderr
    assert "assert: energy_drift < 1e-7" in (outdir / "sweep.csv").read_text()
    assert sweep(PENDULUM, *SIX, "-o", outdir, "--assert", "energy_drift < 1e-5").exit_code == 0


def test_command_line_errors_exit_2_before_anything_runs(tmp_path: Path) -> None:
    for args, fragment in [
        (["--param", "time.step=0.01,-1"], "--param 'time.step=0.01,-1'"),
        (["--param", "a=1,2", "--param", "b=1", "--zip"], "--zip"),
        (["--param", "time.step=0.01", "--workers", 2, "--scheduler", "tcp://127.0.0.1:1"], "--workers"),
        (["--param", "time.step=0.01", "--assert", "energy < 1"], "--assert 'energy < 1'"),
        (["--param", "time.step=0.01", "--retries", -1], "--retries"),
    ]:
        result = sweep(PENDULUM, *args, "-o", tmp_path / "out")
        assert result.exit_code == 2, (args, result.output)
        assert fragment in result.stderr
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- an external cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory):
    """``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1; yields the address."""
    from distributed import Client

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("dask-logs")
    dask = [sys.executable, "-m", "dask"]
    procs: list[subprocess.Popen] = []

    def start(name: str, args: list[str]) -> None:
        log = open(logs / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    try:
        start("scheduler", [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"])
        for k in range(2):
            worker = [*dask, "worker", address, "--nworkers", "1", "--nthreads", "1", "--host", "127.0.0.1"]
            start(f"worker{k}", [*worker, "--no-dashboard", "--name", f"w{k}"])
        with Client(address, timeout="60s", set_as_default=False) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        _stop(procs)


@pytest.mark.slow
def test_external_scheduler_gives_identical_results(scheduler: str, local_sweep, tmp_path: Path) -> None:
    _, local = local_sweep
    outdir = tmp_path / "external"
    result = sweep(PENDULUM, *SIX, "--scheduler", scheduler, "-o", outdir, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["cluster"].startswith(f"Dask scheduler {scheduler} (2 workers")
    assert sorted(p.name for p in outdir.glob("*.h5")) == sorted(STEMS)
    assert [comparable(r) for r in data["rows"]] == [comparable(r) for r in table(local)["rows"]]
    for name in STEMS:
        with h5py.File(outdir / name, "r") as f, h5py.File(local / name, "r") as g:
            for path in ("time", "q", "v", "diagnostics/energy/total"):
                np.testing.assert_array_equal(f[path][()], g[path][()])


def test_a_failing_case_is_retried_then_recorded(scheduler: str, tmp_path: Path) -> None:
    # explicit Euler without projection leaves the circle at once: the second case fails on its
    # violation limit, the first (limit 1 m) completes
    failing = ["--set", "solver.integrator=euler", "--set", "solver.projection.position=false"]
    failing += ["--set", "solver.projection.velocity=false", "--set", "time.end=0.1"]
    failing += ["--param", "solver.max_violation=1,1e-12"]
    outdir = tmp_path / "failing"
    result = sweep(PENDULUM, *failing, "--scheduler", scheduler, "-o", outdir, "--retries", 2, "--format", "json")
    assert result.exit_code == 3, result.output
    good, bad = json.loads(result.stdout)["rows"]
    assert (good["status"], good["attempts"], good["retried"]) == ("completed", 1, False)
    assert (bad["status"], bad["attempts"], bad["retried"]) == ("failed", 3, True)
    assert "passed solver.max_violation" in bad["message"]
    assert len(bad["history"]) == 2 and bad["history"][0].startswith("attempt 1: ")
    with h5py.File(outdir / bad["file"], "r") as f:  # the partial file of the last attempt is kept
        assert f.attrs["status"] == "failed"
    # a rerun runs the failed case again, and only it
    again = sweep(PENDULUM, *failing, "--scheduler", scheduler, "-o", outdir, "--retries", 0, "--format", "json")
    assert again.exit_code == 3
    assert [r["source"] for r in json.loads(again.stdout)["rows"]] == ["resumed", "run"]


# ----------------------------------------------------------------------------- killing and interrupting


class SweepProcess:
    """``python -m mbsim sweep ...`` in its own process group; stderr read line by line."""

    def __init__(self, args: list[object]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mbsim", "sweep", *(str(a) for a in args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.first_case = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            if line.startswith("case "):
                self.first_case.set()

    def wait_first_case(self, timeout: float = 60) -> None:
        assert self.first_case.wait(timeout), "".join(self.lines)

    def workers(self) -> list[psutil.Process]:
        kids = psutil.Process(self.proc.pid).children()
        return [k for k in kids if "spawn_main" in " ".join(k.cmdline())]

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        stdout = self.proc.stdout.read()
        self.proc.wait(timeout)
        self.reader.join(10)
        return self.proc.returncode, stdout, "".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.mark.slow
def test_a_killed_worker_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    outdir = tmp_path / "killed"
    angles = "parameters.theta0=linspace(0.5,1.5,6)"
    proc = SweepProcess([PENDULUM, *LONG, "--param", angles, "--workers", 2, "-o", outdir, "--format", "json"])
    try:
        proc.wait_first_case()
        time.sleep(0.6)  # both workers are on their next case by now (four are still waiting)
        workers = proc.workers()
        assert len(workers) == 2
        workers[0].kill()
        code, stdout, stderr = proc.finish()
    finally:
        proc.kill()
    assert code == 0, stderr
    data = json.loads(stdout)
    rows = data["rows"]
    assert [r["case"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(r["status"] == "completed" for r in rows), rows
    retried = [r for r in rows if r["retried"]]
    assert len(retried) == 1, rows
    assert retried[0]["attempts"] == 2
    assert retried[0]["history"] == ["attempt 1: the worker running it died"]
    assert data["counts"]["retried"] == 1
    files = sorted(outdir.glob("*.h5"))
    assert len(files) == 6 and not list(outdir.glob(".*"))
    cases = []
    for path in files:
        with h5py.File(path, "r") as f:
            assert f.attrs["status"] == "completed"
            assert f.attrs["steps"] == LONG_STEPS
            cases.append(int(f.attrs["sweep_case"]))
    assert sorted(cases) == [1, 2, 3, 4, 5, 6]
    csv_rows = (outdir / "sweep.csv").read_text().splitlines()
    header = csv_rows[0].split(",")
    assert [line.split(",")[header.index("retried")] for line in csv_rows[1:]].count("True") == 1


@pytest.mark.slow
def test_interrupted_sweep_then_rerun_runs_only_the_unfinished(tmp_path: Path) -> None:
    outdir = tmp_path / "interrupted"
    args = [PENDULUM, *SLOW, "--param", "parameters.theta0=linspace(0.5,1.5,4)", "-o", outdir, "--format", "json"]
    proc = SweepProcess([*args, "--workers", 1])
    try:
        proc.wait_first_case()
        os.killpg(proc.proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
        code, stdout, stderr = proc.finish()
    finally:
        proc.kill()
    assert code == 130, stderr
    assert "Traceback" not in stderr
    data = json.loads(stdout)
    assert data["interrupted"] is True
    statuses = [r["status"] for r in data["rows"]]
    done = [r["file"] for r in data["rows"] if r["status"] == "completed"]
    assert 1 <= len(done) < 4 and statuses.count("interrupted") == 4 - len(done), statuses
    assert sorted(p.name for p in outdir.glob("*.h5")) == sorted(done)  # only finished cases have files
    assert not list(outdir.glob(".*"))
    before = file_ids(outdir)
    rerun = sweep(*args, "--workers", 2)
    assert rerun.exit_code == 0, rerun.output
    rows = json.loads(rerun.stdout)["rows"]
    assert [r["source"] == "resumed" for r in rows] == [r["file"] in done for r in rows]
    assert all(r["status"] == "completed" for r in rows)
    assert {k: v for k, v in file_ids(outdir).items() if k in done} == before
    assert len(list(outdir.glob("*.h5"))) == 4
