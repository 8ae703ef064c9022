"""Standard streams and locales (issue 28, item 10), through the real ``mbsim`` in subprocesses.

However a shell, a cron job or a batch scheduler starts mbsim, a command does its work:

- a closed stdin, stdout or stderr (``<&-``, ``>&-``, ``2>&-``): the command runs as usual and
  exits 0 with complete files; what goes to a closed stream is dropped silently;
- stdout on a full device (``> /dev/full``): the command finishes its files, says on stderr that
  its output was lost and exits 2 (an unwritable output, CONTRACT §2); stderr on a full device:
  messages are dropped, the exit code is the command's;
- a reader that went away (``| head -c 1``): no traceback, no "Exception ignored", exit 141
  (128 + SIGPIPE, what a shell shows for any writer whose reader left), files complete;
- an ASCII locale (``LC_ALL=C``, Python's UTF-8 mode off) with non-ASCII file names, scene text,
  names and messages, and file names holding bytes that are not UTF-8 at all: exit 0 (or the
  command's own 2), names kept in the files, JSON and reports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
from cli_process import PENDULUM, root_attrs
from quick_loop import quick

TIMEOUT = 120
BASH = shutil.which("bash") or "/bin/bash"
PENDULUM_ROWS = 51  # time.end 0.5 at step 0.01
SHORT = ("--set", "time.end=0.5")
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "", "PYTHONUTF8": "0"}
UTF8_LOCALE = {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONIOENCODING": "", "PYTHONUTF8": "0"}

URDF = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="upper">
    <inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="upper"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
</robot>
"""


def _env(extra: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("LC_", "PYTHONUTF8"))}
    env.update(extra or {})
    return env


def shell(redirections: str, *args: object, cwd: Path, env: dict | None = None) -> tuple[int, str, str]:
    """``mbsim ARGS REDIRECTIONS`` in bash (e.g. ``2>&-``): (exit code, stdout, stderr) of what
    the redirections leave to this process."""
    argv = [sys.executable, "-m", "mbsim", *(os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args)]
    proc = subprocess.run(
        [BASH, "-c", f'"$@" {redirections}', "bash", *argv],
        capture_output=True,
        timeout=TIMEOUT,
        cwd=cwd,
        env=env or _env(),
    )
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def into_closed_pipe(*args: object, cwd: Path, env: dict | None = None) -> tuple[int, str]:
    """``mbsim ARGS`` writing into a pipe whose reader has already gone: (exit code, stderr)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mbsim", *(str(a) for a in args)],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT,
            cwd=cwd,
            env=env or _env(),
        )
    finally:
        os.close(write)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def no_python_noise(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and "Exception ignored" not in text, text


def complete(path: Path, rows: int = PENDULUM_ROWS) -> None:
    assert root_attrs(path)["status"] == "completed"
    with h5py.File(path, "r") as f:
        assert len(f["time"]) == rows and len(f["bodies/bob/position"]) == rows


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A folder with a result file (r.h5) and a small URDF, shared by the cases."""
    folder = tmp_path_factory.mktemp("stdio")
    code, _, err = shell("", "run", PENDULUM, "-o", "r.h5", *SHORT, "--quiet", cwd=folder)
    assert code == 0, err
    (folder / "arm.urdf").write_text(URDF, encoding="utf-8")
    return folder


# command id -> (arguments, files it must leave complete); "{n}" is a fresh name per case
COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "run": (("run", str(PENDULUM), "-o", "{n}.h5", *SHORT), ("{n}.h5",)),
    "run_json": (("run", str(PENDULUM), "-o", "{n}.h5", *SHORT, "--json"), ("{n}.h5",)),
    "validate": (("validate", str(PENDULUM)), ()),
    "info": (("info", "r.h5"), ()),
    "info_json": (("info", "r.h5", "--json"), ()),
    "compare": (
        ("compare", str(PENDULUM), "--solvers", "lagrange", "-o", "{n}", "--set", "time.end=0.2"),
        ("{n}/compare.json", "{n}/compare.md", "{n}/lagrange.h5"),
    ),
    "export_html": (("export", "r.h5", "-o", "{n}.html"), ("{n}.html",)),
    "plot": (("plot", "r.h5", "-o", "{n}.png"), ("{n}.png",)),
    "import": (("import", "arm.urdf"), ()),
    "help": (("--help",), ()),
    "sweep_help": (("sweep", "--help"), ()),
}


def _case(command: str, name: str) -> tuple[list[str], list[str]]:
    args, files = COMMANDS[command]
    return [a.replace("{n}", name) for a in args], [f.replace("{n}", name) for f in files]


def _check_files(work: Path, files: list[str]) -> None:
    for file in files:
        path = work / file
        assert path.is_file() and path.stat().st_size > 0, file
        if file.endswith(".h5") and "/" not in file:
            complete(path)
        if file.endswith(".json"):
            json.loads(path.read_text(encoding="utf-8"))


CLOSED = [
    *[("stderr", "2>&-", c) for c in ("run", "run_json", "compare", "export_html", "info", "plot")],
    *[("stdout", ">&-", c) for c in ("run", "info_json", "validate", "help", "import")],
    *[("stdin", "<&-", c) for c in ("run", "sweep_help")],
    ("all_three", "<&- >&- 2>&-", "run"),
]


@pytest.mark.parametrize(
    ("stream", "redirect", "command"), quick(CLOSED, keep="all_three-run", ids=[f"{s}-{c}" for s, _, c in CLOSED])
)
def test_a_closed_stream_changes_nothing(work: Path, stream: str, redirect: str, command: str) -> None:
    name = f"closed-{stream}-{command}"
    args, files = _case(command, name)
    code, out, err = shell(redirect, *args, cwd=work)
    assert code == 0, (out, err)
    no_python_noise(out, err)
    _check_files(work, files)
    if stream == "stderr" and command == "run":
        assert "status     completed" in out  # the summary still reaches stdout
    if stream == "stderr" and command in ("run", "run_json"):
        # with descriptor 2 closed, the result file itself became "stderr" (a 0-byte file, exit 1)
        with h5py.File(work / files[0], "r") as f:
            assert f.attrs["format"] == "mbsim-result"


FULL = ("run_json", "info_json", "info", "validate", "help", "compare", "import")


@pytest.mark.parametrize("command", quick(FULL, keep="info"))
def test_stdout_on_a_full_device_is_an_output_error(work: Path, command: str) -> None:
    args, files = _case(command, f"full-{command}")
    code, out, err = shell("> /dev/full", *args, cwd=work)
    assert code == 2, err
    no_python_noise(err)
    assert "mbsim: output error: cannot write to standard output: No space left on device" in err
    _check_files(work, files)  # the work is done and kept; only the printed summary is lost


def test_stderr_on_a_full_device_drops_the_messages(work: Path) -> None:
    args, files = _case("compare", "full-stderr")
    code, out, _ = shell("2> /dev/full", *args, cwd=work)
    assert code == 0
    assert "lagrange" in out
    _check_files(work, files)


PIPED = ("info", "info_json", "run_json", "compare", "validate", "help")


@pytest.mark.parametrize("command", quick(PIPED, keep="info"))
def test_a_reader_that_went_away(work: Path, command: str) -> None:
    args, files = _case(command, f"pipe-{command}")
    code, err = into_closed_pipe(*args, cwd=work)
    assert code == 141, err
    no_python_noise(err)
    _check_files(work, files)


@pytest.mark.parametrize(
    "pipeline",
    quick(
        [
            "info r.h5 --json | head -c 1",
            f"compare {PENDULUM} --solvers lagrange,null_space -o headcmp --set time.end=0.2 | head -1",
            "info r.h5 | head -1",
        ],
        keep="info-head-1",
        ids=["info_json-head-c1", "compare-head-1", "info-head-1"],
    ),
)
def test_head_in_a_shell_pipeline(work: Path, pipeline: str) -> None:
    command = f'set -o pipefail; {sys.executable} -m mbsim {pipeline}; echo "status=$?" >&2'
    proc = subprocess.run([BASH, "-c", command], capture_output=True, text=True, timeout=TIMEOUT, cwd=work)
    no_python_noise(proc.stderr)
    assert proc.stdout  # head got its line
    status = int(proc.stderr.rsplit("status=", 1)[1])
    assert status in (0, 141), proc.stderr  # 0 when mbsim wrote everything before head left


# ----------------------------------------------------------------------------- locales


@pytest.fixture(scope="module")
def umlauts(tmp_path_factory) -> Path:
    """szenen/Pendel-ö.yaml: non-ASCII file name, scene name, body name and comment."""
    folder = tmp_path_factory.mktemp("locale") / "szenen"
    folder.mkdir()
    text = PENDULUM.read_text(encoding="utf-8")
    text = text.replace("name: pendulum 2d", "name: Pendel-ö ✓ 振り子").replace("bob", "Gewicht-ä")
    assert "Gewicht-ä" in text and "振り子" in text
    (folder / "Pendel-ö.yaml").write_text("# Schwere Masse — ß\n" + text, encoding="utf-8")
    (folder / "Arm-ö.urdf").write_text(URDF.replace("upper", "Oberarm-ü"), encoding="utf-8")
    return folder


def _c_run(folder: Path, *args: object, env: dict = ASCII_LOCALE) -> tuple[int, str, str]:
    return shell("", *args, cwd=folder, env=_env(env))


def test_an_ascii_locale_runs_a_non_ascii_scene(umlauts: Path) -> None:
    code, out, err = _c_run(umlauts, "run", "Pendel-ö.yaml", "-o", "Lauf-ö.h5", *SHORT)
    assert code == 0, err
    no_python_noise(err)
    assert "Pendel-ö ✓ 振り子" in out and "Lauf-ö.h5" in out  # UTF-8 out, not "??"
    attrs = root_attrs(umlauts / "Lauf-ö.h5")
    assert attrs["status"] == "completed" and attrs["scene_name"] == "Pendel-ö ✓ 振り子"
    assert "Pendel-ö.yaml" in attrs["writer_command"]
    with h5py.File(umlauts / "Lauf-ö.h5", "r") as f:
        assert len(f["bodies/Gewicht-ä/position"]) == PENDULUM_ROWS


LOCALE_COMMANDS = {
    "validate": (("validate", "Pendel-ö.yaml"), "Pendel-ö ✓ 振り子"),
    "run_json": (("run", "Pendel-ö.yaml", "-o", "Lauf-ö-json.h5", *SHORT, "--json"), None),
    "info": (("info", "Lauf-ö.h5"), "Gewicht-ä"),
    "info_json": (("info", "Lauf-ö.h5", "--json"), None),
    "export_html": (("export", "Lauf-ö.h5", "-o", "Seite-ö.html"), "Seite-ö.html"),
    "export_glb": (("export", "Lauf-ö.h5", "-o", "Modell-ö.glb"), "Modell-ö.glb"),
    "plot": (("plot", "Lauf-ö.h5", "-o", "Bild-ö.png"), "Bild-ö.png"),
    "compare": (("compare", "Pendel-ö.yaml", "--solvers", "lagrange", "-o", "Vergleich-ö", *SHORT), "lagrange"),
    "import": (("import", "Arm-ö.urdf", "-o", "Arm-ö.yaml"), "Arm-ö.yaml"),
    "unknown_key_message": (("validate", "Pendel-ö.yaml", "--set", "bodies.0.mässe=1"), "mässe"),
}  # fmt: skip


@pytest.mark.parametrize("command", quick(LOCALE_COMMANDS, keep="validate"))
def test_every_command_under_an_ascii_locale(umlauts: Path, command: str) -> None:
    if not (umlauts / "Lauf-ö.h5").exists():
        assert _c_run(umlauts, "run", "Pendel-ö.yaml", "-o", "Lauf-ö.h5", *SHORT)[0] == 0
    args, shown = LOCALE_COMMANDS[command]
    code, out, err = _c_run(umlauts, *args)
    no_python_noise(out, err)
    assert code == (2 if command == "unknown_key_message" else 0), err
    if shown is not None:
        assert shown in out + err  # the characters themselves, not "?" or an escape
    if command.endswith("json"):
        data = json.loads(out)
        assert data["file"] == "Lauf-ö.h5" if command == "info_json" else data["file"] == "Lauf-ö-json.h5"
        assert data.get("scene", data.get("scene_name")) == "Pendel-ö ✓ 振り子"
    if command == "compare":
        report = json.loads((umlauts / "Vergleich-ö" / "compare.json").read_text(encoding="utf-8"))
        assert report["scene_file"] == "Pendel-ö.yaml"
        assert report["outdir"] == "Vergleich-ö" and report["rows"][0]["file"] == "Vergleich-ö/lagrange.h5"
        assert "Pendel-ö.yaml" in (umlauts / "Vergleich-ö" / "compare.md").read_text(encoding="utf-8")
    if command == "import":
        scene = umlauts / "Arm-ö.yaml"
        assert scene.read_text(encoding="utf-8").startswith("# written by mbsim import from Arm-ö.urdf")
        code, _, err = _c_run(umlauts, "validate", "Arm-ö.yaml")
        assert code == 0, err  # the imported scene loads (its name is the file's stem, in UTF-8)


NOT_UTF8 = b"Pendel-\xff\xfe"  # bytes no locale reads as UTF-8: a file name from another system


@pytest.mark.parametrize("locale", quick(["utf8", "ascii"], keep="ascii"))
@pytest.mark.parametrize("command", quick(["validate", "run_json", "info_json", "compare"], keep="run_json"))
def test_file_names_that_are_not_utf8(tmp_path: Path, locale: str, command: str) -> None:
    scene = os.fsencode(tmp_path) + b"/" + NOT_UTF8 + b".yaml"
    shutil.copyfile(PENDULUM, scene)
    result = os.fsencode(tmp_path) + b"/" + NOT_UTF8 + b".h5"
    env = UTF8_LOCALE if locale == "utf8" else ASCII_LOCALE
    if command == "info_json":
        assert shell("", "run", scene, "-o", result, *SHORT, cwd=tmp_path, env=_env(env))[0] == 0
    args = {
        "validate": ("validate", scene),
        "run_json": ("run", scene, "-o", result, *SHORT, "--json"),
        "info_json": ("info", result, "--json"),
        "compare": ("compare", scene, "--solvers", "lagrange", "-o", os.fsencode(tmp_path) + b"/cmp\xff", *SHORT),
    }[command]
    code, out, err = shell("", *args, cwd=tmp_path, env=_env(env))
    assert code == 0, err
    no_python_noise(out, err)
    if command.endswith("json"):
        assert json.loads(out)["file"].endswith("Pendel-\\xff\\xfe.h5")  # escaped, never a lone surrogate
    if command == "run_json":
        assert root_attrs(Path(os.fsdecode(result)))["status"] == "completed"
    if command == "compare":
        report = (tmp_path / os.fsdecode(b"cmp\xff") / "compare.md").read_text(encoding="utf-8")
        assert "Pendel-\\xff\\xfe.yaml" in report


# ----------------------------------------------------------------------------- environments

NOT_A_DIR = "{tmp}/a-file/below"  # a folder nobody can create, root included: its parent is a file

ENVIRONMENTS = {
    "TERM_dumb": ({"TERM": "dumb"}, ()),
    "COLUMNS_1": ({"COLUMNS": "1"}, ()),
    "COLUMNS_100000": ({"COLUMNS": "100000"}, ()),
    "no_HOME": ({}, ("HOME",)),
    "HOME_missing": ({"HOME": "{tmp}/nowhere"}, ()),
    "HOME_not_a_dir": ({"HOME": NOT_A_DIR}, ()),
    "TMPDIR_not_a_dir": ({"TMPDIR": NOT_A_DIR}, ()),
    "XDG_CACHE_HOME_not_a_dir": ({"XDG_CACHE_HOME": NOT_A_DIR}, ()),
    "MPLCONFIGDIR_not_a_dir": ({"MPLCONFIGDIR": NOT_A_DIR}, ()),
    "no_PATH": ({}, ("PATH",)),
}


@pytest.mark.slow
@pytest.mark.parametrize("environment", list(ENVIRONMENTS))
def test_run_export_and_plot_in_a_strange_environment(tmp_path: Path, environment: str) -> None:
    (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
    extra, drop = ENVIRONMENTS[environment]
    env = _env({k: v.replace("{tmp}", str(tmp_path)) for k, v in extra.items()}, drop)
    for args in (
        ("run", PENDULUM, "-o", "e.h5", *SHORT),
        ("export", "e.h5", "-o", "e.html"),
        ("plot", "e.h5", "-o", "e.png"),
        ("import", Path(__file__).parents[1] / "data" / "robots" / "free_brick.xml", "-o", "brick.yaml"),
    ):
        code, out, err = shell("", *args, cwd=tmp_path, env=env)
        assert code == 0, (args, err)
        no_python_noise(out, err)
    complete(tmp_path / "e.h5")
    assert (tmp_path / "e.html").stat().st_size > 0 and (tmp_path / "e.png").stat().st_size > 0
