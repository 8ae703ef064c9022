"""Malformed scenes are refused before anything is simulated or written (CONTRACT §2, exit code 2).

Each case is a small valid scene with one edit. The edited line carries the comment ``#<``; the
error message must name the scene file with exactly that line, the dotted key path of the offending
value and what was wrong, with no traceback and no result file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("in_tmp_path")

MARK = "  #<"  # marks the line the error message must point at

SCENE_3D = """\
mbsim: 1
name: two boxes
dimension: 3
gravity: [0, 0, -9.8]
time: {end: 0.01, step: 0.005}
solver:
  method: lagrange
  integrator: rk4
bodies:
  - name: box1
    mass: 1.0
    inertia: [1, 1, 1]
    position: [0, 0, -1]
  - name: box2
    mass: 2.0
    inertia: [2, 2, 2]
    position: [0, 0, -2]
joints:
  - {name: j0, type: spherical, body1: ground, body2: box1, point: [0, 0, 0]}
  - {name: j1, type: revolute, body1: box1, body2: box2, point: [0, 0, -1.5], axis: [1, 0, 0]}
"""

SCENE_2D = """\
mbsim: 1
name: planar bar
dimension: 2
gravity: [0, -9.81]
time: {end: 0.01, step: 0.005}
bodies:
  - name: bar
    mass: 1.0
    inertia: 0.1
    position: [0, -1]
joints:
  - {name: pivot, type: revolute, body1: ground, body2: bar, point: [0, 0]}
"""


@dataclass(frozen=True)
class Case:
    """One malformed scene: its text, the key path and message fragments the error must show."""

    id: str
    text: str
    key_path: str | None  # None: the error has no key path (YAML that does not parse)
    fragments: tuple[str, ...]

    @property
    def line(self) -> int:
        lines = [k for k, text in enumerate(self.text.splitlines(), start=1) if text.endswith(MARK)]
        assert len(lines) == 1, f"case {self.id}: mark exactly one line"
        return lines[0]


def edit(base: str, old: str, new: str) -> str:
    """Replace the one occurrence of ``old`` in ``base``."""
    assert base.count(old) == 1, f"'{old}' must occur exactly once"
    return base.replace(old, new)


def case(id: str, base: str, old: str, new: str, key_path: str | None, *fragments: str) -> Case:
    return Case(id, edit(base, old, new), key_path, fragments)


J1 = "  - {name: j1, type: revolute, body1: box1, body2: box2, point: [0, 0, -1.5], axis: [1, 0, 0]}"
IMPORT = "__import__('os').getcwd()"
BALL = "    shapes: [{type: sphere, radius: 0.1}]\n"  # rigid contact needs shapes on both bodies

# fmt: off
CASES = [
    # unknown keys, with "did you mean"
    case("top_level_typo", SCENE_3D, "gravity: [0, 0, -9.8]", f"gravty: [0, 0, -9.8]{MARK}", "gravty",
         "unknown key 'gravty'", "did you mean 'gravity'?"),
    case("body_key_typo", SCENE_3D, "    inertia: [2, 2, 2]", f"    inertai: [2, 2, 2]{MARK}", "bodies[1].inertai",
         "unknown key 'inertai'", "did you mean 'inertia'?"),
    case("joint_key_typo", SCENE_3D, J1, J1.replace("axis:", "axiz:") + MARK, "joints[1].axiz",
         "no key 'axiz'", "did you mean 'axis'?"),
    case("joint_key_of_other_type", SCENE_3D, "point: [0, 0, 0]}", f"point: [0, 0, 0], axis: [0, 0, 1]}}{MARK}",
         "joints[0].axis", "spherical joint has no key 'axis'"),
    case("solver_option_typo", SCENE_3D, "  integrator: rk4",
         f"  integrator: rk4\n  projecton: {{position: true}}{MARK}", "solver.projecton",
         "unknown key 'projecton'", "did you mean 'projection'?"),
    case("projection_option_typo", SCENE_3D, "  integrator: rk4",
         f"  integrator: rk4\n  projection: {{positon: true}}{MARK}", "solver.projection.positon",
         "did you mean 'position'?"),
    # wrong types and values
    case("mass_text", SCENE_3D, "    mass: 1.0", f"    mass: abc{MARK}", "bodies[0].mass", "'abc'"),
    case("mass_list", SCENE_3D, "    mass: 1.0", f"    mass: [1, 2]{MARK}", "bodies[0].mass",
         "expected a positive number", "got a list of 2"),
    case("mass_negative", SCENE_3D, "    mass: 2.0", f"    mass: -2{MARK}", "bodies[1].mass",
         "expected a positive number", "got -2"),
    case("mass_zero_by_expression", SCENE_3D, "    mass: 2.0", f"    mass: '2 - 2*1'{MARK}", "bodies[1].mass",
         "expected a positive number", "got 0"),
    case("inertia_not_positive_definite", SCENE_3D, "    inertia: [2, 2, 2]", f"    inertia: [1, 1, -1]{MARK}",
         "bodies[1].inertia", "not positive definite"),
    case("inertia_triangle_inequality", SCENE_3D, "    inertia: [2, 2, 2]", f"    inertia: [1, 1, 5]{MARK}",
         "bodies[1].inertia", "triangle inequality"),
    case("inertia_matrix_not_symmetric", SCENE_3D, "    inertia: [1, 1, 1]",
         f"    inertia: [[1, 0.1, 0], [0, 1, 0], [0, 0, 1]]{MARK}", "bodies[0].inertia", "symmetric"),
    case("inertia_wrong_length", SCENE_3D, "    inertia: [1, 1, 1]", f"    inertia: [1, 1]{MARK}",
         "bodies[0].inertia", "3 principal values or a 3x3 matrix", "got a list of 2"),
    case("mass_and_density", SCENE_3D, "  - name: box1\n    mass: 1.0",
         f"  - name: box1{MARK}\n    mass: 1.0\n    density: 1000\n    shapes: [{{type: sphere, radius: 0.1}}]",
         "bodies[0]", "either mass", "or density"),
    case("zero_joint_axis", SCENE_3D, J1, J1.replace("axis: [1, 0, 0]", "axis: [0, 0, 0]") + MARK,
         "joints[1].axis", "non-zero vector"),
    case("unknown_body_in_joint", SCENE_3D, J1, J1.replace("body2: box2", "body2: boxx2") + MARK,
         "joints[1].body2", "unknown body 'boxx2'", "did you mean 'box2'?"),
    case("joint_to_itself", SCENE_3D, J1, J1.replace("body2: box2", "body2: box1") + MARK,
         "joints[1].body2", "must differ"),
    case("duplicate_body_name", SCENE_3D, "  - name: box2", f"  - name: box1{MARK}", "bodies[1].name",
         "duplicate body name 'box1'"),
    case("duplicate_joint_name", SCENE_3D, J1, J1.replace("name: j1", "name: j0") + MARK, "joints[1].name",
         "duplicate name 'j0'"),
    case("body_named_ground", SCENE_3D, "  - name: box2", f"  - name: ground{MARK}", "bodies[1].name",
         "'ground' is reserved"),
    case("vector_3_in_2d", SCENE_2D, "    position: [0, -1]", f"    position: [0, -1, 0]{MARK}",
         "bodies[0].position", "expected a list of 2 numbers", "got a list of 3"),
    case("vector_2_in_3d", SCENE_3D, "    position: [0, 0, -2]", f"    position: [0, -2]{MARK}",
         "bodies[1].position", "expected a list of 3 numbers", "got a list of 2"),
    case("gravity_2_in_3d", SCENE_3D, "gravity: [0, 0, -9.8]", f"gravity: [0, -9.8]{MARK}", "gravity",
         "expected a list of 3 numbers"),
    case("missing_mesh_file", SCENE_3D, "    position: [0, 0, -2]",
         f"    position: [0, 0, -2]\n    shapes: [{{type: mesh, file: no_such_mesh.stl}}]{MARK}",
         "bodies[1].shapes[0].file", "no_such_mesh.stl"),
    case("unknown_joint_type", SCENE_3D, J1, J1.replace("type: revolute", "type: revolut") + MARK,
         "joints[1].type", "unknown joint type 'revolut'", "did you mean 'revolute'?"),
    case("spherical_in_2d", SCENE_2D, "type: revolute, body1: ground, body2: bar, point: [0, 0]}",
         f"type: spherical, body1: ground, body2: bar, point: [0, 0]}}{MARK}", "joints[0].type", "'spherical'",
         "2D"),
    case("unknown_method", SCENE_3D, "  method: lagrange", f"  method: lagrang{MARK}", "solver.method",
         "unknown method 'lagrang'", "did you mean 'lagrange'?"),
    case("unknown_integrator", SCENE_3D, "  integrator: rk4", f"  integrator: rk5{MARK}", "solver.integrator",
         "unknown integrator 'rk5'", "did you mean 'rk4'?"),
    Case("rigid_contact_needs_timestepping",
         edit(SCENE_3D, J1, f"{J1}\ncontacts:\n  - {{type: rigid, body1: box1, body2: box2}}{MARK}")
         .replace("    position: [0, 0, -1]\n", f"    position: [0, 0, -1]\n{BALL}")
         .replace("    position: [0, 0, -2]\n", f"    position: [0, 0, -2]\n{BALL}"),
         "contacts[0].type", ("timestepping",)),
    case("format_version", SCENE_3D, "mbsim: 1", f"mbsim: 2{MARK}", "mbsim", "<= 1", "got 2"),
    case("dimension", SCENE_3D, "dimension: 3", f"dimension: 4{MARK}", "dimension", "expected one of 2, 3"),
    case("zero_time_step", SCENE_3D, "time: {end: 0.01, step: 0.005}", f"time: {{end: 0.01, step: 0}}{MARK}",
         "time.step", "expected a positive number"),
    Case("missing_time",
         edit(SCENE_3D, "mbsim: 1\n", f"mbsim: 1{MARK}\n").replace("time: {end: 0.01, step: 0.005}\n", ""),
         "time", ("missing required key 'time'",)),
    Case("missing_body_position",
         edit(SCENE_3D, "  - name: box2", f"  - name: box2{MARK}").replace("    position: [0, 0, -2]\n", ""),
         "bodies[1].position", ("missing required key 'position'",)),
    case("quaternion_not_unit", SCENE_3D, "    position: [0, 0, -1]",
         f"    position: [0, 0, -1]\n    orientation: {{quaternion: [1, 1, 0, 0]}}{MARK}",
         "bodies[0].orientation.quaternion", "unit quaternion"),
    case("euler_sequence", SCENE_3D, "    position: [0, 0, -1]",
         f"    position: [0, 0, -1]\n    orientation: {{euler: {{sequence: ZXq, angles: [0, 0, 0]}}}}{MARK}",
         "bodies[0].orientation.euler.sequence", "'ZXq'"),
    case("universal_axes_not_perpendicular", SCENE_3D, J1,
         J1.replace("revolute", "universal").replace("axis: [1, 0, 0]", "axes: [[1, 0, 0], [1, 1, 0]]") + MARK,
         "joints[1].axes", "perpendicular"),
    case("reserved_parameter_name", SCENE_3D, "dimension: 3", f"dimension: 3\nparameters: {{t: 1}}{MARK}",
         "parameters.t", "'t'"),
    case("force_on_unknown_body", SCENE_2D, "point: [0, 0]}",
         f"point: [0, 0]}}\nforces:\n  - {{type: torque, body: baar, value: 1}}{MARK}", "forces[0].body",
         "'baar'", "did you mean 'bar'?"),
    case("unknown_force_type", SCENE_2D, "point: [0, 0]}",
         f"point: [0, 0]}}\nforces:\n  - {{type: torq, body: bar, value: 1}}{MARK}", "forces[0].type",
         "did you mean 'torque'?"),
    # YAML itself
    case("yaml_syntax", SCENE_3D, "  method: lagrange\n", f"  method: lagrange: fast{MARK}\n", None, "not valid YAML"),
    case("yaml_duplicate_key", SCENE_3D, "  integrator: rk4", f"  integrator: rk4\n  method: gauss{MARK}",
         "solver.method", "duplicate key 'method'"),
    case("yaml_python_tag", SCENE_3D, "    mass: 1.0", f"    mass: !!python/object:os.system ls{MARK}",
         "bodies[0].mass", "unsupported YAML value"),
    # expressions
    case("expression_unknown_name", SCENE_3D, "    mass: 1.0", f"    mass: 2*foo{MARK}", "bodies[0].mass",
         "unknown name 'foo'", "2*foo"),
    case("expression_attribute", SCENE_3D, "    mass: 1.0", f"    mass: pi.real{MARK}", "bodies[0].mass",
         "attribute access", ".real"),
    case("expression_import", SCENE_3D, "    mass: 1.0", f'    mass: "{IMPORT}"{MARK}', "bodies[0].mass",
         "__import__"),
    case("expression_import_in_parameter", SCENE_3D, "dimension: 3",
         f"dimension: 3\nparameters:\n  L: \"__import__('os')\"{MARK}", "parameters.L", "'__import__'"),
    case("expression_t_in_constant", SCENE_3D, "    mass: 1.0", f"    mass: 1 + t{MARK}", "bodies[0].mass",
         "unknown name 't'"),
    case("expression_syntax", SCENE_3D, "    mass: 1.0", f"    mass: '2*(1 + '{MARK}", "bodies[0].mass",
         "syntax error"),
    case("expression_wrong_arity", SCENE_3D, "    mass: 1.0", f"    mass: 'sin(1, 2)'{MARK}", "bodies[0].mass",
         "sin()", "1 argument"),
    case("force_expression_state_of_other_dimension", SCENE_3D, J1,
         f"{J1}\nforces:\n  - {{type: torque, body: box2, value: [angle, 0, 0]}}{MARK}", "forces[0].value[0]",
         "unknown name 'angle'"),
    case("drive_expression_name", SCENE_3D, J1, J1.replace("}", ", drive: {position: 'x*t'}}") + MARK,
         "joints[1].drive.position", "unknown name 'x'"),
]
# fmt: on
CASE_BY_ID = {c.id: c for c in CASES}
assert len(CASE_BY_ID) == len(CASES), "case ids must be unique"


def check_refused(result, scene: Path, c: Case, out: Path) -> None:
    """Exit 2, a located message on stderr, no traceback, nothing written."""
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert "Traceback" not in result.output
    assert f"{scene}:{c.line}:" in err, err
    if c.key_path is not None:
        assert f": {c.key_path}: " in err, err
    for fragment in c.fragments:
        assert fragment in err, err
    assert len(err.strip().splitlines()) == 1, "one line, not a dump"
    assert not out.exists()


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_run_refuses_malformed_scene(c: Case, write_scene, mbsim, tmp_path: Path) -> None:
    scene = write_scene(c.text)
    out = tmp_path / "result.h5"
    result = mbsim("run", scene, "-o", out)
    check_refused(result, scene, c, out)
    assert result.stdout == ""
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(
    "case_id",
    [
        "top_level_typo",
        "inertia_triangle_inequality",
        "unknown_body_in_joint",
        "unknown_method",
        "missing_mesh_file",
        "spherical_in_2d",
        "expression_import",
        "yaml_duplicate_key",
    ],
)
def test_validate_refuses_malformed_scene(case_id: str, write_scene, mbsim, tmp_path: Path) -> None:
    c = CASE_BY_ID[case_id]
    scene = write_scene(c.text)
    result = mbsim("validate", scene)
    check_refused(result, scene, c, tmp_path / "outputs")
    assert sorted(p.name for p in tmp_path.iterdir()) == [scene.name]


def test_base_scenes_are_valid(write_scene, mbsim, tmp_path: Path) -> None:
    """The cases above fail because of their one edit, not because the base scenes are wrong."""
    for name, text in (("s3.yaml", SCENE_3D), ("s2.yaml", SCENE_2D)):
        out = tmp_path / f"{name}.h5"
        result = mbsim("run", write_scene(text, name), "-o", out, "--quiet")
        assert result.exit_code == 0, result.output
        assert out.is_file()


def test_debug_shows_the_traceback(write_scene, mbsim) -> None:
    scene = write_scene(CASE_BY_ID["top_level_typo"].text)
    result = mbsim("run", scene, "--debug")
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert "did you mean 'gravity'?" in result.stderr


def test_json_mode_reports_the_error_as_json(write_scene, mbsim, tmp_path: Path) -> None:
    import json

    c = CASE_BY_ID["unknown_body_in_joint"]
    scene = write_scene(c.text)
    result = mbsim("run", scene, "-o", tmp_path / "r.h5", "--json")
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report["status"] == "error"
    assert report["exit_code"] == 2
    assert f"{scene}:{c.line}:" in report["message"]
    assert "joints[1].body2" in report["message"]


@pytest.mark.parametrize(
    "where",
    ["mass", "parameter", "gravity", "drive", "force", "time_end"],
)
def test_expression_code_is_never_executed(where: str, write_scene, mbsim, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    payload = f"__import__('os').system('touch {marker}')"
    text = {
        "mass": edit(SCENE_3D, "    mass: 1.0", f'    mass: "{payload}"'),
        "parameter": edit(SCENE_3D, "dimension: 3", f'dimension: 3\nparameters: {{p: "{payload}"}}'),
        "gravity": edit(SCENE_3D, "gravity: [0, 0, -9.8]", f'gravity: [0, 0, "{payload}"]'),
        "drive": edit(SCENE_3D, J1, J1.replace("}", f', drive: {{position: "{payload}"}}}}')),
        "force": edit(
            SCENE_2D, "point: [0, 0]}", f'point: [0, 0]}}\nforces:\n  - {{type: torque, body: bar, value: "{payload}"}}'
        ),
        "time_end": edit(SCENE_2D, "end: 0.01", f'end: "{payload}"'),
    }[where]
    scene = write_scene(text)
    for command in (("validate", scene), ("run", scene, "-o", tmp_path / "r.h5")):
        result = mbsim(*command)
        assert result.exit_code == 2, result.output
        assert "__import__" in result.stderr
        assert "Traceback" not in result.output
    assert not marker.exists()
    assert not (tmp_path / "r.h5").exists()


# --set errors are errors of the command line: the message names --set and the key instead of a line
SET_CASES = [
    ("time.end", "expects KEY=VALUE"),
    ("=3", "bad key"),
    ("time..end=1", "bad key 'time..end'"),
    ("bodies.boxx.mass=2", "no item named 'boxx' in bodies"),
    ("joints.j9.axis=[0, 1, 0]", "no item named 'j9' in joints"),
    ("bodies[5].mass=2", "index 5 out of range"),
    ("time[0]=1", "'time' is a mapping, not a list"),
    ("time.end.x=1", "'time.end' is a value"),
    ("time.end=[1,", "cannot read the value"),
    ("bodies.box1.mas=2", "did you mean 'mass'?"),
    ("bodies.box1.mass=-3", "expected a positive number"),
    ("solver.method=gaus", "unknown method 'gaus'"),
    ("time.end=__import__('os')", "__import__"),
]


@pytest.mark.parametrize(("assignment", "fragment"), SET_CASES, ids=[a for a, _ in SET_CASES])
def test_bad_set_is_refused(assignment: str, fragment: str, write_scene, mbsim, tmp_path: Path) -> None:
    scene = write_scene(SCENE_3D)
    out = tmp_path / "result.h5"
    result = mbsim("run", scene, "-o", out, "--set", assignment)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("mbsim: scene error: --set: "), result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()


def test_set_error_names_the_dotted_path(write_scene, mbsim) -> None:
    result = mbsim("validate", write_scene(SCENE_3D), "--set", "bodies.box2.inertia=[1, 1, 5]")
    assert result.exit_code == 2
    assert "--set: bodies[1].inertia: " in result.stderr
    assert "triangle inequality" in result.stderr
