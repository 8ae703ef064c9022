"""Running a planned sweep on Dask: resume, submit, retry, collect, write.

The client (this process) does the bookkeeping; workers only run cases
(:func:`mbsim.sweep.worker.run_case`) and return bytes.

- **Options.** ``--workers`` 1 to :data:`WORKERS_PER_CORE` per core, ``--retries`` 0 to
  :data:`MAX_RETRIES`, ``--scheduler`` ``tcp://HOST:PORT`` (or ``HOST:PORT``) are checked before
  the scene is (:func:`check_options`); an address where nothing accepts a connection is refused
  at once, one that accepts but does not answer as a Dask scheduler within
  :data:`CONNECT_TIMEOUT` seconds likewise (exit 2, naming ``--scheduler``).
- **Cluster.** No scheduler address: an embedded ``distributed.LocalCluster`` of N worker
  processes with one thread each, bound to 127.0.0.1, no dashboard, with the scheduler's
  ``allowed-failures`` at 0 (a worker death comes straight back to this client, which retries
  under ``--retries``) and the workers' profiler and monitors quiet
  (:data:`LOCAL_CLUSTER_CONFIG`). An address: that cluster, unchanged (its own ``allowed-failures``
  applies first; the attempts it makes are counted from the start events the workers log).
- **Lazy.** The cases are derived one at a time as workers become free (:meth:`SweepPlan.case`),
  so the first case starts as soon as the cluster is up however many there are. A case whose
  file in OUTDIR is a completed result of the same case is resumed when its turn comes.
- **Throttle.** At most as many cases are in flight as the cluster has worker threads, so a
  worker that dies takes only the case it was running, and a large sweep holds only the
  payloads of the running cases.
- **Results.** Every attempt that returns a file has it written into OUTDIR by the client,
  through a temporary name and a rename (a half-written file never carries the final name).
  A worker's disk is never assumed to be the client's.
- **No clobbering, one writer** (CONTRACT §4, :mod:`mbsim.output.outdir`). Before anything
  runs, OUTDIR must be (or be creatable as) a writable directory, each table's name in it must
  be free or hold a table mbsim wrote (its mark), and no case's file in it may be a symbolic
  link, a directory or another non-regular file, a file that is not HDF5, or a file a live mbsim
  process is writing: any of these refuses the sweep with exit 2 naming the file. The tables
  are checked again just before they are replaced. A case's file that is HDF5 but not an
  mbsim result (another program's) is found when the case comes up: that case fails with the
  reason and its file is untouched, and so does a case whose file turned into something else or
  was taken by another live mbsim process while the sweep ran (:func:`write_result` takes the
  writer's lock of :mod:`mbsim.output.safety` on an existing file before renaming over it, and
  never renames over a file that appeared meanwhile).
- **Retries.** A case whose run failed (exit 3 in ``mbsim run``'s terms), raised an internal
  error, or whose worker died is submitted again, up to ``retries`` times; after that it is
  recorded ``failed`` with the last reason. A scene error is not retried (it would fail the
  same way). An attempt that never started (its worker died before it began) is resubmitted
  without counting.
- **Signals.** SIGINT, SIGTERM and SIGHUP (:mod:`mbsim.interrupts`) at any moment: the loops
  poll the flag between cases (planning, the scan of OUTDIR, submission, collection). The
  cases in flight are cancelled and recorded ``interrupted``, like the ones never started; the
  finished cases' files stay, the tables are written, and the CLI exits 128 + N. The cluster is
  closed within :data:`CLOSE_TIMEOUT` seconds (its worker processes are killed if they take
  longer), or at once on a second signal. The embedded cluster's processes are started with
  these signals blocked and its workers ignore SIGINT and SIGHUP (:mod:`mbsim.sweep.preload`):
  Ctrl-C in a terminal reaches the whole foreground process group, and it is the client that
  decides.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mbsim import errors, interrupts
from mbsim.assertions import Assertion, evaluate_all
from mbsim.errors import Interrupted, OutputError, SceneError, UsageError, path_text
from mbsim.output.outdir import check_report, check_result, install_result, open_outdir
from mbsim.sweep.cases import Case, SweepPlan
from mbsim.sweep.preload import LOG_LEVEL_KEY
from mbsim.sweep.table import TABLES, SweepResult, SweepRow, write_tables
from mbsim.sweep.worker import (
    EVENT_TOPIC_PREFIX,
    HASH_ATTR,
    SUMMARY_ATTR,
    CaseOutcome,
    run_case,
)

# the embedded cluster's settings: a worker death comes straight back to the client (which
# retries under --retries), and the workers' housekeeping threads wake rarely, since each wake-up
# takes the GIL from the case being computed (the statistical profiler, every 10 ms by default,
# and the 20 ms event-loop tick cost a case 10-15 % of its time; with these, about 3 %)
LOCAL_CLUSTER_CONFIG = {
    "distributed.scheduler.allowed-failures": 0,
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
}
# how often an attempt whose worker died before it began is resubmitted without counting
FREE_RESUBMISSIONS = 3
MAX_RETRIES = 100
WORKERS_PER_CORE = 4  # more processes than that only compete for the cores (and memory)
CONNECT_TIMEOUT = 10.0  # seconds to reach a --scheduler and hear it answer
CLOSE_TIMEOUT = 5.0  # seconds the cluster gets to close before its worker processes are killed
POLL = 0.01  # seconds between looks at the cases in flight
Progress = Callable[[SweepRow | None, int, int], None]  # (row just finished or None, done, total)


def default_workers() -> int:
    """The number of cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def max_workers() -> int:
    """The most ``--workers`` this machine takes: :data:`WORKERS_PER_CORE` per core."""
    return WORKERS_PER_CORE * default_workers()


_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?\Z")


def parse_scheduler(text: str) -> tuple[str, str, int]:
    """``tcp://HOST:PORT`` (or ``HOST:PORT``) -> (address, host, port).

    Raises:
        UsageError: anything else (another protocol, no port, a port out of range, a bad host).
    """
    expected = "expected the address of a Dask scheduler, tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)"
    raw = text.strip()
    shown = raw if len(raw) <= 80 else f"{raw[:80]}... ({len(raw)} characters)"
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "tcp", raw
    if scheme.lower() != "tcp":
        raise UsageError(f"{expected}, got '{shown}' (only the tcp protocol is supported)", file="--scheduler")
    try:
        parts = urlsplit(f"tcp://{rest}")
        host, port = parts.hostname, parts.port
        extra = parts.path or parts.query or parts.fragment or parts.username or parts.password
    except ValueError:  # a port that is no number, or out of range
        host, port, extra = None, None, True
    if not host or port is None or not 0 < port < 65536 or extra:
        raise UsageError(f"{expected}, got '{shown}'", file="--scheduler")
    if ":" not in host and not _HOST.match(host):
        raise UsageError(f"{expected}, got '{shown}' (not a host name)", file="--scheduler")
    shown_host = f"[{host}]" if ":" in host else host
    return f"tcp://{shown_host}:{port}", host, port


def check_options(workers: int | None, scheduler: str | None, retries: int) -> str | None:
    """Check ``--workers``, ``--scheduler`` and ``--retries`` (before the scene: they are quick).

    Returns:
        The scheduler's address as ``tcp://HOST:PORT``, or None for a local cluster.
    Raises:
        UsageError: a bad value (exit 2), naming the option.
    """
    if not 0 <= retries <= MAX_RETRIES:
        raise UsageError(f"expected a count from 0 to {MAX_RETRIES}, got {retries}", file="--retries")
    if scheduler is not None and workers is not None:
        raise UsageError(
            "--workers sizes the local cluster; with --scheduler the cluster's own workers run the cases",
            file="--workers",
        )
    if workers is not None and not 1 <= workers <= max_workers():
        raise UsageError(
            f"expected 1 to {max_workers()} worker processes ({WORKERS_PER_CORE} per core of this machine; "
            f"more only compete for the cores), got {workers}",
            file="--workers",
        )
    if scheduler is None:
        return None
    return parse_scheduler(scheduler)[0]


def probe_scheduler(address: str, timeout: float | None = None) -> None:
    """Refuse an address where nothing accepts a connection at once, and one where no Dask
    endpoint answers Dask's handshake within ``timeout`` seconds (Dask itself would retry until
    its own timeout, or wait without end for a silent peer, and then print a traceback).

    Raises:
        UsageError: unknown host, connection refused or timed out, no Dask answer (exit 2).
        Interrupted: a signal came while waiting.
    """
    import asyncio

    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    _, host, port = parse_scheduler(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror as exc:
        raise UsageError(f"unknown host '{host}' in {address} ({exc.strerror})", file="--scheduler") from None
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise UsageError(
            f"nothing answers at {address} ({reason}); start the cluster first "
            "(`dask scheduler` prints its address) or leave --scheduler out for a local one",
            file="--scheduler",
        ) from None

    async def handshake() -> str:
        from distributed.comm import connect

        task = asyncio.ensure_future(connect(address, timeout=timeout))
        deadline = time.monotonic() + timeout
        while not task.done():
            if interrupts.received() is not None or time.monotonic() > deadline:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                return "interrupted" if interrupts.received() is not None else "timeout"
            await asyncio.sleep(0.05)
        try:
            comm = task.result()
        except Exception as exc:
            return f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        with contextlib.suppress(Exception):
            await comm.close()
        return "ok"

    answer = asyncio.run(handshake())
    if answer == "interrupted":
        interrupts.check()
    if answer == "timeout":
        raise UsageError(
            f"no Dask scheduler answered at {address} within {timeout:g} s (something accepts "
            "connections there, but it does not answer as Dask does)",
            file="--scheduler",
        )
    if answer != "ok":
        raise UsageError(f"cannot connect to a Dask scheduler at {address}: {answer[7:]}", file="--scheduler")


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Block SIGINT, SIGTERM and SIGHUP in this thread; the threads and processes it starts
    inherit the mask (the cluster's worker processes then never see a Ctrl-C meant for the
    client, :mod:`mbsim.sweep.preload`). A signal that comes meanwhile stays pending and is
    handled on leaving."""
    from multiprocessing import resource_tracker

    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.HANDLED)
    except (AttributeError, OSError, ValueError):  # no pthread_sigmask here
        yield
        return
    try:
        # multiprocessing's resource tracker, started by the first spawn, inherits the mask:
        # it ignores SIGINT and SIGTERM itself, and SIGHUP stays blocked in it (a hang-up would
        # end it, and its successor prints tracebacks). Starting it unblocks SIGINT and SIGTERM
        # in this thread, whatever the mask was: block them again.
        resource_tracker.ensure_running()
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.HANDLED)
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# ----------------------------------------------------------------------------- OUTDIR


def prepare_outdir(outdir: str | Path, stems: list[str]) -> tuple[Path, set[str]]:
    """Create OUTDIR and check it and the files already in it (module docstring).

    Returns:
        OUTDIR and the names of the case files it holds.
    Raises:
        OutputError: (exit 2) OUTDIR is not a writable directory, a table's path holds something
            mbsim did not write, or a case's file is refused. Interrupted: a signal came.
    """
    out = open_outdir(outdir, "sweep")
    for name, mark in TABLES.items():
        check_report(out / name, mark)
    wanted = {f"{stem}.h5" for stem in stems}
    try:
        with os.scandir(out) as entries:
            existing = {e.name for e in entries if e.name in wanted}
    except OSError as exc:
        raise OutputError(f"cannot list the output directory: {exc.strerror or exc}", file=str(out)) from None
    for k, name in enumerate(sorted(existing)):
        if k % 256 == 0:
            interrupts.check()
        check_result(out / name, read=False)
    return out, existing


def write_result(path: Path, data: bytes) -> None:
    """Write a case's result file into OUTDIR (:func:`mbsim.output.outdir.install_result`: never
    over another live run's file, a link or anything that is not an mbsim result).

    Raises:
        OutputError: the target is refused or cannot be written; nothing of it changed.
    """
    install_result(path, data)


def read_completed(path: Path, case_hash: str) -> dict[str, Any] | None:
    """The stored run summary when ``path`` is a completed result of this very case, else None."""
    import json

    import h5py

    if path.is_symlink() or not path.is_file():  # a link is never taken for the case's file
        return None
    try:
        with h5py.File(path, "r", locking=False) as f:
            status = f.attrs.get("status")
            stored = f.attrs.get(HASH_ATTR)
            summary = f.attrs.get(SUMMARY_ATTR)
    except (OSError, ValueError):  # unreadable or truncated: run again
        return None
    text = [v.decode() if isinstance(v, bytes) else v for v in (status, stored, summary)]
    if text[0] != "completed" or text[1] != case_hash or not isinstance(text[2], str):
        return None
    try:
        return json.loads(text[2])
    except ValueError:
        return None


# ----------------------------------------------------------------------------- the cluster


class _Cluster:
    """A Dask client on an embedded LocalCluster or on a running scheduler; :meth:`close` is
    bounded in time."""

    def __init__(self, address: str | None, workers: int, debug: bool) -> None:
        import distributed  # noqa: F401  (its import sets the log levels this one then changes)

        self.cluster = None
        self.client = None
        self.scratch = ""  # the local workers' temporary directories go below it
        self._threads = 1
        self._threads_at = -1e9
        quiet = logging.WARNING if debug else logging.CRITICAL  # failures are reported in the table
        logging.getLogger("distributed").setLevel(quiet)
        if address:
            self.client = _connect(address)
            n = len(self.client.scheduler_info().get("workers", {}))
            self.description = f"Dask scheduler {address} ({n} workers at the start)"
            return
        self.scratch = tempfile.mkdtemp(prefix="mbsim-sweep-")
        try:
            self._start_local(workers, quiet)
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        self.description = f"a local Dask cluster of {workers} worker process{'es' if workers != 1 else ''}"

    def _start_local(self, workers: int, quiet: int) -> None:
        """Start the LocalCluster in a helper thread (:func:`mbsim.interrupts.polled`): its worker
        processes take seconds to import the simulator, more on a loaded machine, and a signal
        meanwhile ends the start at once instead of when the cluster is up."""
        import dask
        from distributed import Client, LocalCluster

        config = {**LOCAL_CLUSTER_CONFIG, LOG_LEVEL_KEY: quiet}  # the workers' log level (preload)

        def start() -> tuple[Any, Any]:
            # the signals are blocked in the starting thread only: the cluster's threads and
            # worker processes inherit the mask, the main thread keeps handling them
            with _signals_blocked(), dask.config.set(config):
                cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    # the scheduler's small HTTP server (health, metrics) on a free loopback port, not 8787
                    scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                    silence_logs=quiet,
                    preload=["mbsim.sweep.preload"],
                )
                return cluster, Client(cluster, set_as_default=False)

        try:
            self.cluster, self.client = interrupts.polled(start)
        except Interrupted:
            self._abandon_start()
            raise

    @staticmethod
    def _abandon_start(grace: float = 1.5) -> None:
        """A signal came while the local cluster was starting: kill the worker processes spawned
        so far (a nanny may spawn one more while its start fails: keep at it while the start
        runs, for at most ``grace`` seconds), and let nothing wait for the half-started cluster
        at exit (distributed closes its clusters at exit, with a timeout of its own)."""
        import psutil
        from distributed.deploy.spec import SpecCluster

        for cluster in list(SpecCluster._instances):
            cluster.shutdown_on_close = False
        deadline = time.monotonic() + grace
        while True:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process().children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if "spawn_main" in " ".join(child.cmdline()):  # not the resource tracker
                            child.kill()
            if not interrupts.abandoned() or time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def threads(self) -> int:
        """Worker threads of the cluster (asked again at most every two seconds)."""
        now = time.monotonic()
        if now - self._threads_at > 2.0:
            self._threads_at = now
            with contextlib.suppress(Exception):  # the scheduler is busy or gone: keep what we had
                self._threads = max(1, sum(self.client.nthreads().values()))
        return self._threads

    def started(self, topic: str) -> dict[tuple[int, int], int]:
        """(case index, attempt) -> how many times a worker started it (from the logged events)."""
        counts: dict[tuple[int, int], int] = {}
        try:
            events = self.client.get_events(topic)
        except Exception:
            return counts
        for _, msg in events:
            if isinstance(msg, dict) and "case" in msg:
                key = (int(msg["case"]), int(msg.get("attempt", 1)))
                counts[key] = counts.get(key, 0) + 1
        return counts

    def _worker_pids(self) -> list[int]:
        pids = []
        with contextlib.suppress(Exception):
            for nanny in list(self.cluster.workers.values()):
                pid = getattr(nanny, "pid", None)
                if pid:
                    pids.append(int(pid))
        return pids

    def close(self, cancel: list[Any] = (), timeout: float = CLOSE_TIMEOUT) -> None:
        """Close the client and the local cluster within ``timeout`` seconds (or at a second
        signal). ``cancel``: the futures of cases abandoned in flight; a local cluster's workers
        are then (and after a signal) killed first: a case cannot be stopped half-way otherwise,
        and the cluster would wait for it. An external cluster is asked to cancel them."""
        pids = self._worker_pids() if self.cluster is not None else []
        if (cancel or interrupts.received() is not None) and pids:
            self._kill(pids)

        def work() -> None:
            if cancel and self.cluster is None:
                with contextlib.suppress(Exception):
                    self.client.cancel(list(cancel), force=True)
            with contextlib.suppress(Exception):
                self.client.close(timeout=max(1.0, timeout - 1))
            if self.cluster is not None:
                with contextlib.suppress(Exception):
                    self.cluster.close(timeout=max(1.0, timeout - 1))

        thread = threading.Thread(target=work, name="mbsim-sweep-close", daemon=True)
        signals = interrupts.count()
        thread.start()
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline and interrupts.count() <= max(1, signals):
            thread.join(0.05)
        if thread.is_alive() and self.cluster is not None:
            self.cluster.shutdown_on_close = False  # no second wait at exit (distributed's atexit)
            self._kill(pids + self._worker_pids())
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    @staticmethod
    def _kill(pids: list[int]) -> None:
        for pid in set(pids):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _connect(address: str, timeout: float | None = None) -> Any:
    """A Client of the scheduler at ``address``, made in a helper thread so that this one
    polls the signal flag, and bounded in time (a silent peer makes Dask's own connection wait
    without end).

    Raises:
        UsageError: nothing or no Dask scheduler answers there (exit 2). Interrupted: a signal.
    """
    from distributed import Client

    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    probe_scheduler(address, timeout)
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = Client(address, timeout=f"{timeout}s", set_as_default=False)
        except BaseException as exc:  # reported by the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=connect, name="mbsim-sweep-connect", daemon=True)
    with _signals_blocked():
        thread.start()
    deadline = time.monotonic() + timeout + 1.0
    while thread.is_alive():
        interrupts.check()
        if time.monotonic() > deadline:
            raise UsageError(
                f"no Dask scheduler answered at {address} within {timeout:g} s (something accepts "
                "connections there, but it does not answer as a Dask scheduler)",
                file="--scheduler",
            )
        thread.join(0.05)
    if "error" in box:
        exc = box["error"]
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"cannot connect to the Dask scheduler at {address}: {reason}", file="--scheduler")
    return box["client"]


# ----------------------------------------------------------------------------- the cases


def _apply(row: SweepRow, summary: dict[str, Any], assertions: tuple[Assertion, ...]) -> None:
    row.set_summary(summary)
    row.assertions = [o.to_dict() for o in evaluate_all(assertions, summary)]


class _Feed:
    """The cases in sweep order, derived one at a time: resumed, refused or handed out to run;
    keeps the count of finished cases and reports progress."""

    def __init__(
        self,
        plan: SweepPlan,
        rows: list[SweepRow],
        out: Path,
        existing: set[str],
        assertions: tuple[Assertion, ...],
        progress: Progress | None,
    ) -> None:
        self.plan, self.rows, self.out, self.existing = plan, rows, out, existing
        self.assertions, self.progress = assertions, progress
        self.position = 0  # the next case to look at
        self.done = 0
        self.resumed = 0
        self._shown = 0.0

    @property
    def exhausted(self) -> bool:
        return self.position >= len(self.rows)

    def finish(self, row: SweepRow, status: str, message: str = "", attempts: int | None = None) -> None:
        row.status, row.message = status, message
        if attempts is not None:
            row.attempts = attempts
        self.done += 1
        if self.progress:
            self.progress(row, self.done, len(self.rows))

    def _tick(self) -> None:
        """Progress without a row (resumed cases), at most ten times a second."""
        now = time.monotonic()
        if self.progress and (now - self._shown > 0.1 or self.exhausted):
            self._shown = now
            self.progress(None, self.done, len(self.rows))

    def next(self) -> Case | None:
        """The next case to run, or None when there is none (or a signal came)."""
        while not self.exhausted and interrupts.received() is None:
            index = self.position
            self.position += 1
            row = self.rows[index]
            try:
                case = self.plan.case(index)
            except SceneError as exc:  # a combination the checks before the run did not reach
                self.finish(row, "failed", str(exc))
                continue
            row.case_hash = case.case_hash
            if row.file in self.existing:
                path = self.out / row.file
                summary = read_completed(path, case.case_hash)
                if summary is not None:
                    row.status, row.source = "completed", "resumed"
                    _apply(row, summary, self.assertions)
                    self.done += 1
                    self.resumed += 1
                    self._tick()
                    continue
                try:
                    check_result(path)  # another program's HDF5 file, a link, or one a live run took since
                except OutputError as exc:
                    self.finish(row, "failed", str(exc))
                    continue
            return case
        return None

    def abandon(self, status: str, message: str) -> None:
        """Mark every case not looked at yet."""
        for row in self.rows[self.position :]:
            row.status, row.message = status, message
        self.position = len(self.rows)


class _Runner:
    """The client's loop: throttled submission, outcomes, retries, result files."""

    def __init__(
        self,
        plan: SweepPlan,
        feed: _Feed,
        cluster: _Cluster,
        retries: int,
        note: Callable[[str], None],
    ) -> None:
        from distributed import as_completed

        self.plan, self.feed, self.rows, self.out = plan, feed, feed.rows, feed.out
        self.cluster, self.retries, self.assertions, self.note = cluster, retries, feed.assertions, note
        self.token = uuid.uuid4().hex[:12]
        self.topic = EVENT_TOPIC_PREFIX + self.token
        self.cases: dict[int, Case] = {}  # the cases submitted so far (kept until they finish)
        self.attempt: dict[int, int] = {}  # the attempt each case is on
        self.submissions: dict[int, int] = {}
        self.free: dict[int, int] = {}  # resubmissions of attempts that never began
        self.ran: set[int] = set()  # every case submitted (for the scheduler's reruns)
        self.in_flight: dict[str, int] = {}  # future key -> case index
        self.futures_by_key: dict[str, Any] = {}
        self.mesh_cache: dict[str, bytes] = {}
        self.futures = as_completed(loop=cluster.client.loop)

    def submit(self, index: int) -> None:
        self.submissions[index] = self.submissions.get(index, 0) + 1
        case, attempt = self.cases[index], self.attempt[index]
        payload = self.plan.payload(case, attempt, self.topic, self.mesh_cache, self.cluster.scratch)
        key = f"mbsim-case-{self.token}-{index + 1}-{self.submissions[index]}"
        future = self.cluster.client.submit(run_case, payload, key=key, pure=False, retries=0)
        self.in_flight[future.key] = index
        self.futures_by_key[future.key] = future
        self.futures.add(future)

    def start(self, case: Case) -> None:
        index = case.index
        self.cases[index] = case
        self.attempt[index], self.free[index] = 1, 0
        self.ran.add(index)
        self.rows[index].source = "run"
        self.submit(index)

    def top_up(self) -> None:
        limit = self.cluster.threads()
        while len(self.in_flight) < limit and interrupts.received() is None:
            case = self.feed.next()
            if case is None:
                return
            self.start(case)

    def run(self, first: Case) -> None:
        self.start(first)
        self.top_up()
        while self.in_flight and interrupts.received() is None:
            batch = self.futures.next_batch(block=False)
            if not batch:
                time.sleep(POLL)
                continue
            for future in batch:  # every finished one: its result is here already
                self.collect(future)
            self.top_up()

    def done_with(self, index: int) -> None:
        self.cases.pop(index, None)

    def collect(self, future: Any) -> None:
        """One returned attempt: write its file, then finish, retry or resubmit the case."""
        from distributed.scheduler import KilledWorker

        index = self.in_flight.pop(future.key)
        self.futures_by_key.pop(future.key, None)
        row = self.rows[index]
        outcome: CaseOutcome | None = None
        if future.status == "finished":
            try:
                outcome = future.result()
            except Exception as exc:  # lost between finishing and gathering
                reason = f"{type(exc).__name__}: {exc}"
        elif future.status == "error":
            exc = future.exception()
            reason = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, KilledWorker):
                reason = "the worker running it died"
                began = self.cluster.started(self.topic).get((index, self.attempt[index]))
                if not began and self.free[index] < FREE_RESUBMISSIONS:
                    self.free[index] += 1
                    future.release()
                    self.submit(index)  # it never began: not an attempt
                    return
        else:
            reason = f"the task was {future.status}"
        future.release()
        if outcome is not None:
            row.worker = outcome.worker
            if outcome.data is not None:
                try:
                    write_result(self.out / row.file, outcome.data)
                except OutputError as exc:  # the client's disk, or a file not ours: no retry
                    self.finish(index, "failed", str(exc))
                    return
            if outcome.summary is not None:
                _apply(row, outcome.summary, self.assertions)
            if outcome.status == "completed":
                self.finish(index, "completed")
                return
            reason = outcome.message or "failed"
            if outcome.kind == "scene":  # deterministic: retrying says nothing new
                self.finish(index, "failed", reason)
                return
        if self.attempt[index] <= self.retries:
            row.history.append(f"attempt {self.attempt[index]}: {reason}")
            self.note(f"case {row.case}: attempt {self.attempt[index]} failed ({reason}); trying again")
            self.attempt[index] += 1
            self.submit(index)
        else:
            self.finish(index, "failed", reason)

    def finish(self, index: int, status: str, message: str = "") -> None:
        self.feed.finish(self.rows[index], status, message, self.attempt[index])
        self.done_with(index)

    def abandon(self, status: str, running: str) -> list[Any]:
        """Mark the cases in flight; returns their futures (to cancel)."""
        futures = list(self.futures_by_key.values())
        for index in self.in_flight.values():
            row = self.rows[index]
            row.status, row.message, row.attempts = status, running, self.attempt[index]
        self.in_flight.clear()
        self.futures_by_key.clear()
        return futures


def _count_scheduler_reruns(started: dict[tuple[int, int], int], rows: list[SweepRow], ran: set[int]) -> None:
    """Attempts the scheduler made on its own (an external cluster's ``allowed-failures``)."""
    extras: dict[int, int] = {}
    for (index, _), n in started.items():
        extras[index] = extras.get(index, 0) + max(0, n - 1)
    for index in ran:
        row = rows[index]
        extra = extras.get(index, 0)
        if extra:
            row.attempts += extra
            row.history.append(f"a worker died while running it; the scheduler ran it again ({extra}x)")
        row.retried = row.attempts > 1


# ----------------------------------------------------------------------------- the sweep


def run_sweep(
    plan: SweepPlan,
    outdir: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    retries: int = 1,
    assertions: tuple[Assertion, ...] = (),
    note: Callable[[str], None] | None = None,
    progress: Progress | None = None,
    debug: bool = False,
) -> SweepResult:
    """Run every case of ``plan`` not already completed in ``outdir``; write the files and tables.

    Args:
        plan: the checked sweep (:func:`mbsim.sweep.cases.plan_sweep`).
        outdir: where the result files and ``sweep.{json,csv,md}`` go (created).
        workers: worker processes of the local cluster (default: the core count); not with ``scheduler``.
        scheduler: address of a running Dask scheduler (``tcp://host:port``).
        retries: how many times a failed case is run again.
        assertions: checked on every case's summary.
        note: receives progress notes (the CLI prints them on stderr).
        progress: called after each case finishes (and with None for resumed cases).
        debug: keep Dask's warnings.

    Raises:
        UsageError: bad options, or no scheduler at the address (exit 2). OutputError: OUTDIR or a
        case's file is refused (exit 2). Interrupted: a signal before OUTDIR was looked at.
    Returns:
        The result; ``interrupted`` and ``signum`` are set when a signal stopped the sweep.
    """
    note = note or (lambda _: None)
    address = check_options(workers, scheduler, retries)
    with interrupts.handling():
        interrupts.check()
        if address:
            probe_scheduler(address)
        out, existing = prepare_outdir(outdir, plan.stems)
        start = time.perf_counter()
        result = SweepResult(
            scene=plan.scene_name,
            scene_file=path_text(plan.scene_file),  # shown in the tables: UTF-8 text whatever the locale
            outdir=str(out),
            overrides=list(plan.overrides),
            params=[{"key": p.key, "values": list(p.values)} for p in plan.params],
            zipped=plan.zipped,
            cluster="",
            retries=retries,
            assertions=[a.text for a in assertions],
        )
        if plan.assembly_report:
            moved = ", ".join(
                f"{r['body']} {r['distance']:.3g} m / {r['rotation']:.3g} rad" for r in plan.assembly_report
            )
            result.notes.append(f"the initial state was assembled onto the joints: {moved}")
        result.rows = [
            SweepRow(case=k + 1, file=f"{stem}.h5", parameters=plan.parameters(k)) for k, stem in enumerate(plan.stems)
        ]
        feed = _Feed(plan, result.rows, out, existing, assertions, progress)
        if progress:
            progress(None, 0, len(result.rows))
        first = feed.next()
        if first is not None:
            n = min(workers or default_workers(), len(result.rows) - feed.position + 1)
            _run_on_dask(plan, feed, first, result, n, address, retries, note, debug)
        if not result.cluster:
            if interrupts.received() is not None:
                result.cluster = "no cluster (interrupted before it started)"
            elif feed.resumed == len(result.rows):
                result.cluster = "no cluster (every case was resumed)"
            else:
                result.cluster = "no cluster (no case left to run)"
        signum = interrupts.received()
        if signum is not None:
            result.interrupted, result.signum = True, signum
            feed.abandon("interrupted", f"not started: {errors.interrupted_message(signum)}")
        if feed.resumed:
            note(f"{feed.resumed} of {len(result.rows)} cases already completed in {out}: not run again")
        result.wall_time_s = time.perf_counter() - start
        try:
            write_tables(result)
        except OSError as exc:
            raise OutputError(f"cannot write the sweep's tables: {exc.strerror or exc}", file=str(out)) from None
    return result


def _run_on_dask(
    plan: SweepPlan,
    feed: _Feed,
    first: Case,
    result: SweepResult,
    workers: int,
    address: str | None,
    retries: int,
    note: Callable[[str], None],
    debug: bool,
) -> None:
    """Start or reach the cluster, run the cases, close; fills the rows and ``result``."""
    local = f"{workers} local worker{'s' if workers != 1 else ''}"
    note(f"starting {'a connection to ' + address if address else local}...")
    rows = feed.rows
    try:
        cluster = _Cluster(address, workers, debug)
    except Interrupted:  # while connecting: the caller marks this case and the rest
        feed.position = first.index
        return
    except Exception:
        if interrupts.received() is None:
            raise
        # a SIGTERM to the whole process group ends workers that are still starting, and the
        # cluster's start fails with them: it is the signal that ended the sweep
        feed.position = first.index
        return
    result.cluster = cluster.description
    runner = _Runner(plan, feed, cluster, retries, note)
    cancel: list[Any] = []
    try:
        if interrupts.received() is None:
            try:
                runner.run(first)
            except Exception as exc:  # the scheduler went away...: keep what finished, say why
                reason = f"the sweep stopped: {type(exc).__name__}: {exc}"
                result.notes.append(reason)
                cancel = runner.abandon("failed", reason)
                feed.abandon("failed", reason)
        else:
            feed.position = first.index  # never submitted
        signum = interrupts.received()
        if signum is not None:
            note(f"{errors.interrupted_message(signum)}: cancelling the cases in flight...")
            cancel = runner.abandon("interrupted", f"{errors.interrupted_message(signum)} while running")
        else:
            _count_scheduler_reruns(cluster.started(runner.topic), rows, runner.ran)
        for index in runner.ran:
            rows[index].retried = rows[index].attempts > 1
    finally:
        cluster.close(cancel)
