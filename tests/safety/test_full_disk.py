"""CONTRACT §4 on a full disk (issue 28, item 1): a real tmpfs of a few hundred kB, through the
real CLI. A run stops cleanly before the disk is full (exit 3, status failed, "no space left on
device", every row written before readable with plain h5py), or exit 2 with nothing left behind
when not even the header fits; compare, import -o, export -o and plot -o end with their exit code
and no traceback, and never leave a half-written file.

Mounting needs root: the tests skip (saying why) elsewhere; each disk is unmounted at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from cli_process import CHAIN, PENDULUM, ROOT, root_attrs, run_mbsim
from quick_loop import quick

BOUNCING = ROOT / "scenes" / "bouncing_ball.yaml"
URDF = ROOT / "scenes" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf"
NO_SPACE = "no space left on device"
KB = 1024


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``disk(size_kb, options="") -> folder``: a fresh tmpfs of that size, unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs (a disk that fills) needs root")
    mounted: list[Path] = []

    def mount(size_kb: int, options: str = "") -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        opts = f"size={size_kb}k" + (f",{options}" if options else "")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(point)], capture_output=True, text=True)
        if proc.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounted.append(point)
        return point

    try:
        yield mount
    finally:
        for point in mounted:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


def free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def fill(folder: Path, leave: int = 0) -> None:
    """Take the disk's space but ``leave`` bytes (all of it when 0) with a file of its own."""
    with open(folder / "filler", "ab", buffering=0) as f:
        want = free_bytes(folder) - leave
        if want > 0:
            os.posix_fallocate(f.fileno(), 0, want)
        if leave == 0:  # the last pages too
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass


def assert_clean(err: str) -> None:
    assert "Traceback" not in err, err
    assert "Exception ignored" not in err, err


def assert_readable_failed(path: Path) -> int:
    """The file opens with plain h5py, says failed for want of space, and its rows are whole: every
    row dataset as long as /time, times increasing, numbers finite. Returns the number of rows."""
    attrs = root_attrs(path)
    assert attrs["status"] == "failed", attrs
    assert NO_SPACE in attrs["message"], attrs["message"]
    with h5py.File(path, "r") as f:
        t = f["time"][:]
        assert attrs.get("steps_recorded", 0) == len(t)
        assert np.all(np.diff(t) > 0)
        lengths = {}
        f.visititems(lambda name, obj: lengths.setdefault(name, obj.shape[0]) if _is_row_data(name, obj) else None)
        assert set(lengths.values()) <= {len(t)}, lengths
        if len(t):
            assert np.all(np.isfinite(f["q"][:]))
    return len(t)


def _is_row_data(name: str, obj: object) -> bool:
    return isinstance(obj, h5py.Dataset) and obj.chunks is not None and name.split("/")[0] != "events"


# (id, scene, overrides, disk size kB, bytes left free by a filler (None: no filler), exit, rows)
RUNS = [
    pytest.param(CHAIN, ["output.every=1", "time.end=20"], 2048, None, 3, "some", id="issue-repro-chain-2MB"),
    pytest.param(PENDULUM, ["time.end=10"], 300, None, 3, "some", id="pendulum-fills-mid-run"),
    pytest.param(PENDULUM, ["time.end=10", "output.every=1"], 400, 300 * KB, 3, "some", id="already-half-full"),
    pytest.param(PENDULUM, ["time.end=10"], 1024, 0, 2, None, id="full-at-start"),
    pytest.param(PENDULUM, ["time.end=10"], 32, None, 2, None, id="tiny-disk-no-room-for-the-header"),
    pytest.param(PENDULUM, ["time.end=10"], 1024, 100 * KB, 3, "none", id="room-for-the-header-only"),
    pytest.param(BOUNCING, ["time.end=3"], 600, None, 3, "some", id="event-driven"),
]


@pytest.mark.parametrize(
    ("scene", "overrides", "size_kb", "leave", "code", "rows"), quick(RUNS, keep="pendulum-fills-mid-run")
)
def test_run_on_a_full_disk(disk, scene, overrides, size_kb, leave, code, rows) -> None:
    folder = disk(size_kb)
    if leave is not None:
        fill(folder, leave)
    out = folder / "x.h5"
    sets = [a for o in overrides for a in ("--set", o)]
    rc, stdout, err = run_mbsim("run", scene, *sets, "-o", out, timeout=300)
    assert_clean(err)
    assert rc == code, (rc, stdout, err)
    assert NO_SPACE in err
    if code == 2:  # nothing could be written: nothing is left behind
        assert "output error" in err and str(out) in err
        assert sorted(p.name for p in folder.iterdir()) == (["filler"] if leave is not None else [])
        return
    n = assert_readable_failed(out)
    assert (n > 0) == (rows == "some"), n
    assert f"keeps the {n} rows" in err
    # what the run reserved past the end of its file was given back
    assert os.stat(out).st_blocks * 512 <= os.stat(out).st_size + 64 * KB


def test_disk_filled_by_another_program_mid_run(disk, background) -> None:
    """The usual way a disk fills: something else takes the space while the run writes."""
    folder = disk(4096)
    out = folder / "x.h5"
    run = background("run", PENDULUM, "--set", "time.end=1e5", "-o", out)
    run.wait_rows(out, 1, timeout=120)
    fill(folder)
    rc, _, err = run.finish(timeout=120)
    assert_clean(err)
    assert rc == 3, err
    assert assert_readable_failed(out) > 0


def test_disk_filled_then_the_run_ends_at_its_close(disk, background) -> None:
    """The disk fills and the run is stopped (SIGTERM) before its next flush: the close must write
    the buffered rows into a full disk. It writes what its reservation holds and closes with
    status failed; never a crash or a half-closed file."""
    folder = disk(4096)
    out = folder / "x.h5"
    run = background("run", PENDULUM, "--set", "time.end=1e5", "--set", "output.every=50", "-o", out)
    run.wait_rows(out, 1, timeout=120)
    fill(folder)
    run.signal(signal.SIGTERM)
    rc, _, err = run.finish(timeout=120)
    assert_clean(err)
    assert rc in (143, 3), err  # 3: a flush met the full disk before the signal
    attrs = root_attrs(out)
    assert attrs["status"] == "failed"
    assert attrs["message"].startswith("interrupted (SIGTERM)") or NO_SPACE in attrs["message"], attrs
    with h5py.File(out, "r") as f:
        assert len(f["time"]) == attrs["steps_recorded"] >= 1


@pytest.mark.parametrize(
    ("size_kb", "full", "code"),
    quick(
        [
            # 300 kB: room for some rows of lagrange's run and for the reports, not for null_space's
            # rows nor the plots (at 400 kB the compact files of today leave room for the plots, which
            # then take the report's space: exit 2 for compare.md, not this test's case)
            pytest.param(300, False, 3, id="room-for-some-rows"),
            pytest.param(400, True, 2, id="full-at-start"),
        ],
        keep="room-for-some-rows",
    ),
)
def test_compare_on_a_full_disk(disk, size_kb, full, code) -> None:
    """Each solver's run fails for want of space: a failed row in the table, and the command ends
    with exit 3 after its reports (an output lost, not a finding of the comparison); where not
    even compare.json fits, exit 2 naming it. No traceback either way."""
    folder = disk(size_kb)
    if full:
        fill(folder)
    out = folder / "out"
    rc, stdout, err = run_mbsim("compare", PENDULUM, "--solvers", "lagrange,null_space", "-o", out, timeout=300)
    assert_clean(err)
    assert rc == code, (rc, stdout, err)
    assert NO_SPACE in err.lower()
    if code == 2:
        assert "compare.json" in err
        assert [p.name for p in out.iterdir()] == []  # no half-written file, no result file without rows
        return
    for name in ("lagrange.h5", "null_space.h5"):
        if (out / name).exists():
            assert_readable_failed(out / name)
    assert "failed" in stdout


def _export_source(tmp_path: Path) -> Path:
    source = tmp_path / "p.h5"
    rc, _, err = run_mbsim("run", PENDULUM, "--set", "time.end=1", "-o", source, "-q", timeout=120)
    assert rc == 0, err
    return source


@pytest.mark.parametrize(
    ("command", "name", "leave"),
    quick(
        [
            pytest.param("export", "x.glb", 0, id="export-glb-full"),
            pytest.param("export", "x.html", 0, id="export-html-full"),
            pytest.param("export", "x.html", 8 * KB, id="export-html-8kB-left"),
            pytest.param("plot", "x.png", 0, id="plot-png-full"),
            pytest.param("plot", "x.png", 8 * KB, id="plot-png-8kB-left"),
            pytest.param("import", "x.yaml", 0, id="import-o-full"),
        ],
        keep="export-glb-full",
    ),
)
def test_other_outputs_on_a_full_disk(disk, tmp_path, command, name, leave) -> None:
    folder = disk(256)
    fill(folder, leave)
    before = sorted(p.name for p in folder.iterdir())
    target = folder / name
    if command == "import":
        rc, _, err = run_mbsim("import", URDF, "-o", target, timeout=120)
    else:
        rc, _, err = run_mbsim(command, _export_source(tmp_path), "-o", target, timeout=120)
    assert_clean(err)
    assert rc == 2, err
    assert "no space left on device" in err.lower() and str(target) in err
    assert sorted(p.name for p in folder.iterdir()) == before  # no half-written file, no temporary


def test_read_only_disk(disk, tmp_path) -> None:
    """A read-only file system: exit 2 naming the file, for run, import and export alike."""
    folder = disk(1024, "ro")
    for args in (
        ("run", PENDULUM, "-o", folder / "x.h5"),
        ("import", URDF, "-o", folder / "x.yaml"),
        ("export", _export_source(tmp_path), "-o", folder / "x.glb"),
    ):
        rc, _, err = run_mbsim(*args, timeout=120)
        assert_clean(err)
        assert rc == 2, (args, err)
        assert str(args[-1]) in err
    assert list(folder.iterdir()) == []


def test_overwriting_a_result_on_a_full_disk(disk) -> None:
    """An earlier result given up for a new run on an otherwise full disk: the new run gets the
    space the old file held, goes as far as it allows and fails cleanly (exit 3, readable rows)."""
    folder = disk(1024)
    out = folder / "x.h5"
    rc, _, err = run_mbsim("run", PENDULUM, "--set", "time.end=0.1", "-o", out, timeout=120)
    assert rc == 0, err
    fill(folder)
    rc, _, err = run_mbsim("run", PENDULUM, "--set", "output.every=1", "-o", out, timeout=120)
    assert_clean(err)
    assert rc == 3, err
    assert_readable_failed(out)
