"""``mbsim sweep`` without Dask: ``--param`` parsing, the cases, file names, the case hash,
checking on the client, shipping scene and mesh files as bytes, one case on a "worker" (in
process), resume detection, and the table."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from mbsim.assertions import parse_assertions
from mbsim.errors import SceneError
from mbsim.sweep import case_stems, expand, parse_param, parse_params, plan_sweep, render
from mbsim.sweep.execute import read_completed
from mbsim.sweep.table import SweepResult, SweepRow, write_atomic
from mbsim.sweep.worker import HASH_ATTR, PARAMETERS_ATTR, SUMMARY_ATTR, run_case

SCENES = Path(__file__).resolve().parents[2] / "scenes"
PENDULUM = SCENES / "pendulum_2d.yaml"
SHORT = ("time.end=0.1",)


# ----------------------------------------------------------------------------- --param


def test_a_list_of_values_read_as_yaml() -> None:
    p = parse_param("gravity=[0, -9.81],[0,-1.62]")
    assert p.key == "gravity" and p.texts == ("[0, -9.81]", "[0,-1.62]")
    assert p.values == ([0, -9.81], [0, -1.62])
    p = parse_param(" contacts[0].stiffness = 1e6, 2.5e6 ,3 ")
    assert p.key == "contacts[0].stiffness"
    assert p.values == (1e6, 2.5e6, 3)  # YAML 1.1 reads 1e6 as text: a number all the same
    assert parse_param("solver.integrator=rk4,scipy:DOP853").values == ("rk4", "scipy:DOP853")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x=linspace(0, 1, 5)", [0.0, 0.25, 0.5, 0.75, 1.0]),
        ("x=logspace(5, 7, 3)", [1e5, 1e6, 1e7]),
        ("x=geomspace(1e-5, 1e-3, 3)", [1e-5, 1e-4, 1e-3]),
        ("x=linspace(0, pi/2, 3)", [0.0, math.pi / 4, math.pi / 2]),
        ("x=linspace(2, 2, 1)", [2.0]),
    ],
)
def test_ranges_and_their_texts_round_trip(text: str, expected: list[float]) -> None:
    p = parse_param(text)
    np.testing.assert_allclose(p.values, expected, rtol=1e-12)
    for t, v in zip(p.texts, p.values, strict=True):
        assert yaml.safe_load(t) == v and isinstance(yaml.safe_load(t), float)  # exactly, as a YAML float


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("time.step", "expected KEY=V1,V2"),
        ("=1,2", "expected KEY=V1,V2"),
        ("time.step=", "no values"),
        ("time.step=1,,2", "an empty value"),
        ("time step=1", "expected a dotted scene path"),
        ("x=linspace(0, 1)", "three arguments"),
        ("x=linspace(0, 1, 2.5)", "whole number"),
        ("x=linspace(0, 1, 0)", "whole number"),
        ("x=linspace(0, foo, 3)", "unknown name 'foo'"),
        ("x=logspace(1e5, 1e7, 3)", "takes exponents"),
        ("x=geomspace(0, 1, 3)", "non-zero end values"),
        ("x=[1, 2", "cannot read the value"),
    ],
)
def test_bad_params_are_command_line_errors(text: str, fragment: str) -> None:
    with pytest.raises(SceneError, match="--param") as info:
        parse_param(text)
    assert fragment in str(info.value)


def test_a_key_swept_twice_is_refused() -> None:
    with pytest.raises(SceneError, match="swept twice"):
        parse_params(["bodies[0].mass=1,2", "bodies.0.mass=3"])
    with pytest.raises(SceneError, match="at least one"):
        parse_params([])


def test_cases_are_the_product_or_zipped() -> None:
    a, b = parse_param("a=1,2"), parse_param("b=x,y,z")
    cases = expand([a, b])
    assert [[v for _, _, v in c] for c in cases] == [[1, "x"], [1, "y"], [1, "z"], [2, "x"], [2, "y"], [2, "z"]]
    assert [[v for _, _, v in c] for c in expand([a, parse_param("b=x,y")], zipped=True)] == [[1, "x"], [2, "y"]]
    with pytest.raises(SceneError, match="same number of values"):
        expand([a, b], zipped=True)
    with pytest.raises(SceneError, match="more than a sweep takes"):
        expand([parse_param("a=linspace(0,1,1000)"), parse_param("b=linspace(0,1,1000)")])


# ----------------------------------------------------------------------------- file names


def test_file_names_come_from_the_values_and_are_safe() -> None:
    params = [parse_param("contacts[0].stiffness=logspace(6,8,3)"), parse_param("time.step=1e-5,2.5e-5")]
    stems = case_stems(expand(params))
    assert stems[0] == "stiffness-1e6_step-1e-5"
    assert stems[-1] == "stiffness-1e8_step-2.5e-5"
    assert len(set(stems)) == 6
    odd = case_stems(expand([parse_param("solver.integrator=scipy:DOP853,'a/b\\\\c *?<>|\"'")]))
    for stem in odd:
        assert all(ch.isalnum() or ch in "._-" for ch in stem), stem
    # the same value gives the same name wherever it sits in the sweep (resume after extending it)
    again = case_stems(expand([parse_param("contacts[0].stiffness=1e7"), parse_param("time.step=1e-5")]))
    assert again == ["stiffness-1e7_step-1e-5"]


def test_file_names_keep_apart_what_looks_alike() -> None:
    # two paths with the same last name use the whole path
    stems = case_stems(expand([parse_param("bodies[0].mass=1"), parse_param("bodies[1].mass=2")]))
    assert stems == ["bodies.0.mass-1_bodies.1.mass-2"]
    # values equal to six digits, and names equal but for case, get the case number
    stems = case_stems(expand([parse_param("x=1.0000001,1.0000002,A,a")]))
    assert stems == ["x-1-case1", "x-1-case2", "x-A-case3", "x-a-case4"]
    # Windows device names and very long names
    assert case_stems(expand([parse_param("con=1")]))[0] == "con-1"
    assert case_stems([(("nul", "x", "x"),)])[0].startswith("nul-")
    long = case_stems(expand([parse_param("name=" + "a" * 300)]))[0]
    assert len(long) <= 120 and long.startswith("name-aaa")


# ----------------------------------------------------------------------------- planning


def test_plan_checks_every_case_and_names_the_param() -> None:
    plan = plan_sweep(str(PENDULUM), parse_params(["time.step=0.01,0.02"]), overrides=SHORT)
    assert [c.overrides for c in plan.cases] == [("time.end=0.1", "time.step=0.01"), ("time.end=0.1", "time.step=0.02")]
    assert plan.scene_name == "pendulum 2d"
    with pytest.raises(SceneError) as info:
        plan_sweep(str(PENDULUM), parse_params(["bodies.bob.mass=1,-2"]))
    assert str(info.value).startswith("--param 'bodies.bob.mass=1,-2': bodies[0].mass: value -2: expected a positive")
    with pytest.raises(SceneError, match="--param 'bodies.nobody.mass=1,2'.*no item named 'nobody'"):
        plan_sweep(str(PENDULUM), parse_params(["bodies.nobody.mass=1,2"]))
    with pytest.raises(SceneError, match="did you mean 'lagrange'"):  # checked in every solver section
        plan_sweep(str(PENDULUM), parse_params(["solver.method=lagrange,lagrang"]))
    with pytest.raises(SceneError, match="^--set: time.step"):
        plan_sweep(str(PENDULUM), parse_params(["bodies.bob.mass=1,2"]), overrides=("time.step=-3",))


def test_the_case_hash_follows_scene_and_parameters(tmp_path: Path) -> None:
    scene = tmp_path / "p.yaml"
    shutil.copy(PENDULUM, scene)
    params = parse_params(["parameters.theta0=0.5,1"])
    first = [c.case_hash for c in plan_sweep(str(scene), params, overrides=SHORT).cases]
    assert len(set(first)) == 2
    assert first == [c.case_hash for c in plan_sweep(str(scene), params, overrides=SHORT).cases]
    # the same scene reached another way (a value spelt differently) is the same case
    respelt = parse_params(["parameters.theta0=.5,1"])
    assert [c.case_hash for c in plan_sweep(str(scene), respelt, overrides=SHORT).cases] == first
    assert first != [c.case_hash for c in plan_sweep(str(scene), params, overrides=("time.end=0.2",)).cases]
    assert first != [c.case_hash for c in plan_sweep(str(scene), params, overrides=SHORT, strict=True).cases]
    scene.write_text(scene.read_text().replace("inertia: 1.0e-6", "inertia: 2.0e-6"))
    assert set(first).isdisjoint(c.case_hash for c in plan_sweep(str(scene), params, overrides=SHORT).cases)


# ----------------------------------------------------------------------------- one case on a worker

MESH_SCENE = """# a cube from an STL file one directory up
mbsim: 1
name: mesh cube
time: {end: 0.01, step: 0.005}
gravity: [0, 0, -9.8]
bodies:
  - {name: cube, density: 1000, position: [0, 0, 1], shapes: [{type: mesh, file: MESHFILE}]}
"""


def _mesh_scene(tmp_path: Path, absolute: bool = False) -> tuple[Path, Path]:
    import trimesh

    meshes = tmp_path / "project" / "meshes"
    meshes.mkdir(parents=True)
    mesh = meshes / "cube.stl"
    trimesh.creation.box(extents=(0.1, 0.2, 0.3)).export(mesh)
    scenes = tmp_path / "project" / "scenes"
    scenes.mkdir()
    scene = scenes / "cube.yaml"
    scene.write_text(MESH_SCENE.replace("MESHFILE", str(mesh) if absolute else "../meshes/cube.stl"))
    return scene, meshes


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_scene_and_meshes_travel_as_bytes(tmp_path: Path, absolute: bool) -> None:
    scene, meshes = _mesh_scene(tmp_path, absolute)
    plan = plan_sweep(str(scene), parse_params(["bodies.cube.density=1000,2000"]))
    case = plan.cases[1]  # cases are derived when asked for: before the files go
    payload = plan.payload(case, attempt=1)
    assert [data[:5] for _, data in payload.files] == [meshes.joinpath("cube.stl").read_bytes()[:5]]
    shutil.rmtree(tmp_path / "project")  # the worker has no shared disk: only the bytes
    outcome = run_case(payload)
    assert outcome.status == "completed", outcome.message
    assert outcome.kind == "ok" and outcome.summary["steps"] == 2
    out = tmp_path / "case.h5"
    out.write_bytes(outcome.data)
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "completed"
        assert f.attrs[HASH_ATTR] == case.case_hash
        assert json.loads(f.attrs[PARAMETERS_ATTR]) == {"bodies.cube.density": 2000}
        scene_text = f["scene"][()].decode()
    assert "density: 2000" in scene_text
    assert ("_abs/0/cube.stl" in scene_text) == absolute


def test_a_missing_mesh_is_found_on_the_client(tmp_path: Path) -> None:
    scene, meshes = _mesh_scene(tmp_path)
    (meshes / "cube.stl").rename(meshes / "other.stl")
    with pytest.raises(SceneError, match="bodies\\[0\\].shapes\\[0\\].file: .*mesh file not found"):
        plan_sweep(str(scene), parse_params(["bodies.cube.density=1000,2000"]))


def test_failures_come_back_as_outcomes() -> None:
    failing = ["solver.integrator=euler", "solver.projection.position=false", "solver.projection.velocity=false"]
    failing.append("solver.max_violation=1e-12")
    plan = plan_sweep(str(PENDULUM), parse_params(["bodies.bob.mass=1,2"]), overrides=(*SHORT, *failing))
    outcome = run_case(plan.payload(plan.cases[0], 1))
    assert (outcome.status, outcome.kind) == ("failed", "simulation")
    assert "passed solver.max_violation" in outcome.message
    assert outcome.data is not None and outcome.summary["status"] == "failed"  # the partial file comes back
    # a scene error only the compile step finds (a second solver section is checked on the
    # client too, so break the payload by hand): named with the user's file, not the worker's
    plan = plan_sweep(str(PENDULUM), parse_params(["bodies.bob.mass=1,2"]), overrides=SHORT)
    payload = plan.payload(plan.cases[0], 1)
    broken = type(payload)(**{**payload.__dict__, "overrides": (*payload.overrides, "solver.method=nope")})
    outcome = run_case(broken)
    assert (outcome.status, outcome.kind, outcome.data) == ("failed", "scene", None)
    assert outcome.message.startswith("--set: solver.method: unknown method 'nope'")


# ----------------------------------------------------------------------------- resume and table


def test_only_a_completed_file_of_the_same_case_counts(tmp_path: Path) -> None:
    plan = plan_sweep(str(PENDULUM), parse_params(["bodies.bob.mass=1,2"]), overrides=SHORT)
    outcome = run_case(plan.payload(plan.cases[0], 1))
    path = tmp_path / "case.h5"
    write_atomic(path, outcome.data)
    assert not list(tmp_path.glob(".*tmp"))
    summary = read_completed(path, plan.cases[0].case_hash)
    assert summary["steps"] == 10 and summary["status"] == "completed"
    assert read_completed(path, plan.cases[1].case_hash) is None  # another case
    assert read_completed(tmp_path / "missing.h5", plan.cases[0].case_hash) is None
    with h5py.File(path, "a") as f:
        assert json.loads(f.attrs[SUMMARY_ATTR])["steps"] == 10
        f.attrs["status"] = "failed"
    assert read_completed(path, plan.cases[0].case_hash) is None  # failed: run again
    path.write_bytes(outcome.data[: len(outcome.data) // 2])
    assert read_completed(path, plan.cases[0].case_hash) is None  # truncated: run again


def _result(rows: list[SweepRow], asserts: tuple[str, ...] = (), interrupted: bool = False) -> SweepResult:
    return SweepResult(
        scene="s",
        scene_file="s.yaml",
        outdir="out",
        overrides=[],
        params=[{"key": "time.step", "values": [0.01, 0.02]}],
        zipped=False,
        cluster="test",
        retries=1,
        assertions=list(asserts),
        rows=rows,
        interrupted=interrupted,
    )


def test_table_formats_and_exit_codes() -> None:
    checks = parse_assertions(["energy_drift < 1e-3"])
    good = SweepRow(1, "step-0.01.h5", {"time.step": 0.01}, "completed", "run", 1)
    good.set_summary({"steps": 10, "wall_time_s": 0.5, "energy_drift": 1e-6, "max_position_violation": 1e-15})
    good.assertions = [o.to_dict() for o in [checks[0].evaluate({"energy_drift": 1e-6})]]
    bad = SweepRow(2, "step-0.02.h5", {"time.step": 0.02}, "completed", "resumed", 0)
    bad.set_summary({"steps": 5, "energy_drift": 1e-2})
    bad.assertions = [checks[0].evaluate({"energy_drift": 1e-2}).to_dict()]
    result = _result([good, bad], ("energy_drift < 1e-3",))
    assert result.exit_code == 4
    rows = list(csv.DictReader(io.StringIO(render(result, "csv"))))
    assert [r["case"] for r in rows] == ["1", "2"]
    assert rows[0]["time.step"] == "0.01" and rows[0]["assert: energy_drift < 1e-3"] == "held"
    assert rows[1]["assert: energy_drift < 1e-3"] == "FAILED" and rows[1]["source"] == "resumed"
    assert float(rows[0]["energy_drift"]) == 1e-6 and rows[1]["wall_s"] == ""
    table = render(result, "table")
    assert "case 2: assertion 1 failed: energy_drift < 1e-3 (energy_drift = 0.01)" in table
    md = render(result, "markdown")
    assert "| case | time.step | status | source | tries |" in md
    data = json.loads(render(result, "json"))
    assert data["format"] == "mbsim-sweep" and data["exit_code"] == 4
    assert data["counts"] == {
        "cases": 2,
        "completed": 2,
        "failed": 0,
        "interrupted": 0,
        "resumed": 1,
        "run": 1,
        "retried": 0,
        "assertions_failed": 1,
    }
    bad.status = "failed"
    assert result.exit_code == 3  # a failed case before a failed assertion
    assert _result([good], interrupted=True).exit_code == 130
    assert _result([good]).exit_code == 0
