"""CONTRACT §4, readable while running: another process opens a live result file with plain h5py
(no flag, no environment variable) or ``mbsim info`` and reads every row flushed so far."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import CHAIN, run_mbsim

READER = """
import json, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    out = {
        "status": f.attrs["status"],
        "time": len(f["time"]),
        "q": len(f["q"]),
        "position": len(f["bodies/box1/position"]) if "bodies/box1/position" in f else -1,
        "scene": "mbsim" in f["scene"][()].decode(),
    }
print(json.dumps(out))
"""


def read_in_another_process(path: Path, *extra: str) -> dict:
    code = READER.replace('"r")', '"r", ' + ", ".join(extra) + ")") if extra else READER
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_plain_h5py_reader_and_mbsim_info_open_a_live_file(tmp_path: Path, background) -> None:
    out = tmp_path / "live.h5"
    run = background("run", CHAIN, "-o", out, "--set", "time.end=1000", "--quiet")
    run.wait_rows(out, 2)
    first = read_in_another_process(out)
    assert first["status"] == "running"
    assert first["time"] >= 2 and first["scene"]
    assert first["q"] == first["time"]  # whole rows: every dataset of a flush has its rows
    assert first["position"] == first["time"]
    swmr = read_in_another_process(out, "swmr=True")  # HDF5's SWMR reader flag works as well
    assert swmr["time"] >= first["time"]

    code, stdout, stderr = run_mbsim("info", out, "--json")
    assert code == 0, stderr
    info = json.loads(stdout)
    assert info["status"] == "running" and info["live"] is True
    assert f"process {run.proc.pid}" in info["writer"]
    assert info["recorded"] >= first["time"]

    run.wait_rows(out, first["time"] + 1)  # the file keeps growing for a new reader
    assert read_in_another_process(out)["time"] > first["time"]

    run.signal(signal.SIGTERM)
    code, _, stderr = run.finish()
    assert code == 143, stderr
    final = read_in_another_process(out)
    assert final["status"] == "failed" and final["q"] == final["time"]


HAMMER = """
import sys, time, h5py
ok, failures = 0, []
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        with h5py.File(sys.argv[1], "r") as f:
            len(f["time"])
        ok += 1
    except OSError as exc:
        failures.append(str(exc)[:120])
print(ok, len(failures), failures[:3])
"""


@pytest.mark.slow
def test_a_reader_opening_during_flushes_never_meets_a_half_flushed_file(tmp_path: Path, background) -> None:
    """Thousands of plain opens while the run flushes every 2 s (every step recorded, so each flush
    writes megabytes): before the writer lengthened the file ahead of its writes, a reader landing
    inside a flush met "truncated file" (the superblock's end past the data written so far), about
    once every 3 s."""
    out = tmp_path / "busy.h5"
    run = background("run", CHAIN, "-o", out, "--set", "time.end=100000", "--set", "output.every=1", "--quiet")
    run.wait_rows(out, 2)
    proc = subprocess.run([sys.executable, "-c", HAMMER, str(out), "12"], capture_output=True, text=True, timeout=120)
    run.signal(signal.SIGTERM)
    run.finish(timeout=60)
    assert proc.returncode == 0, proc.stderr
    ok, failed, examples = proc.stdout.split(" ", 2)
    assert int(ok) > 1000 and int(failed) == 0, f"{failed} of {int(ok) + int(failed)} opens failed: {examples}"
