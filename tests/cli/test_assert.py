"""``--assert`` of ``mbsim run``: conditions over the run summary, exit 4 naming the condition
and its value, exit 2 for a bad condition, 3 before 4 when the run itself failed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mbsim.assertions import SUMMARY_NAMES, parse_assertion
from mbsim.errors import EXIT_CODES, SceneError
from mbsim.simulate import RunSummary

pytestmark = pytest.mark.usefixtures("in_tmp_path")

PENDULUM = Path(__file__).resolve().parents[2] / "scenes" / "pendulum_2d.yaml"
SHORT = ("--set", "time.end=0.2")
# explicit Euler without projection leaves the circle at once: fails on the violation limit
FAILING = ("--set", "solver.integrator=euler", "--set", "solver.projection.position=false")
FAILING += ("--set", "solver.projection.velocity=false", "--set", "solver.max_violation=1e-12")


def test_exit_code_4_is_in_the_one_table() -> None:
    assert EXIT_CODES["assertion"] == 4


def test_every_name_is_a_numeric_summary_field() -> None:
    numeric = {k for k, t in RunSummary.__annotations__.items() if t in ("int", "float")}
    assert set(SUMMARY_NAMES) <= numeric


@pytest.mark.slow
def test_assertions_that_hold_exit_0_and_are_listed(mbsim) -> None:
    result = mbsim("run", PENDULUM, *SHORT, "--assert", "max_position_violation < 1e-10", "--assert", "steps == 20")
    assert result.exit_code == 0, result.output
    assert "assert     held: max_position_violation < 1e-10 (max_position_violation = " in result.stdout
    assert "assert     held: steps == 20 (steps = 20)" in result.stdout


def test_a_failing_assertion_exits_4_naming_it_and_its_value(mbsim) -> None:
    result = mbsim("run", PENDULUM, *SHORT, "--assert", "energy_drift < 1e-4", "--assert", "energy_drift < 1e-15")
    assert result.exit_code == 4
    summary = json.loads(mbsim("info", "outputs/pendulum_2d.h5", "--json").stdout)
    assert summary["status"] == "completed"  # the run itself completed; its file stays
    (line,) = [x for x in result.stderr.splitlines() if "assertion failed" in x]
    assert line.startswith("mbsim: assertion failed: energy_drift < 1e-15 (energy_drift = ")
    drift = float(line.rsplit("= ", 1)[1].rstrip(")"))
    assert 0 < drift < 1e-4


def test_json_carries_the_outcomes(mbsim) -> None:
    result = mbsim("run", PENDULUM, *SHORT, "--json", "--assert", "steps > 5 and not t_end < 0.2")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["status"] == "completed"
    assert data["assertions"] == [
        {"expression": "steps > 5 and not t_end < 0.2", "passed": True, "values": {"steps": 20.0, "t_end": 0.2}}
    ]
    failed = mbsim("run", PENDULUM, *SHORT, "--json", "--assert", "steps > 100")
    assert failed.exit_code == 4
    assert json.loads(failed.stdout)["assertions"][0]["passed"] is False


def test_a_failed_run_exits_3_even_when_assertions_fail(mbsim) -> None:
    result = mbsim("run", PENDULUM, *SHORT, *FAILING, "--assert", "max_position_violation < 1e-20")
    assert result.exit_code == 3
    assert "assert     FAILED: max_position_violation < 1e-20" in result.stdout


@pytest.mark.parametrize(
    ("condition", "fragment"),
    [
        ("energy_drif < 1", "did you mean 'energy_drift'?"),
        ("energy_drift", "expected a comparison"),
        ("energy_drift <", "syntax error"),
        ("__import__('os') == 0", "unknown function"),
        ("status == 1", "unknown name 'status'"),
    ],
)
def test_a_bad_assertion_is_a_command_line_error(mbsim, condition: str, fragment: str) -> None:
    result = mbsim("run", PENDULUM, *SHORT, "--assert", condition)
    assert result.exit_code == 2
    assert f"--assert '{condition}'" in result.stderr
    assert fragment in result.stderr
    assert not Path("outputs").exists()  # checked before anything runs


def test_nan_fails_the_test_that_needs_it() -> None:
    check = parse_assertion("energy_drift < 1")
    outcome = check.evaluate({"energy_drift": math.nan})
    assert not outcome.passed
    assert outcome.values == {"energy_drift": None}
    assert outcome.describe() == "energy_drift < 1 (energy_drift = nan)"
    assert not parse_assertion("steps > 0").evaluate({}).passed  # a missing value too


def test_parse_error_type() -> None:
    with pytest.raises(SceneError):
        parse_assertion("1 +")
