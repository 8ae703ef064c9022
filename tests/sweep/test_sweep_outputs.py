"""The outputs' summaries in a sweep (issue 30 item 5, CONTRACT §8): a sweep of a position servo's
target shows the bar's rest angle rise with it in max_/min_/final_NAME columns of every table,
each the case's own dataset's value and the closed-form rest angle, and ``--assert`` with
max_NAME is decided per case."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from click.testing import CliRunner
from summary_scenes import SERVO, rest_angle

from mbsim.assertions import evaluate_all, parse_assertions
from mbsim.cli.main import cli
from mbsim.sweep.table import SweepResult, SweepRow, is_sweep_csv_header, render
from mbsim.sweep.worker import CasePayload, run_case

TARGETS = (0.1, 0.2, 0.3)
SUMMARIES = [f"{k}_{n}" for n in ("angle", "tip_y", "cubic") for k in ("max", "min", "final")]


def _payload(index: int, target: float) -> CasePayload:
    return CasePayload(
        index=index,
        attempt=1,
        scene_name="servo.yaml",
        scene_dir=".",
        scene_bytes=SERVO.encode(),
        files=(),
        overrides=(f"parameters.target={target}",),
        strict=False,
        case_hash="",
        parameters=(("parameters.target", target),),
        display_file="servo.yaml",
    )


def test_sweep_table_has_the_outputs_summaries_per_case(tmp_path: Path) -> None:
    """The worker's cases in-process (no cluster): the columns follow the standard ones, each cell
    is its case's dataset's max/min/last value, and the rest angle rises with the target as the
    closed form says."""
    assertions = parse_assertions(["max_angle < 0.25"])
    result = SweepResult("servo bar", "servo.yaml", str(tmp_path), [], [{"key": "parameters.target"}], False, "", 0, [])
    result.assertions = [a.text for a in assertions]
    finals = []
    for k, target in enumerate(TARGETS):
        outcome = run_case(_payload(k, target))
        assert outcome.status == "completed", outcome.message
        row = SweepRow(k + 1, f"case{k}.h5", {"parameters.target": target}, status="completed", source="run")
        row.set_summary(outcome.summary)
        row.assertions = [o.to_dict() for o in evaluate_all(assertions, outcome.summary)]
        result.rows.append(row)
        (tmp_path / row.file).write_bytes(outcome.data)
        with h5py.File(tmp_path / row.file, "r") as f:
            for name in ("angle", "tip_y", "cubic"):
                values = f[f"outputs/{name}"][:]
                assert row.outputs[f"max_{name}"] == values.max()
                assert row.outputs[f"min_{name}"] == values.min()
                assert row.outputs[f"final_{name}"] == values[-1]
            # the servo holds the weight where kp (target - q) = m g r cos q
            assert row.outputs["final_angle"] == pytest.approx(rest_angle(target), abs=1e-6)
            peak = f["outputs/angle"][:].max()
            assert row.assertions[0] == {
                "expression": "max_angle < 0.25",
                "passed": peak < 0.25,
                "values": {"max_angle": peak},
            }
        finals.append(row.outputs["final_angle"])
    assert np.all(np.diff(finals) > 0.09)  # monotonic in the target (gravity takes a little of each)
    assert [r.assertions[0]["passed"] for r in result.rows] == [True, True, False]

    text = render(result, "csv")
    header = text.splitlines()[0]
    assert is_sweep_csv_header(header)  # a later sweep still knows the file as its own
    columns = header.split(",")
    assert columns[columns.index("max_quaternion_norm_error") + 1 :] == [
        *SUMMARIES,
        "assert: max_angle < 0.25",
        "message",
        "history",
    ]
    for line, row in zip(csv.DictReader(io.StringIO(text)), result.rows, strict=True):
        assert {k: float(line[k]) for k in SUMMARIES} == row.outputs  # full precision
    rows = json.loads(render(result, "json"))["rows"]
    assert [r["outputs"]["final_angle"] for r in rows] == finals
    table = render(result, "table")
    assert table.splitlines()[0].split()[-len(SUMMARIES) - 1 :] == [*SUMMARIES, "asserts"]
    for row in result.rows:
        assert f"{row.outputs['final_angle']:.6g}" in render(result, "markdown")
        assert f"{row.outputs['max_tip_y']:.6g}" in table


def test_a_stored_summary_without_outputs_apart_gives_the_flat_names() -> None:
    """A case's summary from an earlier sweep file (the outputs' summaries only among the standard
    numbers) still fills the columns, and a standard number is never taken for an output."""
    row = SweepRow(1, "x.h5", {})
    row.set_summary({"steps": 5, "max_position_violation": 1e-12, "max_angle": 0.2, "final_angle": 0.1})
    assert row.outputs == {"max_angle": 0.2, "final_angle": 0.1}
    assert row.max_position_violation == 1e-12


@pytest.mark.slow
def test_sweep_cli_asserts_max_output_per_case_and_resumes_with_it(tmp_path: Path) -> None:
    """``mbsim sweep --assert 'max_angle < 0.25'`` on a LocalCluster: the third target overshoots
    (exit 4, that case's assertion FAILED with its value); a rerun resumes every case and keeps
    the columns."""
    scene = tmp_path / "servo.yaml"
    scene.write_text(SERVO, encoding="utf-8")
    outdir = tmp_path / "sweep"
    args = ["sweep", str(scene), "--param", "parameters.target=0.1,0.2,0.3", "--set", "time.end=0.5"]
    args += ["--assert", "max_angle < 0.25", "--workers", "1", "-o", str(outdir), "-q", "--format", "json"]
    for source in ("run", "resumed"):
        r = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert r.exit_code == 4, r.output
        table = json.loads(r.stdout)
        assert [row["source"] for row in table["rows"]] == [source] * 3
        for row in table["rows"]:
            with h5py.File(outdir / row["file"], "r") as f:
                peak = f["outputs/angle"][:].max()
            assert row["outputs"]["max_angle"] == peak
            (outcome,) = row["assertions"]
            assert outcome["passed"] == (peak < 0.25) and outcome["values"] == {"max_angle": peak}
        assert [row["assertions"][0]["passed"] for row in table["rows"]] == [True, True, False]
        assert "case 3: assertion 1 failed: max_angle < 0.25" in (outdir / "sweep.md").read_text(encoding="utf-8")
