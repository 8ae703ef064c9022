"""Caches are safe (CONTRACT §4): a corrupt, unreadable or unwritable cache is rebuilt or bypassed, never exit 1.

Two caches: the signed distance fields of mbsim.model.contact.sdf (``sdf-<key>.npz`` under
``$MBSIM_CACHE``) and numba's compiled kernels (``*.nbi`` / ``*.nbc`` under ``$NUMBA_CACHE_DIR``),
guarded by mbsim.model.kernel_cache. The first half runs the real command line in a subprocess
on scenes/blocks_elastic.yaml (a compliant contact against a box's field) cut to 200 steps,
with both caches in temporary directories: one module-wide cold run fills them (it compiles
every kernel of the scene), each test runs on its own copy. The repository's ``__pycache__`` is
never touched. The second half checks the pieces in-process: ``cached_sdf`` on each kind of bad
file or directory, ``cache_dir``, and the numba guard on numba's own ``IndexDataCacheFile``.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import trimesh

from mbsim.model import kernel_cache
from mbsim.model.contact import compliant
from mbsim.model.contact import sdf as sdf_module
from mbsim.model.contact.sdf import build_sdf, cached_sdf

ROOT = Path(__file__).resolve().parents[2]
SCENE = ROOT / "scenes" / "blocks_elastic.yaml"
SHORT = "time.end=0.002"  # 200 steps: about a second once the kernels are cached
WARNING = "mbsim: warning:"
# the per-step kernels every run of the scene loads (the field's build kernel runs only on an sdf cache miss)
STEP_KERNELS = ("kernels.", "compliant_kernels.")


# ------------------------------------------------------------------- the command line in a subprocess


def run_cli(out: Path, sdf_dir: Path, numba_dir: Path, **env: str) -> subprocess.CompletedProcess:
    """``python -m mbsim run SCENE -o out --quiet`` with both caches pointed at the given paths."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    environ.update(MBSIM_CACHE=str(sdf_dir), NUMBA_CACHE_DIR=str(numba_dir), **env)
    command = [sys.executable, "-m", "mbsim", "run", str(SCENE), "-o", str(out), "--quiet", "--set", SHORT]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=900, cwd=out.parent)


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


def step_kernel_files(numba_dir: Path, suffix: str) -> list[Path]:
    files = [p for p in numba_dir.rglob(f"*{suffix}") if p.name.startswith(STEP_KERNELS)]
    assert files, f"no {suffix} files of {STEP_KERNELS} in {numba_dir}"
    return files


@pytest.fixture(scope="module")
def filled_caches(tmp_path_factory) -> tuple[Path, Path]:
    """(sdf cache, numba cache) after one cold run of the scene: every kernel it uses compiled and saved."""
    base = tmp_path_factory.mktemp("filled-caches")
    sdf_dir, numba_dir = base / "sdf", base / "numba"
    out = base / "cold.h5"
    assert_completed(run_cli(out, sdf_dir, numba_dir), out)
    sdf_file(sdf_dir)
    step_kernel_files(numba_dir, ".nbi")
    return sdf_dir, numba_dir


@pytest.fixture
def caches(filled_caches, tmp_path) -> tuple[Path, Path]:
    """This test's own copy of the filled caches."""
    sdf_dir, numba_dir = tmp_path / "sdf", tmp_path / "numba"
    shutil.copytree(filled_caches[0], sdf_dir)
    shutil.copytree(filled_caches[1], numba_dir)
    return sdf_dir, numba_dir


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00 garbage, not an npz \xff" * 8, "truncated"],
    ids=["zero-byte", "garbage", "truncated"],
)
def test_bad_field_file_is_rebuilt(caches, filled_caches, tmp_path, content):
    sdf_dir, numba_dir = caches
    path = sdf_file(sdf_dir)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2] if content == "truncated" else content)
    out = tmp_path / "run.h5"
    proc = run_cli(out, sdf_dir, numba_dir)
    assert_completed(proc, out)
    assert WARNING in proc.stderr and path.name in proc.stderr and "rebuilding" in proc.stderr
    assert_field_file_healthy(path, sdf_file(filled_caches[0]))


def test_cache_directory_is_a_plain_file(caches, tmp_path):
    _, numba_dir = caches
    plain = tmp_path / "not-a-directory"
    plain.write_text("a file in the way\n")
    out = tmp_path / "run.h5"
    proc = run_cli(out, plain, numba_dir)
    assert_completed(proc, out)
    assert WARNING in proc.stderr and "in memory" in proc.stderr
    assert plain.read_text() == "a file in the way\n"


def test_cache_directory_below_a_plain_file(caches, tmp_path):
    """Cannot be created, not even by root (unlike a chmod-ed directory)."""
    _, numba_dir = caches
    plain = tmp_path / "plain"
    plain.write_text("x")
    out = tmp_path / "run.h5"
    proc = run_cli(out, plain / "sdf", numba_dir)
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


def test_read_only_cache_directory(tmp_path, request):
    read_only = _read_only_dir(tmp_path / "read-only")  # before the caches: a skip costs no cold run
    try:
        _, numba_dir = request.getfixturevalue("caches")
        out = tmp_path / "run.h5"
        proc = run_cli(out, read_only, numba_dir)
        assert_completed(proc, out)
        assert WARNING in proc.stderr and "in memory" in proc.stderr
        assert list(read_only.iterdir()) == []
    finally:
        read_only.chmod(0o700)


def _corrupt_and_repair(caches, tmp_path, suffix: str, content: bytes) -> None:
    """Overwrite the step kernels' ``suffix`` files with ``content``; a run recompiles and rewrites them,
    and a further run loads every file it needs without a warning."""
    sdf_dir, numba_dir = caches
    files = step_kernel_files(numba_dir, suffix)
    for f in files:
        f.write_bytes(content)
    out = tmp_path / "repair.h5"
    proc = run_cli(out, sdf_dir, numba_dir)
    assert_completed(proc, out)
    assert WARNING in proc.stderr and "compiled-kernel cache file" in proc.stderr
    for f in files:
        assert f.stat().st_size > 0 and f.read_bytes() != content, f"{f.name} was not rewritten"
    assert [p.name for p in numba_dir.rglob("*.tmp.*")] == []
    # healthy: the next run loads them (the guard reports every file it cannot read)
    out = tmp_path / "again.h5"
    proc = run_cli(out, sdf_dir, numba_dir)
    assert_completed(proc, out)
    assert WARNING not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_zero_byte_kernel_index_files_are_a_miss(caches, tmp_path):
    _corrupt_and_repair(caches, tmp_path, ".nbi", b"")


@pytest.mark.slow
def test_zero_byte_kernel_data_files_are_a_miss(caches, tmp_path):
    _corrupt_and_repair(caches, tmp_path, ".nbc", b"")


@pytest.mark.slow
def test_garbage_kernel_index_files_are_a_miss(caches, tmp_path):
    _corrupt_and_repair(caches, tmp_path, ".nbi", b"\x00 not a numba index \xff" * 8)


@pytest.mark.slow
def test_no_writable_kernel_cache_location(tmp_path):
    """With numba restricted to $NUMBA_CACHE_DIR (no fallback to ``__pycache__``) and that below a
    plain file, numba finds no cache location at all: the kernels are compiled in memory."""
    from numba.core import config

    if not hasattr(config, "CACHE_LOCATOR_CLASSES"):
        pytest.skip("this numba has no NUMBA_CACHE_LOCATOR_CLASSES to rule out its fallback locations")
    plain = tmp_path / "plain"
    plain.write_text("x")
    out = tmp_path / "run.h5"
    proc = run_cli(out, tmp_path / "sdf", plain / "numba", NUMBA_CACHE_LOCATOR_CLASSES="UserProvidedCacheLocator")
    assert_completed(proc, out)
    assert WARNING in proc.stderr and "compiled kernels cannot be cached" in proc.stderr
    assert proc.stderr.count(WARNING) == 1  # once, not once per kernel


KERNEL_MODULES = (
    "mbsim.model.kernels",
    "mbsim.model.contact.sdf",
    "mbsim.model.contact.compliant_kernels",
    "mbsim.solvers.soa_kernels",
    "mbsim.solvers.lcp",
    "mbsim.model.expr_kernel",
    "mbsim.model.step_kernels",
    "mbsim.model.record_kernels",
    "mbsim.solvers.ode_kernels",
    "mbsim.solvers.recursive_kernels",
    "mbsim.solvers.lapack_kernels",
    "mbsim.solvers.robust_kernels",
)
# records, for each @njit(cache=True) definition, whether the guard was in place when it ran
_ORDER_PROBE = """
import importlib, json, sys
from numba.core import dispatcher

seen = []
original = dispatcher.Dispatcher.enable_caching

def enable_caching(self):
    guarded = getattr(dispatcher.Dispatcher.enable_caching, "__mbsim_cache_guard__", False)
    seen.append((self.py_func.__module__, self.py_func.__name__, guarded))
    return original(self)

dispatcher.Dispatcher.enable_caching = enable_caching
importlib.import_module(sys.argv[1])
print(json.dumps(seen))
"""


def test_guard_is_installed_before_any_cached_kernel_is_defined(tmp_path):
    """Whichever kernel module a program imports first, the guard is in place before its @njit(cache=True)
    definitions run (those that import nothing from mbsim rely on their packages' import order)."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")  # decorating looks for (and probes) a cache directory
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", _ORDER_PROBE, name], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for name in KERNEL_MODULES
    }
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr.decode()
        seen = json.loads(stdout.decode().strip().splitlines()[-1])
        assert name in {module for module, _, _ in seen}, f"importing {name} defined none of its kernels"
        late = [f"{module}.{func}" for module, func, guarded in seen if not guarded]
        assert late == [], f"importing {name} first: defined before the guard: {late}"


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


# ------------------------------------------------------------------- the numba guard in-process


def test_guard_wraps_numbas_cache_internals_once():
    from numba.core import caching

    first = kernel_cache.install()
    assert kernel_cache.install() == first  # idempotent
    assert len(first) == 5, first  # this numba has every internal the guard wraps
    assert getattr(caching.IndexDataCacheFile._load_index, "__mbsim_cache_guard__", False)
    assert not getattr(caching.IndexDataCacheFile._load_index.__wrapped__, "__mbsim_cache_guard__", False)


@pytest.fixture
def index_file(tmp_path):
    """numba's own IndexDataCacheFile on a temporary directory, with one entry saved."""
    from numba.core import caching

    cache = caching.IndexDataCacheFile(cache_path=str(tmp_path), filename_base="f-1.py311", source_stamp="stamp")
    cache.save("key", ("payload", 1))
    assert cache.load("key") == ("payload", 1)
    return cache


@pytest.mark.parametrize(
    ("content", "reported"),
    [
        (b"", True),
        (b"\x00 garbage \xff" * 4, True),
        ("truncated", True),
        ("not-a-mapping", True),
        (pickle.dumps("0.0.0") + b"anything", False),  # another numba version's index: numba's own silent miss
    ],
    ids=["zero-byte", "garbage", "truncated", "not-a-mapping", "other-version"],
)
def test_guard_bad_index_is_a_miss_then_rewritten(index_file, tmp_path, content, reported, caplog):
    import numba

    index = tmp_path / "f-1.py311.nbi"
    if content == "truncated":
        content = index.read_bytes()[:-5]
    elif content == "not-a-mapping":
        content = pickle.dumps(numba.__version__) + pickle.dumps(("stamp", ["not", "a", "dict"]))
    index.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
        assert index_file.load("key") is None
        index_file.save("key", ("payload", 2))
    assert index_file.load("key") == ("payload", 2)
    assert any(str(index) in r.getMessage() for r in caplog.records) == reported


@pytest.mark.parametrize(
    "content", [b"", b"\x00 garbage \xff" * 4, "truncated"], ids=["zero-byte", "garbage", "truncated"]
)
def test_guard_bad_data_file_is_a_miss_then_rewritten(index_file, tmp_path, content, caplog):
    data = tmp_path / "f-1.py311.1.nbc"
    data.write_bytes(data.read_bytes()[:-3] if content == "truncated" else content)
    with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
        assert index_file.load("key") is None
    assert any(str(data) in r.getMessage() for r in caplog.records)
    index_file.save("key", ("payload", 3))
    assert index_file.load("key") == ("payload", 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f-1.py311.1.nbc", "f-1.py311.nbi"]


def test_guard_load_save_and_locate_failures(caplog):
    """The three outer wrappers on stand-ins whose numba side raises."""
    from numba.core import caching

    class Broken:
        _cache_path = "/nowhere"
        _name = "<kernel>"

    def boom(self, *args, **kwargs):
        raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="mbsim.cache"):
        assert kernel_cache._guard_load_overload(boom)(Broken(), "sig", None) is None
        assert kernel_cache._guard_save_overload(boom)(Broken(), "sig", None) is None
        dispatcher = Broken()
        kernel_cache._guard_enable_caching(boom, caching.NullCache)(dispatcher)
    assert isinstance(dispatcher._cache, caching.NullCache)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "could not be loaded" in messages and "cannot write" in messages


def test_numba_writes_its_cache_files_atomically(index_file, tmp_path, monkeypatch):
    """numba writes a temporary file and renames it over the old one: a write that fails before the
    rename leaves the old file whole and no temporary file behind."""
    from numba.core import caching

    before = (tmp_path / "f-1.py311.1.nbc").read_bytes()

    def failing_replace(src, dst):
        assert Path(src).read_bytes() != before and Path(src).parent == tmp_path  # the new bytes, beside it
        raise OSError("disk full")

    monkeypatch.setattr(caching.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        index_file.save("key", ("payload", 4))
    monkeypatch.undo()
    assert (tmp_path / "f-1.py311.1.nbc").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f-1.py311.1.nbc", "f-1.py311.nbi"]
