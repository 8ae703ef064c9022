"""mbsim as a contender: one scene with overrides, its stepping loop timed as ``mbsim.simulate.run`` reports it."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class MbsimRun:
    """mbsim on one scene with overrides: ``run(steps)`` loads it (untimed) and times ``run``'s loop."""

    def __init__(self, scene: Path, overrides: tuple[str, ...], workdir: Path, tag: str):
        self.scene, self.overrides, self.workdir, self.tag = scene, tuple(overrides), workdir, tag
        self.count = 0
        self.last_file: Path | None = None
        self.last_status = ""

    def _spec(self, steps: int, extra: tuple[str, ...] = ()):
        from mbsim.scene.spec import load_scene

        step = load_scene(str(self.scene), self.overrides).step
        return load_scene(str(self.scene), [*self.overrides, f"time.end={steps * step!r}", *extra])

    def run(self, steps: int) -> tuple[float, int]:
        from mbsim.simulate import run

        spec = self._spec(steps)
        self.count += 1
        out = self.workdir / f"{self.tag}_{self.count}.h5"
        summary = run(spec, out)
        if self.last_file is not None and self.last_file.exists():
            self.last_file.unlink()
        self.last_file = out
        self.last_status = summary.status if not summary.message else f"{summary.status}: {summary.message}"
        if summary.status != "completed":
            raise RuntimeError(f"mbsim run {self.last_status}")
        return summary.wall_time_s, summary.steps

    def simulate(self, steps: int) -> Path:
        """An untimed run of ``steps`` steps (for the cross-check); its result file."""
        from mbsim.simulate import run

        out = self.workdir / f"{self.tag}_check.h5"
        summary = run(self._spec(steps), out)
        if summary.status != "completed":
            raise RuntimeError(f"mbsim check run {summary.status}: {summary.message}")
        return out


def _h5_position(path: Path, body: str) -> tuple[float, np.ndarray]:
    """(last recorded time, position of ``body`` there) from an mbsim result file, in 3D."""
    import h5py

    with h5py.File(path, "r") as f:
        t = float(f["time"][-1])
        p = np.asarray(f[f"bodies/{body}/position"][-1], dtype=float)
    return t, np.pad(p, (0, 3 - p.size))
