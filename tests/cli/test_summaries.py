"""The outputs' summaries outside ``run`` (issue 30 item 5, CONTRACT §8): ``plot --what outputs|
actuators|joints``, ``info``'s outputs and actuators, ``compare``'s max_/min_/final_NAME columns
and its per-output error against a reference, each against values the test computes itself from
the result file's datasets (or a closed form)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest
from summary_scenes import SERVO, rest_angle

OUTPUTS = ("angle", "tip_y", "cubic")


@pytest.fixture(scope="module")
def servo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The servo bar's result file and ``run --json``'s summary."""
    from click.testing import CliRunner

    from mbsim.cli.main import cli

    folder = tmp_path_factory.mktemp("servo")
    scene = folder / "servo.yaml"
    scene.write_text(SERVO, encoding="utf-8")
    out = folder / "servo.h5"
    result = CliRunner().invoke(cli, ["run", str(scene), "-o", str(out), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


@pytest.fixture
def saved_figures(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every matplotlib figure saved during the test."""
    from matplotlib.figure import Figure

    figures = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


# ----------------------------------------------------------------------------- plot


def test_plot_outputs_actuators_joints_draw_the_recorded_series(servo_run, mbsim, tmp_path, saved_figures) -> None:
    """``outputs``: a panel per output; ``actuators``: force then power; ``joints``: position then
    velocity; each line is the dataset it names."""
    out, _ = servo_run
    r = mbsim("plot", out, "-o", tmp_path / "p.png", "--what", "outputs,actuators,joints")
    assert r.exit_code == 0, r.output
    (figure,) = saved_figures
    axes = figure.axes
    assert len(axes) == len(OUTPUTS) + 2 + 2
    with h5py.File(out, "r") as f:
        expected = [(n, f[f"outputs/{n}"][:]) for n in sorted(OUTPUTS)]  # the file's order
        expected += [("lift", f["actuators/lift/force"][:]), ("lift", f["actuators/lift/power"][:])]
        expected += [("hinge", f["joints/hinge/position"][:]), ("hinge", f["joints/hinge/velocity"][:])]
        time = f["time"][:]
    for ax, (label, values) in zip(axes, expected, strict=True):
        (line,) = ax.lines
        assert line.get_label() == label
        np.testing.assert_array_equal(line.get_xdata(), time)
        np.testing.assert_array_equal(line.get_ydata(), values)
    assert [ax.get_ylabel() for ax in axes[len(OUTPUTS) :]] == [
        "actuator force, N or N m",
        "actuator power, W",
        "joint position, rad or m",
        "joint velocity, rad/s or m/s",
    ]
    # the lift's power is its force times the hinge's rate (no gear): the panels belong together
    np.testing.assert_allclose(expected[-3][1], expected[-4][1] * expected[-1][1], rtol=0, atol=1e-12)


def test_plot_one_output_and_one_actuator(servo_run, mbsim, tmp_path, saved_figures) -> None:
    out, _ = servo_run
    r = mbsim("plot", out, "-o", tmp_path / "p.png", "--what", "outputs/tip_y,actuators/lift")
    assert r.exit_code == 0, r.output
    (figure,) = saved_figures
    tip, force, power = figure.axes
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(tip.lines[0].get_ydata(), f["outputs/tip_y"][:])
        np.testing.assert_array_equal(force.lines[0].get_ydata(), f["actuators/lift/force"][:])
        np.testing.assert_array_equal(power.lines[0].get_ydata(), f["actuators/lift/power"][:])
    assert [tip.get_ylabel(), force.get_ylabel(), power.get_ylabel()] == ["tip_y", "lift.force", "lift.power"]


@pytest.mark.parametrize(
    ("what", "said"),
    [
        ("outputs/tip_z", "no output 'tip_z' in this result file; it has angle, cubic, tip_y (did you mean 'tip_y'?)"),
        ("output", "unknown plot item 'output'"),
        ("actuators/lifter", "no actuator 'lifter'"),
        ("joints/hinge2", "no joint with a coordinate 'hinge2'"),
        ("energy,outputz", "(did you mean 'outputs'?)"),
    ],
)
def test_plot_unknown_item_exits_2_with_did_you_mean(servo_run, mbsim, tmp_path, what, said) -> None:
    out, _ = servo_run
    png = tmp_path / "bad.png"
    r = mbsim("plot", out, "-o", png, "--what", what)
    assert r.exit_code == 2
    assert said in r.stderr and "Traceback" not in r.output
    assert not png.exists()


@pytest.mark.parametrize("what", ["outputs", "actuators", "joints"])
def test_plot_group_the_file_has_none_of_exits_2(mbsim, write_scene, tmp_path, what) -> None:
    """A free body: no outputs, no actuators, no joint coordinates."""
    scene = write_scene(
        "mbsim: 1\nname: drop\ndimension: 2\ngravity: [0, -9.81]\ntime: {end: 0.01, step: 0.005}\n"
        "bodies:\n  - {name: ball, mass: 1, inertia: 0.1, position: [0, 0]}\n"
    )
    out = tmp_path / "drop.h5"
    assert mbsim("run", scene, "-o", out, "-q").exit_code == 0
    r = mbsim("plot", out, "-o", tmp_path / "x.png", "--what", what)
    assert r.exit_code == 2
    assert f"'{what}': this result file has no " in r.stderr
    assert not (tmp_path / "x.png").exists()


# ----------------------------------------------------------------------------- info


def test_info_lists_outputs_and_actuators(servo_run, mbsim) -> None:
    out, summary = servo_run
    data = json.loads(mbsim("info", out, "--json").stdout)
    text = mbsim("info", out).stdout
    with h5py.File(out, "r") as f:
        for item in data["outputs"]:
            values = f[f"outputs/{item['name']}"][:]
            assert (item["max"], item["min"], item["final"]) == (values.max(), values.min(), values[-1])
            assert summary[f"max_{item['name']}"] == values.max()  # what run --assert reads
            assert f"  {item['name']}  final {values[-1]:.6g}, min {values.min():.6g}, max {values.max():.6g}" in text
        (lift,) = data["actuators"]
        assert lift["final_force"] == f["actuators/lift/force"][-1]
        assert lift["final_power"] == f["actuators/lift/power"][-1]
    assert sorted(i["name"] for i in data["outputs"]) == sorted(OUTPUTS)
    # the bar settles where the servo holds its weight (closed form), 1 s after the start
    final = next(i["final"] for i in data["outputs"] if i["name"] == "angle")
    assert final == pytest.approx(rest_angle(0.3), abs=1e-6)


# ----------------------------------------------------------------------------- compare


def _rms(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


def test_compare_tabulates_the_outputs_and_their_errors(mbsim, write_scene, tmp_path) -> None:
    """Same step for solver and reference: the error of an output is the RMS of the recorded
    difference, row by row; every summary column is its dataset's max, min, last value."""
    scene = write_scene(SERVO)
    outdir = tmp_path / "cmp"
    r = mbsim(
        "compare", scene, "--solvers", "lagrange:integrator=euler,null_space", "--reference", "lagrange",
        "-o", outdir, "-q", "--format", "csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    report = json.loads((outdir / "compare.json").read_text(encoding="utf-8"))
    markdown = (outdir / "compare.md").read_text(encoding="utf-8")
    header = r.stdout.splitlines()[0].split(",")
    standard = header.index("error_max")
    assert header[standard + 1 : standard + 1 + 3 * len(OUTPUTS)] == [
        f"{k}_{n}" for n in OUTPUTS for k in ("max", "min", "final")
    ]  # after the standard columns, in the scene's order
    assert header[standard + 1 + 3 * len(OUTPUTS) :] == [f"error_rms_{n}" for n in OUTPUTS] + ["message", "notes"]
    with h5py.File(outdir / "reference-lagrange.h5", "r") as f:
        reference = {n: f[f"outputs/{n}"][:] for n in OUTPUTS}
    for row, item in zip(rows, report["rows"], strict=True):
        with h5py.File(item["file"], "r") as f:
            for name in OUTPUTS:
                values = f[f"outputs/{name}"][:]
                for key, value in (("max", values.max()), ("min", values.min()), ("final", values[-1])):
                    assert float(row[f"{key}_{name}"]) == value  # the CSV's full precision
                    assert item["outputs"][f"{key}_{name}"] == value
                    assert f"| {value:.6g} |" in markdown
                error = _rms(values, reference[name])
                assert float(row[f"error_rms_{name}"]) == pytest.approx(error, rel=1e-12, abs=1e-300)
    errors = {row["solver"]: float(row["error_rms_angle"]) for row in rows}
    assert errors["null_space"] < 1e-9 < 1e-4 < errors["lagrange:integrator=euler"]  # rk4 vs explicit Euler
    assert float(rows[0]["error_rms_cubic"]) == 0.0  # a function of t alone: the same at the same times


def test_compare_output_error_on_another_time_grid_is_interpolated_cubically(mbsim, write_scene, tmp_path) -> None:
    """An adaptive reference records at its own times: the solver's output is a cubic spline of its
    rows there, which reproduces t^3 - 2t exactly (straight lines between rows 0.01 s apart would be
    off by ~1e-4 at t = 1)."""
    scene = write_scene(SERVO)
    outdir = tmp_path / "cmp"
    r = mbsim(
        "compare", scene, "--solvers", "lagrange", "--reference", "lagrange:integrator=scipy:DOP853,rtol=1e-11",
        "-o", outdir, "-q", "--format", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    with h5py.File(outdir / report["reference"]["file"].rsplit("/", 1)[-1], "r") as f:
        t_ref = f["time"][:]
    with h5py.File(report["rows"][0]["file"], "r") as f:
        t = f["time"][:]
    assert len(t_ref) != len(t)  # the grids differ
    errors = report["rows"][0]["output_error_rms"]
    assert errors["cubic"] < 1e-13
    # the state's outputs: rk4 at 1 ms against DOP853 at 1e-11, both within micro-radians of each other
    assert 0 < errors["angle"] < 1e-5
    assert not math.isnan(errors["tip_y"])
    assert "RMS error NAME = RMS over time of the output's difference" in (outdir / "compare.md").read_text()


def test_compare_output_error_across_coordinates(mbsim, write_scene, tmp_path) -> None:
    """recursive (joint coordinates) against lagrange (body coordinates with multipliers): /q
    differs in kind, the outputs do not; two formulations of the same rk4 motion agree to
    round-off, so the per-output error is the one comparable number."""
    r = mbsim(
        "compare", write_scene(SERVO), "--solvers", "recursive", "--reference", "lagrange",
        "-o", tmp_path / "cmp", "-q", "--format", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["rows"]
    assert set(row["output_error_rms"]) == set(OUTPUTS)
    assert max(row["output_error_rms"].values()) < 1e-10
