"""Helpers of the solver physics tests: run a scene (a file or a dict written to tmp_path) through
``mbsim.simulate.run`` and read its result file (CONTRACT §3) back into memory."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from scipy.interpolate import CubicHermiteSpline
from scipy.optimize import brentq

from mbsim.scene.spec import load_scene
from mbsim.simulate import RunSummary, run

SCENES = Path(__file__).resolve().parents[2] / "scenes"


class Result:
    """Every dataset of a result file as a numpy array (``result["bodies/bob/angle"]``) and the root attrs."""

    def __init__(self, path: Path) -> None:
        self.data: dict[str, np.ndarray] = {}
        with h5py.File(path, "r") as f:
            self.attrs = dict(f.attrs)
            f.visititems(lambda name, obj: self._keep(name, obj))

    def _keep(self, name: str, obj) -> None:
        if isinstance(obj, h5py.Dataset):
            self.data[name] = obj[()]

    def __getitem__(self, key: str) -> np.ndarray:
        return self.data[key]

    @property
    def time(self) -> np.ndarray:
        return self.data["time"]


def write_yaml_scene(scene: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(scene, sort_keys=False), encoding="utf-8")
    return path


def _simulate(
    scene: dict | Path | str, overrides=(), directory: Path | None = None, status: str = "completed", stem: str = "run"
) -> tuple[RunSummary, Result]:
    path = write_yaml_scene(scene, directory / f"{stem}.yaml") if isinstance(scene, dict) else scene
    out = directory / f"{stem}.h5"
    summary = run(load_scene(str(path), list(overrides)), output=out)
    assert summary.status == status, summary.message
    return summary, Result(out)


@pytest.fixture(scope="session")
def simulate() -> Callable[..., tuple[RunSummary, Result]]:
    """``simulate(scene, overrides, directory, status="completed", stem="run") -> (RunSummary, Result)``:
    for module-scoped fixtures that share runs between tests (give them a tmp_path_factory directory)."""
    return _simulate


@pytest.fixture
def run_scene(tmp_path: Path) -> Callable[..., tuple[RunSummary, Result]]:
    """``run_scene(scene, overrides=(), status="completed") -> (RunSummary, Result)``.

    ``scene`` is a path or a scene dict (written as YAML into tmp_path). The run must end with
    ``status`` (its message is shown otherwise).
    """
    counter = itertools.count()

    def _run(scene: dict | Path | str, overrides=(), status: str = "completed") -> tuple[RunSummary, Result]:
        return _simulate(scene, overrides, tmp_path, status, stem=f"run{next(counter)}")

    return _run


def _zero_crossings(t: np.ndarray, x: np.ndarray, xdot: np.ndarray) -> np.ndarray:
    spline = CubicHermiteSpline(t, x, xdot)
    idx = np.nonzero(np.sign(x[:-1]) * np.sign(x[1:]) < 0)[0]
    return np.array([brentq(spline, t[i], t[i + 1], xtol=1e-15, rtol=1e-15) for i in idx])


@pytest.fixture
def zero_crossings() -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """``zero_crossings(t, x, xdot)``: times where the recorded x crosses zero (either way), found on
    the cubic Hermite interpolant of x and its recorded derivative between rows (error O(h^4))."""
    return _zero_crossings
