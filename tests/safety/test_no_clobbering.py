"""CONTRACT §4, no clobbering: an existing path is overwritten only if it is an mbsim result
file; the scene itself, a text file a scene's output.file points at, another program's HDF5
file, a directory are refused with exit 2 naming them, unchanged. Reproduces issue 12's item 2
(`-o p.yaml` turned the scene into HDF5; `output: {file: ../victim.txt}` overwrote it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import h5py
import pytest
from cli_process import PENDULUM, root_attrs, run_mbsim


@pytest.fixture
def scene(tmp_path: Path) -> Path:
    path = tmp_path / "work" / "p.yaml"
    path.parent.mkdir()
    shutil.copy(PENDULUM, path)
    return path


def test_the_scene_itself_is_not_overwritten(scene: Path) -> None:
    before = scene.read_bytes()
    code, _, stderr = run_mbsim("run", scene, "-o", scene)
    assert code == 2
    assert "output error" in stderr and "not an mbsim result file" in stderr and str(scene) in stderr
    assert scene.read_bytes() == before


def test_a_scene_cannot_overwrite_a_file_outside_through_output_file(scene: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("my notes\n")
    scene.write_text(scene.read_text().replace("mbsim: 1", "mbsim: 1\noutput: {file: ../victim.txt}", 1))
    code, _, stderr = run_mbsim("run", scene, cwd=scene.parent)
    assert code == 2, stderr
    assert "victim.txt" in stderr and "not an mbsim result file" in stderr
    assert victim.read_text() == "my notes\n"


def test_another_programs_hdf5_file_and_a_directory_are_refused(scene: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["data"] = [1.0, 2.0, 3.0]
        f.attrs["format"] = "not-mbsim"
    before = other.read_bytes()
    code, _, stderr = run_mbsim("run", scene, "-o", other)
    assert code == 2 and "not an mbsim result file" in stderr
    assert other.read_bytes() == before
    folder = tmp_path / "folder.h5"
    folder.mkdir()
    code, _, stderr = run_mbsim("run", scene, "-o", folder)
    assert code == 2 and "is a directory" in stderr
    empty = tmp_path / "empty.h5"  # not a result either (an empty file can be someone's)
    empty.touch()
    code, _, stderr = run_mbsim("run", scene, "-o", empty)
    assert code == 2 and empty.stat().st_size == 0


def test_an_unwritable_location_is_an_output_error(scene: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    code, _, stderr = run_mbsim("run", scene, "-o", blocker / "out.h5")  # a folder that cannot exist
    assert code == 2, stderr
    assert "output error" in stderr and "Not a directory" in stderr and "Traceback" not in stderr
    if os.geteuid() != 0:  # root writes into read-only folders
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        code, _, stderr = run_mbsim("run", scene, "-o", locked / "out.h5")
        assert code == 2 and "cannot create the result file" in stderr


def test_results_of_mbsim_are_overwritten_and_a_refused_scene_leaves_nothing(scene: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.h5"
    assert run_mbsim("run", scene, "-o", out, "--set", "time.end=0.05")[0] == 0
    assert run_mbsim("run", scene, "-o", out, "--set", "time.end=0.1")[0] == 0  # ours: overwritten
    assert root_attrs(out)["steps"] == 10
    fresh = tmp_path / "fresh.h5"
    code, _, stderr = run_mbsim("run", scene, "-o", fresh, "--set", "bodies[0].mass=-1")
    assert code == 2 and "scene error" in stderr
    assert not fresh.exists()  # the claim made the file; the refused scene removed it again


@pytest.mark.slow
def test_plot_refuses_other_suffixes_and_files_that_are_not_pictures(scene: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.h5"
    assert run_mbsim("run", scene, "-o", out, "--set", "time.end=0.05")[0] == 0
    code, _, stderr = run_mbsim("plot", out, "-o", tmp_path / "p.txt")
    assert code == 2 and "expected a name ending in .png" in stderr and "output error" in stderr
    text = tmp_path / "looks.png"
    text.write_text("not a picture")
    code, _, stderr = run_mbsim("plot", out, "-o", text)
    assert code == 2 and "is not a PNG picture" in stderr
    assert text.read_text() == "not a picture"
    code, _, stderr = run_mbsim("plot", out, "--what", "nonsense")
    assert code == 2 and "command-line error" in stderr and "scene error" not in stderr
    picture = tmp_path / "ok.png"
    assert run_mbsim("plot", out, "-o", picture)[0] == 0
    assert run_mbsim("plot", out, "-o", picture)[0] == 0  # a picture of ours is replaced
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ok.png")]  # no temporary left


def test_compare_refuses_a_file_that_is_not_a_result_in_its_folder(scene: Path, tmp_path: Path) -> None:
    outdir = tmp_path / "cmp"
    outdir.mkdir()
    (outdir / "lagrange.h5").write_text("a user's file that happens to have this name")
    code, _, stderr = run_mbsim("compare", scene, "--solvers", "lagrange", "-o", outdir, "--set", "time.end=0.05")
    assert code == 2 and "lagrange.h5" in stderr and "not an mbsim result file" in stderr
    assert (outdir / "lagrange.h5").read_text().startswith("a user's file")
