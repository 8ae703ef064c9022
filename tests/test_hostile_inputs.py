"""Hostile and malformed inputs: "Exit codes hold everywhere" (CONTRACT §2 and §4).

Every case below is one malformed or hostile input: a broken or booby-trapped scene file, an
expression outside the language, an absurd time or solver setting, a bad ``--set``, an output
location that is not an mbsim result file, a bad command or option. Each must

- exit 2 (never 1: exit 1 is for defects of mbsim itself), within seconds and bounded memory;
- print a message on stderr, ``mbsim: <label>: ...`` (``scene error``, ``output error`` for result
  and picture files, ``command-line error`` for options; click's own ``Error:`` line is accepted
  where click's parser refuses an option), that names the file (with the line where there is
  one), the dotted key path and what was found;
- print no Python traceback;
- leave every file that existed before byte for byte as it was (the scene, the victim text
  file, the foreign HDF5 file, the mesh files) and write nothing at all.

Cases run in-process through click's CliRunner, except those that could hang or blow up memory
(alias bombs, deep nesting, huge literals, absurd step counts, Dask): those run as real
``python -m mbsim`` processes, in parallel, each with a 30 s limit and its peak memory measured.

Some cases fail until the hardening they describe is done: the expectations are the contract's,
not today's behaviour.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import pytest
from click.testing import CliRunner

from mbsim.cli.main import cli

SCENES = Path(__file__).resolve().parents[1] / "scenes"
TIMEOUT_S = 30.0  # a subprocess case that has not ended by then is killed and fails
IN_PROCESS_LIMIT_S = 20.0  # an in-process case must end within this (they take milliseconds)
MAX_RSS_KIB = 1024 * 1024  # peak resident memory of a subprocess case: 1 GiB
MiB = 1024 * 1024
# what a message must say of a path that exists but is no regular file (not "not found")
NOT_A_FILE = ("directory", "regular file", "not a file", "device", "special file", "FIFO", "named pipe")


def _shortened(name: str, old: str, new: str) -> str:
    """A shipped scene with its time span cut down, so that nothing long ever runs."""
    text = (SCENES / name).read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{name}: '{old}' must occur once"
    return text.replace(old, new)


PEND = _shortened("pendulum_2d.yaml", "time: {end: 10.0, step: 0.01}", "time: {end: 0.02, step: 0.01}")
CHAIN = _shortened("four_box_chain.yaml", "time: {end: 10.0, step: 0.002}", "time: {end: 0.004, step: 0.002}")
BLOCKS = _shortened("blocks_elastic.yaml", "time: {end: 0.02, step: 1.0e-5}", "time: {end: 2.0e-5, step: 1.0e-5}")
BLOCKS_NO_CONTACT = BLOCKS[: BLOCKS.index("contacts:")]

# labels (regular expressions, multi-line) of the message on stderr; one of them must match
SCENE = (r"^mbsim: scene error: ",)
OUTPUT = (r"^mbsim: output error: ",)
CLICK = (r"^Error: ",)  # click's parser: "Usage: ...\nTry ...\n\nError: ..."
CMDLINE = (r"^mbsim: command-line error: ", *CLICK)
MBSIM = (r"^mbsim: ",)  # any mbsim label (--set: a scene value or a command-line key)
INPUT_FILE = (r"^mbsim: output error: ", *CMDLINE)  # a file given to info / plot that is not a result

DIR = object()  # in ``files``: make a directory
RESULT = object()  # in ``files``: a copy of a completed mbsim result file
TRUNCATED = object()  # in ``files``: its first 2 KiB (a copy cut short)

Fragment = str | tuple[str, ...]  # a tuple: any one of them


@dataclass
class Call:
    """What a case runs (arguments of ``mbsim``, in its working directory) and the scene line it must name."""

    args: list[str]
    line: int | None = None


@dataclass(frozen=True)
class Case:
    """One hostile input; ``build(cwd, result)`` lays out its files and returns the call."""

    id: str
    build: Callable[[Path, Path], Call] = field(repr=False)
    fragments: tuple[Fragment, ...]
    labels: tuple[str, ...] = SCENE
    proc: bool = False
    not_in: tuple[str, ...] = ()  # must not appear on stderr


def sub(base: str, old: str, new: str) -> str:
    """``base`` with the first occurrence of ``old`` replaced."""
    assert old in base, f"'{old}' not in the base scene"
    return base.replace(old, new, 1)


def first_changed_line(base: str, text: str) -> int:
    for number, (a, b) in enumerate(zip(base.splitlines(), text.splitlines(), strict=False), start=1):
        if a != b:
            return number
    return min(len(base.splitlines()), len(text.splitlines())) + 1


def q(text: str) -> str:
    """``text`` as a YAML single-quoted scalar."""
    return "'" + text.replace("'", "''") + "'"


def _lay_out(cwd: Path, files: dict[str, object] | None, result: Path) -> None:
    for name, content in (files or {}).items():
        path = cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is DIR:
            path.mkdir(exist_ok=True)
        elif content is RESULT:
            path.write_bytes(result.read_bytes())
        elif content is TRUNCATED:
            path.write_bytes(result.read_bytes()[:2048])
        elif callable(content):
            content(path)
        else:
            path.write_bytes(content.encode() if isinstance(content, str) else content)


def scene_case(
    id: str,
    text: str | bytes | Callable[[], str | bytes],
    *fragments: Fragment,
    base: str | None = None,
    line: int | bool | None = True,
    cmd: str = "run",
    extra: tuple[str, ...] = (),
    files: dict[str, object] | None = None,
    labels: tuple[str, ...] = SCENE,
    proc: bool = False,
    not_in: tuple[str, ...] = (),
) -> Case:
    """A scene file ``scene.yaml`` with ``text``, checked by ``mbsim run scene.yaml -o out.h5`` (or ``cmd``).

    ``line``: True -> the first line where ``text`` differs from ``base`` must be named; an int ->
    that line; None -> no line (the file must still be named).
    """

    def build(cwd: Path, result: Path) -> Call:
        _lay_out(cwd, files, result)
        data = text() if callable(text) else text
        (cwd / "scene.yaml").write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        number = None
        if line is True and base is not None:
            number = first_changed_line(base, data)
        elif isinstance(line, int) and line is not True:
            number = line
        args = [cmd, "scene.yaml", *(["-o", "out.h5"] if cmd == "run" else []), *extra]
        return Call(args, number)

    return Case(id, build, ("scene.yaml", *fragments), labels, proc, not_in)


def edit(id: str, base: str, old: str, new: str, *fragments: Fragment, **kw) -> Case:
    """``base`` with one edit; the message must name the edited line and the fragments."""
    return scene_case(id, sub(base, old, new), *fragments, base=base, **kw)


def cmd_case(
    id: str,
    args: list[str],
    *fragments: Fragment,
    files: dict[str, object] | None = None,
    scene: str | None = PEND,
    labels: tuple[str, ...] = CMDLINE,
    proc: bool = False,
    not_in: tuple[str, ...] = (),
) -> Case:
    """``mbsim ARGS`` in a directory holding ``scene.yaml`` (the short pendulum) and ``files``."""

    def build(cwd: Path, result: Path) -> Call:
        if scene is not None:
            (cwd / "scene.yaml").write_text(scene, encoding="utf-8")
        _lay_out(cwd, files, result)
        return Call(list(args))

    return Case(id, build, fragments, labels, proc, not_in)


def set_case(id: str, assignment: str, *fragments: Fragment, proc: bool = False, base: str = PEND) -> Case:
    """``mbsim run scene.yaml -o out.h5 --set ASSIGNMENT``: the message blames --set, not a line of the file."""
    return cmd_case(
        id,
        ["run", "scene.yaml", "-o", "out.h5", "--set", assignment],
        "--set",
        *fragments,
        scene=base,
        labels=MBSIM,
        proc=proc,
        not_in=("scene.yaml:",),
    )


def foreign_hdf5(path: Path) -> None:
    """An HDF5 file of another program (no ``format="mbsim-result"``)."""
    with h5py.File(path, "w") as f:
        f["data"] = [1.0, 2.0, 3.0]
        f.attrs["creator"] = "another program"


def fifo(path: Path) -> None:
    os.mkfifo(path)


NOTES = "notes: nothing to see here\n"  # the text of the victim files
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
JUNK = random.Random(12).randbytes(4096)
PNG_JUNK = b"\x89PNG\r\n\x1a\n" + JUNK
STL_EMPTY_SOLID = "solid nothing\nendsolid nothing\n"


def alias_bomb(levels: int = 12, width: int = 10) -> str:
    """A "billion laughs": ``width ** levels`` values from a few hundred bytes."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return PEND + "\n".join(lines) + "\n"


def with_name(name_text: str) -> Callable[[], str]:
    return lambda: sub(PEND, "name: pendulum 2d", f"name: {name_text}")


def mass(expr: str) -> str:
    return f"    mass: {q(expr)}"


def fifty_mib_name() -> bytes:
    return sub(PEND, "name: pendulum 2d", "name: '" + "x" * (50 * MiB) + "'").encode()


PEND_MASS = "    mass: 1.0"
PEND_POS = '    position: ["L*sin(theta0)", "-L*cos(theta0)"]'
PEND_JOINT = "    point: [0, 0]"
PEND_TIME = "time: {end: 0.02, step: 0.01}"
PEND_PARAMS = "parameters:\n  L: 1.0\n  theta0: 2.5"
PEND_SOLVER = "  method: lagrange\n  integrator: rk4"
BOX1 = "mass: 12, inertia: [9.25, 10.0, 1.25]"
BOX1_POS = 'position: ["-h*c", "h*c", "-h*s"]'
BOX1_EULER = "sequence: ZXZ, angles: "
HINGE1 = "{name: hinge1, type: spherical, body1: box1, body2: box2"
BLOCK1_SHAPE = "shapes: [{type: box, size: [0.1, 0.1, 0.1]}]"
TORQUE = "\nforces:\n  - {type: torque, body: bob, value: 0}\n"


def pend_force(entry: str) -> str:
    return PEND + f"forces:\n  - {entry}\n"


FORCE_LINE = len(PEND.splitlines()) + 2  # the line of the entry pend_force adds


def mesh_scene(file: str) -> str:
    return sub(BLOCKS, BLOCK1_SHAPE, f"shapes: [{{type: mesh, file: {q(file)}}}]")


def deep(n: int, open_: str = "[", close: str = "]", inner: str = "") -> str:
    return open_ * n + inner + close * n


# fmt: off
CASES: list[Case] = [
    # ------------------------------------------------------------------ YAML structure
    scene_case("yaml_top_is_list", "- mbsim: 1\n- name: x\n", ("mapping",), line=None),
    scene_case("yaml_top_is_text", "just some text\n", ("mapping",), line=None),
    scene_case("yaml_top_is_number", "42\n", ("mapping",), line=None),
    scene_case("yaml_empty_file", "", "empty", line=None),
    scene_case("yaml_only_comments", "# nothing here\n# at all\n", "empty", line=None),
    scene_case("yaml_binary_junk", PNG_JUNK, "UTF-8", line=1),
    scene_case("yaml_latin1", sub(PEND, "name: pendulum 2d", "name: pendule à fil").encode("latin-1"),
               "UTF-8", "0xe0", line=PEND.splitlines().index("name: pendulum 2d") + 1),
    scene_case("yaml_utf16", PEND.encode("utf-16"), "UTF-8", line=None),
    scene_case("yaml_nul_byte", sub(PEND, "name: pendulum 2d", "name: pendu\x00lum"), "U+0000",
               base=PEND),
    scene_case("yaml_control_char", sub(PEND, "name: pendulum 2d", "name: pendu\x1blum"), "U+001B",
               base=PEND),
    edit("yaml_tab_indent", PEND, "    mass: 1.0", "\tmass: 1.0", "not valid YAML"),
    edit("yaml_unclosed_flow", PEND, PEND_TIME, "time: {end: 0.02, step: 0.01", "not valid YAML", line=None),
    edit("yaml_bad_indent", PEND, "    mass: 1.0", "      mass: 1.0", "not valid YAML"),
    edit("yaml_duplicate_top_key", PEND, "dimension: 2", "dimension: 2\nname: again", "duplicate key 'name'",
         line=PEND.splitlines().index("dimension: 2") + 2),
    edit("yaml_duplicate_nested_key", PEND, PEND_MASS, PEND_MASS + "\n    mass: 2.0", "duplicate key 'mass'",
         line=PEND.splitlines().index(PEND_MASS) + 2),
    edit("yaml_duplicate_merge", PEND, PEND_MASS, PEND_MASS + "\n    <<: {a: 1}\n    <<: {b: 2}", "'<<'",
         line=PEND.splitlines().index(PEND_MASS) + 3),
    edit("yaml_int_key", PEND, "dimension: 2", "dimension: 2\n1: one", "'1'"),
    edit("yaml_list_key", PEND, "dimension: 2", "dimension: 2\n? [a, b]\n: 1", "mapping keys"),
    edit("yaml_mapping_key", PEND, "dimension: 2", "dimension: 2\n{a: 1}: 2", "mapping keys"),
    edit("yaml_null_key", PEND, "dimension: 2", "dimension: 2\n~: 3", "'~'"),
    edit("yaml_python_apply", PEND, "name: pendulum 2d",
         "name: !!python/object/apply:os.system ['touch MARKER']", "python/object/apply"),
    edit("yaml_python_name", PEND, PEND_MASS, "    mass: !!python/name:os.system", "python/name"),
    edit("yaml_python_object_new", PEND, PEND_MASS, "    mass: !!python/object/new:os.system [ls]",
         "python/object/new"),
    edit("yaml_custom_tag", PEND, PEND_MASS, "    mass: !kilograms 1.0", "!kilograms"),
    edit("yaml_binary_tag", PEND, "name: pendulum 2d", "name: !!binary aGVsbG8=", "binary"),
    edit("yaml_set_tag", PEND, "dimension: 2", "dimension: 2\ndescription: !!set {a, b}", "set"),
    edit("yaml_recursive_alias", PEND, "dimension: 2", "dimension: 2\ndescription: &x [*x]", "*x"),
    edit("yaml_undefined_alias", PEND, PEND_MASS, "    mass: *nowhere", "nowhere"),
    edit("yaml_merge_scalar", PEND, PEND_MASS, PEND_MASS + "\n    <<: 5", "'<<'",
         line=PEND.splitlines().index(PEND_MASS) + 2),
    edit("yaml_two_documents", PEND, "dimension: 2", "dimension: 2\n---\nname: second", "document",
         line=PEND.splitlines().index("dimension: 2") + 2),
    edit("yaml_timestamp_as_number", PEND, PEND_TIME, "time: {end: 2001-12-14, step: 0.01}", "time.end"),
    scene_case("yaml_alias_bomb", alias_bomb(), "alias", line=None, proc=True),
    scene_case("yaml_deep_list_5000", lambda: PEND + "description: " + deep(5000) + "\n", "nested", line=None,
               proc=True),
    scene_case("yaml_deep_list_100000", lambda: PEND + "description: " + deep(100_000) + "\n", "nested",
               line=None, proc=True),
    scene_case("yaml_deep_mapping_5000", lambda: PEND + "description: " + deep(5000, "{a: ", "}", "1") + "\n",
               "nested", line=None, proc=True),
    scene_case("yaml_deep_block_3000",
               lambda: PEND + "description:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(3000)),
               "nested", line=None, proc=True),
    scene_case("yaml_5000_digit_integer", sub(PEND, PEND_MASS, "    mass: 1" + "0" * 4999), "bodies[0].mass",
               base=PEND, proc=True),
    scene_case("yaml_5000_digit_float", sub(PEND, PEND_MASS, "    mass: 1." + "1" * 4998), "bodies[0].mass",
               base=PEND, proc=True),
    scene_case("yaml_50MiB_string", fifty_mib_name, "MiB", line=None, proc=True),
    scene_case("yaml_5MiB_name", with_name("'" + "y" * (5 * MiB) + "'"), "name", line=None, proc=True),
    edit("yaml_unknown_top_key", PEND, "dimension: 2", "dimension: 2\ncolour: red", "unknown key 'colour'"),
    edit("yaml_unknown_top_key_typo", PEND, "gravity:", "gravty:", "gravty", "did you mean 'gravity'?"),
    # wrong type of every top-level section
    edit("top_mbsim_text", PEND, "mbsim: 1", "mbsim: one", "mbsim", "'one'"),
    edit("top_name_list", PEND, "name: pendulum 2d", "name: [a, b]", "name", "list"),
    edit("top_name_mapping", PEND, "name: pendulum 2d", "name: {first: a}", "name", "mapping"),
    edit("top_description_mapping", PEND, "dimension: 2", "dimension: 2\ndescription: {a: 1}", "description"),
    edit("top_dimension_text", PEND, "dimension: 2", "dimension: two", "dimension", "'two'"),
    edit("top_dimension_4", PEND, "dimension: 2", "dimension: 4", "dimension", "4"),
    edit("top_parameters_list", PEND, PEND_PARAMS, "parameters: [1, 2]", "parameters", "list"),
    edit("top_gravity_number", PEND, "gravity: [0, -9.81]", "gravity: 9.81", "gravity", "9.81"),
    edit("top_time_number", PEND, PEND_TIME, "time: 5", "time", "5"),
    edit("top_solver_text", PEND, "solver:\n" + PEND_SOLVER, "solver: lagrange", "solver", "lagrange"),
    edit("top_output_text", PEND, "dimension: 2", "dimension: 2\noutput: out.h5", "output", "out.h5"),
    edit("top_ground_list", PEND, "dimension: 2", "dimension: 2\nground: []", "ground", "list"),
    scene_case("top_bodies_mapping", PEND[: PEND.index("bodies:")] + "bodies: {name: x}\n", "bodies",
               ("mapping", "dict"), base=PEND),
    scene_case("top_joints_text", PEND[: PEND.index("joints:")] + "joints: none\n", "joints", ("none", "str"),
               base=PEND),
    edit("top_forces_number", PEND, "dimension: 2", "dimension: 2\nforces: 3", "forces", ("3", "int")),
    edit("top_contacts_mapping", PEND, "dimension: 2", "dimension: 2\ncontacts: {a: 1}", "contacts",
         ("mapping", "dict")),
    scene_case("top_missing_mbsim", PEND.replace("mbsim: 1\n", ""), "'mbsim'", line=None),
    scene_case("top_missing_name", PEND.replace("name: pendulum 2d\n", ""), "'name'", line=None),
    scene_case("top_missing_bodies", PEND[: PEND.index("bodies:")], "'bodies'", line=None),
    edit("top_version_2", PEND, "mbsim: 1", "mbsim: 2", "mbsim", "2"),
    edit("top_version_0", PEND, "mbsim: 1", "mbsim: 0", "mbsim", "0"),
    edit("top_version_fraction", PEND, "mbsim: 1", "mbsim: 1.5", "mbsim", "1.5"),
    edit("top_version_bool", PEND, "mbsim: 1", "mbsim: true", "mbsim", "True"),
    # ------------------------------------------------------------------ bodies, joints, forces, contacts
    edit("mass_negative", CHAIN, BOX1, "mass: -12, inertia: [9.25, 10.0, 1.25]", "bodies[0].mass", "-12"),
    edit("mass_zero", CHAIN, BOX1, "mass: 0, inertia: [9.25, 10.0, 1.25]", "bodies[0].mass", "0"),
    edit("mass_nan", CHAIN, BOX1, "mass: .nan, inertia: [9.25, 10.0, 1.25]", "bodies[0].mass", "nan"),
    edit("mass_inf", CHAIN, BOX1, "mass: .inf, inertia: [9.25, 10.0, 1.25]", "bodies[0].mass", "inf"),
    edit("mass_minus_inf", CHAIN, BOX1, "mass: -.inf, inertia: [9.25, 10.0, 1.25]", "bodies[0].mass", "inf"),
    edit("mass_overflows_to_inf", CHAIN, BOX1, "mass: 1e309, inertia: [9.25, 10.0, 1.25]", "bodies[0].mass",
         "inf"),
    edit("mass_text", PEND, PEND_MASS, "    mass: heavy", "bodies[0].mass", "heavy"),
    edit("mass_bool", PEND, PEND_MASS, "    mass: true", "bodies[0].mass", "True"),
    edit("mass_null", PEND, PEND_MASS, "    mass: ~", "bodies[0]", line=None),
    edit("inertia_triangle", CHAIN, BOX1, "mass: 12, inertia: [1, 1, 5]", "bodies[0].inertia", "triangle"),
    edit("inertia_negative", CHAIN, BOX1, "mass: 12, inertia: [-1, 10, 1.25]", "bodies[0].inertia",
         "positive definite"),
    edit("inertia_nan", CHAIN, BOX1, "mass: 12, inertia: [.nan, 10, 1.25]", "bodies[0].inertia", "nan"),
    edit("inertia_matrix_ragged", CHAIN, BOX1, "mass: 12, inertia: [[1, 0], [0, 1, 0], [0, 0, 1]]",
         "bodies[0].inertia"),
    edit("inertia_vector_in_2d", PEND, "    inertia: 1.0e-6", "    inertia: [1, 2, 3]", "bodies[0].inertia"),
    edit("inertia_zero_in_2d", PEND, "    inertia: 1.0e-6", "    inertia: 0", "bodies[0].inertia", "0"),
    edit("quaternion_not_unit", CHAIN, "orientation: {euler: {sequence: ZXZ, angles: [\"pi/4\", \"pi/4\", 0]}}",
         "orientation: {quaternion: [1, 1, 1, 1]}", "bodies[0].orientation.quaternion", "unit"),
    edit("quaternion_zero", CHAIN, "orientation: {euler: {sequence: ZXZ, angles: [\"pi/4\", \"pi/4\", 0]}}",
         "orientation: {quaternion: [0, 0, 0, 0]}", "bodies[0].orientation.quaternion"),
    edit("quaternion_nan", CHAIN, "orientation: {euler: {sequence: ZXZ, angles: [\"pi/4\", \"pi/4\", 0]}}",
         "orientation: {quaternion: [.nan, 0, 0, 0]}", "bodies[0].orientation.quaternion", "nan"),
    edit("quaternion_3_components", CHAIN, "orientation: {euler: {sequence: ZXZ, angles: [\"pi/4\", \"pi/4\", 0]}}",
         "orientation: {quaternion: [1, 0, 0]}", "bodies[0].orientation.quaternion", "3"),
    edit("euler_ZZX", CHAIN, BOX1_EULER, "sequence: ZZX, angles: ", "bodies[0].orientation.euler.sequence", "ZZX"),
    edit("euler_abc", CHAIN, BOX1_EULER, "sequence: abc, angles: ", "bodies[0].orientation.euler.sequence", "abc"),
    edit("euler_4_letters", CHAIN, BOX1_EULER, "sequence: ZXZX, angles: ", "bodies[0].orientation.euler.sequence",
         "ZXZX"),
    edit("euler_mixed_case", CHAIN, BOX1_EULER, "sequence: ZxZ, angles: ", "bodies[0].orientation.euler.sequence",
         "ZxZ"),
    edit("euler_number", CHAIN, BOX1_EULER, "sequence: 313, angles: ", "bodies[0].orientation.euler.sequence",
         "313"),
    edit("euler_two_angles", CHAIN, 'angles: ["pi/4", "pi/4", 0]', 'angles: ["pi/4", "pi/4"]',
         "bodies[0].orientation.euler.angles"),
    edit("orientation_unknown_form", CHAIN, "orientation: {euler: {sequence: ZXZ,",
         "orientation: {rotvec: {sequence: ZXZ,", "bodies[0].orientation", "rotvec"),
    edit("orientation_mapping_in_2d", PEND, "    orientation: theta0", "    orientation: {quaternion: [1, 0, 0, 0]}",
         "bodies[0].orientation"),
    edit("joint_unknown_body", CHAIN, HINGE1, "{name: hinge1, type: spherical, body1: box1, body2: box9",
         "joints[1].body2", "box9"),
    edit("joint_same_body", CHAIN, HINGE1, "{name: hinge1, type: spherical, body1: box2, body2: box2",
         "joints[1]", "box2"),
    edit("joint_ground_to_ground", PEND, "    body2: bob", "    body2: ground", "joints[0].body2", "ground"),
    edit("body_duplicate_name", CHAIN, "{name: box2,", "{name: box1,", "bodies[1].name", "box1"),
    edit("joint_duplicate_name", CHAIN, "{name: hinge1,", "{name: hinge0,", "joints[1].name", "hinge0"),
    edit("body_named_ground", PEND, "  - name: bob", "  - name: ground", "bodies[0].name", "ground"),
    edit("body_name_empty", PEND, "  - name: bob", "  - name: ''", "bodies[0].name"),
    edit("body_name_list", PEND, "  - name: bob", "  - name: [bob]", "bodies[0].name", "list"),
    edit("body_not_a_mapping", PEND, "  - name: bob", "  - just a text\n  - name: bob", "bodies[0]"),
    edit("position_2_in_3d", CHAIN, BOX1_POS, 'position: ["-h*c", "h*c"]', "bodies[0].position", "2"),
    edit("position_4_in_3d", CHAIN, BOX1_POS, 'position: ["-h*c", "h*c", 0, 0]', "bodies[0].position", "4"),
    edit("gravity_2_in_3d", CHAIN, "gravity: [0, 0, -9.8]", "gravity: [0, -9.8]", "gravity", "2"),
    edit("gravity_3_in_2d", PEND, "gravity: [0, -9.81]", "gravity: [0, -9.81, 0]", "gravity", "3"),
    edit("joint_point_3_in_2d", PEND, PEND_JOINT, "    point: [0, 0, 0]", "joints[0].point", "3"),
    edit("velocity_3_in_2d", PEND, PEND_MASS, PEND_MASS + "\n    velocity: [0, 0, 0]", "bodies[0].velocity", "3",
         line=PEND.splitlines().index(PEND_MASS) + 2),
    edit("angular_velocity_vector_in_2d", PEND, PEND_MASS, PEND_MASS + "\n    angular_velocity: [0, 0, 1]",
         "bodies[0].angular_velocity", line=PEND.splitlines().index(PEND_MASS) + 2),
    edit("joint_type_unknown", CHAIN, HINGE1, "{name: hinge1, type: hinge, body1: box1, body2: box2",
         "joints[1].type", "hinge"),
    edit("joint_type_spherical_in_2d", PEND, "    type: revolute", "    type: spherical", "joints[0].type",
         "spherical"),
    edit("joint_axis_zero", PEND, "    type: revolute", "    type: prismatic\n    axis: [0, 0]", "joints[0].axis",
         line=PEND.splitlines().index("    type: revolute") + 2),
    edit("joint_axis_nan", CHAIN, "{name: hinge0, type: spherical, body1: ground, body2: box1, point: [0, 0, 0]}",
         "{name: hinge0, type: revolute, body1: ground, body2: box1, point: [0, 0, 0], axis: [.nan, 0, 1]}",
         "joints[0].axis", "nan"),
    scene_case("force_type_unknown", pend_force("{type: magnet, body: bob, value: [0, 0]}"), "forces[0].type",
               "magnet", line=FORCE_LINE),
    scene_case("force_body_unknown", pend_force("{type: force, body: nobody, value: [0, 0]}"), "forces[0].body",
               "nobody", line=FORCE_LINE),
    scene_case("force_value_3_in_2d", pend_force("{type: force, body: bob, value: [1, 2, 3]}"),
               "forces[0].value", "3", line=FORCE_LINE),
    scene_case("spring_negative_stiffness",
               pend_force("{type: spring_damper, body1: ground, body2: bob, point1: [0, 0], point2: [0, -1], "
                          "stiffness: -5}"), "forces[0].stiffness", "-5", line=FORCE_LINE),
    scene_case("contact_type_unknown", BLOCKS.replace("type: compliant", "type: sticky"), "contacts[0].type",
               "sticky", base=BLOCKS),
    scene_case("contact_body_unknown", BLOCKS.replace("body1: block2", "body1: block9"), "contacts[0].body1",
               "block9", base=BLOCKS),
    scene_case("contact_restitution_2", BLOCKS_NO_CONTACT + "contacts:\n  - {type: rigid, body1: block2, "
               "body2: block1, restitution: 2}\n", "contacts[0].restitution", "2", base=BLOCKS,
               extra=("--set", "solver.method=timestepping")),
    scene_case("rigid_contact_smooth_method", BLOCKS_NO_CONTACT + "contacts:\n  - {name: impact, type: rigid, "
               "body1: block2, body2: block1}\n", "contacts[0]", "timestepping", base=BLOCKS),
    scene_case("shape_type_unknown", BLOCKS.replace("{type: box, size: [0.1, 0.1, 0.1]}", "{type: cube, a: 1}"),
               "bodies[0].shapes[0].type", "cube", base=BLOCKS),
    scene_case("shape_radius_negative", BLOCKS.replace("{type: box, size: [0.1, 0.1, 0.1]}",
                                                       "{type: sphere, radius: -0.05}"),
               "bodies[0].shapes[0].radius", "-0.05", base=BLOCKS),
    scene_case("shape_box_size_2", BLOCKS.replace("{type: box, size: [0.1, 0.1, 0.1]}", "{type: box, size: [1, 1]}"),
               "bodies[0].shapes[0].size", base=BLOCKS),
    scene_case("mesh_missing", mesh_scene("missing.stl"), "bodies[0].shapes[0].file", "missing.stl", base=BLOCKS),
    scene_case("mesh_garbage", mesh_scene("garbage.stl"), "bodies[0].shapes[0].file", "garbage.stl", base=BLOCKS,
               files={"garbage.stl": JUNK}),
    scene_case("mesh_garbage_obj", mesh_scene("garbage.obj"), "bodies[0].shapes[0].file", "garbage.obj",
               base=BLOCKS, files={"garbage.obj": "v 1 2\nf 1 2 9\nthis is not a mesh\n"}),
    scene_case("mesh_empty_file", mesh_scene("empty.stl"), "bodies[0].shapes[0].file", "empty.stl", base=BLOCKS,
               files={"empty.stl": b""}),
    scene_case("mesh_no_triangles", mesh_scene("nothing.stl"), "bodies[0].shapes[0].file", "nothing.stl",
               base=BLOCKS, files={"nothing.stl": STL_EMPTY_SOLID}),
    scene_case("mesh_is_directory", mesh_scene("meshdir.stl"), "bodies[0].shapes[0].file", "meshdir.stl", NOT_A_FILE,
               base=BLOCKS, files={"meshdir.stl": DIR}),
    scene_case("mesh_unknown_format", mesh_scene("notes.xyz123"), "bodies[0].shapes[0].file", "notes.xyz123",
               base=BLOCKS, files={"notes.xyz123": NOTES}),
    scene_case("mesh_outside_folder_system_file", mesh_scene("/etc/passwd"), "bodies[0].shapes[0].file",
               "/etc/passwd", base=BLOCKS, not_in=("root:",)),
    scene_case("mesh_outside_folder_text", mesh_scene("../outside.stl"), "bodies[0].shapes[0].file",
               "outside.stl", base=BLOCKS, files={"../outside.stl": NOTES}),
    scene_case("mesh_dev_zero", mesh_scene("/dev/zero"), "bodies[0].shapes[0].file", "/dev/zero", NOT_A_FILE,
               base=BLOCKS, proc=True),
    scene_case("mesh_fifo", mesh_scene("pipe.stl"), "bodies[0].shapes[0].file", "pipe.stl", NOT_A_FILE, base=BLOCKS,
               files={"pipe.stl": fifo}, proc=True),
    # ------------------------------------------------------------------ expressions
    edit("expr_import", PEND, PEND_MASS, mass("__import__('os').system('touch MARKER')"), "bodies[0].mass",
         "__import__"),
    edit("expr_import_in_parameter", PEND, "  L: 1.0", "  L: " + q("__import__('os').getcwd()"), "parameters.L",
         "__import__"),
    edit("expr_attribute", PEND, PEND_MASS, mass("pi.real"), "bodies[0].mass", ".real"),
    edit("expr_dunder_chain", PEND, PEND_MASS, mass("(1).__class__.__bases__"), "bodies[0].mass",
         ("__bases__", "__class__")),
    edit("expr_lambda_call", PEND, PEND_MASS, mass("(lambda: 1)()"), "bodies[0].mass", ("lambda", "Lambda")),
    edit("expr_lambda", PEND, PEND_MASS, mass("lambda x: x"), "bodies[0].mass", ("lambda", "Lambda")),
    edit("expr_list_comprehension", PEND, PEND_MASS, mass("[x for x in (1, 2)][0]"), "bodies[0].mass",
         "for x in"),
    edit("expr_generator", PEND, PEND_MASS, mass("max(x for x in (1, 2))"), "bodies[0].mass", "for x in"),
    edit("expr_unknown_name", PEND, PEND_MASS, mass("2*mass_of_bob"), "bodies[0].mass", "mass_of_bob"),
    edit("expr_unknown_function", PEND, PEND_MASS, mass("gamma(2)"), "bodies[0].mass", "gamma"),
    edit("expr_eval", PEND, PEND_MASS, mass("eval('1')"), "bodies[0].mass", "eval"),
    edit("expr_open", PEND, PEND_MASS, mass("open('/etc/passwd')"), "bodies[0].mass", "open"),
    edit("expr_1990_digit_literal", PEND, PEND_MASS, mass("1" + "0" * 1989), "bodies[0].mass"),
    edit("expr_1990_digit_literal_in_time", PEND, PEND_TIME, "time: {end: " + q("1" + "0" * 1989) + ", step: 0.01}",
         "time.end"),
    edit("expr_float_literal_overflow", PEND, PEND_MASS, mass("1e999"), "bodies[0].mass", ("1e999", "inf")),
    edit("expr_10_pow_10_pow_10", PEND, PEND_MASS, mass("10**10**10"), "bodies[0].mass", proc=True),
    edit("expr_9_pow_9_pow_9", PEND, PEND_MASS, mass("9**9**9"), "bodies[0].mass", proc=True),
    edit("expr_pow_tower_in_parameter", PEND, "  L: 1.0", "  L: " + q("2**2**2**2**2**2**2"), "parameters.L",
         proc=True),
    edit("expr_deep_parentheses_10000", PEND, PEND_MASS, mass(deep(10_000, "(", ")", "1")), "bodies[0].mass",
         proc=True),
    edit("expr_deep_parentheses_190", PEND, PEND_MASS, mass(deep(190, "(", ")", "1+t")), "bodies[0].mass"),
    edit("expr_deep_calls", PEND, PEND_MASS, mass(deep(150, "sin(", ")", "1")), "bodies[0].mass",
         ("nested", "deep")),
    edit("expr_deep_unary_1500", PEND, PEND_MASS, mass("-" * 1500 + "1"), "bodies[0].mass", proc=True),
    edit("expr_deep_power_chain", PEND, PEND_MASS, mass("**".join(["1"] * 600)), "bodies[0].mass", proc=True),
    edit("expr_string_literal", PEND, PEND_MASS, mass("'abc'"), "bodies[0].mass", "abc"),
    edit("expr_fstring", PEND, PEND_MASS, mass("f'{1}'"), "bodies[0].mass", "f'{1}'"),
    edit("expr_walrus", PEND, PEND_MASS, mass("(x := 1)"), "bodies[0].mass", ":="),
    edit("expr_keyword_argument", PEND, PEND_MASS, mass("sin(x=1)"), "bodies[0].mass", "sin(x=1)"),
    edit("expr_starred_argument", PEND, PEND_MASS, mass("max(*[1, 2])"), "bodies[0].mass", "*[1, 2]"),
    edit("expr_division_by_zero", PEND, PEND_MASS, mass("1/0"), "bodies[0].mass", ("1/0", "division by zero")),
    edit("expr_division_by_zero_in_parameter", PEND, "  L: 1.0", "  L: " + q("1/0"),
         ("parameters.L", "bodies[0].position"), ("1/0", "division by zero")),
    edit("expr_log_zero", PEND, PEND_POS, '    position: ["log(0)", 0]', "bodies[0].position[0]", "log(0)"),
    edit("expr_sqrt_negative", PEND, PEND_POS, '    position: ["sqrt(-1)", 0]', "bodies[0].position[0]",
         "sqrt(-1)"),
    edit("expr_unknown_parameter", PEND, "  L: 1.0", "  L: " + q("M*2"), "parameters.L", "M"),
    edit("expr_parameter_cycle", PEND, PEND_PARAMS, "parameters:\n  A: B + 1\n  B: A + 1\n  L: 1.0\n  theta0: 2.5",
         "parameters.A", "B"),
    edit("expr_parameter_self", PEND, "  L: 1.0", "  L: L + 1", "parameters.L", "L + 1"),
    edit("expr_parameter_named_pi", PEND, "  L: 1.0", "  L: 1.0\n  pi: 3", "parameters.pi", "pi",
         line=PEND.splitlines().index("  L: 1.0") + 2),
    edit("expr_parameter_named_t", PEND, "  L: 1.0", "  L: 1.0\n  t: 3", "parameters.t", "'t'",
         line=PEND.splitlines().index("  L: 1.0") + 2),
    edit("expr_parameter_not_identifier", PEND, "  L: 1.0", "  L: 1.0\n  a b: 3", "parameters", "a b",
         line=PEND.splitlines().index("  L: 1.0") + 2),
    edit("expr_parameter_list", PEND, "  L: 1.0", "  L: [1, 2]", "parameters.L", "list"),
    edit("expr_parameter_mapping", PEND, "  L: 1.0", "  L: {a: 1}", "parameters.L", ("mapping", "dict")),
    edit("expr_parameter_starts_with_digit", PEND, "  L: 1.0", "  L: 1.0\n  2x: 3", "parameters", "2x",
         line=PEND.splitlines().index("  L: 1.0") + 2),
    edit("expr_t_in_static_value", PEND, PEND_MASS, mass("1 + t"), "bodies[0].mass", "t"),
    edit("expr_state_in_gravity", PEND, "gravity: [0, -9.81]", "gravity: [0, vx]", "gravity[1]", "vx"),
    edit("expr_syntax_error", PEND, PEND_MASS, mass("2*(1+"), "bodies[0].mass", "syntax"),
    edit("expr_empty", PEND, PEND_MASS, mass(""), "bodies[0].mass"),
    edit("expr_too_long", PEND, PEND_MASS, mass("1+" * 1500 + "1"), "bodies[0].mass", ("long", "characters")),
    edit("expr_subscript", PEND, PEND_MASS, mass("(1, 2)[0]"), "bodies[0].mass", "[0]"),
    edit("expr_bit_shift", PEND, PEND_MASS, mass("1 << 3"), "bodies[0].mass", "1 << 3"),
    edit("expr_complex", PEND, PEND_MASS, mass("1j"), "bodies[0].mass", "1j"),
    edit("expr_true", PEND, PEND_MASS, mass("True"), "bodies[0].mass", "True"),
    edit("expr_none", PEND, PEND_MASS, mass("None"), "bodies[0].mass", "None"),
    edit("expr_ellipsis", PEND, PEND_MASS, mass("..."), "bodies[0].mass", "..."),
    edit("expr_conditional", PEND, PEND_MASS, mass("1 if pi else 2"), "bodies[0].mass", "if"),
    edit("expr_drive_attribute", PEND, PEND_JOINT, PEND_JOINT + "\n    drive: {position: " + q("t.real") + "}",
         "joints[0].drive.position", ".real", line=PEND.splitlines().index(PEND_JOINT) + 2),
    scene_case("expr_force_import", pend_force("{type: torque, body: bob, value: " +
                                               q("__import__('os').system('touch MARKER')") + "}"),
               "forces[0].value", "__import__", line=FORCE_LINE),
    # ------------------------------------------------------------------ time, solver, output
    edit("time_step_zero", PEND, PEND_TIME, "time: {end: 0.02, step: 0}", "time.step", "0"),
    edit("time_step_negative", PEND, PEND_TIME, "time: {end: 0.02, step: -0.01}", "time.step", "-0.01"),
    edit("time_step_1e-300", PEND, PEND_TIME, "time: {end: 0.02, step: 1.0e-300}", "time.step", proc=True),
    edit("time_end_negative", PEND, PEND_TIME, "time: {end: -1, step: 0.01}", "time.end", "-1"),
    edit("time_end_zero", PEND, PEND_TIME, "time: {end: 0, step: 0.01}", "time.end", "0"),
    edit("time_end_1e300", PEND, PEND_TIME, "time: {end: 1.0e+300, step: 0.01}", "time.end", proc=True),
    edit("time_end_nan", PEND, PEND_TIME, "time: {end: .nan, step: 0.01}", "time.end", "nan"),
    edit("time_end_inf", PEND, PEND_TIME, "time: {end: .inf, step: 0.01}", "time.end", "inf"),
    edit("time_end_text", PEND, PEND_TIME, "time: {end: soon, step: 0.01}", "time.end", "soon"),
    edit("time_step_list", PEND, PEND_TIME, "time: {end: 0.02, step: [0.01]}", "time.step", "list"),
    edit("time_missing_step", PEND, PEND_TIME, "time: {end: 0.02}", "time", "step"),
    edit("time_unknown_key", PEND, PEND_TIME, "time: {end: 0.02, step: 0.01, dt: 0.01}", "time.dt", "dt"),
    edit("time_contact_step_negative", PEND, PEND_TIME, "time: {end: 0.02, step: 0.01, contact_step: -1}",
         "time.contact_step", "-1"),
    edit("solver_method_unknown", PEND, "  method: lagrange", "  method: lagrangian", "solver.method", "lagrangian"),
    edit("solver_method_number", PEND, "  method: lagrange", "  method: 5", "solver.method", "5"),
    edit("solver_integrator_unknown", PEND, "  integrator: rk4", "  integrator: rk45", "solver.integrator", "rk45"),
    edit("solver_integrator_scipy_unknown", PEND, "  integrator: rk4", "  integrator: scipy:LSODA",
         "solver.integrator", "scipy:LSODA"),
    edit("solver_integrator_scipy_hostile", PEND, "  integrator: rk4", "  integrator: 'scipy:__import__'",
         "solver.integrator", "__import__"),
    edit("solver_integrator_ignored_variational", PEND, PEND_SOLVER, "  method: variational\n  integrator: warp9",
         "solver.integrator", "warp9", line=PEND.splitlines().index("  integrator: rk4") + 1),
    edit("solver_integrator_ignored_timestepping", PEND, PEND_SOLVER, "  method: timestepping\n  integrator: warp9",
         "solver.integrator", "warp9", line=PEND.splitlines().index("  integrator: rk4") + 1),
    edit("solver_max_violation_negative", PEND, PEND_SOLVER, PEND_SOLVER + "\n  max_violation: -1",
         "solver.max_violation", "-1", line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("solver_max_violation_zero", PEND, PEND_SOLVER, PEND_SOLVER + "\n  max_violation: 0",
         "solver.max_violation", "0", line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("solver_max_violation_nan", PEND, PEND_SOLVER, PEND_SOLVER + "\n  max_violation: .nan",
         "solver.max_violation", "nan", line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("solver_rtol_zero", PEND, PEND_SOLVER, PEND_SOLVER + "\n  rtol: 0", "solver.rtol", "0",
         line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("solver_rtol_inf", PEND, PEND_SOLVER, PEND_SOLVER + "\n  rtol: .inf", "solver.rtol", "inf",
         line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("solver_atol_negative", PEND, PEND_SOLVER, PEND_SOLVER + "\n  atol: -1.0e-10", "solver.atol", "-1e-10",
         line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("solver_option_of_other_method", PEND, PEND_SOLVER, PEND_SOLVER + "\n  optimizer: pso", "solver.optimizer",
         "optimizer", line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("solver_projection_iterations_zero", PEND, PEND_SOLVER, PEND_SOLVER + "\n  projection: {iterations: 0}",
         "solver.projection.iterations", "0", line=PEND.splitlines().index("  integrator: rk4") + 2),
    edit("output_every_zero", PEND, "dimension: 2", "dimension: 2\noutput: {every: 0}", "output.every", "0"),
    edit("output_every_fraction", PEND, "dimension: 2", "dimension: 2\noutput: {every: 1.5}", "output.every", "1.5"),
    edit("output_every_negative", PEND, "dimension: 2", "dimension: 2\noutput: {every: -1}", "output.every", "-1"),
    edit("output_every_text", PEND, "dimension: 2", "dimension: 2\noutput: {every: often}", "output.every", "often"),
    edit("output_file_list", PEND, "dimension: 2", "dimension: 2\noutput: {file: [a.h5, b.h5]}", "output.file",
         "list"),
    edit("output_unknown_key", PEND, "dimension: 2", "dimension: 2\noutput: {format: csv}", "output.format",
         "format"),
    # ------------------------------------------------------------------ --set
    set_case("set_empty", "", "KEY=VALUE"),
    set_case("set_no_key", "=1", "key"),
    set_case("set_double_dot", "a..b=1", "a..b"),
    set_case("set_trailing_dot", "time.=1", "time."),
    set_case("set_no_equals", "time.end", "KEY=VALUE"),
    set_case("set_nonexistent_path", "nonexistent.path=1", "nonexistent"),
    set_case("set_nonexistent_solver_option", "solver.projection.nonexistent=1", "nonexistent"),
    set_case("set_index_out_of_range", "bodies[5].mass=2", "5"),
    set_case("set_index_99999999999", "bodies[99999999999].mass=2", "99999999999"),
    set_case("set_index_40_digits", "bodies[" + "9" * 40 + "].mass=1", "index"),
    set_case("set_dotted_index_huge", "bodies." + "9" * 40 + ".mass=1", "index"),
    set_case("set_negative_index", "bodies[-2].mass=2", "-2"),
    set_case("set_index_on_mapping", "time[0]=1", "time"),
    set_case("set_into_a_number", "time.end.x=1", "time.end"),
    set_case("set_unknown_item_name", "bodies.nobody.mass=1", "nobody"),
    set_case("set_mass_mapping", "bodies.bob.mass={a: 1}", "mass"),
    set_case("set_mass_text", "bodies.bob.mass=heavy", "heavy"),
    set_case("set_mass_negative", "bodies.0.mass=-1", "-1"),
    set_case("set_time_number", "time=5", "time"),
    set_case("set_method_unknown", "solver.method=quantum", "quantum"),
    set_case("set_integrator_unknown", "solver.integrator=rk9", "rk9"),
    set_case("set_python_tag", "time.end=!!python/object/apply:os.system ['touch MARKER']", "python/object/apply"),
    set_case("set_undefined_alias", "time.end=*x", "time.end"),
    set_case("set_two_documents", "time.end=1\n---\n2", "time.end"),
    set_case("set_unclosed_flow", "gravity=[0, ", "gravity"),
    set_case("set_import", "parameters.L=__import__('os').getcwd()", "__import__"),
    set_case("set_5000_digit_number", "time.end=" + "9" * 5000, "time.end"),
    set_case("set_100000_char_key", "a" * 100_000 + "=1", ("a" * 20, "key")),
    set_case("set_nul_in_value", "name=pendu\x00lum", "name"),
    set_case("set_deep_flow_5000", "gravity=" + deep(5000), "gravity", proc=True),
    set_case("set_deep_flow_60000", "gravity=" + deep(60_000), "gravity", proc=True),  # argv: < 128 KiB
    set_case("set_deep_mapping_5000", "description=" + deep(5000, "{a: ", "}", "1"), "description", proc=True),
    set_case("set_alias_bomb", "description=[" + ", ".join(
        [f"&l{i} [" + ", ".join([f"*l{i - 1}" if i else "1"] * 10) + "]" for i in range(10)]) + "]",
        "description", proc=True),
    set_case("set_10_pow_10_pow_10", "bodies.bob.mass=10**10**10", "mass", proc=True),
    # ------------------------------------------------------------------ output paths and files
    cmd_case("out_is_the_scene", ["run", "scene.yaml", "-o", "scene.yaml"], "scene.yaml", labels=OUTPUT),
    cmd_case("out_existing_text_file", ["run", "scene.yaml", "-o", "notes.txt"], "notes.txt",
             files={"notes.txt": NOTES}, labels=OUTPUT),
    cmd_case("out_existing_text_named_h5", ["run", "scene.yaml", "-o", "notes.h5"], "notes.h5",
             files={"notes.h5": NOTES}, labels=OUTPUT),
    cmd_case("out_foreign_hdf5", ["run", "scene.yaml", "-o", "other.h5"], "other.h5",
             files={"other.h5": foreign_hdf5}, labels=OUTPUT),
    cmd_case("out_fake_hdf5_signature", ["run", "scene.yaml", "-o", "fake.h5"], "fake.h5",
             files={"fake.h5": HDF5_SIGNATURE + JUNK}, labels=OUTPUT),
    cmd_case("out_empty_file", ["run", "scene.yaml", "-o", "empty.h5"], "empty.h5",
             files={"empty.h5": b""}, labels=OUTPUT),
    cmd_case("out_directory", ["run", "scene.yaml", "-o", "adir"], "adir", files={"adir": DIR, "adir/keep": NOTES},
             labels=OUTPUT + CLICK),
    cmd_case("out_below_a_regular_file", ["run", "scene.yaml", "-o", "notes.txt/out.h5"], "notes.txt",
             files={"notes.txt": NOTES}, labels=OUTPUT),
    cmd_case("out_symlink_to_text_file", ["run", "scene.yaml", "-o", "link.h5"], "link.h5",
             files={"notes.txt": NOTES, "link.h5": lambda p: p.symlink_to("notes.txt")}, labels=OUTPUT),
    cmd_case("out_under_proc", ["run", "scene.yaml", "-o", "/proc/mbsim-hostile-test.h5"],
             "/proc/mbsim-hostile-test.h5", labels=OUTPUT),
    cmd_case("out_proc_file", ["run", "scene.yaml", "-o", "/proc/self/status"], "/proc/self/status", labels=OUTPUT),
    cmd_case("out_dev_null", ["run", "scene.yaml", "-o", "/dev/null"], "/dev/null", labels=OUTPUT),
    cmd_case("out_scene_output_file_victim", ["run", "scene.yaml"], "victim.txt",
             scene=sub(PEND, "dimension: 2", "dimension: 2\noutput: {file: ../victim.txt}"),
             files={"../victim.txt": NOTES}, labels=OUTPUT),
    cmd_case("out_scene_output_file_is_scene", ["run", "scene.yaml"], "scene.yaml",
             scene=sub(PEND, "dimension: 2", "dimension: 2\noutput: {file: scene.yaml}"), labels=OUTPUT),
    cmd_case("out_scene_output_file_proc", ["run", "scene.yaml"], "/proc/version",
             scene=sub(PEND, "dimension: 2", "dimension: 2\noutput: {file: /proc/version}"), labels=OUTPUT),
    cmd_case("compare_outdir_is_a_file", ["compare", "scene.yaml", "--solvers", "lagrange", "-o", "notes.txt"],
             "notes.txt", files={"notes.txt": NOTES}, labels=OUTPUT + CLICK),
    cmd_case("compare_outdir_below_a_file", ["compare", "scene.yaml", "--solvers", "lagrange", "-o", "notes.txt/cmp"],
             "notes.txt", files={"notes.txt": NOTES}, labels=OUTPUT),
    cmd_case("compare_outdir_holds_foreign_file", ["compare", "scene.yaml", "--solvers", "lagrange", "-o", "cmp"],
             "lagrange.h5", files={"cmp/lagrange.h5": NOTES}, labels=OUTPUT),
    cmd_case("sweep_outdir_holds_foreign_file",
             ["sweep", "scene.yaml", "--param", "parameters.L=1,2", "-o", "swp", "--workers", "1"],
             "L-1.h5", files={"swp/L-1.h5": NOTES, "swp/L-2.h5": NOTES}, labels=OUTPUT, proc=True),
    cmd_case("plot_txt_suffix", ["plot", "r.h5", "-o", "p.txt"], "p.txt", files={"r.h5": RESULT},
             labels=OUTPUT + CMDLINE),
    cmd_case("plot_over_existing_text", ["plot", "r.h5", "-o", "notes.txt"], "notes.txt",
             files={"r.h5": RESULT, "notes.txt": NOTES}, labels=OUTPUT + CMDLINE),
    cmd_case("plot_over_text_named_png", ["plot", "r.h5", "-o", "x.png"], "x.png",
             files={"r.h5": RESULT, "x.png": NOTES}, labels=OUTPUT),
    cmd_case("plot_over_the_result", ["plot", "r.h5", "-o", "r.h5"], "r.h5", files={"r.h5": RESULT},
             labels=OUTPUT + CMDLINE),
    cmd_case("plot_over_the_scene", ["plot", "r.h5", "-o", "scene.yaml"], "scene.yaml", files={"r.h5": RESULT},
             labels=OUTPUT + CMDLINE),
    cmd_case("plot_below_a_file", ["plot", "r.h5", "-o", "notes.txt/p.png"], "notes.txt",
             files={"r.h5": RESULT, "notes.txt": NOTES}, labels=OUTPUT),
    cmd_case("plot_what_nonsense", ["plot", "r.h5", "-o", "p.png", "--what", "nonsense"], "nonsense",
             files={"r.h5": RESULT}),
    cmd_case("plot_what_bad_component", ["plot", "r.h5", "-o", "p.png", "--what", "bob.velocity.q"],
             "bob.velocity.q", files={"r.h5": RESULT}),
    cmd_case("plot_what_unknown_joint", ["plot", "r.h5", "-o", "p.png", "--what", "nojoint.reaction"],
             "nojoint", files={"r.h5": RESULT}),
    cmd_case("plot_what_only_commas", ["plot", "r.h5", "-o", "p.png", "--what", ",,,"], "--what",
             files={"r.h5": RESULT}),
    cmd_case("plot_text_file", ["plot", "notes.txt", "-o", "p.png"], "notes.txt", files={"notes.txt": NOTES},
             labels=INPUT_FILE),
    cmd_case("plot_foreign_hdf5", ["plot", "other.h5", "-o", "p.png"], "other.h5", files={"other.h5": foreign_hdf5},
             labels=INPUT_FILE),
    cmd_case("info_text_file", ["info", "notes.txt"], "notes.txt", files={"notes.txt": NOTES}, labels=INPUT_FILE),
    cmd_case("info_missing_file", ["info", "missing.h5"], "missing.h5", labels=INPUT_FILE),
    cmd_case("info_foreign_hdf5", ["info", "other.h5"], "other.h5", files={"other.h5": foreign_hdf5},
             labels=INPUT_FILE),
    cmd_case("info_fake_hdf5_signature", ["info", "fake.h5"], "fake.h5", files={"fake.h5": HDF5_SIGNATURE + JUNK},
             labels=INPUT_FILE),
    cmd_case("info_truncated_result", ["info", "trunc.h5"], "trunc.h5", files={"trunc.h5": TRUNCATED},
             labels=INPUT_FILE),
    cmd_case("info_directory", ["info", "adir"], "adir", files={"adir": DIR}, labels=INPUT_FILE),
    cmd_case("info_dev_null", ["info", "/dev/null"], "/dev/null", NOT_A_FILE, labels=INPUT_FILE),
    cmd_case("info_scene_file", ["info", "scene.yaml"], "scene.yaml", labels=INPUT_FILE),
    # ------------------------------------------------------------------ commands and options
    cmd_case("cmd_unknown_command", ["frobnicate", "scene.yaml"], "frobnicate"),
    cmd_case("cmd_run_without_scene", ["run"], "SCENE"),
    cmd_case("cmd_run_unknown_option", ["run", "scene.yaml", "--turbo"], "--turbo"),
    cmd_case("cmd_run_missing_scene", ["run", "missing.yaml", "-o", "out.h5"], "missing.yaml", labels=SCENE + CMDLINE),
    cmd_case("cmd_validate_directory", ["validate", "adir"], "adir", files={"adir": DIR}, labels=SCENE + CMDLINE),
    cmd_case("cmd_validate_dev_null", ["validate", "/dev/null"], "/dev/null", NOT_A_FILE, labels=SCENE + CMDLINE),
    cmd_case("cmd_validate_fifo", ["validate", "pipe.yaml"], "pipe.yaml", NOT_A_FILE, files={"pipe.yaml": fifo},
             labels=SCENE + CMDLINE, proc=True),
    cmd_case("cmd_run_assert_incomplete", ["run", "scene.yaml", "-o", "out.h5", "--assert", "energy_drift <"],
             "energy_drift <"),
    cmd_case("cmd_run_assert_import", ["run", "scene.yaml", "-o", "out.h5", "--assert", "__import__('os') < 1"],
             "__import__"),
    cmd_case("cmd_compare_solvers_empty", ["compare", "scene.yaml", "--solvers", "", "-o", "cmp"], "--solvers"),
    cmd_case("cmd_compare_solvers_commas", ["compare", "scene.yaml", "--solvers", ",,,", "-o", "cmp"], "--solvers"),
    cmd_case("cmd_compare_solvers_colon", ["compare", "scene.yaml", "--solvers", ":", "-o", "cmp"], "--solvers"),
    cmd_case("cmd_compare_solvers_unknown_method", ["compare", "scene.yaml", "--solvers", "lagrange,warp", "-o", "cmp"],
             "warp"),
    cmd_case("cmd_compare_solvers_unknown_option", ["compare", "scene.yaml", "--solvers", "lagrange:omeg=3", "-o",
                                                    "cmp"], "omeg"),
    cmd_case("cmd_compare_solvers_option_without_value", ["compare", "scene.yaml", "--solvers", "lagrange:omega",
                                                          "-o", "cmp"], "omega"),
    cmd_case("cmd_compare_solvers_unclosed_value", ["compare", "scene.yaml", "--solvers", "lagrange:rtol=[1,",
                                                    "-o", "cmp"], "--solvers"),
    cmd_case("cmd_compare_solvers_bad_value", ["compare", "scene.yaml", "--solvers", "lagrange:rtol=-1", "-o", "cmp"],
             "rtol", labels=MBSIM),
    cmd_case("cmd_compare_reference_unknown", ["compare", "scene.yaml", "--solvers", "lagrange", "--reference",
                                               "bogus", "-o", "cmp"], "bogus"),
    cmd_case("cmd_compare_repeat_zero", ["compare", "scene.yaml", "--solvers", "lagrange", "--repeat", "0", "-o",
                                         "cmp"], "--repeat"),
    cmd_case("cmd_compare_format_unknown", ["compare", "scene.yaml", "--solvers", "lagrange", "--format", "xml",
                                            "-o", "cmp"], "xml"),
    cmd_case("cmd_sweep_param_without_equals", ["sweep", "scene.yaml", "--param", "parameters.L", "-o", "swp"],
             "--param", proc=True),
    cmd_case("cmd_sweep_param_without_values", ["sweep", "scene.yaml", "--param", "parameters.L=", "-o", "swp"],
             "--param", proc=True),
    cmd_case("cmd_sweep_param_linspace_two_args", ["sweep", "scene.yaml", "--param", "parameters.L=linspace(1,2)",
                                                   "-o", "swp"], "linspace", proc=True),
    cmd_case("cmd_sweep_param_logspace_overflow", ["sweep", "scene.yaml", "--param",
                                                   "parameters.L=logspace(0,1000,3)", "-o", "swp"], "logspace",
             proc=True),
    cmd_case("cmd_sweep_param_hundred_million_cases", ["sweep", "scene.yaml", "--param",
                                                       "parameters.L=linspace(1,2,100000000)", "-o", "swp"],
             "--param", proc=True),
    cmd_case("cmd_sweep_param_unknown_key", ["sweep", "scene.yaml", "--param", "nonexistent.key=1,2", "-o", "swp"],
             "nonexistent", labels=MBSIM, proc=True),
    cmd_case("cmd_sweep_zip_lengths_differ", ["sweep", "scene.yaml", "--zip", "--param", "parameters.L=1,2",
                                              "--param", "parameters.theta0=1,2,3", "-o", "swp"], "--zip", proc=True),
    cmd_case("cmd_sweep_scheduler_garbage", ["sweep", "scene.yaml", "--param", "parameters.L=1,2", "-o", "swp",
                                             "--scheduler", "garbage"], "garbage", proc=True),
    cmd_case("cmd_sweep_scheduler_with_workers", ["sweep", "scene.yaml", "--param", "parameters.L=1,2", "-o", "swp",
                                                  "--scheduler", "tcp://127.0.0.1:9", "--workers", "2"],
             "--workers", proc=True),
    cmd_case("cmd_sweep_workers_zero", ["sweep", "scene.yaml", "--param", "parameters.L=1,2", "-o", "swp",
                                        "--workers", "0"], "--workers", proc=True),
    cmd_case("cmd_sweep_workers_negative", ["sweep", "scene.yaml", "--param", "parameters.L=1,2", "-o", "swp",
                                            "--workers", "-3"], "--workers", proc=True),
    cmd_case("cmd_sweep_retries_negative", ["sweep", "scene.yaml", "--param", "parameters.L=1,2", "-o", "swp",
                                            "--retries", "-1", "--workers", "1"], "--retries", proc=True),
]
# fmt: on

CASE_BY_ID = {c.id: c for c in CASES}
assert len(CASE_BY_ID) == len(CASES), "case ids must be unique"
IN_PROCESS = [c for c in CASES if not c.proc]
IN_SUBPROCESS = [c for c in CASES if c.proc]


# ----------------------------------------------------------------------------- running and checking


@dataclass
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    elapsed: float
    max_rss_kib: int | None = None
    timed_out: bool = False


def snapshot(root: Path) -> dict[str, str]:
    """Every file below ``root``: its sha256 (symlinks: their target)."""
    out: dict[str, str] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "symlink -> " + os.readlink(path)
            elif path.is_file():
                digest = hashlib.sha256()
                with path.open("rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        digest.update(chunk)
                out[rel] = digest.hexdigest()
            else:
                out[rel] = "special"
    return out


def first_lines(text: str, n: int = 3, width: int = 300) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()][:n]
    return " / ".join(line[:width] for line in lines) or "(nothing)"


def check(case: Case, call: Call, out: Outcome, before: dict[str, str], after: dict[str, str]) -> None:
    """Exit 2, labelled message with the fragments (and line), no traceback, nothing changed or written."""
    problems = []
    if out.timed_out:
        problems.append(f"still running after {TIMEOUT_S:.0f} s (killed)")
    if out.code != 2:
        problems.append(f"exit code {out.code}, expected 2")
    if "Traceback" in out.stdout + out.stderr:
        problems.append("a Python traceback")
    err = out.stderr
    if not any(re.search(label, err, re.M) for label in case.labels):
        problems.append(f"no message labelled {' or '.join(repr(label) for label in case.labels)}")
    for fragment in case.fragments:
        options = fragment if isinstance(fragment, tuple) else (fragment,)
        if not any(option in err for option in options):
            problems.append(f"stderr does not name {' or '.join(repr(o[:60]) for o in options)}")
    if call.line is not None and f"scene.yaml:{call.line}:" not in err:
        problems.append(f"stderr does not name the line (scene.yaml:{call.line}:)")
    for text in case.not_in:
        if text in err:
            problems.append(f"stderr shows {text!r}")
    changed = sorted(k for k in before if after.get(k) != before[k])
    if changed:
        problems.append(f"files changed or removed: {changed}")
    written = sorted(set(after) - set(before))
    if written:
        problems.append(f"files written: {written[:5]}")
    if out.max_rss_kib is not None and out.max_rss_kib > MAX_RSS_KIB:
        problems.append(f"peak memory {out.max_rss_kib / 1024:.0f} MiB")
    if not out.timed_out and out.elapsed > (TIMEOUT_S if case.proc else IN_PROCESS_LIMIT_S):
        problems.append(f"took {out.elapsed:.1f} s")
    assert not problems, (
        f"{case.id}: {'; '.join(problems)} | exit {out.code}, {out.elapsed:.1f} s | stderr: {first_lines(err)}"
    )


@pytest.fixture(scope="module")
def result_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed mbsim result file (the short pendulum), for the info and plot cases."""
    where = tmp_path_factory.mktemp("good-result")
    scene = where / "pendulum.yaml"
    scene.write_text(PEND, encoding="utf-8")
    out = where / "pendulum.h5"
    result = CliRunner().invoke(cli, ["run", str(scene), "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out


def run_in_process(args: list[str]) -> Outcome:
    start = time.monotonic()
    result = CliRunner().invoke(cli, args, prog_name="mbsim", catch_exceptions=True)
    elapsed = time.monotonic() - start
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "\n(uncaught in-process) " + "".join(traceback.format_exception(*result.exc_info))
    return Outcome(result.exit_code, result.stdout, stderr, elapsed)


@pytest.mark.parametrize("case", IN_PROCESS, ids=[c.id for c in IN_PROCESS])
def test_hostile_input(case: Case, tmp_path: Path, result_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    call = case.build(cwd, result_file)
    before = snapshot(tmp_path)
    out = run_in_process(call.args)
    check(case, call, out, before, snapshot(tmp_path))


# Runs ``python -m mbsim ARGS`` as its child and writes the child's peak resident memory (KiB) to
# the file argv[1]. The intermediate process matters: Linux keeps a process's peak memory across
# exec, so a child forked straight from pytest would report pytest's own peak.
MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-m", "mbsim", *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


def run_subprocess(args: list[str], cwd: Path, logs: Path) -> Outcome:
    """``python -m mbsim ARGS`` in ``cwd``; killed (its whole process group) after TIMEOUT_S; peak memory."""
    stdout_path, stderr_path, rss_path = logs / "stdout", logs / "stderr", logs / "max_rss_kib"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", MEASURE, str(rss_path), *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=TIMEOUT_S)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        elapsed = time.monotonic() - start
    with contextlib.suppress(ProcessLookupError):  # the command's own children (a Dask cluster) go with it
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rss = rss_path.read_text() if rss_path.exists() else ""
    return Outcome(
        None if timed_out else proc.returncode,
        stdout_path.read_text(errors="replace"),
        stderr_path.read_text(errors="replace"),
        elapsed,
        max_rss_kib=int(rss) if rss.strip() else None,
        timed_out=timed_out,
    )


@pytest.fixture(scope="module")
def subprocess_outcomes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, result_file: Path
) -> dict[str, tuple[Call, Outcome, dict[str, str], dict[str, str]]]:
    """Runs every selected subprocess case at once, a few in parallel; by case id."""
    selected = [
        item.callspec.params["case"]
        for item in request.session.items
        if getattr(item, "originalname", "") == "test_hostile_input_in_subprocess" and hasattr(item, "callspec")
    ]

    def one(case: Case):
        root = tmp_path_factory.mktemp(case.id[:40])
        cwd = root / "cwd"
        cwd.mkdir()
        logs = tmp_path_factory.mktemp("logs")
        call = case.build(cwd, result_file)
        before = snapshot(root)
        out = run_subprocess(call.args, cwd, logs)
        return case.id, (call, out, before, snapshot(root))

    with ThreadPoolExecutor(max_workers=max(2, min(4, 2 * (os.cpu_count() or 1)))) as pool:
        return dict(pool.map(one, selected))


@pytest.mark.slow
@pytest.mark.parametrize("case", IN_SUBPROCESS, ids=[c.id for c in IN_SUBPROCESS])
def test_hostile_input_in_subprocess(case: Case, subprocess_outcomes) -> None:
    call, out, before, after = subprocess_outcomes[case.id]
    check(case, call, out, before, after)


def test_the_sweep_is_wide_enough() -> None:
    """At least 170 hostile inputs (the issue's count)."""
    assert len(CASES) >= 170


@pytest.mark.parametrize("name", ["PEND", "CHAIN", "BLOCKS"])
def test_base_scenes_are_valid(name: str, tmp_path: Path) -> None:
    """The cases fail because of their one edit, not because the shortened base scenes are wrong."""
    scene = tmp_path / "scene.yaml"
    scene.write_text(globals()[name], encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(scene)])
    assert result.exit_code == 0, result.output
