"""Caches are safe (CONTRACT §4): a corrupt, unreadable or unwritable cache is rebuilt or bypassed, never exit 1.

The one cache: the signed distance fields of mbsim.model.contact.sdf (``sdf-<key>.npz`` under
``$MBSIM_CACHE``; the compiled kernels are built by ``pip install``, nothing is cached at run
time). The first half runs the real command line in a subprocess on scenes/blocks_elastic.yaml
(a compliant contact against a box's field) cut to 200 steps, with the cache in a temporary
directory: one module-wide run fills it, each test runs on its own copy. The second half checks
the pieces in-process: ``cached_sdf`` on each kind of bad file or directory, and ``cache_dir``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import trimesh

from mbsim.model.contact import compliant
from mbsim.model.contact import sdf as sdf_module
from mbsim.model.contact.sdf import build_sdf, cached_sdf

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "scenes" / "blocks_elastic.yaml"
SHORT = "time.end=0.002"  # 200 steps: about a second
WARNING = "mbsim: warning:"


# ------------------------------------------------------------------- the command line in a subprocess


def run_cli(out: Path, sdf_dir: Path, **env: str) -> subprocess.CompletedProcess:
    """``python -m mbsim run SCENE -o out --quiet`` with the cache at ``sdf_dir``."""
    environ = {**os.environ, "MBSIM_CACHE": str(sdf_dir), **env}
    command = [sys.executable, "-m", "mbsim", "run", str(SCENE), "-o", str(out), "--quiet", "--set", SHORT]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=120, cwd=out.parent)


def assert_completed(proc: subprocess.CompletedProcess, out: Path) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "completed", dict(f.attrs)


def sdf_file(directory: Path) -> Path:
    files = sorted(directory.glob("sdf-*.npz"))
    assert len(files) == 1, files
    return files[0]


def assert_field_file_healthy(path: Path, reference: Path) -> None:
    """The file loads and holds the same field as ``reference``; no temporary file is left beside it."""
    with np.load(path, allow_pickle=False) as new, np.load(reference, allow_pickle=False) as ref:
        assert set(new.files) == {"origin", "cell", "shape", "values"}
        assert new["values"].shape == tuple(new["shape"])
        for key in ref.files:
            np.testing.assert_array_equal(new[key], ref[key])
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory) -> Path:
    """The sdf cache after one run of the scene: its field built and saved."""
    base = tmp_path_factory.mktemp("filled-cache")
    sdf_dir = base / "sdf"
    out = base / "cold.h5"
    assert_completed(run_cli(out, sdf_dir), out)
    sdf_file(sdf_dir)
    return sdf_dir


@pytest.fixture
def cache(filled_cache, tmp_path) -> Path:
    """This test's own copy of the filled cache."""
    sdf_dir = tmp_path / "sdf"
    shutil.copytree(filled_cache, sdf_dir)
    return sdf_dir


@pytest.mark.slow  # ~2 s each (a run); in-process: test_cached_sdf_rebuilds_a_bad_file, stderr: test_sizes_and_hangs.py
@pytest.mark.parametrize(
    "content",
    [b"", b"\x00 garbage, not an npz \xff" * 8, "truncated"],
    ids=["zero-byte", "garbage", "truncated"],
)
def test_bad_field_file_is_rebuilt(cache, filled_cache, tmp_path, content):
    sdf_dir = cache
    path = sdf_file(sdf_dir)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2] if content == "truncated" else content)
    out = tmp_path / "run.h5"
    proc = run_cli(out, sdf_dir)
    assert_completed(proc, out)
    assert WARNING in proc.stderr and path.name in proc.stderr and "rebuilding" in proc.stderr
    assert_field_file_healthy(path, sdf_file(filled_cache))


@pytest.mark.slow  # ~2 s (a run); in-process: test_cached_sdf_bypasses_an_unwritable_cache[plain-file]
def test_cache_directory_is_a_plain_file(tmp_path):
    plain = tmp_path / "not-a-directory"
    plain.write_text("a file in the way\n")
    out = tmp_path / "run.h5"
    proc = run_cli(out, plain)
    assert_completed(proc, out)
    assert WARNING in proc.stderr and "in memory" in proc.stderr
    assert plain.read_text() == "a file in the way\n"


@pytest.mark.slow  # ~2 s; a variant of test_cache_directory_is_a_plain_file
def test_cache_directory_below_a_plain_file(tmp_path):
    """Cannot be created, not even by root (unlike a chmod-ed directory)."""
    plain = tmp_path / "plain"
    plain.write_text("x")
    out = tmp_path / "run.h5"
    proc = run_cli(out, plain / "sdf")
    assert_completed(proc, out)
    assert WARNING in proc.stderr and "in memory" in proc.stderr
    assert plain.read_text() == "x"


def _read_only_dir(path: Path) -> Path:
    """A directory chmod-ed 0o500; skips the test where that does not stop writes (root)."""
    path.mkdir()
    path.chmod(0o500)
    try:
        (path / "probe").touch()
    except OSError:
        return path
    (path / "probe").unlink()
    path.chmod(0o700)
    pytest.skip("running as root (or with CAP_DAC_OVERRIDE): chmod does not stop writes")


def test_read_only_cache_directory(tmp_path):
    read_only = _read_only_dir(tmp_path / "read-only")
    try:
        out = tmp_path / "run.h5"
        proc = run_cli(out, read_only)
        assert_completed(proc, out)
        assert WARNING in proc.stderr and "in memory" in proc.stderr
        assert list(read_only.iterdir()) == []
    finally:
        read_only.chmod(0o700)


# ------------------------------------------------------------------- cached_sdf in-process

BOX = (0.4, 0.3, 0.2)
CELL, PAD = 0.05, 0.05


@pytest.fixture
def box():
    return trimesh.creation.box(extents=BOX)


@pytest.fixture
def reference(box):
    return build_sdf(box, CELL, PAD)


def _field_path(directory: Path, mesh) -> Path:
    return directory / f"sdf-{sdf_module.sdf_cache_key(mesh, CELL, PAD)[:40]}.npz"


def _npz_bytes(tmp_path: Path, **arrays) -> bytes:
    scratch = tmp_path / "scratch.npz"
    np.savez(scratch, **arrays)
    return scratch.read_bytes()


def _bad_contents(tmp_path: Path, reference) -> dict[str, bytes]:
    good = dict(origin=reference.origin, cell=reference.cell, shape=np.asarray(reference.shape))
    whole = _npz_bytes(tmp_path, values=reference.values, **good)
    nan = reference.values.copy()
    nan[0, 0, 0] = np.nan
    npy = tmp_path / "scratch.npy"
    np.save(npy, reference.values)
    return {
        "zero-byte": b"",
        "garbage": b"\x00 garbage \xff" * 16,
        "truncated": whole[: len(whole) // 2],
        "missing-values": _npz_bytes(tmp_path, **good),
        "wrong-shape": _npz_bytes(tmp_path, values=np.zeros((2, 2, 2)), **good),
        "shape-disagrees": _npz_bytes(
            tmp_path, values=reference.values, **{**good, "shape": np.asarray(reference.shape) + 1}
        ),
        "non-finite": _npz_bytes(tmp_path, values=nan, **good),
        "other-cell": _npz_bytes(tmp_path, values=reference.values, **{**good, "cell": 2 * CELL}),
        "npy-not-npz": npy.read_bytes(),
    }


BAD = (
    "zero-byte",
    "garbage",
    "truncated",
    "missing-values",
    "wrong-shape",
    "shape-disagrees",
    "non-finite",
    "other-cell",
    "npy-not-npz",
)


@pytest.mark.parametrize("kind", BAD)
def test_cached_sdf_rebuilds_a_bad_file(tmp_path, box, reference, kind, caplog):
    directory = tmp_path / "cache"
    directory.mkdir()
    path = _field_path(directory, box)
    path.write_bytes(_bad_contents(tmp_path, reference)[kind])
    with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
        field = cached_sdf(box, CELL, PAD, directory)
    np.testing.assert_array_equal(field.values, reference.values)
    assert any("unusable" in r.getMessage() and path.name in r.getMessage() for r in caplog.records)
    # replaced by a good file, which the next call loads without a word
    caplog.clear()
    with np.load(path, allow_pickle=False) as data:
        np.testing.assert_array_equal(data["values"], reference.values)
    again = cached_sdf(box, CELL, PAD, directory)
    np.testing.assert_array_equal(again.values, reference.values)
    assert caplog.records == []
    assert sorted(p.name for p in directory.iterdir()) == [path.name]


def test_cached_sdf_good_file_loads_without_a_warning(tmp_path, box, reference, caplog, monkeypatch):
    cached_sdf(box, CELL, PAD, tmp_path)
    monkeypatch.setattr(sdf_module, "build_sdf", lambda *a: pytest.fail("rebuilt a good cache file"))
    with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
        field = cached_sdf(box, CELL, PAD, tmp_path)
    np.testing.assert_array_equal(field.values, reference.values)
    assert caplog.records == []


@pytest.mark.parametrize("where", ["plain-file", "below-plain-file", "directory-at-the-file's-name"])
def test_cached_sdf_bypasses_an_unwritable_cache(tmp_path, box, reference, where, caplog):
    plain = tmp_path / "plain"
    plain.write_text("x")
    directory = {"plain-file": plain, "below-plain-file": plain / "sdf"}.get(where, tmp_path / "cache")
    if where == "directory-at-the-file's-name":
        _field_path(directory, box).mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
        field = cached_sdf(box, CELL, PAD, directory)
    np.testing.assert_array_equal(field.values, reference.values)
    assert any("in memory" in r.getMessage() for r in caplog.records)
    assert plain.read_text() == "x"
    assert [p for p in tmp_path.rglob("*.tmp")] == []


def test_cached_sdf_read_only_directory_with_a_bad_file(tmp_path, box, reference, caplog):
    read_only = _read_only_dir(tmp_path / "cache")
    try:
        read_only.chmod(0o700)
        _field_path(read_only, box).write_bytes(b"")
        read_only.chmod(0o500)
        with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
            field = cached_sdf(box, CELL, PAD, read_only)
        np.testing.assert_array_equal(field.values, reference.values)
        text = " ".join(r.getMessage() for r in caplog.records)
        assert "unusable" in text and "in memory" in text
    finally:
        read_only.chmod(0o700)


def test_cached_sdf_without_a_directory(box, reference):
    np.testing.assert_array_equal(cached_sdf(box, CELL, PAD, None).values, reference.values)


def test_cached_sdf_interrupted_write_leaves_no_temporary_file(tmp_path, box, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sdf_module.np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cached_sdf(box, CELL, PAD, tmp_path)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------- cache_dir


def test_cache_dir_locations(monkeypatch, tmp_path):
    monkeypatch.setenv("MBSIM_CACHE", str(tmp_path / "m"))
    assert compliant.cache_dir() == tmp_path / "m"
    monkeypatch.delenv("MBSIM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert compliant.cache_dir() == tmp_path / "x" / "mbsim" / "sdf"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compliant.cache_dir() == tmp_path / "home" / ".cache" / "mbsim" / "sdf"


def test_cache_dir_without_a_home_is_no_cache(monkeypatch, caplog):
    monkeypatch.delenv("MBSIM_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(compliant.Path, "home", staticmethod(no_home))
    with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
        assert compliant.cache_dir() is None
    assert any("MBSIM_CACHE" in r.getMessage() for r in caplog.records)
