"""CONTRACT §4 for ``mbsim sweep``: signals at any moment, a sweep of 100,000 cases that starts at
once and stops at once, ``--scheduler`` addresses, result files never clobbered, and hostile
options and parameters that exit 2 promptly.

Signals go to the real command in its own process group (``python -m mbsim sweep``), the way a
terminal's Ctrl-C reaches the sweep and its Dask workers alike; every wait is bounded and the
process group is killed if a test fails. Only 127.0.0.1 addresses are used.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import h5py
import psutil
import pytest
from click.testing import CliRunner

from mbsim import interrupts
from mbsim.cli.main import cli
from mbsim.errors import OutputError, SceneError
from mbsim.output.safety import claim_result
from mbsim.sweep import execute, parse_params, plan_sweep
from mbsim.sweep.cases import LIST_CHECKS
from mbsim.sweep.execute import write_result
from mbsim.sweep.worker import run_case

SCENES = Path(__file__).resolve().parents[2] / "scenes"
PENDULUM = SCENES / "pendulum_2d.yaml"
SHORT = ["--set", "time.end=0.02"]  # two steps: a case is a few milliseconds of work
# 100,000 cases of two steps each: far more than ever finish during a test
HUGE = [*SHORT, "--param", "parameters.theta0=linspace(0.5,1.5,100000)"]
# four cases of several seconds each: the workers are busy when the signal comes
LONG = ["--set", "time.end=60", "--set", "time.step=0.0005", "--param", "parameters.theta0=linspace(0.5,1.5,4)"]
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
SIGNAL_IDS = ["SIGINT", "SIGTERM", "SIGHUP"]
STOP_WITHIN = 15.0  # seconds from the signal to the exit: generous for a loaded 2-core machine


def sweep(*args: object):
    return CliRunner().invoke(cli, ["sweep", *(str(a) for a in args)], catch_exceptions=False)


class SweepProcess:
    """``python -m mbsim sweep ...`` in its own process group; stderr read line by line with times."""

    def __init__(self, args: list[object], cwd: Path | None = None) -> None:
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mbsim", "sweep", *(str(a) for a in args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        self.stdout = ""
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._out.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            with self._seen:
                self.lines.append((time.monotonic() - self.start, line))
                self._seen.notify_all()

    def _read_stdout(self) -> None:
        self.stdout = self.proc.stdout.read()

    @property
    def stderr(self) -> str:
        return "".join(line for _, line in self.lines)

    def wait_line(self, prefix: str, timeout: float = 60, contains: str = "") -> float:
        """Seconds since the start at which a stderr line starting with ``prefix`` (and holding
        ``contains``) appeared."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while True:
                for t, line in self.lines:
                    if line.startswith(prefix) and contains in line:
                        return t
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, f"no '{prefix}' line:\n{self.stderr}"
                self._seen.wait(min(left, 0.2))

    def workers(self) -> list[psutil.Process]:
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        out = []
        for k in kids:
            with _ignore_gone():
                if "spawn_main" in " ".join(k.cmdline()):
                    out.append(k)
        return out

    def signal_group(self, sig: int) -> float:
        """Send ``sig`` to the whole process group (a terminal's Ctrl-C); returns the time."""
        os.killpg(self.proc.pid, sig)
        return time.monotonic()

    def finish(self, timeout: float = 60) -> int:
        self.proc.wait(timeout)
        self._reader.join(10)
        self._out.join(10)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            with _ignore_gone():
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class _ignore_gone:  # noqa: N801 - a context manager
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, *exc: object) -> bool:
        return kind is not None and issubclass(kind, (psutil.Error, ProcessLookupError))


def assert_gone(pids: list[psutil.Process], timeout: float = 10) -> None:
    """The sweep's worker processes have ended (none left behind)."""
    _, alive = psutil.wait_procs(pids, timeout=timeout)
    assert not alive, alive


def table(outdir: Path) -> dict:
    return json.loads((outdir / "sweep.json").read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- signals


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), SIGNALS, ids=SIGNAL_IDS)
def test_a_signal_while_cases_run_stops_a_sweep_of_100000_cases_at_once(tmp_path: Path, sig: int, code: int) -> None:
    """The first case starts within seconds (the cases are derived lazily), and a signal ends the
    sweep within seconds: finished cases keep their files, the others are recorded interrupted."""
    outdir = tmp_path / "huge"
    proc = SweepProcess([PENDULUM, *HUGE, "--workers", 2, "-o", outdir, "--format", "csv"])
    try:
        first = proc.wait_line("case ", timeout=60)
        assert first < 30, proc.stderr  # was over two minutes of planning before the first case
        proc.wait_line("case ", timeout=60, contains=" (20/100000) ")  # 20 done (in any order)
        workers = proc.workers()
        assert len(workers) == 2
        sent = proc.signal_group(sig)
        exit_code = proc.finish(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        proc.kill()
    stderr = proc.stderr
    assert exit_code == code, stderr
    assert stopped < STOP_WITHIN, (stopped, stderr)
    assert "Traceback" not in stderr
    name = signal.Signals(sig).name
    assert f"mbsim: interrupted ({name})" in stderr
    assert_gone(workers)
    data = table(outdir)
    assert data["interrupted"] is True and data["interrupted_by"] == name and data["exit_code"] == code
    rows = data["rows"]
    assert len(rows) == 100_000
    done = [r for r in rows if r["status"] == "completed"]
    stopped_rows = [r for r in rows if r["status"] == "interrupted"]
    others = [r for r in rows if r["status"] not in ("completed", "interrupted")]
    assert len(done) >= 20 and not others, (len(done), others[:3], stderr[-3000:])
    assert all(r["message"].startswith(("not started", f"interrupted ({name}) while running")) for r in stopped_rows)
    assert stopped_rows[-1]["message"] == f"not started: interrupted ({name})"
    assert data["counts"]["interrupted"] == len(stopped_rows)
    # only the finished cases have files, each complete; no temporary file is left
    assert sorted(p.name for p in outdir.glob("*.h5")) == sorted(r["file"] for r in done)
    assert not list(outdir.glob(".*"))
    with h5py.File(outdir / done[0]["file"], "r") as f:
        assert f.attrs["status"] == "completed"
    assert (outdir / "sweep.csv").read_text().count("\n") == 100_001
    assert proc.stdout.count("\n") == 100_001  # the table on stdout too


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), SIGNALS, ids=SIGNAL_IDS)
def test_a_signal_while_the_cluster_starts(tmp_path: Path, sig: int, code: int) -> None:
    """The worker processes are being spawned and import the simulator: they must not die with a
    traceback of their own; the client stops the start and records every case interrupted."""
    outdir = tmp_path / "starting"
    proc = SweepProcess([PENDULUM, *HUGE, "--workers", 2, "-o", outdir, "--format", "json"])
    try:
        proc.wait_line("mbsim: starting 2 local workers", timeout=60)
        time.sleep(0.3)  # the worker processes exist and are importing
        workers = proc.workers()
        sent = proc.signal_group(sig)
        exit_code = proc.finish(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        proc.kill()
    stderr = proc.stderr
    assert exit_code == code, stderr
    assert stopped < STOP_WITHIN, (stopped, stderr)
    assert "Traceback" not in stderr and "Nanny failed" not in stderr, stderr
    assert_gone(workers)
    data = json.loads(proc.stdout)
    assert data == table(outdir)
    assert data["interrupted"] is True and data["exit_code"] == code
    assert {r["status"] for r in data["rows"]} <= {"interrupted", "completed"}
    assert data["counts"]["interrupted"] >= 99_990


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), SIGNALS, ids=SIGNAL_IDS)
def test_a_signal_while_workers_are_busy_with_long_cases(tmp_path: Path, sig: int, code: int) -> None:
    """A case cannot be stopped half-way on a worker; the cluster is not waited for (it used to
    take the close timeout and more at exit): the workers are ended, and nothing is left in /tmp."""
    outdir = tmp_path / "long"
    before = set(Path(tempfile.gettempdir()).glob("mbsim-sweep-*"))
    proc = SweepProcess([PENDULUM, *LONG, "--workers", 2, "-o", outdir, "--format", "csv"])
    try:
        # both workers are inside a case once both cases' temporary result files exist
        deadline = time.monotonic() + 60
        while len([p for p in Path(tempfile.gettempdir()).glob("mbsim-sweep-*/mbsim-case-*/result.h5")]) < 2:
            assert time.monotonic() < deadline and proc.proc.poll() is None, proc.stderr
            time.sleep(0.1)
        time.sleep(0.5)
        workers = proc.workers()
        assert len(workers) == 2
        sent = proc.signal_group(sig)
        exit_code = proc.finish(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        proc.kill()
    stderr = proc.stderr
    assert exit_code == code, stderr
    assert stopped < STOP_WITHIN, (stopped, stderr)
    assert "Traceback" not in stderr
    assert_gone(workers)
    assert set(Path(tempfile.gettempdir()).glob("mbsim-sweep-*")) <= before  # the workers' files are gone too
    name = signal.Signals(sig).name
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["message"] for r in rows] == [f"interrupted ({name}) while running"] * 2 + [
        f"not started: interrupted ({name})"
    ] * 2
    assert [r["status"] for r in rows] == ["interrupted"] * 4
    assert not list(outdir.glob("*.h5"))


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), SIGNALS, ids=SIGNAL_IDS)
@pytest.mark.parametrize("delay", [0.05, 0.4])
def test_a_signal_during_start_up(tmp_path: Path, sig: int, code: int, delay: float) -> None:
    """Interpreter start, imports, planning: 128 + N, a message, no traceback, nothing written."""
    outdir = tmp_path / "early"
    proc = SweepProcess([PENDULUM, *HUGE, "-o", outdir])
    try:
        time.sleep(delay)
        sent = proc.signal_group(sig)
        exit_code = proc.finish(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        proc.kill()
    assert not list(outdir.glob("*.h5")) if outdir.exists() else True
    frames = [line for line in proc.stderr.splitlines() if line.lstrip().startswith("File ")]
    if exit_code == -sig and all("<frozen " in line for line in frames):
        # it came before the interpreter ran mbsim's first line (a loaded machine takes more than
        # 0.05 s to start Python): the default action ended the process, which a shell reports as
        # 128 + N as well, and nothing was written (CI met it once in a full run); a SIGINT then
        # meets Python's own handler while runpy looks for the package, whose traceback has only
        # the interpreter's frozen frames (a rehearsal under load met it)
        return
    assert exit_code == code, proc.stderr
    assert stopped < STOP_WITHIN
    assert "Traceback" not in proc.stderr


def test_a_signal_while_the_tables_are_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables are finished (they are what the finished cases have), then 128 + N."""
    outdir = tmp_path / "tables"
    first = sweep(PENDULUM, *SHORT, "--param", "parameters.theta0=1,2", "--workers", 1, "-o", outdir, "-q")
    assert first.exit_code == 0, first.output
    real = execute.write_tables

    def signalled(result):  # SIGTERM arrives while the tables are being written
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        real(result)

    monkeypatch.setattr(execute, "write_tables", signalled)
    start = time.monotonic()
    again = sweep(PENDULUM, *SHORT, "--param", "parameters.theta0=1,2", "-o", outdir, "--format", "json")
    assert again.exit_code == 143, again.output
    assert time.monotonic() - start < STOP_WITHIN
    assert again.stderr.endswith("mbsim: interrupted (SIGTERM)\n")
    data = table(outdir)
    assert data["interrupted"] is False  # every case had finished: the tables say so
    assert data == json.loads(again.stdout)
    assert [r["status"] for r in data["rows"]] == ["completed", "completed"]
    assert interrupts.received() == signal.SIGTERM


# ----------------------------------------------------------------------------- --scheduler


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("address", "fragment"),
    [
        ("garbage", "got 'garbage'"),
        ("tcp://127.0.0.1", "got 'tcp://127.0.0.1'"),
        ("tcp://127.0.0.1:99999", "got 'tcp://127.0.0.1:99999'"),
        ("tcp://127.0.0.1:port", "got 'tcp://127.0.0.1:port'"),
        ("tls://127.0.0.1:8786", "only the tcp protocol"),
        ("tcp://127.0.0.1:8786/path", "got 'tcp://127.0.0.1:8786/path'"),
        ("tcp://no_such host:8786", "not a host name"),
    ],
)
def test_a_malformed_scheduler_address_exits_2_at_once(tmp_path: Path, address: str, fragment: str) -> None:
    start = time.monotonic()
    result = sweep(tmp_path / "no-scene.yaml", "--param", "x=1", "--scheduler", address, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert time.monotonic() - start < 5
    assert result.stderr.startswith("mbsim: command-line error: --scheduler: expected the address of a Dask")
    assert "tcp://HOST:PORT" in result.stderr and fragment in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_scheduler_address_where_nothing_listens_exits_2_at_once(tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mbsim", "sweep", PENDULUM, "--param", "parameters.theta0=1,2"]
        + ["--scheduler", address, "-o", tmp_path / "out"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert time.monotonic() - start < 10
    assert f"mbsim: command-line error: --scheduler: nothing answers at {address} (Connection refused)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_scheduler_address_that_never_answers_exits_2_within_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something accepts the connection and says nothing (Dask's own client waits for ever)."""
    monkeypatch.setattr(execute, "CONNECT_TIMEOUT", 1.5)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        start = time.monotonic()
        result = sweep(PENDULUM, "--param", "parameters.theta0=1,2", "--scheduler", address, "-o", tmp_path / "out")
        took = time.monotonic() - start
    finally:
        server.close()
    assert result.exit_code == 2, result.output
    assert took < 1.5 + 5
    assert f"--scheduler: no Dask scheduler answered at {address} within 1.5 s" in result.stderr
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- OUTDIR and case files


def test_a_file_that_is_not_a_result_refuses_the_sweep_up_front(tmp_path: Path) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    notes = outdir / "theta0-2.h5"  # named like a case's file
    notes.write_text("my notes\n")
    start = time.monotonic()
    result = sweep(PENDULUM, *SHORT, "--param", "parameters.theta0=1,2", "-o", outdir)
    assert result.exit_code == 2, result.output
    assert time.monotonic() - start < 10
    assert result.stderr.startswith(f"mbsim: output error: {notes}: exists and is not an mbsim result file")
    assert notes.read_text() == "my notes\n"
    assert sorted(p.name for p in outdir.iterdir()) == ["theta0-2.h5"]  # nothing ran, no table


@pytest.mark.parametrize("where", ["case", "table"])
def test_a_directory_where_a_file_goes_is_refused(tmp_path: Path, where: str) -> None:
    outdir = tmp_path / "out"
    (outdir / ("theta0-1.h5" if where == "case" else "sweep.json")).mkdir(parents=True)
    result = sweep(PENDULUM, *SHORT, "--param", "parameters.theta0=1,2", "-o", outdir)
    assert result.exit_code == 2, result.output
    assert "mbsim: output error:" in result.stderr and "Traceback" not in result.output


def test_an_unusable_outdir_exits_2(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    for outdir, fragment in [(afile, "is a file"), (afile / "sub", "cannot create the output directory")]:
        result = sweep(PENDULUM, *SHORT, "--param", "parameters.theta0=1,2", "-o", outdir)
        assert result.exit_code == 2, result.output
        assert fragment in result.output and "Traceback" not in result.output
    assert afile.read_text() == "x"


def test_a_file_another_live_run_writes_is_never_replaced(tmp_path: Path) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    target = outdir / "theta0-1.h5"
    run = subprocess.Popen(
        [sys.executable, "-m", "mbsim", "run", PENDULUM, "-o", target, "--set", "time.end=1e6", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (target.exists() and target.stat().st_size > 0):
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.1)
        time.sleep(0.5)
        start = time.monotonic()
        result = sweep(PENDULUM, *SHORT, "--param", "parameters.theta0=1,2", "-o", outdir)
        assert result.exit_code == 2, result.output
        assert time.monotonic() - start < 10
        assert f"{target}: is being written by process {run.pid}" in result.stderr
        assert run.poll() is None  # the run goes on, its file untouched
        with h5py.File(target, "r", locking=False) as f:
            assert f.attrs["status"] == "running" and f.attrs["writer_pid"] == run.pid
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()


def test_write_result_refuses_what_is_not_its_own(tmp_path: Path) -> None:
    plan = plan_sweep(str(PENDULUM), parse_params(["parameters.theta0=1,2"]), overrides=("time.end=0.02",))
    data = run_case(plan.payload(plan.cases[0], 1)).data
    fresh = tmp_path / "fresh.h5"
    write_result(fresh, data)  # absent: written
    assert fresh.read_bytes() == data
    write_result(fresh, data)  # an mbsim result nobody writes: replaced
    text = tmp_path / "text.h5"
    text.write_text("not a result")
    with pytest.raises(OutputError, match="not an mbsim result file"):
        write_result(text, data)
    assert text.read_text() == "not a result"
    # another writer holds it (here: a claim of this process, another open file description)
    with claim_result(fresh), pytest.raises(OutputError, match="is being written by"):
        write_result(fresh, b"garbage")
    assert fresh.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.h5", "text.h5"]  # no temporary file


def test_another_programs_hdf5_file_fails_its_case_untouched(tmp_path: Path) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    theirs = outdir / "theta0-1.h5"
    with h5py.File(theirs, "w") as f:
        f.attrs["owner"] = "another program"
    before = theirs.read_bytes()
    result = sweep(
        PENDULUM, *SHORT, "--param", "parameters.theta0=1,2", "--workers", 1, "-o", outdir, "--format", "json"
    )
    assert result.exit_code == 3, result.output
    first, second = json.loads(result.stdout)["rows"]
    assert first["status"] == "failed" and "exists and is not an mbsim result file" in first["message"]
    assert second["status"] == "completed"
    assert theirs.read_bytes() == before


# ----------------------------------------------------------------------------- hostile options


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--workers", 0], "--workers: expected 1 to"),
        (["--workers", 100000], "--workers: expected 1 to"),
        (["--workers", -3], "--workers: expected 1 to"),
        (["--retries", -1], "--retries: expected a count from 0 to 100, got -1"),
        (["--retries", 10**12], "--retries: expected a count from 0 to 100"),
    ],
)
def test_bad_options_exit_2_before_the_scene_is_read(tmp_path: Path, args: list, fragment: str) -> None:
    result = sweep(tmp_path / "no-scene.yaml", "--param", "x=1", *args, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("mbsim: command-line error: ") and fragment in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        (["x=linspace(0,1,1e12)"], "1000000000000 values is more than a sweep takes (100000)"),
        (["x=linspace(0,1,1e400)"], "expected a whole number of values n >= 1"),
        (["x=linspace(0,1," + "9" * 5000 + ")"], "(5000 characters)"),
        (["x=linspace(0, 9**9**9, 3)"], "expected finite end values"),
        (["x=" + ",".join(["1"] * 100_001)], "100001 values is more than a sweep takes"),
        (["x=" + "[" * 5000 + "1" + "]" * 5000], "nested more than 50 levels"),
        (["a=linspace(0,1,1000)", "b=linspace(0,1,1000)"], "1000000 cases is more than a sweep takes"),
        (["a=1,2", "b=1,2,3"], "--zip"),
        (["time.step"], "expected KEY=V1,V2"),
        (["time.step="], "no values"),
        (["time step=1"], "expected a dotted scene path"),
        (["bodies.bob.mass=1,2", "bodies[0].mass=3"], "set the same scene value (bodies[0].mass)"),
        (["solver.method=lagrange,gauss", "solver={method: gauss}"], "one inside the other"),
        (["bodies.nobody.mass=1,2"], "no item named 'nobody'"),
        (["bodies.bob.nothere=1,2"], "unknown key 'nothere'"),
        (["bodies.bob.mass=1,-2"], "value -2"),
    ],
)
def test_hostile_params_exit_2_promptly(tmp_path: Path, params: list[str], fragment: str) -> None:
    args = [a for p in params for a in ("--param", p)] + (["--zip"] if fragment == "--zip" else [])
    start = time.monotonic()
    result = sweep(PENDULUM, *args, "-o", tmp_path / "out")
    assert time.monotonic() - start < 10
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr) < 2000  # a huge value is not echoed whole
    assert not (tmp_path / "out").exists()


def test_planning_100000_cases_is_quick_and_derives_cases_on_demand() -> None:
    start = time.monotonic()
    plan = plan_sweep(
        str(PENDULUM), parse_params(["parameters.theta0=linspace(0.5,1.5,100000)"]), overrides=("time.end=0.02",)
    )
    assert time.monotonic() - start < 10  # was minutes: every case loaded and hashed up front
    assert len(plan) == len(plan.cases) == 100_000 and plan.checked == 2
    assert plan.stems[-1] == "theta0-1.5" and len(set(plan.stems)) == 100_000
    last = plan.cases[-1]
    assert last.overrides == ("time.end=0.02", "parameters.theta0=1.5")
    assert plan.parameters(99_999) == {"parameters.theta0": 1.5}
    # a value only a case derived later reaches fails that case, naming its --param
    values = [str(k) for k in range(1, 301)] + ["-2"]  # more distinct values than are checked first
    plan = plan_sweep(str(PENDULUM), parse_params(["bodies.bob.mass=" + ",".join(values)]))
    assert plan.checked == LIST_CHECKS
    with pytest.raises(SceneError, match=r"^--param 'bodies.bob.mass=1,2,3,.*bodies\[0\].mass: value -2"):
        plan.case(300)
