"""The smaller items of issue 28 (item 11), through the real ``mbsim`` in subprocesses:

- a body or scene named like HTML markup (``<!--<script>``, ``</script>``, ``]]>``, U+2028) gives
  a page that opens and shows the motion, and whose embedded data decode to exactly the names;
- a gravity of 1e200: the run fails as it must (exit 3, partial file), and info, plot and export
  still read the file (rows glTF's float32 cannot hold are left out and said);
- ``mbsim info`` prints the run's max position violation over every step and the recorded rows'
  own, each labelled, and ``--json`` has a key for each;
- ``mbsim --help`` shows every command's whole one-line summary, whatever the terminal's width.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "output"))
from quick_loop import quick  # noqa: E402
from test_export_page import Page, browser, drawn  # noqa: E402, F401  (the page tests' browser harness)

from mbsim.cli.main import COMMANDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PENDULUM = ROOT / "scenes" / "pendulum_2d.yaml"
TIMEOUT = 120


def mbsim(*args: object, cwd: Path, env: dict | None = None) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mbsim", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def pendulum(name: str, scene_name: str, gravity: float = -9.81, end: float = 0.3) -> str:
    """A planar pendulum whose body (and scene) carry the given names, as JSON (which is YAML):
    every character of a name survives the trip, U+2028 included."""
    return json.dumps(
        {
            "mbsim": 1,
            "name": scene_name,
            "dimension": 2,
            "gravity": [0, gravity],
            "time": {"end": end, "step": 0.01},
            "solver": {"method": "lagrange", "integrator": "rk4"},
            "bodies": [
                {
                    "name": name,
                    "mass": 1.0,
                    "inertia": 1e-3,
                    "position": [1, 0],
                    "shapes": [{"type": "circle", "radius": 0.1}],
                }
            ],
            "joints": [{"name": "pivot", "type": "revolute", "body1": "ground", "body2": name, "point": [0, 0]}],
        }
    )


# ----------------------------------------------------------------------------- hostile names in the page

HOSTILE = {
    "comment_then_script": "<!--<script>",
    "end_of_script": "</script>",
    "end_of_script_upper": "</SCRIPT >",
    "comment_open": "<!--",
    "comment_close": "-->",
    "cdata_end": "]]>",
    "line_separators": "a\u2028b\u2029c",
    "script_and_entity": "<script>alert(1)</script>&amp;",
}


def _embedded_header(page: str) -> dict:
    """The JSON the page's viewer reads, cut out as the HTML tokenizer would (up to the first
    ``</script``): it must be the whole JSON text, with no ``<`` left in it."""
    start = page.index('<script type="application/json" id="mbsim-header">')
    start = page.index(">", start) + 1
    end = re.compile("</script", re.IGNORECASE).search(page, start).start()
    text = page[start:end]
    assert "<" not in text and "\u2028" not in text and "\u2029" not in text
    return json.loads(text)


@pytest.fixture(scope="module")
def hostile_pages(tmp_path_factory):
    """``hostile_pages(key) -> the exported page`` of a pendulum whose body bears that name (each
    made once, on first use, so that one name's failure is that name's alone)."""
    folder = tmp_path_factory.mktemp("hostile")
    pages: dict[str, Path] = {}

    def page(key: str) -> Path:
        if key not in pages:
            name = HOSTILE[key]
            (folder / f"{key}.yaml").write_text(pendulum(name, f"{name} scene"), encoding="utf-8")
            code, _, err = mbsim("run", f"{key}.yaml", "-o", f"{key}.h5", "--quiet", cwd=folder)
            assert code == 0, err
            code, _, err = mbsim("export", f"{key}.h5", "-o", f"{key}.html", cwd=folder)
            assert code == 0, err
            pages[key] = folder / f"{key}.html"
        return pages[key]

    return page


@pytest.mark.parametrize("key", quick(HOSTILE, keep="end_of_script"))
def test_a_hostile_name_is_data_in_the_page(hostile_pages, key: str) -> None:
    page = hostile_pages(key).read_text(encoding="utf-8")
    header = _embedded_header(page)
    assert [b["name"] for run in header["runs"] for b in run["bodies"]] == [HOSTILE[key]]
    assert len(re.findall("</script", page, re.IGNORECASE)) == 3  # the page's own three elements
    assert "<script>alert" not in page


@pytest.mark.parametrize(
    "key", quick(["comment_then_script", "end_of_script", "script_and_entity", "line_separators"], keep="end_of_script")
)
def test_a_hostile_name_does_not_blank_the_page(browser, hostile_pages, key: str) -> None:  # noqa: F811
    page = Page(browser, hostile_pages(key))
    try:
        assert drawn(page.canvas()) > 0.01  # the pendulum is on the canvas
        assert f"{HOSTILE[key]} scene" in page.page.inner_text("h1")
        assert page.errors == []
    finally:
        page.close()


# ----------------------------------------------------------------------------- absurd gravity


def strict_json(text: str) -> dict:
    """``--json`` output as a strict reader (jq) takes it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in --json output")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def gravity_runs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gravity")
    free = json.loads(pendulum("ball", "free fall"))
    del free["joints"]
    for g in ("1e200", "1e308"):
        (folder / f"free{g}.yaml").write_text(json.dumps(free).replace("-9.81", f"-{g}"), encoding="utf-8")
    (folder / "pendulum1e200.yaml").write_text(pendulum("bob", "pendulum", gravity=-1e200), encoding="utf-8")
    return folder


@pytest.mark.parametrize("scene", quick(["pendulum1e200", "free1e200", "free1e308"], keep="free1e200"))
def test_an_absurd_gravity_fails_the_run_and_the_file_still_reads(gravity_runs: Path, scene: str) -> None:
    folder = gravity_runs
    code, out, err = mbsim("run", f"{scene}.yaml", "-o", f"{scene}.h5", "--json", cwd=folder)
    assert code == 3, err  # a numerical failure (CONTRACT §4), not a completed run nor exit 1
    summary = strict_json(out)
    assert summary["status"] == "failed" and summary["message"]
    code, out, err = mbsim("info", f"{scene}.h5", "--json", cwd=folder)
    assert code == 0, err
    drift = strict_json(out)["energy_drift"]
    if scene == "free1e200":  # its diverged row is recorded: the drift of a blow-up is unbounded
        assert summary["energy_drift"] is None and drift is None, (summary, drift)  # (null: inf in JSON)
    with h5py.File(folder / f"{scene}.h5", "r") as f:
        assert f.attrs["status"] == "failed"
        assert np.all(np.isfinite(f["geometry"].attrs["up"])) and np.any(f["geometry"].attrs["up"])
        assert len(f["time"]) >= 1
    code, out, err = mbsim("info", f"{scene}.h5", cwd=folder)
    assert code == 0 and "failed" in out, err
    code, _, err = mbsim("plot", f"{scene}.h5", "-o", f"{scene}.png", cwd=folder)
    assert code == 0, err
    for suffix in ("glb", "html"):
        code, _, err = mbsim("export", f"{scene}.h5", "-o", f"{scene}.{suffix}", cwd=folder)
        assert code == 0, err
        if scene == "free1e200":  # its second row is 5e195 m away: left out, and said
            assert "1 row with a position beyond 1e+18 m left out" in err
    import pygltflib

    gltf = pygltflib.GLTF2().load(str(folder / f"{scene}.glb"))
    for accessor in gltf.accessors:
        assert all(np.isfinite(accessor.max or [0])) and all(np.isfinite(accessor.min or [0]))
    header = _embedded_header((folder / f"{scene}.html").read_text(encoding="utf-8"))
    assert all(np.isfinite(header["box"]["lo"])) and all(np.isfinite(header["box"]["hi"]))


# ----------------------------------------------------------------------------- info's violations


@pytest.fixture(scope="module")
def sparse_rows(tmp_path_factory) -> tuple[Path, dict]:
    """A pendulum without projection, every 10th step recorded: the largest violation falls
    between two recorded rows."""
    folder = tmp_path_factory.mktemp("violation")
    out = folder / "p.h5"
    code, stdout, err = mbsim(
        "run", PENDULUM, "-o", out, "--json", "--set", "output.every=10", "--set", "solver.projection.position=false",
        "--set", "time.end=5", cwd=folder,
    )  # fmt: skip
    assert code == 0, err
    return out, json.loads(stdout)


def test_info_says_which_violation_is_which(sparse_rows) -> None:
    out, run = sparse_rows
    with h5py.File(out, "r") as f:
        every_step = float(f.attrs["max_position_violation"])
        rows = float(np.max(f["diagnostics/constraints/position_violation"][:]))
    assert every_step == run["max_position_violation"] and rows < every_step  # the case of the issue
    code, text, err = mbsim("info", out, cwd=out.parent)
    assert code == 0, err
    line = next(s for s in text.splitlines() if s.startswith("max_position_violation"))
    assert line.split(None, 1)[1] == f"{every_step:.6g} (every step; {rows:.6g} in the recorded rows)"
    assert "max_position_violation_recorded" not in text
    code, text, err = mbsim("info", out, "--json", cwd=out.parent)
    info = json.loads(text)
    assert info["max_position_violation"] == every_step == run["max_position_violation"]
    assert info["max_position_violation_recorded"] == rows


def test_info_of_a_file_without_the_runs_figure(sparse_rows, tmp_path: Path) -> None:
    """A run killed before its end wrote no maximum over every step: info says so, JSON null."""
    out, _ = sparse_rows
    copy = tmp_path / "died.h5"
    copy.write_bytes(out.read_bytes())
    with h5py.File(copy, "a") as f:
        del f.attrs["max_position_violation"]
        rows = float(np.max(f["diagnostics/constraints/position_violation"][:]))
    code, text, err = mbsim("info", copy, cwd=tmp_path)
    assert code == 0, err
    assert f"{rows:.6g} in the recorded rows (the maximum over every step is written when the run ends)" in text
    info = json.loads(mbsim("info", copy, "--json", cwd=tmp_path)[1])
    assert info["max_position_violation"] is None and info["max_position_violation_recorded"] == rows


# ----------------------------------------------------------------------------- --help


@pytest.mark.parametrize(
    "environment",
    quick(
        [{}, {"COLUMNS": "1"}, {"COLUMNS": "100000"}, {"TERM": "dumb", "COLUMNS": "40"}],
        keep="default",
        ids=["default", "COLUMNS_1", "COLUMNS_100000", "TERM_dumb_40"],
    ),
)
def test_help_shows_every_summary_whole(tmp_path: Path, environment: dict) -> None:
    code, text, err = mbsim("--help", cwd=tmp_path, env={**os.environ, **environment})
    assert code == 0, err
    commands = " ".join(text.split("Commands:", 1)[1].split())  # wrapped lines joined
    assert "..." not in commands
    for name, (_, _, summary) in COMMANDS.items():
        assert f"{name} {summary}" in commands, name
