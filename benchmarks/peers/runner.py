"""Running the cases: warm-up, round-robin timing, the cross-checks, and one row per mbsim method."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.peers.cases import CASES, _build
from benchmarks.peers.shared import FULL, PEER_LABELS, PEERS, QUICK, WARMUP_STEPS, Case, _one_line


def time_case(case: Case, log: Callable[[str], None] = print) -> None:
    """Warm every contender up, then time them round robin ``case.repeats`` times."""
    for c in case.contenders:
        if c.run is None:
            continue
        try:
            c.run(min(WARMUP_STEPS, case.steps))
        except Exception as exc:
            c.note = "failed: " + _one_line(f"{type(exc).__name__}: {exc}")
            c.run = None
    for _ in range(case.repeats):
        for c in case.contenders:
            if c.run is None:
                continue
            try:
                wall, taken = c.run(case.steps)
            except Exception as exc:
                c.note = "failed: " + _one_line(f"{type(exc).__name__}: {exc}")
                c.run = None
                c.us.clear()
                continue
            c.steps = taken
            c.us.append(1e6 * wall / max(taken, 1))
    for c in case.contenders:
        shown = f"{c.median:10.1f} µs/step" if c.median is not None else f"{'-':>10}        "
        log(f"  {case.key:9} {PEER_LABELS[c.column]:9} {shown}  {c.label or c.note}")


def check_case(case: Case, log: Callable[[str], None] = print) -> None:
    if case.check is None:
        return
    try:
        case.checks = case.check()
    except Exception as exc:
        case.checks = [{"quantity": "cross-check", "peer": "-", "error": _one_line(f"{type(exc).__name__}: {exc}")}]
    for row in case.checks:
        if "error" in row:
            log(f"  check {case.key}: {row['peer']}: {row['error']}")
        else:
            verdict = "agrees" if row["ok"] else "DIFFERS"
            log(f"  check {case.key}: {row['quantity']}: mbsim {np.round(row['mbsim'], 6).tolist()}, "
                f"{row['peer']} {np.round(row['value'], 6).tolist()}: distance {row['distance']:.2e} "
                f"(tol {row['tol']:g}) {verdict}")  # fmt: skip


def rows_of(case: Case) -> list[dict]:
    """One row per mbsim method of the case, the peers' medians beside it."""
    peers: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    labels: dict[str, str] = {}
    for peer in PEERS:
        c = next((c for c in case.contenders if c.column == peer and not c.extra), None)
        peers[peer] = c.median if c is not None else None
        if c is not None and c.median is None:
            notes[peer] = c.note or "not run"
        if c is not None and c.median is not None:
            labels[peer] = c.label
    timed = {p: v for p, v in peers.items() if v is not None}
    best = min(timed, key=timed.get) if timed else None
    extras = [
        f"{case.title}: extra {PEER_LABELS[c.column]} set-up, {c.label}: "
        + (f"{c.median:.1f} µs/step" if c.median is not None else c.note or "not run")
        for c in case.contenders
        if c.extra
    ]
    rows = []
    for c in case.contenders:
        if c.column != "mbsim":
            continue
        mbsim_us = c.median
        row = {
            "case": case.title,
            "key": case.key,
            "method": c.label,
            "mbsim_us": mbsim_us,
            **{f"{p}_us": peers[p] for p in PEERS},
            "best_peer": best,
            "ratio": (mbsim_us / timed[best]) if (best is not None and mbsim_us is not None) else None,
            "steps": case.steps,
            "repeats": case.repeats,
            "notes": dict(notes, **({"mbsim": c.note} if mbsim_us is None else {})),
            "peer_setups": labels,
            "checks": case.checks,
            "case_notes": [*extras, *case.notes],
        }
        rows.append(row)
    return rows


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None


def run_peers(quick: bool = False, cases: tuple[str, ...] = CASES, log: Callable[[str], None] = print) -> list[dict]:
    """Build, time and cross-check every case; return the rows (see the module docstring)."""
    plan = QUICK if quick else FULL
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mbsim_peers_") as tmp:
        for key in cases:
            start, load = time.perf_counter(), _loadavg()
            case = _build(key, plan, Path(tmp))
            time_case(case, log)
            check_case(case, log)
            for row in rows_of(case):
                row["loadavg"] = (load, _loadavg())  # the 1-minute load average at the case's start and end
                rows.append(row)
            log(f"  {key}: {time.perf_counter() - start:.1f} s")
    return rows
