"""Helpers of the CONTRACT §4 tests: the real ``mbsim`` command in subprocesses, files read as
another process would, and the scenes the tests share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "scenes" / "four_box_chain.yaml"
PENDULUM = ROOT / "scenes" / "pendulum_2d.yaml"
BLOCKS = ROOT / "scenes" / "blocks_elastic.yaml"

# two 1 kg bodies on a 9e4 N/m spring stretched by 0.1 m, no gravity: period 1.5e-2 s, so rk4 at
# 1e-2 s blows up within a few steps and 1e-4 s resolves it
STIFF_SPRING = """\
mbsim: 1
name: stiff free spring
time: {end: 10, step: 0.01}
solver: {method: lagrange, integrator: rk4}
bodies:
  - {name: a, mass: 1, inertia: [0.01, 0.01, 0.01], position: [0, 0, 0]}
  - {name: b, mass: 1, inertia: [0.01, 0.01, 0.01], position: [1.1, 0, 0]}
forces:
  - {type: spring_damper, body1: a, body2: b, point1: [0, 0, 0], point2: [1.1, 0, 0],
     stiffness: 9.0e4, damping: 0, rest_length: 1.0}
"""


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
    except (OSError, KeyError, RuntimeError):  # RuntimeError: a link lookup mid-flush (h5l)
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
