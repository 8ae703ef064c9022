"""Hostile or malformed scene input is refused promptly, in bounded memory, with exit 2 (CONTRACT §2).

Every case is a small valid scene with one hostile edit, or a hostile ``--set``. The refusal must
name where (the file and line, or ``--set``), the dotted key path when there is one, and what was
wrong, on one line and without a traceback. The cases that used to hang or eat gigabytes (an alias
bomb, huge exponents, a step of 1e-300) also run in a subprocess with a timeout.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mbsim.scene.load import MAX_SCENE_BYTES, MAX_VALUES

pytestmark = pytest.mark.usefixtures("in_tmp_path")

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

SCENE_3D = """\
mbsim: 1
name: box
gravity: [0, 0, -9.8]
time: {end: 0.01, step: 0.005}
bodies:
  - name: box1
    mass: 1.0
    inertia: [1, 1, 1]
    position: [0, 0, -1]
joints:
  - {name: j0, type: spherical, body1: ground, body2: box1, point: [0, 0, 0]}
"""

POSITION_3D = "    position: [0, 0, -1]\n"


def edit(base: str, old: str, new: str) -> str:
    """Replace the one occurrence of ``old`` in ``base``."""
    assert base.count(old) == 1, f"'{old}' must occur exactly once"
    return base.replace(old, new)


def orientation(value: str) -> str:
    """The 3D scene with ``orientation: value`` on line 10."""
    return edit(SCENE_3D, POSITION_3D, f"{POSITION_3D}    orientation: {value}\n")


def alias_bomb(levels: int) -> str:
    """The billion laughs: each level a list of 9 aliases of the one before (9**levels values)."""
    lines = ["  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]" for k in range(1, levels + 1)]
    return SCENE_2D + "description:\n" + "\n".join(lines) + "\n"


def alias_bomb_flow(levels: int) -> str:
    """The same bomb as one flow mapping, for a ``--set`` value."""
    first = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"
    rest = [f"l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9)}]" for k in range(1, levels + 1)]
    return "{" + ", ".join([first, *rest]) + "}"


def deep_block_mapping(depth: int) -> str:
    """``description`` as mappings nested ``depth`` levels, one more space of indent per level."""
    lines = [" " * (k + 1) + "k:" for k in range(depth)]
    return SCENE_2D + "description:\n" + "\n".join(lines) + "\n" + " " * (depth + 1) + "v\n"


# meshes are written next to the scene; each is a (file name, bytes) pair
def _mesh_scene(name: str) -> str:
    return edit(SCENE_3D, POSITION_3D, f"{POSITION_3D}    shapes: [{{type: mesh, file: {name}}}]\n")


TETRAHEDRON = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
GLTF_TO_DEV_ZERO = json.dumps({"asset": {"version": "2.0"}, "buffers": [{"uri": "/dev/zero", "byteLength": 8}]})


@dataclass(frozen=True)
class Case:
    """One hostile input and what its refusal must say.

    ``where`` is ``"--set"`` for an error of the command line, else the line of the scene file
    the message must point at (0: the file, no line). ``key_path`` is the dotted path the message
    must show (None: none is expected).
    """

    id: str
    scene: str | bytes | Callable[[], str | bytes]  # a function for the large ones (made when run)
    where: int | str
    key_path: str | None
    fragments: tuple[str, ...]
    args: tuple[str, ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()


def case(
    id: str,
    scene: str | bytes | Callable[[], str | bytes],
    where: int | str,
    key_path: str | None,
    *fragments: str,
    **kw,
) -> Case:
    return Case(id, scene, where, key_path, fragments, **kw)


def set_case(id: str, assignment: str, key_path: str | None, *fragments: str) -> Case:
    return Case(id, SCENE_2D, "--set", key_path, fragments, args=("--set", assignment))


MASS = "    mass: 1.0"  # line 8 of both scenes

# fmt: off
CASES = [
    # YAML structure
    case("alias_bomb", alias_bomb(9), 20, "description.l6[0]", f"more than {MAX_VALUES} values", "aliases"),
    case("deep_flow_list", lambda: SCENE_2D + "description: " + "[" * 100_000 + "]" * 100_000 + "\n", 13, None,
         "nested more than 100 levels deep", "description[0][0]"),
    case("deep_flow_mapping", SCENE_2D + "description: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", 13, None,
         "nested more than 100 levels deep", "description.a.a"),
    case("deep_block_mapping", lambda: deep_block_mapping(5000), 113, None, "nested more than 100 levels deep"),
    case("top_level_list", "- mbsim: 1\n- name: x\n", 1, None, "expected a mapping at the top", "got a list of 2"),
    case("top_level_scalar", "just text\n", 1, None, "expected a mapping at the top", "'just text'"),
    case("empty_file", "", 1, None, "expected a mapping at the top", "got nothing"),
    case("binary_junk", bytes(range(256)) * 64, 2, None, "not UTF-8 text", "0x80"),
    case("latin1", edit(SCENE_2D, "planar bar", "caf\xe9").encode("latin-1"), 2, None, "not UTF-8 text", "0xe9"),
    case("nul_byte", edit(SCENE_2D, "planar bar", "planar\x00bar"), 2, None, "U+0000 is not allowed"),
    case("tab_indent", edit(SCENE_2D, MASS, "\tmass: 1.0"), 8, None, "not valid YAML", "tab"),
    case("duplicate_key", edit(SCENE_2D, MASS, f"{MASS}\n    mass: 2.0"), 9, "bodies[0].mass",
         "duplicate key 'mass'"),
    case("list_as_key", SCENE_2D + "? [a, b]\n: 1\n", 13, None, "mapping keys must be plain names", "a list"),
    case("number_as_key", SCENE_2D + "1: 2\n", 13, "1", "unknown key '1'"),
    case("python_object_tag", edit(SCENE_2D, MASS, "    mass: !!python/object:os.system ls"), 8,
         "bodies[0].mass", "unsupported YAML value", "!!python/object:os.system"),
    case("python_name_key", SCENE_2D + "!!python/name:os.system : 1\n", 13, None,
         "mapping keys must be plain names", "!!python/name:os.system"),
    case("set_tag", SCENE_2D + "description: !!set {a, b}\n", 13, "description", "unsupported YAML tag '!!set'"),
    case("two_documents", SCENE_2D + "---\nname: other\n", 13, None, "expected one YAML document"),
    case("undefined_alias", SCENE_2D + "description: *nothing\n", 13, "description", "no anchor &nothing"),
    case("recursive_alias", SCENE_2D + "description: &a [1, *a]\n", 13, "description[1]",
         "refers to a value that contains it"),
    case("impossible_date", SCENE_2D + "description: 2001-13-45\n", 13, "description", "'2001-13-45'",
         "month must be in 1..12"),
    case("very_long_line", lambda: SCENE_2D + "description: " + "x" * 2_000_000 + "\n", 13, "description",
         "a text of 2000000 characters"),
    case("very_long_name", edit(SCENE_2D, "planar bar", "n" * 10_000), 2, "name",
         "at most 200 are allowed", "(10000 characters)"),
    case("file_too_large", lambda: SCENE_2D + "description: " + "x" * (50 << 20) + "\n", 0, None,
         f"at most {MAX_SCENE_BYTES}", "16 MiB", "50.0 MiB"),
    # numbers
    case("integer_5000_digits", edit(SCENE_2D, MASS, "    mass: " + "9" * 5000), 8, "bodies[0].mass",
         "a number written with 5000 characters"),
    case("integer_400_digits", edit(SCENE_2D, MASS, "    mass: " + "9" * 400), 8, "bodies[0].mass",
         "expected a finite number", "400 digits"),
    case("integer_1990_digits_in_expression", edit(SCENE_2D, MASS, f"    mass: '{'9' * 1990}'"), 8,
         "bodies[0].mass", "1990 digits", "too large for a float"),
    case("inf", edit(SCENE_2D, MASS, "    mass: .inf"), 8, "bodies[0].mass", "expected a finite number", "inf"),
    case("nan_in_vector", edit(SCENE_2D, "position: [0, -1]", "position: [.nan, -1]"), 10,
         "bodies[0].position[0]", "expected a finite number", "nan"),
    case("1e999", edit(SCENE_2D, MASS, "    mass: 1e999"), 8, "bodies[0].mass", "expected a finite number"),
    case("huge_exponent", edit(SCENE_2D, MASS, "    mass: '10**10**10'"), 8, "bodies[0].mass",
         "expected a finite number", "'10**10**10'"),
    case("huge_exponent_parameter", edit(SCENE_2D, "gravity:", "parameters: {P: '9**9**9'}\ngravity:"), 4,
         "parameters.P", "expected a finite number", "'9**9**9'"),
    case("huge_exponent_drive", edit(SCENE_2D, "point: [0, 0]}", "point: [0, 0], drive: {position: '10**10**10'}}"),
         12, "joints[0].drive.position", "expected a finite value", "'10**10**10'"),
    case("chained_comparison", edit(SCENE_2D, MASS, "    mass: '" + "<".join(["1"] * 900) + "'"), 8,
         "bodies[0].mass", "nested more than 100 levels deep"),
    case("import", edit(SCENE_2D, MASS, "    mass: \"__import__('os').system('true')\""), 8, "bodies[0].mass",
         "only calls of plain function names"),
    case("lambda", edit(SCENE_2D, MASS, "    mass: '(lambda: 1)()'"), 8, "bodies[0].mass", "lambda"),
    case("dunder_attribute", edit(SCENE_2D, MASS, "    mass: '(1).__class__'"), 8, "bodies[0].mass",
         "attribute access", "__class__"),
    # orientation
    case("euler_ZZX", orientation("{euler: {sequence: ZZX, angles: [0, 0, 0]}}"), 10,
         "bodies[0].orientation.euler.sequence", "no axis twice in a row", "'ZZX'"),
    case("euler_sequence_number", orientation("{euler: {sequence: 123, angles: [0, 0, 0]}}"), 10,
         "bodies[0].orientation.euler.sequence", "expected a non-empty text", "123"),
    case("euler_two_angles", orientation("{euler: {sequence: ZXZ, angles: [0, 0]}}"), 10,
         "bodies[0].orientation.euler.angles", "expected a list of 3 numbers", "a list of 2"),
    case("axis_of_zero_length", orientation("{axis_angle: {axis: [0, 0, 0], angle: 1}}"), 10,
         "bodies[0].orientation.axis_angle.axis", "non-zero vector"),
    case("axis_of_two", orientation("{axis_angle: {axis: [1, 0], angle: 1}}"), 10,
         "bodies[0].orientation.axis_angle.axis", "a list of 3 numbers"),
    case("quaternion_text", orientation("{quaternion: wxyz}"), 10, "bodies[0].orientation.quaternion",
         "a list of 4 numbers", "'wxyz'"),
    case("orientation_text", orientation("upright"), 10, "bodies[0].orientation",
         "exactly one of euler, quaternion, axis_angle"),
    case("quaternion_overflow", orientation("{quaternion: [1e300, 1e300, 0, 0]}"), 10,
         "bodies[0].orientation.quaternion", "unit quaternion", "norm inf"),
    case("inertia_overflow", edit(SCENE_3D, "[1, 1, 1]", "[1.7e308, 1.7e308, 1.7e308]"), 8, "bodies[0].inertia",
         "overflow"),
    # time and output
    case("step_1e-300", edit(SCENE_2D, "step: 0.005", "step: 1e-300"), 5, "time.step", "solver.max_steps",
         "1e+298 steps"),
    case("end_1e300", edit(SCENE_2D, "end: 0.01", "end: 1e300"), 5, "time.step", "solver.max_steps"),
    case("every_1e300", SCENE_2D + "output: {every: 1e300}\n", 13, "output.every", "solver.max_steps"),
    # merge keys keep the line where a merged value was written
    case("merged_value_keeps_its_line",  # box2 merges box1 and keeps its name: blame where the name was written
         edit(SCENE_3D, "  - name: box1\n    mass: 1.0\n    inertia: [1, 1, 1]\n    position: [0, 0, -1]\n",
              "  - &box {name: box1, mass: 1.0, inertia: [1, 1, 1], position: [0, 0, -1]}\n"
              "  - <<: *box\n    position: [0, 0, -2]\n"),
         6, "bodies[1].name", "duplicate body name 'box1'"),
    case("description_mapping", SCENE_2D + "description: {a: 1}\n", 13, "description", "expected a text",
         "a mapping"),
    case("merge_of_a_number", edit(SCENE_2D, "  - name: bar\n", "  - name: bar\n    <<: 3\n"), 8,
         "bodies[0].<<", "a merge key '<<' expects a mapping"),
    # meshes
    case("mesh_random_bytes", _mesh_scene("part.stl"), 10, "bodies[0].shapes[0].file", "part.stl",
         "not an STL file", files=(("part.stl", bytes(range(256)) * 12),)),
    case("mesh_empty_obj", _mesh_scene("part.obj"), 10, "bodies[0].shapes[0].file", "part.obj", "empty",
         files=(("part.obj", b""),)),
    case("mesh_obj_not_utf8", _mesh_scene("part.obj"), 10, "bodies[0].shapes[0].file", "part.obj", "UTF-8",
         files=(("part.obj", b"# caf\xe9\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"),)),
    case("mesh_gltf_reads_dev_zero", _mesh_scene("part.gltf"), 10, "bodies[0].shapes[0].file", "/dev/zero",
         files=(("part.gltf", GLTF_TO_DEV_ZERO.encode()),)),
    case("mesh_is_a_directory", _mesh_scene("."), 10, "bodies[0].shapes[0].file", "is a directory"),
    case("mesh_scale_overflow", _mesh_scene("tetra.obj, scale: 1e300"), 10, "bodies[0].shapes[0].file",
         "too large, after scaling", files=(("tetra.obj", TETRAHEDRON),)),
    case("mesh_unknown_format", _mesh_scene("part.xyzw"), 10, "bodies[0].shapes[0].file",
         "not a mesh format trimesh reads", files=(("part.xyzw", b"1 2 3\n"),)),
    # --set
    set_case("set_nonexistent_path", "nonexistent.path=1", "nonexistent.path", "unknown key 'nonexistent'"),
    set_case("set_new_key_of_a_body", "bodies[0].colour.red=1", "bodies[0].colour.red", "unknown key 'colour'"),
    set_case("set_empty", "", None, "expects KEY=VALUE"),
    set_case("set_no_key", "=1", None, "bad key"),
    set_case("set_empty_part", "a..b=1", None, "bad key 'a..b'"),
    set_case("set_index_out_of_range", "bodies[99999999999].mass=1", "bodies[99999999999].mass",
             "index 99999999999 out of range"),
    set_case("set_index_5000_digits", "bodies[" + "9" * 5000 + "].mass=1", None, "is too large"),
    set_case("set_deep_value", "bodies[0]=" + "[" * 100_000 + "]" * 100_000, "bodies[0]",
             "nested more than 100 levels deep"),
    set_case("set_python_tag", "name=!!python/object/apply:os.system [ls]", "name", "unsupported YAML"),
    set_case("set_alias_bomb", "description=" + alias_bomb_flow(9), "description", f"more than {MAX_VALUES} values"),
    set_case("set_step_1e-300", "time.step=1e-300", "time.step", "solver.max_steps"),
    set_case("set_nan", "bodies[0].mass=.nan", "bodies[0].mass", "expected a finite number"),
]
# fmt: on
CASE_BY_ID = {c.id: c for c in CASES}
assert len(CASE_BY_ID) == len(CASES), "case ids must be unique"


def write_case(c: Case, tmp_path: Path) -> Path:
    scene = tmp_path / "hostile.yaml"
    text = c.scene() if callable(c.scene) else c.scene
    scene.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    for name, data in c.files:
        (tmp_path / name).write_bytes(data)
    return scene


def check_refused(c: Case, scene: Path, exit_code: int, stderr: str, output: str) -> None:
    """Exit 2, one located line on stderr with the key path and the reason, no traceback."""
    assert exit_code == 2, output[-2000:]
    assert "Traceback" not in output
    assert len(stderr.strip().splitlines()) == 1, "one line, not a dump"
    if c.where == "--set":
        assert stderr.startswith("mbsim: scene error: --set: "), stderr[:500]
    elif c.where == 0:
        assert stderr.startswith(f"mbsim: scene error: {scene}: "), stderr[:500]
    else:
        assert f"{scene}:{c.where}:" in stderr, stderr[:500]
    if c.key_path is not None:
        assert f": {c.key_path}: " in stderr, stderr[:500]
    for fragment in c.fragments:
        assert fragment in stderr, stderr[:500]
    assert len(stderr) < 1000, "messages quote long values shortened"


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_hostile_scene_is_refused(c: Case, mbsim: Callable, tmp_path: Path) -> None:
    scene = write_case(c, tmp_path)
    start = time.perf_counter()
    result = mbsim("validate", scene, *c.args)
    elapsed = time.perf_counter() - start
    check_refused(c, scene, result.exit_code, result.stderr, result.output)
    assert elapsed < 10, f"took {elapsed:.1f} s"


def test_merge_keys_merge(mbsim: Callable, tmp_path: Path) -> None:
    """``<<: *base`` merges a mapping; explicit keys override merged ones; earlier mappings of a
    merged list override later ones (YAML's merge key type)."""
    from mbsim.scene.load import load_raw_scene

    text = edit(
        SCENE_3D,
        "  - name: box1\n    mass: 1.0\n    inertia: [1, 1, 1]\n    position: [0, 0, -1]\n",
        "  - &box {name: box1, mass: 1.0, inertia: [1, 1, 1], position: [0, 0, -1]}\n"
        "  - <<: *box\n"
        "    name: box2\n"
        "    position: [0, 0, -2]\n"
        "  - name: box3\n"
        "    <<: [{mass: 3.0, inertia: [2, 2, 2]}, *box]\n"
        "    position: [0, 0, -3]\n",
    )
    scene = tmp_path / "merge.yaml"
    scene.write_text(text, encoding="utf-8")
    result = mbsim("validate", scene)
    assert result.exit_code == 0, result.output
    assert "3 bodies" in result.stdout
    raw = load_raw_scene(scene)
    box1, box2, box3 = raw.data["bodies"]
    assert box2 == {"name": "box2", "mass": 1.0, "inertia": [1, 1, 1], "position": [0, 0, -2]}
    assert box3 == {"name": "box3", "mass": 3.0, "inertia": [2, 2, 2], "position": [0, 0, -3]}
    assert "<<" not in box2 and "<<" not in box3
    # merged values keep the line they were written on; explicit ones their own
    assert raw.marks[("bodies", 1, "mass")][0] == 6
    assert raw.marks[("bodies", 1, "position")][0] == 9
    assert raw.marks[("bodies", 2, "mass")][0] == 11
    # copies are independent: --set on one leaves the others alone
    raw = load_raw_scene(scene, ["bodies.box2.inertia[0]=2"])
    assert raw.data["bodies"][0]["inertia"] == [1, 1, 1]
    assert raw.data["bodies"][1]["inertia"] == [2, 1, 1]


def test_solver_max_steps_allows_a_long_run(mbsim: Callable, write_scene) -> None:
    scene = write_scene(edit(SCENE_2D, "step: 0.005", "step: 1e-12"))
    assert mbsim("validate", scene).exit_code == 2
    result = mbsim("validate", scene, "--set", "solver.max_steps=1e11")
    assert result.exit_code == 0, result.output


# The cases that used to hang or take gigabytes (alias bombs, huge exponents, time.step 1e-300) run
# as real processes with time and memory bounds in tests/test_hostile_inputs.py.
