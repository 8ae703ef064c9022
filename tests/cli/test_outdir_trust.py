"""Issue 28, item 2: ``mbsim compare`` replaces only files mbsim wrote in OUTDIR (CONTRACT §4).

Every case runs the real command in a subprocess (``python -m mbsim compare``) on the 2D pendulum
for two steps. A refused comparison exits 2 naming the file, prints no traceback and leaves OUTDIR
byte-for-byte as it was (every name, every file's bytes, every link's target); a link in OUTDIR
is never followed to overwrite what it points at. Files an earlier mbsim wrote are replaced.
The marks by which mbsim knows its own files are those of mbsim.output.outdir.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import pytest
from quick_loop import quick

PENDULUM = Path(__file__).resolve().parents[2] / "scenes" / "pendulum_2d.yaml"
SHORT = ["--set", "time.end=0.02"]  # two steps of the pendulum
SOLVER = "lagrange"
TIMEOUT = 180  # seconds per command: generous for a loaded 2-core machine
REPORTS = ("compare.json", "compare.md", "violation.png", "energy.png")


def run_mbsim(*args: object, timeout: float, cwd: Path | None = None) -> tuple[int, str, str]:
    """The real command in a subprocess: (exit code, stdout, stderr)."""
    command = [sys.executable, "-m", "mbsim", *(str(a) for a in args)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def compare(outdir: Path, *extra: object, cwd: Path | None = None) -> tuple[int, str, str]:
    return run_mbsim("compare", PENDULUM, "--solvers", SOLVER, *SHORT, "-o", outdir, "--quiet", *extra,
                     timeout=TIMEOUT, cwd=cwd)  # fmt: skip


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry of a folder: a file's bytes, a link's target, a directory's or FIFO's kind."""
    out: dict[str, object] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_symlink():
            out[entry.name] = ("link", os.readlink(entry.path))
        elif entry.is_dir():
            out[entry.name] = ("dir", snapshot(Path(entry.path)))
        elif entry.is_file():
            out[entry.name] = Path(entry.path).read_bytes()
        else:
            out[entry.name] = ("special", os.lstat(entry.path).st_mode)
    return out


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of a comparison mbsim wrote (lagrange.h5 and the four reports)."""
    outdir = tmp_path_factory.mktemp("genuine") / "out"
    code, _, err = compare(outdir)
    assert code == 0, err
    return outdir


def foreign_png() -> bytes:
    """A real PNG picture of the user's own (Matplotlib's default Software text)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def foreign_hdf5(path: Path) -> None:
    with h5py.File(path, "w") as f:
        f.attrs["owner"] = "another program"
        f["data"] = [1.0, 2.0]


def refused(outdir: Path, name: str, *extra: object) -> None:
    """The comparison exits 2 naming ``outdir/name``, without a traceback, and changes nothing."""
    before = snapshot(outdir)
    code, out, err = compare(outdir, *extra)
    assert code == 2, (code, out, err)
    assert f"{outdir / name}:" in err, err
    assert "Traceback" not in err and out == ""
    assert snapshot(outdir) == before


# ----------------------------------------------------------------------------- foreign content

FOREIGN: dict[str, Callable[[Path], None]] = {
    "compare.json-notes": lambda p: p.write_text("my notes\n"),
    "compare.json-other-json": lambda p: p.write_text('{"format": "my-own", "data": [1, 2]}\n'),
    # mbsim's format key, but not where mbsim puts it: a file of the user's that quotes it
    "compare.json-format-not-first": lambda p: p.write_text('{"notes": "x", "format": "mbsim-compare"}\n'),
    "compare.md-notes": lambda p: p.write_text("notes\n"),
    # looks like mbsim's title, but is the user's own text
    "compare.md-lookalike-title": lambda p: p.write_text("# mbsim compare: my thoughts on solvers\n\nkeep this\n"),
    "compare.md-empty": lambda p: p.write_bytes(b""),
    "violation.png-text": lambda p: p.write_text("not a picture\n"),
    "violation.png-users-png": lambda p: p.write_bytes(foreign_png()),
    "energy.png-text": lambda p: p.write_text("not a picture\n"),
    "energy.png-users-png": lambda p: p.write_bytes(foreign_png()),
    "energy.png-binary-junk": lambda p: p.write_bytes(os.urandom(4096)),
    "lagrange.h5-notes": lambda p: p.write_text("my notes\n"),
    "lagrange.h5-other-hdf5": foreign_hdf5,
}


@pytest.mark.parametrize("case", quick(FOREIGN, keep="compare.md-notes"))
def test_a_file_mbsim_did_not_write_refuses_the_comparison(tmp_path: Path, case: str) -> None:
    name = case.split("-", 1)[0]
    outdir = tmp_path / "out"
    outdir.mkdir()
    FOREIGN[case](outdir / name)
    (outdir / "mine.txt").write_text("other work of the user\n")
    refused(outdir, name)


def test_the_issue_example_notes_in_compare_md(tmp_path: Path) -> None:
    """`mkdir out; echo notes > out/compare.md; mbsim compare ... -o out`: the notes stay."""
    outdir = tmp_path / "out"
    outdir.mkdir()
    subprocess.run("echo notes > out/compare.md", shell=True, cwd=tmp_path, check=True)
    code, out, err = run_mbsim("compare", PENDULUM, "--solvers", SOLVER, *SHORT, "-o", "out", timeout=TIMEOUT,
                               cwd=tmp_path)  # fmt: skip
    assert code == 2, err
    assert err.startswith("mbsim: output error: out/compare.md: exists and was not written by mbsim"), err
    assert (outdir / "compare.md").read_text() == "notes\n"
    assert sorted(p.name for p in outdir.iterdir()) == ["compare.md"]  # nothing ran, nothing was written


# ----------------------------------------------------------------------------- links, directories, FIFOs


@pytest.mark.parametrize("name", quick([*REPORTS, "lagrange.h5"], keep="compare.json"))
def test_a_link_in_outdir_is_never_followed(tmp_path: Path, genuine: Path, name: str) -> None:
    """Even a link to a file mbsim wrote (elsewhere) is refused: writing through it would change a
    file outside OUTDIR, replacing it would lose the user's link."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(genuine, elsewhere)
    before = snapshot(elsewhere)
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / name).symlink_to(elsewhere / name)
    refused(outdir, name)
    assert snapshot(elsewhere) == before


def test_a_dangling_link_is_refused(tmp_path: Path) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / "compare.json").symlink_to(tmp_path / "would-be-created.json")
    refused(outdir, "compare.json")
    assert not (tmp_path / "would-be-created.json").exists()


def test_the_reused_reference_never_writes_through_a_link(tmp_path: Path, genuine: Path) -> None:
    """--reference equal to a solver copies its run to reference-<name>.h5; a link there to an
    mbsim result elsewhere was followed (shutil.copyfile), overwriting that file."""
    precious = tmp_path / "precious.h5"
    shutil.copyfile(genuine / "lagrange.h5", precious)
    before = precious.read_bytes()
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / "reference-lagrange.h5").symlink_to(precious)
    refused(outdir, "reference-lagrange.h5", "--reference", SOLVER)
    assert precious.read_bytes() == before


@pytest.mark.parametrize("name", quick(["compare.md", "energy.png", "lagrange.h5"], keep="compare.md"))
def test_a_directory_where_a_file_goes(tmp_path: Path, name: str) -> None:
    outdir = tmp_path / "out"
    (outdir / name).mkdir(parents=True)
    (outdir / name / "inside.txt").write_text("keep\n")
    refused(outdir, name)


@pytest.mark.parametrize("name", quick(["compare.json", "violation.png", "lagrange.h5"], keep="compare.json"))
def test_a_fifo_where_a_file_goes_neither_blocks_nor_is_written(tmp_path: Path, name: str) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    os.mkfifo(outdir / name)
    refused(outdir, name)  # within the subprocess timeout: nothing opened the FIFO and waited


# ----------------------------------------------------------------------------- OUTDIR itself


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[Path]:
    """A directory nothing can be written into: mode 0555, or (root ignores modes) a read-only tmpfs."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"running as root and cannot mount a read-only tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True)


@pytest.mark.parametrize(
    "kind", quick(["file", "link-to-file", "dangling-link", "fifo", "read-only", "below-a-file"], keep="file")
)
def test_an_outdir_that_is_no_writable_directory_exits_2(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out"
    with contextlib.ExitStack() as stack:
        if kind == "file":
            target.write_text("a file\n")
        elif kind == "link-to-file":
            (tmp_path / "afile").write_text("a file\n")
            target.symlink_to(tmp_path / "afile")
        elif kind == "dangling-link":
            target.symlink_to(tmp_path / "nowhere")
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "below-a-file":
            (tmp_path / "afile").write_text("a file\n")
            target = tmp_path / "afile" / "sub"
        else:
            stack.enter_context(read_only_dir(target))
        before = snapshot(tmp_path)
        code, out, err = compare(target)
        assert code == 2, (code, out, err)
        assert str(target) in err and "Traceback" not in err, err
        assert snapshot(tmp_path) == before
    assert not (tmp_path / "nowhere").exists()


# ----------------------------------------------------------------------------- what mbsim wrote is replaced


def _legacy_markdown(path: Path) -> None:
    """compare.md as versions before the marker line wrote it (the title first)."""
    lines = path.read_text().splitlines(keepends=True)
    assert lines[0].startswith("<!-- written by mbsim compare")
    path.write_text("".join(lines[1:]))


def _legacy_png(path: Path) -> None:
    """A plot as versions before the mark wrote it: Matplotlib's own Software text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    fig.savefig(path, dpi=50)
    plt.close(fig)


OLDER: dict[str, Callable[[Path], None]] = {
    "compare.md-legacy-title": _legacy_markdown,
    "violation.png-legacy-matplotlib": _legacy_png,
    "energy.png-legacy-matplotlib": _legacy_png,
    "compare.json-earlier-run": lambda p: None,
    "lagrange.h5-earlier-run": lambda p: None,
}


@pytest.mark.parametrize("case", quick(OLDER, keep="lagrange.h5-earlier-run"))
def test_files_an_earlier_mbsim_wrote_are_replaced(tmp_path: Path, genuine: Path, case: str) -> None:
    name = case.split("-", 1)[0]
    outdir = tmp_path / "out"
    shutil.copytree(genuine, outdir)
    OLDER[case](outdir / name)
    (outdir / "mine.txt").write_text("other work of the user\n")
    old = (outdir / name).read_bytes()
    code, _, err = compare(outdir, "--set", "time.step=0.005")  # another run: other contents
    assert code == 0, err
    assert "Traceback" not in err
    assert (outdir / "mine.txt").read_text() == "other work of the user\n"
    assert (outdir / name).read_bytes() != old
    data = json.loads((outdir / "compare.json").read_text())
    assert data["format"] == "mbsim-compare" and data["rows"][0]["status"] == "completed"
    assert (outdir / "compare.md").read_text().startswith("<!-- written by mbsim compare -->\n# mbsim compare: ")
    from mbsim.output.outdir import png_software

    for png in ("violation.png", "energy.png"):
        assert png_software((outdir / png).read_bytes()[:65536]) == "mbsim compare"
    with h5py.File(outdir / "lagrange.h5", "r") as f:
        assert f.attrs["format"] == "mbsim-result" and f.attrs["status"] == "completed"
    assert sorted(p.name for p in outdir.iterdir()) == sorted([*REPORTS, "lagrange.h5", "mine.txt"])  # no temporary


def test_a_legacy_png_without_an_mbsim_compare_json_is_not_ours(tmp_path: Path) -> None:
    """Matplotlib's Software text alone says nothing of who wrote it: next to no mbsim table it
    is the user's picture."""
    outdir = tmp_path / "out"
    outdir.mkdir()
    _legacy_png(outdir / "energy.png")
    refused(outdir, "energy.png")


@pytest.mark.slow
def test_a_link_put_in_place_of_a_result_while_the_comparison_runs_is_not_followed(
    tmp_path: Path, genuine: Path
) -> None:
    """While the first solver runs (seconds), the second solver's result name becomes a link to an
    mbsim result elsewhere: the second run refuses it (its row fails, saying so) instead of
    writing through it."""
    precious = tmp_path / "precious.h5"
    shutil.copyfile(genuine / "lagrange.h5", precious)
    before = precious.read_bytes()
    outdir = tmp_path / "out"
    command = [sys.executable, "-m", "mbsim", "compare", PENDULUM, "--solvers", "lagrange,lagrange:integrator=euler",
               "--set", "time.end=300", "-o", outdir, "--format", "json", "--quiet"]  # fmt: skip
    proc = subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (outdir / "lagrange.h5").exists():  # the first run has started
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        target = outdir / "lagrange_integrator-euler.h5"
        target.symlink_to(precious)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    first, second = json.loads(out)["rows"]
    assert first["status"] == "completed", first
    assert second["status"] == "failed" and "is a symbolic link" in second["message"], second
    assert precious.read_bytes() == before
    assert os.readlink(target) == str(precious)


@pytest.mark.slow  # ~3 s (a whole comparison); the hard-linked backup: tests/safety/test_file_replaced.py
def test_a_result_with_other_names_is_replaced_without_changing_them(tmp_path: Path, genuine: Path) -> None:
    """A backup made with hard links (`cp -al out backup`): the run writes a new lagrange.h5, the
    backup's name keeps the old contents (the writer truncates an existing result in place)."""
    outdir = tmp_path / "out"
    shutil.copytree(genuine, outdir)
    backup = tmp_path / "backup.h5"
    os.link(outdir / "lagrange.h5", backup)
    before = backup.read_bytes()
    code, _, err = compare(outdir, "--set", "time.step=0.005")
    assert code == 0, err
    assert backup.read_bytes() == before
    with h5py.File(outdir / "lagrange.h5", "r") as new, h5py.File(backup, "r") as old:
        assert len(new["time"]) == 5 and len(old["time"]) == 3
