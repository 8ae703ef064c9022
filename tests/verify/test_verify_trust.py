"""``mbsim verify`` on a problem folder from elsewhere (issue 28 item 8): a problem folder is
untrusted input. Every bad key of problem.yaml and every bad reference table is exit 2 with a
message naming the file and key, within seconds, without a traceback; no file outside the
problem's folder is read (nor echoed), and nothing is written outside ``-o``.

Every case goes through the real command line in a subprocess with a timeout, so that a case
that would hang (a FIFO) fails the test instead of blocking it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from quick_loop import quick

TIMEOUT = 60  # seconds; every refusal below comes within a few
SECRET = "TOP-SECRET-LINE-e8f1"  # the first line of a file outside the problem: never echoed

SCENE = """\
mbsim: 1
name: small pendulum
dimension: 2
gravity: [0, -9.81]
time: {end: 2.0, step: 0.001}
solver: {method: lagrange, integrator: rk4}
output: {every: 100}
bodies:
  - {name: bob, mass: 1.0, inertia: 1.0e-6, position: [0.0, -1.0], velocity: [0.01, 0.0]}
joints:
  - {name: O, type: revolute, body1: ground, body2: bob, point: [0, 0]}
"""


def reference_table() -> str:
    """x of the small-angle pendulum (x = v0 / w sin(w t)), every 0.1 s (recorded times)."""
    w = np.sqrt(9.81 / (1.0 + 1e-6))
    t = np.round(np.arange(0, 21) * 0.1, 10)
    x = 0.01 / w * np.sin(w * t)
    return "t,x\n" + "".join(f"{a:.17g},{b:.17g}\n" for a, b in zip(t, x, strict=True))


def base_problem() -> dict:
    return {
        "id": "T1",
        "title": "small pendulum",
        "source": "closed form",
        "reference": "small-angle closed form",
        "methods": ["lagrange"],
        "checks": [
            {"quantity": "bodies/bob/position", "reference": "reference.csv", "columns": [0], "tolerance": 1e-6}
        ],
        "quick": {"set": ["time.end=0.2"]},
    }


def write_problem(folder: Path, problem: dict | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scene.yaml").write_text(SCENE)
    (folder / "reference.csv").write_text(reference_table())
    text = problem if isinstance(problem, str) else yaml.safe_dump(problem, sort_keys=False, allow_unicode=True)
    (folder / "problem.yaml").write_text(text, encoding="utf-8")
    return folder


def mbsim(*args: object, cwd: Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mbsim", *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry below ``root``: file bytes, or the kind of the entry."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        if p.is_symlink():
            out[key] = "link -> " + os.readlink(p)
        elif p.is_file():
            out[key] = p.read_bytes()
        else:
            out[key] = "dir" if p.is_dir() else "special"
    return out


# ------------------------------------------------------------------ the hostile problem folders


def _set(**values: object) -> Callable[[dict, Path], None]:
    def change(problem: dict, folder: Path) -> None:
        problem.update(values)

    return change


def _check(**values: object) -> Callable[[dict, Path], None]:
    def change(problem: dict, folder: Path) -> None:
        problem["checks"][0].update(values)

    return change


def _table(text: str | bytes) -> Callable[[dict, Path], None]:
    def change(problem: dict, folder: Path) -> None:
        problem["checks"][0]["reference"] = "bad.csv"
        target = folder / "bad.csv"
        target.write_bytes(text if isinstance(text, bytes) else text.encode())

    return change


def _secret_outside(folder: Path) -> Path:
    secret = folder.parent / "secret.txt"
    secret.write_text(f"{SECRET}\nmore: private\n")
    return secret


def _scene_link_outside(problem: dict, folder: Path) -> None:
    (folder / "link.yaml").symlink_to(_secret_outside(folder))
    problem["scene"] = "link.yaml"


def _reference_link_outside(problem: dict, folder: Path) -> None:
    (folder / "link.csv").symlink_to(_secret_outside(folder))
    problem["checks"][0]["reference"] = "link.csv"


def _scene_dotdot(problem: dict, folder: Path) -> None:
    _secret_outside(folder)
    problem["scene"] = "../secret.txt"


def _scene_fifo(problem: dict, folder: Path) -> None:
    os.mkfifo(folder / "pipe.yaml")
    problem["scene"] = "pipe.yaml"


def _reference_fifo(problem: dict, folder: Path) -> None:
    os.mkfifo(folder / "pipe.csv")
    problem["checks"][0]["reference"] = "pipe.csv"


def _scene_directory(problem: dict, folder: Path) -> None:
    (folder / "adir").mkdir()
    problem["scene"] = "adir"


def _scene_loop(problem: dict, folder: Path) -> None:
    (folder / "a.yaml").symlink_to(folder / "b.yaml")
    (folder / "b.yaml").symlink_to(folder / "a.yaml")
    problem["scene"] = "a.yaml"


def _huge_table(problem: dict, folder: Path) -> None:
    problem["checks"][0]["reference"] = "huge.csv"
    with open(folder / "huge.csv", "wb") as f:  # sparse: 17 MiB that take no disk
        f.write(b"t,x\n0,0\n")
        f.truncate(17 * 2**20)


def _too_many(key: str, n: int) -> Callable[[dict, Path], None]:
    def change(problem: dict, folder: Path) -> None:
        if key == "methods":
            problem["methods"] = [f"lagrange:max_violation={1e-3 + k * 1e-6}" for k in range(n)]
        else:
            problem["checks"] = [{"quantity": "summary.energy_drift", "tolerance": 1.0}] * n

    return change


# (id, change to the problem, text the message must contain)
HOSTILE = [
    ("scene-absolute-outside", _set(scene="/etc/passwd"), "outside the problem's folder"),
    ("scene-dotdot-outside", _scene_dotdot, "outside the problem's folder"),
    ("scene-symlink-outside", _scene_link_outside, "outside the problem's folder"),
    ("scene-fifo", _scene_fifo, "FIFO"),
    ("scene-directory", _scene_directory, "directory"),
    ("scene-symlink-loop", _scene_loop, "scene"),
    ("scene-nul-byte", _set(scene="scene\0.yaml"), "control characters"),
    ("scene-missing", _set(scene="nothing.yaml"), "not found"),
    ("reference-absolute-outside", _check(reference="/etc/passwd"), "outside the problem's folder"),
    ("reference-symlink-outside", _reference_link_outside, "outside the problem's folder"),
    ("reference-fifo", _reference_fifo, "FIFO"),
    ("reference-nan", _table("t,x\n0,0\n0.1,nan\n"), "finite"),
    ("reference-inf", _table("t,x\n0,0\n0.1,-inf\n"), "finite"),
    ("reference-times-backwards", _table("t,x\n0,0\n0.2,1\n0.1,2\n"), "must increase"),
    ("reference-times-repeated", _table("t,x\n0,0\n0.1,1\n0.1,2\n"), "must increase"),
    ("reference-missing-column", _table("t,x\n0,0\n0.1\n"), "expected 2 numbers"),
    ("reference-no-t-header", _table("time,x\n0,0\n"), "header t,NAME"),
    ("reference-only-header", _table("t,x\n"), "no rows"),
    ("reference-words", _table("t,x\n0,zero\n"), "expected numbers"),
    ("reference-nul-byte", _table(b"t,x\n0,0\x00\n"), "expected numbers"),
    ("reference-giant-cell", _table("t,x\n0," + "1" * 200_000 + "\n"), "not a CSV row"),
    ("reference-larger-than-16MiB", _huge_table, "larger than"),
    ("reference-columns-mismatch", _table("t,x,y\n0,0,0\n"), "value columns"),
    ("id-dotdot-path", _set(id="../../x"), "plain name"),
    ("id-slash", _set(id="a/b"), "plain name"),
    ("id-dot", _set(id="."), "plain name"),
    ("id-absolute", _set(id="/tmp/x"), "plain name"),
    ("id-too-long", _set(id="A" * 65), "plain name"),
    ("id-terminal-escape", _set(id="\x1b[2J"), "control characters"),
    ("title-terminal-escape", _set(title="pendulum \x1b]0;owned\x07"), "control characters"),
    ("source-newline", _set(source="a\nb"), "control characters"),
    ("citation-escape", _set(citation="see \x1b[31mred"), "control characters"),
    ("tolerance-negative", _check(tolerance=-1), "positive"),
    ("tolerance-zero", _check(tolerance=0), "positive"),
    ("tolerance-nan", _check(tolerance=float("nan")), "finite"),
    ("tolerance-inf", _check(tolerance=float("inf")), "finite"),
    ("tolerance-text", _check(tolerance="loose"), "tolerance"),
    ("columns-boolean", _check(columns=[True]), "column numbers"),
    ("columns-negative", _check(columns=[-1]), "column numbers"),
    ("quantity-empty-path", _check(quantity="/"), "dataset path"),
    ("label-escape", _check(label="\x1b[2K"), "control characters"),
    ("methods-too-many", _too_many("methods", 101), "at most 100 runs"),
    ("checks-too-many", _too_many("checks", 101), "at most 100 checks"),
    ("checks-empty", _set(checks=[]), "non-empty list of checks"),
    ("unknown-key", _set(shell="rm -rf /"), "unknown key 'shell'"),
    ("quick-set-newline", _set(quick={"set": ["time.end=0.2\nx"]}), "control characters"),
    ("expected-failure-escape", _set(expected_failures={"lagrange": "\x1b[2J"}), "control characters"),
]


@pytest.mark.parametrize(
    "name, change, expected", quick(HOSTILE, keep="scene-dotdot-outside", ids=[c[0] for c in HOSTILE])
)
def test_a_hostile_problem_is_refused(tmp_path, name, change, expected):
    folder = tmp_path / "elsewhere" / "problem"
    problem = base_problem()
    folder.mkdir(parents=True)
    change(problem, folder)
    write_problem(folder, problem)
    before = snapshot(tmp_path)
    proc = mbsim("verify", folder, "--quick", "-o", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert expected in proc.stderr, proc.stderr
    assert "problem.yaml" in proc.stderr or "bad.csv" in proc.stderr or "huge.csv" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr and "root:" not in proc.stdout + proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr  # nothing reaches the terminal as a control sequence
    assert snapshot(tmp_path) == before  # refused before anything was written (no -o folder either)


def test_id_with_a_path_writes_nothing_outside_the_output(tmp_path):
    """The issue's reproduction: ``id: ../../x`` wrote its result two levels above ``-o``."""
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    problem = base_problem() | {"id": "../../x"}
    folder = write_problem(tmp_path / "p", problem)
    proc = mbsim("verify", folder, "--quick", "-o", "out", cwd=work)
    assert proc.returncode == 2, proc.stderr
    assert "problem.yaml" in proc.stderr and "id:" in proc.stderr and "plain name" in proc.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "a" / "x").exists()
    assert list(tmp_path.rglob("*.h5")) == []


@pytest.mark.slow  # a variant of test_a_hostile_problem_is_refused[scene-symlink-outside]
def test_problem_file_that_links_outside_is_not_read(tmp_path):
    folder = tmp_path / "p"
    write_problem(folder, base_problem())
    (folder / "problem.yaml").unlink()
    _secret_outside(folder)
    (folder / "problem.yaml").symlink_to(tmp_path / "secret.txt")
    proc = mbsim("verify", folder, "--quick", "-o", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "outside the problem's folder" in proc.stderr and SECRET not in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # ~2 s each; the scene's YAML loader's bombs: tests/scene/test_hostile_scenes.py
@pytest.mark.parametrize(
    "bomb",
    [
        'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
        + "".join(
            f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + "id: T1\n",
        "id: " + "[" * 10_000 + "]" * 10_000 + "\n",
    ],
    ids=["billion-laughs", "deep-nesting"],
)
def test_yaml_bombs_in_the_problem_file(tmp_path, bomb):
    folder = write_problem(tmp_path / "p", bomb)
    proc = mbsim("verify", folder, "--quick", "-o", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "problem.yaml" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow  # a variant of test_a_hostile_problem_is_refused[scene-fifo]
def test_a_problem_file_that_is_a_fifo_does_not_block(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    os.mkfifo(folder / "problem.yaml")
    proc = mbsim("verify", folder, "--quick", "-o", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ found by the run


@pytest.mark.parametrize(
    "quantity, expected",
    quick(
        [("bodies/bob", "is a group"), ("scene", "not a numeric time series"), ("bodies", "is a group")],
        keep="group-of-a-body",
        ids=["group-of-a-body", "text-dataset", "group-of-groups"],
    ),
)
def test_a_quantity_that_is_no_time_series_is_exit_2_naming_the_key(tmp_path, quantity, expected):
    problem = base_problem()
    problem["checks"][0]["quantity"] = quantity
    problem["checks"][0].pop("columns")
    folder = write_problem(tmp_path / "p", problem)
    proc = mbsim("verify", folder, "--quick", "-o", tmp_path / "out", cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert "problem.yaml" in proc.stderr and "checks[0].quantity" in proc.stderr and expected in proc.stderr


def test_the_base_problem_passes(tmp_path):
    """The folder the hostile cases start from is a good problem: exit 0."""
    folder = write_problem(tmp_path / "p", base_problem())
    proc = mbsim("verify", folder, "--quick", "-o", tmp_path / "out", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "out" / "T1" / "lagrange.h5").is_file()


# ------------------------------------------------------------------ the output folder


def _read_only_mount(where: Path) -> Path:
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a read-only tmpfs (chmod does not stop root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    return where


@pytest.mark.parametrize(
    "below", quick(["", "sub/deeper"], keep="outdir-itself", ids=["outdir-itself", "outdir-below"])
)
def test_a_read_only_output_is_exit_2_before_anything_runs(tmp_path, below):
    mount = _read_only_mount(tmp_path / "ro")
    try:
        folder = write_problem(tmp_path / "p", base_problem())
        out = mount / below if below else mount
        proc = mbsim("verify", folder, "--quick", "-o", out, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Read-only file system" in proc.stderr and "Traceback" not in proc.stderr
        assert "running" not in proc.stderr  # refused before the first run
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("kind", quick(["file", "fifo"], keep="file"))
def test_a_file_in_the_way_of_the_problem_folder_is_exit_2(tmp_path, kind):
    folder = write_problem(tmp_path / "p", base_problem())
    (tmp_path / "out").mkdir()
    if kind == "file":
        (tmp_path / "out" / "T1").write_text("mine")
    else:
        os.mkfifo(tmp_path / "out" / "T1")
    proc = mbsim("verify", folder, "--quick", "-o", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "T1" in proc.stderr and "Traceback" not in proc.stderr
    if kind == "file":
        assert (tmp_path / "out" / "T1").read_text() == "mine"
