"""Running a planned sweep on Dask: resume, submit, retry, collect, write.

The client (this process) does the bookkeeping; workers only run cases
(:func:`mbsim.sweep.worker.run_case`) and return bytes.

- **Cluster.** No scheduler address: an embedded ``distributed.LocalCluster`` of N worker
  processes with one thread each, bound to 127.0.0.1, no dashboard, with the scheduler's
  ``allowed-failures`` at 0 (a worker death comes straight back to this client, which retries
  under ``--retries``) and the workers' profiler and monitors quiet
  (:data:`LOCAL_CLUSTER_CONFIG`). An address: that cluster, unchanged (its own ``allowed-failures``
  applies first; the attempts it makes are counted from the start events the workers log).
- **Throttle.** At most as many cases are in flight as the cluster has worker threads, so a
  worker that dies takes only the case it was running, and a large sweep holds only the
  payloads of the running cases.
- **Results.** Every attempt that returns a file has it written into OUTDIR by the client,
  through a temporary name and a rename (a half-written file never carries the final name).
  A worker's disk is never assumed to be the client's.
- **Retries.** A case whose run failed (exit 3 in ``mbsim run``'s terms), raised an internal
  error, or whose worker died is submitted again, up to ``retries`` times; after that it is
  recorded ``failed`` with the last reason. A scene error is not retried (it would fail the
  same way). An attempt that never started (its worker died before it began) is resubmitted
  without counting.
- **SIGINT.** The first Ctrl-C cancels the cases in flight, records them and the ones never
  started as ``interrupted``, writes the table and returns (the CLI exits 130); a second one
  stops at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mbsim.assertions import Assertion, evaluate_all
from mbsim.errors import MbsimError, SceneError
from mbsim.sweep.cases import Case, SweepPlan
from mbsim.sweep.table import SweepResult, SweepRow, write_atomic, write_tables
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
Progress = Callable[[SweepRow | None, int, int], None]  # (row just finished or None, done, total)


def default_workers() -> int:
    """The number of cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _InterruptFlag:
    """SIGINT sets a flag the loop polls (the first time); the second SIGINT raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.raised = False
        self._old: Any = None

    def __enter__(self) -> _InterruptFlag:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def read_completed(path: Path, case_hash: str) -> dict[str, Any] | None:
    """The stored run summary when ``path`` is a completed result of this very case, else None."""
    import json

    import h5py

    if not path.is_file():
        return None
    try:
        with h5py.File(path, "r") as f:
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


class _Cluster:
    """A Dask client on an embedded LocalCluster or on a running scheduler; closed on exit."""

    def __init__(self, scheduler: str | None, workers: int, debug: bool) -> None:
        import dask
        from distributed import Client, LocalCluster

        self.cluster = None
        quiet = logging.WARNING if debug else logging.CRITICAL  # failures are reported in the table
        logging.getLogger("distributed").setLevel(quiet)
        if scheduler:
            try:
                self.client = Client(scheduler, timeout="15s", set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise MbsimError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
            n = len(self.client.scheduler_info().get("workers", {}))
            self.description = f"Dask scheduler {scheduler} ({n} workers at the start)"
        else:
            with dask.config.set(LOCAL_CLUSTER_CONFIG):
                self.cluster = LocalCluster(
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
            self.client = Client(self.cluster, set_as_default=False)
            self.description = f"a local Dask cluster of {workers} worker process{'es' if workers != 1 else ''}"

    def threads(self) -> int:
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:  # the scheduler is busy or gone: keep one in flight
            return 1

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

    def close(self) -> None:
        try:
            self.client.close(timeout=10)
        finally:
            if self.cluster is not None:
                self.cluster.close(timeout=10)


def _apply(row: SweepRow, summary: dict[str, Any], assertions: tuple[Assertion, ...]) -> None:
    row.set_summary(summary)
    row.assertions = [o.to_dict() for o in evaluate_all(assertions, summary)]


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
        progress: called after each case finishes (and once at the start with None).
        debug: keep Dask's warnings.

    Raises:
        SceneError: bad settings (exit 2). MbsimError: the scheduler cannot be reached.
    Returns:
        The result; ``interrupted`` is set when SIGINT stopped the sweep.
    """
    note = note or (lambda _: None)
    if retries < 0:
        raise SceneError(f"expected a count >= 0, got {retries}", file="--retries")
    if scheduler and workers is not None:
        raise SceneError(
            "--workers sizes the local cluster; with --scheduler the cluster's own workers run the cases",
            file="--workers",
        )
    if workers is not None and workers < 1:
        raise SceneError(f"expected at least 1 worker, got {workers}", file="--workers")
    out = Path(outdir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SceneError(f"cannot create the output directory: {exc}", file=str(out)) from None
    start = time.perf_counter()
    result = SweepResult(
        scene=plan.scene_name,
        scene_file=plan.scene_file,
        outdir=str(out),
        overrides=list(plan.overrides),
        params=[{"key": p.key, "values": list(p.values)} for p in plan.params],
        zipped=plan.zipped,
        cluster="",
        retries=retries,
        assertions=[a.text for a in assertions],
    )
    if plan.assembly_report:
        moved = ", ".join(f"{r['body']} {r['distance']:.3g} m / {r['rotation']:.3g} rad" for r in plan.assembly_report)
        result.notes.append(f"the initial state was assembled onto the joints: {moved}")
    rows = [
        SweepRow(case=c.index + 1, file=f"{c.stem}.h5", parameters=c.parameters, case_hash=c.case_hash)
        for c in plan.cases
    ]
    result.rows = rows
    todo: list[Case] = []
    for case, row in zip(plan.cases, rows, strict=True):
        summary = read_completed(out / row.file, case.case_hash)
        if summary is None:
            todo.append(case)
            continue
        row.status, row.source = "completed", "resumed"
        _apply(row, summary, assertions)
    total = len(rows)
    if len(todo) < total:
        note(f"{total - len(todo)} of {total} cases already completed in {out}: not run again")
    if progress:
        progress(None, total - len(todo), total)
    if todo:
        n = min(workers or default_workers(), len(todo))
        _run_on_dask(plan, todo, rows, out, result, n, scheduler, retries, assertions, note, progress, debug)
    else:
        result.cluster = "no cluster (every case was resumed)"
    result.wall_time_s = time.perf_counter() - start
    write_tables(result)
    return result


def _run_on_dask(
    plan: SweepPlan,
    todo: list[Case],
    rows: list[SweepRow],
    out: Path,
    result: SweepResult,
    workers: int,
    scheduler: str | None,
    retries: int,
    assertions: tuple[Assertion, ...],
    note: Callable[[str], None],
    progress: Progress | None,
    debug: bool,
) -> None:
    """Start or reach the cluster, run the cases, close; fills ``rows`` and ``result``."""
    note(f"starting {'a connection to ' + scheduler if scheduler else f'{workers} local workers'}...")
    with _InterruptFlag() as interrupt:
        cluster = _Cluster(scheduler, workers, debug)
        result.cluster = cluster.description
        try:
            runner = _Runner(plan, todo, rows, out, cluster, retries, assertions, note, progress)
            try:
                runner.run(interrupt)
            except Exception as exc:  # the scheduler went away...: keep what finished, say why
                reason = f"the sweep stopped: {type(exc).__name__}: {exc}"
                result.notes.append(reason)
                runner.abandon("failed", reason, reason)
            if interrupt.raised:
                result.interrupted = True
                note("interrupted: cancelling the cases in flight...")
                runner.abandon("interrupted", "interrupted while running", "not started: interrupted")
            _count_scheduler_reruns(cluster.started(runner.topic), rows, runner.cases)
        finally:
            cluster.close()


class _Runner:
    """The client's loop: throttled submission, outcomes, retries, result files."""

    def __init__(
        self,
        plan: SweepPlan,
        todo: list[Case],
        rows: list[SweepRow],
        out: Path,
        cluster: _Cluster,
        retries: int,
        assertions: tuple[Assertion, ...],
        note: Callable[[str], None],
        progress: Progress | None,
    ) -> None:
        from distributed import as_completed

        self.plan, self.rows, self.out, self.cluster = plan, rows, out, cluster
        self.retries, self.assertions, self.note, self.progress = retries, assertions, note, progress
        self.token = uuid.uuid4().hex[:12]
        self.topic = EVENT_TOPIC_PREFIX + self.token
        self.cases = {c.index: c for c in todo}
        self.attempt = dict.fromkeys(self.cases, 1)  # the attempt each case is on
        self.submissions = dict.fromkeys(self.cases, 0)
        self.free = dict.fromkeys(self.cases, 0)  # resubmissions of attempts that never began
        self.waiting = list(reversed(todo))  # pop() takes them in sweep order
        self.in_flight: dict[str, int] = {}  # future key -> case index
        self.mesh_cache: dict[str, bytes] = {}
        self.done = len(rows) - len(todo)
        self.futures = as_completed(loop=cluster.client.loop)

    def submit(self, index: int) -> None:
        self.submissions[index] += 1
        payload = self.plan.payload(self.cases[index], self.attempt[index], self.topic, self.mesh_cache)
        key = f"mbsim-case-{self.token}-{index + 1}-{self.submissions[index]}"
        future = self.cluster.client.submit(run_case, payload, key=key, pure=False, retries=0)
        self.in_flight[future.key] = index
        self.futures.add(future)

    def top_up(self) -> None:
        limit = self.cluster.threads()
        while self.waiting and len(self.in_flight) < limit:
            self.submit(self.waiting.pop().index)

    def run(self, interrupt: _InterruptFlag) -> None:
        self.top_up()
        while self.in_flight and not interrupt.raised:
            batch = self.futures.next_batch(block=False)
            if not batch:
                time.sleep(0.02)
                continue
            for future in batch:
                self.collect(future)
            if not interrupt.raised:
                self.top_up()

    def finish(self, row: SweepRow, status: str, message: str = "") -> None:
        row.status, row.message, row.attempts = status, message, self.attempt[row.case - 1]
        self.done += 1
        if self.progress:
            self.progress(row, self.done, len(self.rows))

    def collect(self, future: Any) -> None:
        """One returned attempt: write its file, then finish, retry or resubmit the case."""
        from distributed.scheduler import KilledWorker

        index = self.in_flight.pop(future.key)
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
        row.source = "run"
        if outcome is not None:
            row.worker = outcome.worker
            if outcome.data is not None:
                try:
                    write_atomic(self.out / row.file, outcome.data)
                except OSError as exc:  # the client's disk: retrying would not help
                    self.finish(row, "failed", f"cannot write the result file: {exc}")
                    return
            if outcome.summary is not None:
                _apply(row, outcome.summary, self.assertions)
            if outcome.status == "completed":
                self.finish(row, "completed")
                return
            reason = outcome.message or "failed"
            if outcome.kind == "scene":  # deterministic: retrying says nothing new
                self.finish(row, "failed", reason)
                return
        if self.attempt[index] <= self.retries:
            row.history.append(f"attempt {self.attempt[index]}: {reason}")
            self.note(f"case {row.case}: attempt {self.attempt[index]} failed ({reason}); trying again")
            self.attempt[index] += 1
            self.submit(index)
        else:
            self.finish(row, "failed", reason)

    def abandon(self, status: str, running: str, waiting: str) -> None:
        """Cancel what is in flight; mark it and the cases never submitted."""
        with contextlib.suppress(Exception):  # a scheduler gone already: nothing to cancel
            self.cluster.client.cancel(list(self.futures.futures), force=True)
        for index in self.in_flight.values():
            row = self.rows[index]
            row.status, row.message, row.attempts = status, running, self.attempt[index]
        for case in self.waiting:
            self.rows[case.index].status, self.rows[case.index].message = status, waiting
        self.in_flight.clear()
        self.waiting.clear()


def _count_scheduler_reruns(started: dict[tuple[int, int], int], rows: list[SweepRow], cases: dict[int, Case]) -> None:
    """Attempts the scheduler made on its own (an external cluster's ``allowed-failures``)."""
    extras: dict[int, int] = {}
    for (index, _), n in started.items():
        extras[index] = extras.get(index, 0) + max(0, n - 1)
    for index in cases:
        row = rows[index]
        extra = extras.get(index, 0)
        if extra:
            row.attempts += extra
            row.history.append(f"a worker died while running it; the scheduler ran it again ({extra}x)")
        row.retried = row.attempts > 1
