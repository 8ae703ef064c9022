"""Shared fixtures: scene files in pytest's tmp_path and the click runner of ``mbsim``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mbsim import interrupts
from mbsim.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def no_signal_left_over() -> Iterator[None]:
    """Every test starts and ends with mbsim's signal flag clear (mbsim.interrupts is process-wide)."""
    interrupts.reset()
    yield
    interrupts.reset()


@pytest.fixture
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test in its own temporary directory, so that default outputs never land in the repository."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_scene(tmp_path: Path) -> Callable[..., Path]:
    """``write_scene(text, name="scene.yaml") -> path`` of a scene file in tmp_path."""

    def write(text: str, name: str = "scene.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def mbsim() -> Callable[..., Result]:
    """``mbsim(*args) -> click Result``: the command line in-process, stdout and stderr apart."""
    runner = CliRunner()

    def invoke(*args: object) -> Result:
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return invoke


@pytest.fixture(scope="session")
def benchmark_module() -> Callable[[str], object]:
    """``benchmark_module(name)``: benchmarks/NAME.py imported by path (the benchmarks folder is
    not an installed package), once per session."""
    import importlib.util
    import sys

    loaded: dict[str, object] = {}

    def load(name: str):
        key = f"mbsim_benchmarks_{name}"
        if key not in loaded:
            path = ROOT / "benchmarks" / f"{name}.py"
            if not path.exists():  # a package: benchmarks/NAME/__init__.py
                path = ROOT / "benchmarks" / name / "__init__.py"
            spec = importlib.util.spec_from_file_location(key, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[key] = module  # dataclasses look their module up while the class is built
            spec.loader.exec_module(module)
            loaded[key] = module
        return loaded[key]

    yield load
    for key in loaded:
        sys.modules.pop(key, None)


@pytest.fixture(autouse=True, scope="session")
def _sdf_cache_in_a_temporary_directory(tmp_path_factory):
    """Signed distance fields are cached on disk: keep the tests' cache out of the user's home."""
    import os

    old = os.environ.get("MBSIM_CACHE")
    os.environ["MBSIM_CACHE"] = str(tmp_path_factory.mktemp("sdf-cache"))
    yield
    if old is None:
        os.environ.pop("MBSIM_CACHE", None)
    else:
        os.environ["MBSIM_CACHE"] = old
