"""``mbsim verify`` (CONTRACT §6): problem folders, the rows and their outcomes, exit codes 0/4/2,
a user's own problem folder, and the shipped problems' tables against their derivations."""

from __future__ import annotations

import json
import re
import runpy
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mbsim.verify.problem import SHIPPED, find_problems, load_problem, shipped_problems

PENDULUM_SCENE = """\
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


def small_angle_table(amplitude_fix: float = 1.0) -> str:
    """x of a pendulum started at the bottom at 0.01 m/s: x = (v0 / w) sin(w t) to ~1e-9 m
    (small angle: the amplitude is 3e-3 rad, the nonlinear correction ~ theta^3 / 16 ~ 2e-9)."""
    w = np.sqrt(9.81 / (1.0 + 1e-6))
    t = np.round(np.arange(0, 21) * 0.1, 10)
    x = amplitude_fix * 0.01 / w * np.sin(w * t)
    return "# small-angle pendulum\nt,x\n" + "".join(f"{a:.17g},{b:.17g}\n" for a, b in zip(t, x, strict=True))


def write_problem(folder: Path, problem: str, table: str | None = None, scene: str = PENDULUM_SCENE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scene.yaml").write_text(scene)
    (folder / "problem.yaml").write_text(textwrap.dedent(problem))
    (folder / "reference.csv").write_text(table if table is not None else small_angle_table())
    return folder


OWN = """\
id: my_pendulum
title: a small swing
source: my textbook
reference: small-angle closed form
methods: [lagrange, null_space]
checks:
  - {quantity: bodies/bob/position, columns: [0], reference: reference.csv, tolerance: 1.0e-7, label: "x [m]"}
  - {quantity: summary.energy_drift, tolerance: 1.0e-8}
quick:
  set: [time.end=0.5]
"""


def test_a_users_own_problem_folder_runs_and_passes(mbsim, tmp_path: Path) -> None:
    folder = write_problem(tmp_path / "mine", OWN)
    result = mbsim("verify", folder, "--json", "-o", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["format"] == "mbsim-verify" and report["failed"] == 0 and report["passed"] == 2
    rows = report["rows"]
    assert [r["method"] for r in rows] == ["lagrange", "null_space"]
    for row in rows:
        assert row["problem"] == "my_pendulum" and row["source"] == "my textbook" and row["outcome"] == "pass"
        assert row["quantity"] == "x [m]" and row["tolerance"] == 1e-7
        assert 0 <= row["error"] < 2e-8  # the small-angle closed form holds to ~2e-9 m
        assert row["wall_time_s"] > 0
        assert {c["quantity"] for c in row["checks"]} == {"bodies/bob/position", "summary.energy_drift"}
        assert Path(row["file"]).is_file()


def test_a_check_out_of_tolerance_fails_with_exit_4(mbsim, tmp_path: Path) -> None:
    """The table scaled by 1.001 (an error of ~3e-6 m) against a tolerance of 1e-7 m."""
    folder = write_problem(tmp_path / "mine", OWN, small_angle_table(1.001))
    result = mbsim("verify", folder, "-o", tmp_path / "out", "--quiet", "--method", "lagrange")
    assert result.exit_code == 4, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("my_pendulum"))
    assert "fail" in line.split() and "x [m]" in line
    assert "0 passed, 0 failed as expected, 1 failed" in result.stdout
    error = float(line.split()[-4])
    assert error == pytest.approx(0.001 * 0.01 / np.sqrt(9.81), rel=0.05)


def test_quick_shortens_the_run_and_compares_only_the_times_it_reaches(mbsim, tmp_path: Path) -> None:
    folder = write_problem(tmp_path / "mine", OWN)
    result = mbsim("verify", folder, "--quick", "--json", "-o", tmp_path / "out", "--quiet", "--method", "lagrange")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["rows"]
    assert row["t_end"] == pytest.approx(0.5) and row["steps"] == 500


def test_an_expected_failure_is_recorded_as_expected_not_as_a_pass(mbsim, tmp_path: Path) -> None:
    """lagrange on a doubled hinge (redundant equations, J M^-1 J^T singular) refuses with its
    rank-loss message; the problem says so; a wrong expectation is a failure."""
    doubled = PENDULUM_SCENE + "  - {name: O2, type: revolute, body1: ground, body2: bob, point: [0, 0]}\n"
    problem = OWN.replace("methods: [lagrange, null_space]", "methods: [null_space]") + (
        "expected_failures:\n  lagrange: rank\n"
    )
    folder = write_problem(tmp_path / "mine", problem, scene=doubled)
    result = mbsim("verify", folder, "--json", "-o", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.stdout)["rows"]}
    assert rows["null_space"]["outcome"] == "pass"
    assert rows["lagrange"]["outcome"] == "expected" and rows["lagrange"]["status"] == "failed"
    assert "rank" in rows["lagrange"]["message"]
    (folder / "problem.yaml").write_text(problem.replace("lagrange: rank", "lagrange: diverged"))
    result = mbsim("verify", folder, "--json", "-o", tmp_path / "out2", "--quiet", "--method", "lagrange")
    assert result.exit_code == 4
    (row,) = json.loads(result.stdout)["rows"]
    assert row["outcome"] == "fail" and "expected a failure with 'diverged'" in row["message"]


def test_adaptive_runs_are_compared_through_the_interpolated_table(mbsim, tmp_path: Path) -> None:
    """scipy:DOP853 records at its own steps; match: interpolate compares every recorded time with a
    cubic spline of a fine table (here every 0.01 s: spline error ~1e-12 m)."""
    w = np.sqrt(9.81 / (1.0 + 1e-6))
    t = np.round(np.arange(0, 201) * 0.01, 10)
    table = "t,x\n" + "".join(f"{a:.17g},{0.01 / w * np.sin(w * a):.17g}\n" for a in t)
    problem = OWN.replace("methods: [lagrange, null_space]", 'methods: ["lagrange:integrator=scipy:DOP853"]')
    problem = problem.replace(
        "reference: reference.csv, tolerance", "reference: reference.csv, match: interpolate, tolerance"
    )
    folder = write_problem(tmp_path / "mine", problem, table)
    result = mbsim("verify", folder, "--json", "-o", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["rows"]
    assert row["outcome"] == "pass" and row["error"] < 1e-7
    exact = problem.replace("match: interpolate, ", "")
    (folder / "problem.yaml").write_text(exact)
    result = mbsim("verify", folder, "--json", "-o", tmp_path / "out2", "--quiet")
    assert result.exit_code == 4
    assert "is not a recorded time" in json.loads(result.stdout)["rows"][0]["message"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p.replace("tolerance: 1.0e-7", "tolerance: -1"), "checks[0].tolerance: expected a positive number"),
        (lambda p: p.replace("checks:", "chekcs:"), "unknown key 'chekcs'"),
        (lambda p: p.replace("methods: [lagrange, null_space]\n", ""), "missing required key 'methods'"),
        (lambda p: p.replace("reference.csv", "missing.csv"), "reference table not found"),
        (lambda p: p.replace("summary.energy_drift", "summary.energy"), "unknown summary number"),
        (lambda p: p.replace("methods: [lagrange, null_space]", "methods: [lagrnge]"), "lagrnge"),
    ],
)
def test_a_wrong_problem_file_exits_2_naming_file_line_and_key(mbsim, tmp_path: Path, edit, message) -> None:
    folder = write_problem(tmp_path / "mine", edit(OWN))
    result = mbsim("verify", folder, "-o", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "problem.yaml" in result.stderr or "missing.csv" in result.stderr or "mine" in result.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.h5"))


def test_a_bad_reference_table_names_its_line(mbsim, tmp_path: Path) -> None:
    folder = write_problem(tmp_path / "mine", OWN, "t,x\n0,0\n0.1,zero\n")
    result = mbsim("verify", folder)
    assert result.exit_code == 2
    assert "reference.csv:3" in result.stderr and "expected numbers" in result.stderr


def test_unknown_problem_and_method_exit_2(mbsim, tmp_path: Path) -> None:
    result = mbsim("verify", "A2")
    assert result.exit_code == 2 and "no such problem 'A2'" in result.stderr and "A02" in result.stderr
    folder = write_problem(tmp_path / "mine", OWN)
    result = mbsim("verify", folder, "--method", "timestepping", "-o", tmp_path / "out")
    assert result.exit_code == 2 and "no problem runs method timestepping" in result.stderr


def test_list_names_every_shipped_problem(mbsim) -> None:
    result = mbsim("verify", "--list")
    assert result.exit_code == 0
    ids = [line.split()[0] for line in result.stdout.splitlines()]
    for required in ("A01", "A02", "A02_N4", "A03", "A04", "A05", "four_box_chain", "slider_crank_fold",
                     "bouncing_ball", "sliding_block", "two_blocks_elastic", "hertz_impact"):  # fmt: skip
        assert required in ids


def test_every_shipped_problem_loads_and_says_where_it_comes_from() -> None:
    problems = [load_problem(p) for p in shipped_problems()]
    assert len({p.id for p in problems}) == len(problems)
    for problem in problems:
        assert problem.citation and problem.reference and problem.source
        # every problem is in the quick run: shortened, or short enough as it is
        assert problem.quick_set or problem.id in ("two_blocks_elastic", "A03", "sliding_block", "hertz_impact")
    assert [p.id for p in find_problems(["A01"])] == ["A01"]


def test_the_references_are_derived_without_mbsim() -> None:
    """Independent means independent: no problem's derivation imports mbsim (numpy, scipy, trimesh
    and the standard library only)."""
    import ast

    scripts = sorted(SHIPPED.glob("*/*.py"))
    assert len(scripts) >= 8
    for path in scripts:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "mbsim" or n.startswith("mbsim.") for n in names), f"{path} imports {names}"


SLOW_DERIVATIONS = ("A04_bricard", "A05_flyball_governor")  # 17 s and 11 s


@pytest.mark.parametrize(
    "folder",
    [
        pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW_DERIVATIONS else p
        for p in shipped_problems()
        if (p / "reference.py").is_file()
    ],
    ids=lambda p: p.name,
)
def test_the_shipped_tables_are_what_their_derivations_write(folder: Path, tmp_path: Path, monkeypatch) -> None:
    """Each reference.py recomputes its tables (and generated scene) from the closed form or the
    independent model it documents; the shipped files must be exactly what it writes."""
    before = {
        p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".csv", ".yaml") and p.name != "problem.yaml"
    }
    copy = tmp_path / folder.name
    copy.mkdir()
    for name, data in before.items():
        (copy / name).write_bytes(data)
    (copy / "reference.py").write_bytes((folder / "reference.py").read_bytes())
    monkeypatch.chdir(copy)
    monkeypatch.setattr(sys, "argv", ["reference.py"])
    try:
        runpy.run_path(str(copy / "reference.py"), run_name="__main__")
    except SystemExit as exc:  # a derivation with a main() that returns its exit code
        assert exc.code in (0, None)
    for name, data in before.items():
        written = (copy / name).read_bytes()
        if name.endswith(".csv") and written != data:
            # an ODE solution recomputed under another numpy/scipy release moves in its last digits
            # (seen: 2e-9 relative on a 6e-6 entry); any real change of a derivation is far larger
            assert_same_table(written.decode(), data.decode(), name)
        else:
            assert written == data, name


def assert_same_table(written: str, shipped: str, name: str, rtol: float = 1e-8, atol: float = 1e-12) -> None:
    """The same lines, the same words, and numbers equal to ``rtol`` (plus ``atol`` near zero)."""
    new_lines, old_lines = written.splitlines(), shipped.splitlines()
    assert len(new_lines) == len(old_lines), f"{name}: {len(new_lines)} lines written, {len(old_lines)} shipped"
    for number, (new, old) in enumerate(zip(new_lines, old_lines, strict=True), start=1):
        new_words, old_words = re.split(r"[,\s]+", new), re.split(r"[,\s]+", old)
        assert len(new_words) == len(old_words), f"{name}:{number}: {new!r} != {old!r}"
        for a, b in zip(new_words, old_words, strict=True):
            try:
                x, y = float(a), float(b)
            except ValueError:
                assert a == b, f"{name}:{number}: {new!r} != {old!r}"
                continue
            assert abs(x - y) <= rtol * max(abs(x), abs(y)) + atol, f"{name}:{number}: {a} != {b}"


@pytest.mark.slow
def test_the_quick_verification_passes(mbsim, tmp_path: Path) -> None:
    """CONTRACT §6 in CI: every shipped problem's quick variant under every method it names passes,
    and the methods that must refuse a problem do (about 2 minutes)."""
    result = mbsim("verify", "--quick", "--json", "--quiet", "-o", tmp_path / "out")
    report = json.loads(result.stdout)
    failed = [f"{r['problem']} {r['method']}: {r['message'] or r['quantity']} {r['error']}" for r in report["rows"]
              if r["outcome"] == "fail"]  # fmt: skip
    assert result.exit_code == 0 and not failed, failed
    assert {r["problem"] for r in report["rows"]} == {load_problem(p).id for p in shipped_problems()}
    bricard = {r["method"]: r["outcome"] for r in report["rows"] if r["problem"] == "A04"}
    assert bricard["lagrange"] == "expected"
    for method in ("null_space", "gauss", "augmented_lagrangian"):
        assert bricard[method] == "pass"
        assert bricard[f"{method}:integrator=scipy:DOP853,rtol=1e-10,atol=1e-10"] == "pass"


def test_the_benchmark_section_is_replaced_in_place(benchmark_module, tmp_path: Path, mbsim) -> None:
    """benchmarks/verify.py renders saved --json outputs into its marked section of BENCHMARKS.md,
    replacing only that section; benchmarks/run.py keeps it (kept_section)."""
    bench = benchmark_module("verify")
    folder = write_problem(tmp_path / "mine", OWN)
    saved = tmp_path / "run.json"
    saved.write_text(
        mbsim("verify", folder, "--json", "--quiet", "-o", tmp_path / "out", "--method", "lagrange").stdout
    )
    target = tmp_path / "BENCHMARKS.md"
    target.write_text("# mbsim benchmarks\n\n## 9. Peers\n\ntext\n")
    assert bench.main(["--from-json", str(saved), "--output", str(target)]) == 0
    first = target.read_text()
    assert first.startswith("# mbsim benchmarks\n\n## 9. Peers\n\ntext\n")
    assert "| my_pendulum | my textbook | `lagrange` | x [m] |" in first and "1 passed" in first
    assert bench.main(["--from-json", str(saved), str(saved), "--output", str(target)]) == 0
    second = target.read_text()
    assert second.count(bench.BEGIN) == 1 and "2 passed" in second
    assert bench.kept_section(target).startswith(bench.BEGIN) and bench.kept_section(target).endswith(bench.END)


def test_a_run_with_scene_overrides_of_its_own(mbsim, tmp_path: Path) -> None:
    """methods entries {solver: SPEC, set: [...]}: the overrides apply to that run only (here an
    adaptive run recording every step), and the row says them."""
    problem = OWN.replace(
        "methods: [lagrange, null_space]",
        'methods: [lagrange, {solver: "lagrange:integrator=scipy:DOP853,rtol=1e-11,atol=1e-13",\n'
        "                     set: [output.every=1]}]",
    ).replace("reference: reference.csv, tolerance", "reference: reference.csv, match: interpolate_result, tolerance")
    folder = write_problem(tmp_path / "mine", problem)
    result = mbsim("verify", folder, "--json", "-o", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    fixed, adaptive = json.loads(result.stdout)["rows"]
    assert fixed["overrides"] == [] and adaptive["overrides"] == ["output.every=1"]
    assert (
        adaptive["method"] == "lagrange:integrator=scipy:DOP853,rtol=1e-11,atol=1e-13" and adaptive["outcome"] == "pass"
    )
    assert adaptive["steps"] > 10 and fixed["steps"] == 2000
    table = mbsim("verify", folder, "-o", tmp_path / "out2", "--quiet").stdout
    assert "lagrange:integrator=scipy:DOP853,rtol=1e-11,atol=1e-13 (output.every=1)" in table
