"""One case of a sweep, as a Dask worker runs it: files in, result file bytes out.

The task carries everything the case needs as bytes (the scene file and the mesh files its
shapes name), so that a worker on another machine needs no shared disk: :func:`run_case` lays
the files out in a temporary directory the way they lie relative to the scene on the client
(a mesh at ``../meshes/part.stl`` from the scene is written at the same relative place), loads
the scene with the case's ``--set`` overrides exactly as ``mbsim run`` would, runs it into a
temporary result file, stamps the sweep attributes on it and returns its bytes. The client
writes the file into OUTDIR (atomically). Nothing here imports Dask; the same function runs
in-process (benchmarks, tests).

Failures never raise: a scene error (deterministic, not retried), a failed run (status
``failed``, its partial file returned) and an internal error all come back as a
:class:`CaseOutcome`. Only the death of the worker's process itself reaches the client as an
exception (Dask's ``KilledWorker``).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import mbsim
from mbsim.errors import MbsimError, SceneError

# root attributes stamped on every result file a sweep writes (besides CONTRACT §3's)
HASH_ATTR = "sweep_case_hash"
CASE_ATTR = "sweep_case"
PARAMETERS_ATTR = "sweep_parameters"
SUMMARY_ATTR = "sweep_summary"
EVENT_TOPIC_PREFIX = "mbsim-sweep-"


@dataclass(frozen=True)
class CasePayload:
    """What a worker needs for one case.

    Attributes:
        index: position of the case in the sweep, 0-based.
        attempt: 1 for the first submission, 2 for the first retry, ...
        scene_name: file name of the scene (``blocks_elastic.yaml``).
        scene_dir: directory of the scene below the worker's temporary root (POSIX, may be ``.``).
        scene_bytes: the scene file as read on the client.
        files: (path below the temporary root (POSIX), bytes) of every mesh file the case names.
        overrides: the ``--set`` assignments of the case (the sweep's own, then the parameters,
            then rewrites of absolute mesh paths to the shipped copies).
        strict: ``--strict``: refuse an inconsistent start instead of assembling it.
        case_hash: sha256 of the scene as loaded and of its meshes (:func:`mbsim.sweep.cases.case_hash`).
        parameters: (key, value) of the case, stamped on the file as JSON.
        display_file: the scene file as the user named it, put in messages instead of the temporary path.
        topic: Dask event topic on which the worker logs that the attempt started ('' for none).
        scratch: directory for the case's temporary directory ('' for the system's): the client
            of a local cluster gives one it removes after the cluster, so that a worker killed
            mid-case (an interrupted sweep) leaves nothing behind.
    """

    index: int
    attempt: int
    scene_name: str
    scene_dir: str
    scene_bytes: bytes
    files: tuple[tuple[str, bytes], ...]
    overrides: tuple[str, ...]
    strict: bool
    case_hash: str
    parameters: tuple[tuple[str, Any], ...]
    display_file: str
    topic: str = ""
    scratch: str = ""


@dataclass
class CaseOutcome:
    """What a worker returns for one attempt of one case.

    Attributes:
        index, attempt: as in the payload.
        status: ``completed`` or ``failed`` (the run's status; ``failed`` also for errors).
        kind: ``ok``, ``simulation`` (the run failed: exit 3 in ``mbsim run``'s terms), ``scene``
            (the case's scene is wrong: not retried) or ``internal`` (an unforeseen exception).
        message: why it failed ('' when it completed).
        summary: ``RunSummary.to_dict()`` of the run, plus ``outputs``: its outputs' summaries
            apart (max_NAME ... -> value); None when it did not start.
        data: the bytes of the result file (None when none was written).
        worker: ``host:pid`` that ran it.
        seconds: wall time of the whole task on the worker (files, load, compile, run, read back).
    """

    index: int
    attempt: int
    status: str
    kind: str
    message: str = ""
    summary: dict[str, Any] | None = None
    data: bytes | None = field(default=None, repr=False)
    worker: str = ""
    seconds: float = 0.0


def _log_start(payload: CasePayload) -> None:
    """Tell the scheduler that this attempt started (it counts attempts the scheduler itself
    reran after a worker died); nothing when not on a Dask worker."""
    if not payload.topic:
        return
    try:
        from distributed import get_worker

        get_worker().log_event(payload.topic, {"case": payload.index, "attempt": payload.attempt})
    except Exception:  # not in a worker, or an older distributed: the client's count stands
        pass


def _lay_out(payload: CasePayload, root: Path) -> Path:
    """Write the scene and its meshes below ``root``; returns the scene's path."""
    scene_dir = root / PurePosixPath(payload.scene_dir)
    scene_dir.mkdir(parents=True, exist_ok=True)
    scene = scene_dir / payload.scene_name
    scene.write_bytes(payload.scene_bytes)
    for rel, data in payload.files:
        target = root / PurePosixPath(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return scene


def stamp(path: str | Path, payload: CasePayload, summary: dict[str, Any]) -> None:
    """Add the sweep's root attributes to a closed result file."""
    import h5py

    with h5py.File(path, "a") as f:
        f.attrs[HASH_ATTR] = payload.case_hash
        f.attrs[CASE_ATTR] = payload.index + 1
        f.attrs[PARAMETERS_ATTR] = json.dumps(dict(payload.parameters), default=str)
        f.attrs[SUMMARY_ATTR] = json.dumps(summary, default=str)


def run_case(payload: CasePayload) -> CaseOutcome:
    """Run one case in a temporary directory and return its outcome with the result file's bytes."""
    from mbsim.scene.spec import load_scene
    from mbsim.simulate import run

    start = time.perf_counter()
    _log_start(payload)
    outcome = CaseOutcome(payload.index, payload.attempt, "failed", "internal")
    outcome.worker = f"{socket.gethostname()}:{os.getpid()}"
    scratch = payload.scratch if payload.scratch and os.path.isdir(payload.scratch) else None
    with tempfile.TemporaryDirectory(prefix="mbsim-case-", dir=scratch) as tmp:
        root = Path(tmp)
        out = root / "result.h5"
        scene = root / "scene"  # placeholder until laid out: messages replace the real path
        try:
            scene = _lay_out(payload, root / "scene")
            spec = load_scene(str(scene), payload.overrides)
            ran = run(spec, out, strict=payload.strict)
            summary = ran.to_dict()
            # the outputs' summaries also apart: the table's columns, whatever the outputs' names
            summary["outputs"] = dict(ran.outputs)
        except SceneError as exc:
            outcome.kind, outcome.message = "scene", str(exc)
        except MbsimError as exc:
            outcome.kind, outcome.message = "simulation", str(exc)
        except Exception as exc:  # one case must not end the sweep
            outcome.message = f"internal error: {type(exc).__name__}: {exc}"
        else:
            summary["file"] = ""  # the temporary path means nothing on the client
            summary["scene"] = spec.name
            outcome.summary = summary
            outcome.status = summary["status"]
            outcome.kind = "ok" if outcome.status == "completed" else "simulation"
            outcome.message = summary["message"]
        outcome.message = outcome.message.replace(str(scene), payload.display_file)
        if out.is_file():
            try:
                if outcome.summary is not None:
                    stamp(out, payload, outcome.summary)
                outcome.data = out.read_bytes()
            except Exception as exc:  # a file that cannot be read back is a failed case
                outcome.status, outcome.kind = "failed", "internal"
                outcome.message = f"reading the result file back failed: {type(exc).__name__}: {exc}"
    outcome.seconds = time.perf_counter() - start
    return outcome


def worker_version() -> str:
    """The mbsim version a worker has (the client compares it with its own)."""
    return mbsim.__version__


__all__ = ["CaseOutcome", "CasePayload", "run_case", "stamp"]
