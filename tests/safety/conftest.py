"""Helpers of the CONTRACT §4 tests: the real ``mbsim`` command in subprocesses, files read as
another process would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import h5py
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "scenes" / "four_box_chain.yaml"
PENDULUM = ROOT / "scenes" / "pendulum_2d.yaml"


def mbsim_command(*args: object) -> list[str]:
    return [sys.executable, "-m", "mbsim", *(str(a) for a in args)]


def run_mbsim(*args: object, timeout: float = 120, env: dict | None = None, cwd: Path | None = None):
    """Run ``mbsim ARGS`` to the end: (exit code, stdout, stderr)."""
    proc = subprocess.run(mbsim_command(*args), capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def root_attrs(path: Path) -> dict:
    """The root attributes, read the way a user's script would (plain h5py, no flags)."""
    with h5py.File(path, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def recorded_rows(path: Path) -> int:
    """Rows of /time readable now (0 while the file does not exist or is mid-flush)."""
    try:
        with h5py.File(path, "r") as f:
            return len(f["time"]) if "time" in f else 0
    except (OSError, KeyError):
        return 0


class Background:
    """One ``mbsim`` process in its own process group; killed (group and all) at the end."""

    def __init__(self, *args: object, env: dict | None = None, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            mbsim_command(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )

    def wait_rows(self, path: Path, rows: int = 1, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while True:
            n = recorded_rows(path)
            if n >= rows:
                return n
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, f"no {rows} recorded rows in {path} within {timeout} s"
            time.sleep(0.1)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()


@pytest.fixture
def background() -> Iterator:
    """``background(*args) -> Background``; every process started is killed after the test."""
    started: list[Background] = []

    def start(*args: object, **kwargs) -> Background:
        process = Background(*args, **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
