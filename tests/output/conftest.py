"""Fixtures of the export tests: result files of the scenes in export_scenes.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from export_scenes import SHAPES_2D, SHAPES_3D, run_scene


@pytest.fixture(scope="module")
def result_3d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 3D result file, moved away from its scene folder, which is then deleted."""
    folder = tmp_path_factory.mktemp("scene3d")
    out = run_scene(folder, SHAPES_3D)
    moved = tmp_path_factory.mktemp("moved") / "every_shape.h5"
    shutil.move(out, moved)
    shutil.rmtree(folder)
    return moved


@pytest.fixture(scope="module")
def result_2d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_scene(tmp_path_factory.mktemp("scene2d"), SHAPES_2D)
