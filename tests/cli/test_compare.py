"""``mbsim compare`` (CONTRACT §2): solver specs, the table in every format, the files of OUTDIR,
failed runs as rows, bad specs as exit 2, and the error against a reference as a physics check.

Every run is a pendulum of at most 0.5 s (50 steps); the main comparison runs once per module.
"""

from __future__ import annotations

import csv
import io
import json
import signal
import statistics
import types
from dataclasses import replace
from pathlib import Path

import h5py
import pytest
from click.testing import CliRunner

from mbsim import interrupts
from mbsim.cli.main import cli
from mbsim.compare import file_stem, parse_solver_list, parse_solver_spec
from mbsim.errors import SceneError
from mbsim.scene.fields import Field, Text
from mbsim.solvers import SOLVERS, lagrange

pytestmark = pytest.mark.usefixtures("in_tmp_path")

SCENES = Path(__file__).resolve().parents[2] / "scenes"
PENDULUM = SCENES / "pendulum_2d.yaml"
DOUBLE = SCENES / "double_pendulum_2d.yaml"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

RK4 = "lagrange:integrator=rk4"
EULER = "lagrange:integrator=euler"
# explicit Euler without projection leaves the circle at once: fails on the violation limit at step 2
FAILING = "lagrange:integrator=euler,projection.position=false,projection.velocity=false,max_violation=1e-12"
REFERENCE = "lagrange:integrator=scipy:DOP853,rtol=1e-12"


def invoke(*args: object):
    return CliRunner().invoke(cli, ["compare", *(str(a) for a in args)], catch_exceptions=False)


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory):
    """rk4, euler and a failing spec on the pendulum (0.5 s), against a DOP853 reference; --format json."""
    outdir = tmp_path_factory.mktemp("compare") / "out"
    result = CliRunner().invoke(
        cli,
        ["compare", str(PENDULUM), "--set", "time.end=0.5", "--solvers", f"{RK4},{EULER},{FAILING}"]
        + ["--reference", REFERENCE, "--format", "json", "-o", str(outdir)],
        catch_exceptions=False,
    )
    return result, outdir


def rows_by_solver(data: dict) -> dict[str, dict]:
    return {row["solver"]: row for row in data["rows"]}


# ----------------------------------------------------------------------------- the main comparison


def test_compare_writes_result_files_json_markdown_and_plots(comparison) -> None:
    result, outdir = comparison
    assert result.exit_code == 0, result.output
    data = json.loads((outdir / "compare.json").read_text(encoding="utf-8"))
    assert data["format"] == "mbsim-compare"
    assert data["scene"] == "pendulum 2d"
    assert data["overrides"] == ["time.end=0.5"]
    assert [r["solver"] for r in data["rows"]] == [RK4, EULER, FAILING]
    for row in data["rows"]:  # one result file per solver, its status as in the table
        path = Path(row["file"])
        assert path.parent == outdir and path.suffix == ".h5"
        with h5py.File(path, "r") as f:
            assert f.attrs["status"] == row["status"]
    md = (outdir / "compare.md").read_text(encoding="utf-8")
    assert "| solver | status | wall s |" in md
    for solver in (RK4, EULER, FAILING):
        assert f"`{solver}`" in md
    for name in ("violation.png", "energy.png"):
        assert (outdir / name).read_bytes()[:8] == PNG_SIGNATURE, name


def test_compare_json_stdout_is_compare_json(comparison) -> None:
    result, outdir = comparison
    printed = json.loads(result.stdout)  # nothing but the JSON object on stdout
    stored = json.loads((outdir / "compare.json").read_text(encoding="utf-8"))
    assert printed == stored
    row = printed["rows"][0]
    for key in (
        "status",
        "wall_time_s",
        "us_per_step",
        "steps",
        "max_position_violation",
        "max_velocity_violation",
        "energy_drift",
        "error_rms",
        "error_max",
    ):
        assert key in row, key
    assert row["steps"] == 50
    assert row["us_per_step"] == pytest.approx(1e6 * row["wall_time_s"] / 50)


def test_error_against_the_reference_orders_the_integrators(comparison) -> None:
    """A physics check: over 0.5 s at h = 0.01, rk4 (global error O(h^4)) is far closer to a
    tight DOP853 solution than explicit Euler (O(h))."""
    result, outdir = comparison
    data = json.loads(result.stdout)
    rows = rows_by_solver(data)
    rk4, euler = rows[RK4], rows[EULER]
    assert data["reference"]["status"] == "completed"
    assert Path(data["reference"]["file"]).name.startswith("reference-")
    assert Path(data["reference"]["file"]).is_file()
    assert 0 < rk4["error_rms"] < 1e-6
    assert 1e-3 < euler["error_rms"] < 0.5  # the bob swings about 1 m: a percent-level error
    assert euler["error_rms"] > 1e3 * rk4["error_rms"]
    assert rk4["error_rms"] <= 1.5 * rk4["error_max"] * 3**0.5  # three coordinates x, y, angle
    assert euler["error_max"] >= euler["error_rms"] / 3**0.5


def test_failed_solver_is_a_row_and_the_others_complete(comparison) -> None:
    result, _ = comparison
    assert result.exit_code == 0
    rows = rows_by_solver(json.loads(result.stdout))
    failed = rows[FAILING]
    assert failed["status"] == "failed"
    assert "max_violation" in failed["message"]
    assert failed["steps"] == 2  # the partial run is kept and reported
    assert failed["error_rms"] is None
    with h5py.File(failed["file"], "r") as f:
        assert f.attrs["status"] == "failed"
        assert len(f["time"]) == 3
    assert rows[RK4]["status"] == rows[EULER]["status"] == "completed"
    assert "Traceback" not in result.stderr


def test_result_file_names_are_safe(comparison) -> None:
    _, outdir = comparison
    names = [p.name for p in outdir.glob("*.h5")]
    assert len(names) == 4  # three solvers and the reference
    for name in names:
        assert not set(name) & set(":=,/ "), name
    assert "lagrange_integrator-euler.h5" in names


# ----------------------------------------------------------------------------- formats and options


def test_csv_has_a_header_and_one_line_per_solver() -> None:
    result = invoke(DOUBLE, "--set", "time.end=0.05", "--solvers", f"lagrange,{EULER}", "--format", "csv", "--quiet")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # --quiet: no progress notes
    table = list(csv.reader(io.StringIO(result.stdout)))
    assert table[0][:3] == ["solver", "status", "wall_s"]
    assert [r[0] for r in table[1:]] == ["lagrange", EULER]
    assert all(r[1] == "completed" for r in table[1:])
    assert float(table[1][table[0].index("max_position_violation")]) < 1e-10


def test_table_is_the_default_with_progress_on_stderr_and_default_outdir(in_tmp_path: Path) -> None:
    result = invoke(PENDULUM, "--set", "time.end=0.05", "--solvers", f"lagrange,{EULER}")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["solver", "status", "wall"]
    assert lines[2].startswith("lagrange ") and lines[3].startswith(EULER)
    assert "running lagrange (1/2)" in result.stderr
    outdir = in_tmp_path / "outputs" / "compare-pendulum_2d"
    assert (outdir / "lagrange.h5").is_file()
    assert (outdir / "compare.json").is_file()


def test_markdown_format_prints_compare_md(tmp_path: Path) -> None:
    result = invoke(PENDULUM, "--set", "time.end=0.05", "--solvers", "lagrange", "--format", "markdown", "-o", tmp_path)
    assert result.exit_code == 0, result.output
    assert result.stdout == (tmp_path / "compare.md").read_text(encoding="utf-8")


def test_repeat_reports_the_median_wall_time(tmp_path: Path) -> None:
    result = invoke(PENDULUM, "--set", "time.end=0.05", "--solvers", "lagrange", "--repeat", "3", "--format", "json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    assert row["repeats"] == 3 and len(row["wall_times_s"]) == 3
    assert row["wall_time_s"] == statistics.median(row["wall_times_s"])
    assert result.stderr.count("running lagrange") == 3


def test_same_spec_twice_gets_two_files(tmp_path: Path) -> None:
    result = invoke(PENDULUM, "--set", "time.end=0.02", "--solvers", "lagrange,lagrange", "-o", tmp_path, "-q")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.glob("*.h5")) == ["lagrange-2.h5", "lagrange.h5"]


def test_failed_reference_leaves_the_error_column_empty(tmp_path: Path) -> None:
    result = invoke(
        PENDULUM, "--set", "time.end=0.1", "--solvers", "lagrange", "--reference", FAILING, "--format", "json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["reference"]["status"] == "failed"
    assert data["rows"][0]["error_rms"] is None
    assert any("reference" in n and "failed" in n for n in data["notes"])


def test_reference_equal_to_a_solver_reuses_its_run(tmp_path: Path) -> None:
    result = invoke(
        PENDULUM, "--set", "time.end=0.05", "--solvers", "lagrange", "--reference", "lagrange", "-o", tmp_path
    )
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "compare.json").read_text(encoding="utf-8"))
    assert data["rows"][0]["error_rms"] == 0.0
    assert (tmp_path / "reference-lagrange.h5").is_file()
    assert "running reference" not in result.stderr


def test_an_exception_inside_a_solver_fails_only_its_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    step, advance = lagrange.Solver.step, lagrange.Solver.advance

    def broken(self, state, h):
        if self.integrator == "euler":
            raise RuntimeError("solver bug")
        return step(self, state, h)

    def broken_block(self, state, h, *args):  # fixed steps run in compiled blocks
        if self.integrator == "euler":
            raise RuntimeError("solver bug")
        return advance(self, state, h, *args)

    monkeypatch.setattr(lagrange.Solver, "step", broken)
    monkeypatch.setattr(lagrange.Solver, "advance", broken_block)
    result = invoke(PENDULUM, "--set", "time.end=0.05", "--solvers", f"lagrange,{EULER}", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = rows_by_solver(json.loads(result.stdout))
    assert rows["lagrange"]["status"] == "completed"
    assert rows[EULER]["status"] == "failed"
    assert "RuntimeError: solver bug" in rows[EULER]["message"]


def test_interrupt_skips_the_rest_and_exits_130(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import mbsim.compare

    real_run = mbsim.compare.run

    def interrupted_euler(spec, output, **kwargs):
        summary = real_run(spec, output, **kwargs)
        if spec.solver.integrator == "euler":  # as if Ctrl-C had stopped this run
            interrupts.record(signal.SIGINT)
            summary = replace(summary, status="failed", message="interrupted (SIGINT)")
        return summary

    monkeypatch.setattr(mbsim.compare, "run", interrupted_euler)
    result = invoke(PENDULUM, "--set", "time.end=0.02", "--solvers", f"lagrange,{EULER},lagrange", "--format", "json")
    assert result.exit_code == 130
    data = json.loads(result.stdout)
    assert data["interrupted"] is True
    assert [r["status"] for r in data["rows"]] == ["completed", "failed", "skipped"]


def test_scene_option_of_another_method_is_dropped_with_a_note(
    monkeypatch: pytest.MonkeyPatch, write_scene, tmp_path: Path
) -> None:
    """A scene written for another method keeps options that mean nothing to lagrange."""
    fake = types.SimpleNamespace(
        NAME="fake",
        OPTION_FIELDS={"optimizer": Field(Text(), "test option", "kkt")},
        CAPABILITIES={"integrators": True},
        create=lambda model, ctx, spec: lagrange.create(model, ctx, replace(spec, options={})),
    )
    monkeypatch.setitem(SOLVERS, "fake", fake)
    text = PENDULUM.read_text(encoding="utf-8").replace("method: lagrange", "method: fake\n  optimizer: pso")
    scene = write_scene(text)
    result = invoke(scene, "--set", "time.end=0.02", "--solvers", "lagrange,fake", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = rows_by_solver(json.loads(result.stdout))
    assert rows["lagrange"]["status"] == rows["fake"]["status"] == "completed"
    assert any("solver.optimizer dropped" in n for n in rows["lagrange"]["notes"])
    assert rows["fake"]["notes"] == []
    # given explicitly, an option the method does not take is a bad spec
    bad = invoke(scene, "--solvers", "lagrange:optimizer=pso")
    assert bad.exit_code == 2
    assert "'lagrange:optimizer=pso'" in bad.stderr and "unknown option 'optimizer'" in bad.stderr


@pytest.mark.skipif("gauss" not in SOLVERS, reason="method gauss is not registered yet")
def test_compare_with_gauss(tmp_path: Path) -> None:
    result = invoke(DOUBLE, "--set", "time.end=0.05", "--solvers", "lagrange,gauss", "--reference", "lagrange")
    assert result.exit_code == 0, result.output


# ----------------------------------------------------------------------------- bad specs


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--solvers", "lagrang"], ["'lagrang'", "did you mean 'lagrange'"]),
        (["--solvers", "lagrange,lagrange:omeg=3"], ["'lagrange:omeg=3'", "unknown option 'omeg'"]),
        (["--solvers", "lagrange:omega"], ["'lagrange:omega'", "expected key=value"]),
        (["--solvers", ""], ["expected at least one solver spec"]),
        (["--solvers", " , "], ["expected at least one solver spec"]),
        (["--solvers", "lagrange:integrator=eulr"], ["'lagrange:integrator=eulr'", "did you mean 'euler'"]),
        (["--solvers", "lagrange:rtol=-1"], ["'lagrange:rtol=-1'", "solver.rtol"]),
        (["--solvers", "lagrange:projection.positon=no"], ["projection.positon", "did you mean 'position'"]),
        (["--solvers", "lagrange:=3"], ["'lagrange:=3'", "expected an option name"]),
        (["--solvers", "lagrange", "--reference", "lagrang:rtol=1e-9"], ["--reference", "did you mean 'lagrange'"]),
        (["--solvers", "lagrange", "--reference", "lagrange,lagrange"], ["--reference", "expected one solver spec"]),
        (["--solvers", "lagrange", "--repeat", "0"], ["--repeat"]),
        (["--solvers", "lagrange", "--set", "time.ennd=1"], ["--set", "time.ennd"]),
    ],
)
def test_bad_spec_exits_2_before_anything_runs(args: list[str], fragments: list[str], tmp_path: Path) -> None:
    outdir = tmp_path / "never"
    result = invoke(PENDULUM, *args, "-o", outdir)
    assert result.exit_code == 2, result.output
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    assert "Traceback" not in result.stderr
    assert not outdir.exists()  # checked before anything ran or was written


def test_a_bad_spec_after_good_ones_runs_nothing(tmp_path: Path) -> None:
    result = invoke(PENDULUM, "--solvers", "lagrange,lagrange:integrator=euler,lagrange:omeg=3", "-o", tmp_path / "x")
    assert result.exit_code == 2
    assert "running" not in result.stderr
    assert not (tmp_path / "x").exists()


# ----------------------------------------------------------------------------- parsing


def test_solver_list_shares_the_comma_with_options() -> None:
    specs = parse_solver_list("lagrange, gauss,augmented_lagrangian:omega=3,mu=5,lagrange:integrator=scipy:DOP853")
    assert [s.text for s in specs] == [
        "lagrange",
        "gauss",
        "augmented_lagrangian:omega=3,mu=5",
        "lagrange:integrator=scipy:DOP853",
    ]
    assert specs[2].options == (("omega", "3"), ("mu", "5"))
    assert specs[2].option_values() == {"omega": 3, "mu": 5}
    assert specs[2].overrides() == ["solver.method=augmented_lagrangian", "solver.omega=3", "solver.mu=5"]
    assert specs[3].option_values() == {"integrator": "scipy:DOP853"}
    # a flow list keeps its commas
    assert parse_solver_spec("lagrange:x=[1, 2],y=3").options == (("x", "[1, 2]"), ("y", "3"))


def test_file_stem_is_filesystem_safe() -> None:
    assert file_stem(parse_solver_spec("augmented_lagrangian:omega=3,mu=5")) == "augmented_lagrangian_omega-3_mu-5"
    assert file_stem(parse_solver_spec(REFERENCE)) == "lagrange_integrator-scipy-DOP853_rtol-1e-12"
    long = file_stem(parse_solver_spec("lagrange:" + ",".join(f"k{i}=v/{i}" for i in range(60))))
    assert len(long) <= 120 and "/" not in long


@pytest.mark.parametrize("text", ["", ":omega=3", "lagrange:", "lagrange:omega", "lagrange:a=1,a=2", "lagrange:m="])
def test_malformed_spec_raises_scene_error(text: str) -> None:
    with pytest.raises(SceneError):
        parse_solver_spec(text)


def test_methods_with_other_coordinates_are_compared_on_the_bodies(tmp_path) -> None:
    """recursive's /q are joint angles, lagrange's body coordinates: the error falls back to the
    bodies' positions and orientations, and is small for two accurate solutions."""
    out = tmp_path / "cmp"
    result = invoke(
        DOUBLE, "--solvers", "recursive", "--reference", REFERENCE, "-o", out, "--set", "time.end=1.0",
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads((out / "compare.json").read_text())["rows"]
    assert rows[0]["error_rms"] is not None and rows[0]["error_rms"] < 1e-6
