"""Issue 28, items 2, 3 and 11: ``mbsim sweep`` replaces only files mbsim wrote in OUTDIR, runs
scenes with ``models:`` on workers that do not have the model files, and its README example.

The command runs for real in a subprocess (``python -m mbsim sweep``). Refusals come before any
cluster starts, so they are quick; the tests that run cases use ``--workers 1``, two-step
pendulum cases or the UR5 arm for a few milliseconds, and are marked slow. The check that a
case needs no model file on its worker builds the task the client ships and runs it in this
process after the model files are gone (a worker on another machine sees exactly that task).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest
from quick_loop import quick

from mbsim.sweep import parse_params, plan_sweep
from mbsim.sweep.worker import run_case

SCENES = Path(__file__).resolve().parents[2] / "scenes"
PENDULUM = SCENES / "pendulum_2d.yaml"
UR5 = SCENES / "ur5_arm.yaml"
FOUR_BAR_MJCF = SCENES / "four_bar_mjcf.yaml"
SHORT = ["--set", "time.end=0.02"]  # two steps of the pendulum
TWO = ["--param", "parameters.theta0=1,2"]  # cases theta0-1.h5 and theta0-2.h5
TABLES = ("sweep.json", "sweep.csv", "sweep.md")
TIMEOUT = 300


def run_mbsim(*args: object, timeout: float = TIMEOUT, cwd: Path | None = None) -> tuple[int, str, str]:
    """The real command in a subprocess: (exit code, stdout, stderr)."""
    command = [sys.executable, "-m", "mbsim", *(str(a) for a in args)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def sweep(outdir: Path, *extra: object, scene: Path = PENDULUM) -> tuple[int, str, str]:
    return run_mbsim("sweep", scene, *SHORT, *TWO, "--workers", 1, "-o", outdir, "--quiet", *extra)


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


def refused(outdir: Path, name: str) -> None:
    """The sweep exits 2 naming ``outdir/name`` before anything runs, and changes nothing."""
    before = snapshot(outdir)
    code, out, err = sweep(outdir)
    assert code == 2, (code, out, err)
    assert f"{outdir / name}:" in err, err
    assert "Traceback" not in err and "starting" not in err and out == ""
    assert snapshot(outdir) == before


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a two-case sweep mbsim wrote (theta0-1.h5, theta0-2.h5 and the tables)."""
    outdir = tmp_path_factory.mktemp("genuine") / "out"
    code, _, err = sweep(outdir)
    assert code == 0, err
    return outdir


# ----------------------------------------------------------------------------- foreign files (no cluster)

FOREIGN: dict[str, Callable[[Path], None]] = {
    "sweep.json-notes": lambda p: p.write_text("my notes\n"),
    "sweep.json-other-json": lambda p: p.write_text('{"format": "mbsim-compare", "rows": []}\n'),
    "sweep.csv-users-table": lambda p: p.write_text("case,file,notes\n1,a.h5,keep me\n"),
    # the sweep's header row, but not the whole of it: the user's own table of selected columns
    "sweep.csv-partial-header": lambda p: p.write_text("case,file,status,source\n1,a.h5,completed,run\n"),
    "sweep.csv-binary": lambda p: p.write_bytes(b"\xff\xfe\x00junk"),
    "sweep.md-notes": lambda p: p.write_text("notes\n"),
    "sweep.md-lookalike-title": lambda p: p.write_text("# mbsim sweep: what I learnt\n\nkeep this\n"),
    "theta0-1.h5-notes": lambda p: p.write_text("my notes\n"),
}


@pytest.mark.parametrize("case", quick(FOREIGN, keep=0))
def test_a_file_mbsim_did_not_write_refuses_the_sweep(tmp_path: Path, case: str) -> None:
    name = case.rsplit("-", 1)[0] if case.startswith("theta0") else case.split("-", 1)[0]
    outdir = tmp_path / "out"
    outdir.mkdir()
    FOREIGN[case](outdir / name)
    (outdir / "mine.txt").write_text("other work of the user\n")
    refused(outdir, name)


def test_the_issue_example_notes_in_sweep_md(tmp_path: Path) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / "sweep.md").write_text("notes\n")
    code, _, err = sweep(outdir)
    assert code == 2, err
    assert f"{outdir / 'sweep.md'}: exists and was not written by mbsim" in err
    assert snapshot(outdir) == {"sweep.md": b"notes\n"}


# ----------------------------------------------------------------------------- links, FIFOs, OUTDIR (no cluster)


@pytest.mark.parametrize("name", quick(["sweep.json", "sweep.md", "theta0-1.h5"], keep="sweep.json"))
def test_a_link_in_outdir_is_never_followed(tmp_path: Path, name: str) -> None:
    """A link to a file elsewhere (here: one of the user's) is refused, whatever it points at."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("the user's file\n")
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / name).symlink_to(elsewhere / "precious")
    refused(outdir, name)
    assert (elsewhere / "precious").read_text() == "the user's file\n"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sweep.json", "sweep.csv", "theta0-2.h5"])
def test_a_link_to_a_file_mbsim_wrote_is_refused_too(tmp_path: Path, genuine: Path, name: str) -> None:
    """A link to the very sweep's files elsewhere: resuming from it or replacing through it would
    change (or trust) a folder the command was not given."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(genuine, elsewhere)
    before = snapshot(elsewhere)
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / name).symlink_to(elsewhere / name)
    refused(outdir, name)
    assert snapshot(elsewhere) == before


@pytest.mark.parametrize("name", quick(["sweep.csv", "theta0-2.h5"], keep="sweep.csv"))
def test_a_fifo_where_a_file_goes_neither_blocks_nor_is_written(tmp_path: Path, name: str) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    os.mkfifo(outdir / name)
    refused(outdir, name)


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
    "kind", quick(["link-to-file", "dangling-link", "fifo", "read-only", "below-a-file"], keep="link-to-file")
)
def test_an_outdir_that_is_no_writable_directory_exits_2(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out"
    with contextlib.ExitStack() as stack:
        if kind == "link-to-file":
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
        code, out, err = sweep(target)
        assert code == 2, (code, out, err)
        assert str(target) in err and "Traceback" not in err, err
        assert snapshot(tmp_path) == before


def test_a_param_into_an_imported_joint_that_the_scene_does_not_amend_names_the_param(tmp_path: Path) -> None:
    """Only an amended imported joint is in the scene's joints: list before the models are
    expanded; another is exit 2 naming the --param, before anything runs."""
    code, _, err = run_mbsim(
        "sweep", UR5, "--set", "time.end=0.002", "--param", "joints.elbow_joint.spring.stiffness=1,2",
        "--workers", 1, "-o", tmp_path / "out",
    )  # fmt: skip
    assert code == 2, err
    assert "elbow_joint" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- file names from values


@pytest.mark.parametrize(
    "values",
    quick(
        [
            pytest.param("a,A,a-case1", id="suffix-collides-with-a-value"),
            pytest.param("../../evil,a/b,..,/etc/passwd,a-b", id="values-that-look-like-paths"),
            pytest.param("con,CON.x,nul", id="windows-device-names"),
        ],
        keep="values-that-look-like-paths",
    ),
)
def test_case_file_names_are_distinct_and_inside_outdir(tmp_path: Path, values: str) -> None:
    plan = plan_sweep(str(PENDULUM), parse_params([f"name={values}"]), overrides=("time.end=0.02",))
    outdir = tmp_path / "out"
    names = [f"{stem}.h5" for stem in plan.stems]
    assert len({n.lower() for n in names}) == len(names), names
    for name in names:
        assert "/" not in name and "\\" not in name and not name.startswith(".")
        assert (outdir / name).resolve().parent == outdir.resolve()


@pytest.mark.slow
def test_hostile_values_write_distinct_files_inside_outdir(tmp_path: Path) -> None:
    outdir = tmp_path / "work" / "out"
    code, out, err = run_mbsim(
        "sweep", PENDULUM, *SHORT, "--param", "name=a,A,a-case1,../../evil,a/b", "--workers", 1, "-o", outdir,
        # a case's file is OUTDIR/<name>.h5 whatever the scene's output.file says
        "--param", f"output.file={tmp_path / 'escaped.h5'}", "--format", "json", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["out"]  # nothing beside OUTDIR
    files = sorted(p.name for p in outdir.glob("*.h5"))
    assert len(files) == 5 and files == sorted(r["file"] for r in rows)
    for row in rows:  # each file holds its own case
        with h5py.File(outdir / row["file"], "r") as f:
            assert json.loads(f.attrs["sweep_parameters"]) == row["parameters"]


# ----------------------------------------------------------------------------- what mbsim wrote is replaced


def _legacy_markdown(path: Path) -> None:
    """sweep.md as versions before the marker line wrote it (the title first)."""
    lines = path.read_text().splitlines(keepends=True)
    assert lines[0] == "<!-- written by mbsim sweep -->\n"
    path.write_text("".join(lines[1:]))


OLDER: dict[str, Callable[[Path], None]] = {
    "sweep.md-legacy-title": _legacy_markdown,
    "sweep.json-earlier-run": lambda p: p.write_text(p.read_text().replace('"retries": 1', '"retries": 0')),
    "sweep.csv-earlier-run": lambda p: p.write_text(p.read_text() + "\n"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(OLDER), ids=list(OLDER))
def test_tables_an_earlier_mbsim_wrote_are_replaced(tmp_path: Path, genuine: Path, case: str) -> None:
    name = case.split("-", 1)[0]
    outdir = tmp_path / "out"
    shutil.copytree(genuine, outdir)
    OLDER[case](outdir / name)
    old = (outdir / name).read_bytes()
    code, _, err = sweep(outdir)  # every case resumed: no cluster
    assert code == 0, err
    assert (outdir / name).read_bytes() != old
    data = json.loads((outdir / "sweep.json").read_text())
    assert data["format"] == "mbsim-sweep" and data["counts"]["resumed"] == 2
    assert (outdir / "sweep.md").read_text().startswith("<!-- written by mbsim sweep -->\n# mbsim sweep: ")
    assert sorted(p.name for p in outdir.iterdir()) == sorted([*TABLES, "theta0-1.h5", "theta0-2.h5"])


@pytest.mark.slow
def test_an_mbsim_result_of_another_run_in_place_of_a_case_file_is_replaced(tmp_path: Path, genuine: Path) -> None:
    """A result an earlier mbsim wrote for another case (here: the other angle) is mbsim's: the
    case runs and replaces it; the files of the user's beside it stay."""
    outdir = tmp_path / "out"
    outdir.mkdir()
    shutil.copyfile(genuine / "theta0-2.h5", outdir / "theta0-1.h5")
    (outdir / "mine.txt").write_text("keep\n")
    code, out, err = sweep(outdir, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["source"] for r in rows] == ["run", "run"]
    with h5py.File(outdir / "theta0-1.h5", "r") as f:
        assert json.loads(f.attrs["sweep_parameters"]) == {"parameters.theta0": 1}
    assert (outdir / "mine.txt").read_text() == "keep\n"


# ----------------------------------------------------------------------------- scenes with models (item 3)


@pytest.mark.slow
def test_a_sweep_of_the_ur5_scene_with_a_param_into_its_amended_joint(tmp_path: Path) -> None:
    """The issue's command failed every case ("model file not found"); the amended wrist_3_joint's
    spring is swept too. Each case's result is the one `mbsim run` gives with the same --set."""
    outdir = tmp_path / "out"
    code, out, err = run_mbsim(
        "sweep", UR5, "--param", "time.end=0.002,0.004", "--param", "joints.wrist_3_joint.spring.stiffness=1,2",
        "--workers", 1, "-o", outdir, "--format", "json", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["status"] for r in rows] == ["completed"] * 4
    row = rows[3]
    assert row["parameters"] == {"time.end": 0.004, "joints.wrist_3_joint.spring.stiffness": 2}
    single = tmp_path / "single.h5"
    code, _, err = run_mbsim(
        "run", UR5, "--set", "time.end=0.004", "--set", "joints.wrist_3_joint.spring.stiffness=2", "-o", single,
        "--quiet",
    )  # fmt: skip
    assert code == 0, err
    with h5py.File(outdir / row["file"], "r") as swept, h5py.File(single, "r") as alone:
        assert swept.attrs["status"] == "completed"
        np.testing.assert_array_equal(swept["q"][:], alone["q"][:])
        assert swept["scene"][()] == alone["scene"][()]  # the scene as loaded: models expanded, both


def _scene_copy(scene: Path, target: Path) -> Path:
    """The scene and its robots/ folder copied below ``target``."""
    target.mkdir()
    shutil.copytree(scene.parent / "robots", target / "robots")
    return Path(shutil.copyfile(scene, target / scene.name))


@pytest.mark.parametrize(
    ("scene", "param"),
    quick(
        [
            pytest.param(UR5, "joints.wrist_3_joint.spring.stiffness=1,2", id="urdf-ur5"),
            pytest.param(FOUR_BAR_MJCF, "gravity=[0,0,-9.81],[0,0,-1.62]", id="mjcf-four-bar"),
        ],
        keep="urdf-ur5",
    ),
)
def test_a_case_needs_no_model_file_on_its_worker(tmp_path: Path, scene: Path, param: str) -> None:
    """The task of a case (what travels to a worker on another machine) carries the scene with its
    models expanded: it runs after every model file on this machine is gone."""
    copy = _scene_copy(scene, tmp_path / "client")
    plan = plan_sweep(str(copy), parse_params([param]), overrides=("time.end=0.002",))
    payloads = [plan.payload(case, 1) for case in plan.cases]
    shutil.rmtree(tmp_path / "client")  # the worker has none of the client's files
    for payload in payloads:
        assert b"models:" not in payload.scene_bytes and payload.overrides == ()
        outcome = run_case(payload)
        assert (outcome.status, outcome.message) == ("completed", ""), outcome.message


def test_an_edited_model_file_is_run_again_not_resumed(tmp_path: Path) -> None:
    """The case hash (what resume compares) covers the model file's content, not only the scene's."""
    copy = _scene_copy(UR5, tmp_path / "scene")
    params = parse_params(["time.end=0.002"])
    before = plan_sweep(str(copy), params).case(0).case_hash
    urdf = tmp_path / "scene" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf"
    text = urdf.read_text()
    assert text.count('<mass value="3.7"/>') == 1
    urdf.write_text(text.replace('<mass value="3.7"/>', '<mass value="3.9"/>'))
    assert plan_sweep(str(copy), params).case(0).case_hash != before


# ----------------------------------------------------------------------------- the README's example (item 11)


@pytest.mark.slow
def test_the_readme_sweep_example_fails_exactly_where_the_readme_says(tmp_path: Path) -> None:
    """README.md's sweep example exits 4: the assertion fails for k = 1e7 and 1e8 at 5e-5 s only,
    with the drifts the README quotes (its words are checked against the run, not trusted)."""
    readme = (SCENES.parent / "README.md").read_text()
    assert "It exits 4,\n# and that is its finding" in readme
    code, out, err = run_mbsim(
        "sweep", SCENES / "blocks_stiffness_sweep.yaml", "--param", "parameters.k=logspace(6,8,3)",
        "--param", "time.step=1e-5,2e-5,5e-5", "--assert", "energy_drift < 1e-3", "--workers", 1,
        "-o", tmp_path / "sweep-blocks", "--format", "json", "--quiet", timeout=900,
    )  # fmt: skip
    assert code == 4, err
    rows = json.loads(out)["rows"]
    assert all(r["status"] == "completed" for r in rows)
    failed = {(r["parameters"]["parameters.k"], r["parameters"]["time.step"]): r["energy_drift"]
              for r in rows if not r["assertions"][0]["passed"]}  # fmt: skip
    assert sorted(failed) == [(1e7, 5e-5), (1e8, 5e-5)]
    assert f"{failed[(1e7, 5e-5)]:.1e}" == "2.0e-03" and f"{failed[(1e8, 5e-5)]:.1e}" == "3.3e-02"
    assert f"{max(r['energy_drift'] for r in rows if r['assertions'][0]['passed']):.1e}" == "7.2e-04"


def test_collision_meshes_of_an_imported_model_travel_with_the_case(tmp_path: Path) -> None:
    """collisions: true with a package:// mesh: the expanded scene names the mesh by its absolute
    path on the client; the mesh travels in the task and the case runs without the client's files."""
    import trimesh

    client = tmp_path / "client"
    (client / "parts" / "meshes").mkdir(parents=True)
    trimesh.creation.box(extents=[0.1, 0.1, 0.3]).export(client / "parts" / "meshes" / "box.stl")
    (client / "robot.urdf").write_text(
        '<robot name="r"><link name="base"/><link name="arm">'
        '<inertial><origin xyz="0.1 0 0"/><mass value="1"/>'
        '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>'
        '<collision><geometry><mesh filename="package://parts/meshes/box.stl"/></geometry></collision></link>'
        '<joint name="hinge" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>'
        '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint></robot>\n'
    )
    (client / "scene.yaml").write_text(
        "mbsim: 1\nname: mesh arm\ngravity: [0, 0, -9.81]\ntime: {end: 0.002, step: 0.001}\n"
        "solver: {method: recursive, integrator: rk4}\n"
        "models:\n  - {file: robot.urdf, collisions: true, package_paths: {parts: parts}}\n"
    )
    plan = plan_sweep(str(client / "scene.yaml"), parse_params(["gravity=[0,0,-9.81],[0,0,-1.62]"]))
    payloads = [plan.payload(case, 1) for case in plan.cases]
    mesh = (client / "parts" / "meshes" / "box.stl").read_bytes()
    shutil.rmtree(client)
    for payload in payloads:
        assert [data for _, data in payload.files] == [mesh]
        outcome = run_case(payload)
        assert (outcome.status, outcome.message) == ("completed", ""), outcome.message
        with h5py.File(io.BytesIO(outcome.data), "r") as f:
            assert "arm" in f["bodies"]
