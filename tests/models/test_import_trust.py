"""Imported models are untrusted input (issue 28, items 4, 7 and 11): whatever is wrong in a URDF
or MJCF file, or in a file it names, is exit 2 naming the MODEL file, the element and the line,
through `mbsim import` and through a scene's `models:` alike, within seconds; nothing is silently
dropped or merged, nothing read blocks (FIFOs, devices, folders), no traceback. An import that
succeeds writes a scene that `validate` accepts.

Every case runs the real command in a subprocess with a timeout."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "safety"))
from cli_process import run_mbsim  # noqa: E402
from quick_loop import quick  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PENDULUM_MJCF = ROOT / "tests" / "data" / "robots" / "double_pendulum_slider.xml"
TIMEOUT = 60  # every case ends in seconds; a hang fails here instead of blocking the suite

INERTIAL = """<inertial><origin xyz="0 0 -0.5"/><mass value="1.0"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.01"/></inertial>"""

# a two-link arm: line numbers below are those of this text
ARM = f"""<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="upper">
    {INERTIAL}
  </link>
  <link name="fore">
    {INERTIAL}
  </link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0" rpy="0 0 0"/>
    <axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/>
    <dynamics damping="0.1"/>
  </joint>
  <joint name="elbow" type="continuous">
    <parent link="upper"/><child link="fore"/>
    <origin xyz="0 0 -1" rpy="0 0 0"/>
    <axis xyz="0 1 0"/>
  </joint>
</robot>
"""


def line_of(text: str, needle: str, start: int = 0) -> int:
    """The 1-based line of the first ``needle`` at or after ``start``."""
    return text[: text.index(needle, start)].count("\n") + 1


def mutate(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text, old
    return text.replace(old, new, count)


def scene_with(tmp_path: Path, model: Path, **entry) -> Path:
    """A scene with one models: entry (a pendulum beside it, so it is a scene without the model too)."""
    scene = {
        "mbsim": 1,
        "name": "with a model",
        "gravity": [0, 0, -9.81],
        "time": {"end": 0.01, "step": 1e-3},
        "solver": {"method": "lagrange", "integrator": "rk4"},
        "models": [{"file": model.name if model.parent == tmp_path else str(model), **entry}],
    }
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(scene), encoding="utf-8")
    return path


def refused(result: tuple[int, str, str], *needles: str) -> str:
    """Exit 2, no traceback, one message containing every needle; the message."""
    code, out, err = result
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert "RuntimeWarning" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert len(err) < 2000, err  # one message, however long the offending text
    return err


def import_and_scene(tmp_path: Path, model: Path, *needles: str, **entry) -> None:
    """Both doors refuse the model with a message naming the model file and ``needles``;
    through models:, no key of the scene is blamed."""
    err = refused(run_mbsim("import", model, timeout=TIMEOUT), str(model), *needles)
    assert "models[0]" not in err
    scene = scene_with(tmp_path, model, **entry)
    err = refused(run_mbsim("validate", scene, timeout=TIMEOUT), *needles)
    assert model.name in err and "models[0]" not in err, err  # the model file, not a line of the scene


def accepted(tmp_path: Path, model: Path, *args: str) -> dict:
    """``mbsim import`` writes a scene and ``validate`` accepts it; the scene as data."""
    out = tmp_path / "imported.yaml"
    code, _, err = run_mbsim("import", model, "-o", out, *args, timeout=TIMEOUT)
    assert code == 0, err
    code, _, err = run_mbsim("validate", out, timeout=TIMEOUT)
    assert code == 0, err
    return yaml.safe_load(out.read_text())


def write(tmp_path: Path, text: str | bytes, name: str = "robot.urdf") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --- item 4: what import must refuse, named in the model file ---------------------------------


def test_the_arm_itself_imports(tmp_path):
    """The base case every mutation starts from: two bodies, two revolute joints."""
    scene = accepted(tmp_path, write(tmp_path, ARM))
    assert [b["name"] for b in scene["bodies"]] == ["upper", "fore"]
    assert [j["name"] for j in scene["joints"]] == ["shoulder", "elbow"]


STRUCTURE = {
    # id: (mutation of ARM, needles; "@LINE" is the line of the given text in the mutated file)
    "duplicate_joint_name": (('name="elbow"', 'name="shoulder"'), ("joint 'shoulder'", "duplicate joint name")),
    "duplicate_link_name": (('<link name="fore">', '<link name="upper">'), ("link 'upper'", "duplicate link name")),
    "link_with_two_parents": (
        ('<parent link="upper"/><child link="fore"/>', '<parent link="base"/><child link="upper"/>'),
        ("joint 'elbow'", "the child of two joints"),
    ),
    "missing_parent_link": (
        ('<parent link="upper"/>', '<parent link="nowhere"/>'),
        ("joint 'elbow' <parent>", "'nowhere' is not in the file"),
    ),
    "missing_child_link": (
        ('<child link="fore"/>', '<child link="nowhere"/>'),
        ("joint 'elbow' <child>", "'nowhere' is not in the file"),
    ),
    "joint_to_itself": (
        ('<parent link="upper"/><child link="fore"/>', '<parent link="fore"/><child link="fore"/>'),
        ("joint 'elbow'", "to itself"),
    ),
    "no_parent_element": (('<parent link="upper"/>', ""), ("joint 'elbow'", "missing element <parent>")),
    "two_origins": (
        ('<origin xyz="0 0 -1" rpy="0 0 0"/>', '<origin xyz="0 0 -1"/><origin xyz="0 0 -2"/>'),
        ("joint 'elbow' <origin>", "more than one <origin>"),
    ),
    "two_inertials": (
        ('</link>\n  <link name="fore">', f'{INERTIAL}</link>\n  <link name="fore">'),
        ("link 'upper' <inertial>", "more than one <inertial>"),
    ),
    "two_masses": (
        ('<mass value="1.0"/>', '<mass value="1.0"/><mass value="2.0"/>'),
        ("link 'upper' <inertial> <mass>", "more than one <mass>"),
    ),
    "inertial_without_mass": (('<mass value="1.0"/>', ""), ("link 'upper' <inertial>", "missing element <mass>")),
    "inertial_without_inertia": (
        ('<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.01"/>', ""),
        ("link 'upper' <inertial>", "missing element <inertia>"),
    ),
    "mass_without_value": (('<mass value="1.0"/>', "<mass/>"), ("<mass>", "missing attribute 'value'")),
    "inertia_without_ixx": (('ixx="0.1" ', ""), ("<inertia>", "missing attribute 'ixx'")),
    "axis_without_xyz": (('<axis xyz="0 1 0"/>\n  </joint>', "<axis/>\n  </joint>"), ("joint 'elbow' <axis>", "'xyz'")),
    "joint_without_name": (('<joint name="elbow"', "<joint"), ("a <joint> without a name",)),
    "link_without_name": (('<link name="fore">', "<link>"), ("a <link> without a name",)),
    "mimic_itself": (
        ('<axis xyz="0 1 0"/>\n  </joint>', '<axis xyz="0 1 0"/><mimic joint="elbow"/>\n  </joint>'),
        ("joint 'elbow' <mimic>", "cannot follow itself"),
    ),
    "mimic_unknown": (
        ('<axis xyz="0 1 0"/>\n  </joint>', '<axis xyz="0 1 0"/><mimic joint="wrist"/>\n  </joint>'),
        ("joint 'elbow' <mimic>", "'wrist', which is not in the file"),
    ),
    "mimic_without_joint": (
        ('<axis xyz="0 1 0"/>\n  </joint>', '<axis xyz="0 1 0"/><mimic/>\n  </joint>'),
        ("joint 'elbow' <mimic>", "without a joint"),
    ),
    "negative_damping": (('damping="0.1"', 'damping="-0.1"'), ("joint 'shoulder' <dynamics damping>", "negative")),
    "negative_friction": (
        ('damping="0.1"', 'damping="0.1" friction="-0.5"'),
        ("joint 'shoulder' <dynamics friction>", "negative friction"),
    ),
    "limits_upside_down": (('lower="-3" upper="3"', 'lower="3" upper="-3"'), ("joint 'shoulder' <limit>", "above")),
}


@pytest.mark.parametrize("case", quick(sorted(STRUCTURE), keep="duplicate_link_name"))
def test_broken_structure_is_refused_naming_model_element_and_line(tmp_path, case):
    """Duplicates, dangling or doubled references, doubled single elements, missing required
    parts: exit 2 from `mbsim import` and from `validate` of a scene with the model, naming the
    model file, the element and the line of the offending element (never a key of the scene)."""
    (old, new), needles = STRUCTURE[case]
    text = mutate(ARM, old, new)
    model = write(tmp_path, text)
    import_and_scene(tmp_path, model, *needles)
    code, _, err = run_mbsim("import", model, timeout=TIMEOUT)
    line = int(re.search(r"robot\.urdf:(\d+)", err).group(1))
    assert 1 <= line <= text.count("\n") + 1


def test_duplicate_joint_names_name_both_lines(tmp_path):
    """The issue's case: two joints named 'shoulder' (one was silently dropped and its link floated
    free): refused at the second one's line, naming the first one's."""
    text = mutate(ARM, 'name="elbow"', 'name="shoulder"')
    model = write(tmp_path, text)
    first, second = (
        line_of(text, '<joint name="shoulder"'),
        text[: text.rindex('<joint name="shoulder"')].count("\n") + 1,
    )
    err = refused(run_mbsim("import", model, timeout=TIMEOUT), f"{model}:{second}:", f"also line {first}")
    assert "joint 'shoulder'" in err


BAD_NUMBERS = {
    "nan": "nan",
    "inf": "inf",
    "minus_inf": "-inf",
    "overflow": "1e999",
    "garbage": "abc",
    "hex": "0x10",
    "underscore": "1_0",
}
NUMERIC = {
    # id: (the attribute's text in ARM, its element's text, how to put a value in)
    "mass": ('value="1.0"', "link 'upper' <inertial> <mass value>", 'value="{}"'),
    "ixx": ('ixx="0.1"', "link 'upper' <inertial> <inertia ixx>", 'ixx="{}"'),
    "izz": ('izz="0.01"', "link 'upper' <inertial> <inertia izz>", 'izz="{}"'),
    "ixy": ('ixy="0"', "link 'upper' <inertial> <inertia ixy>", 'ixy="{}"'),
    "inertial_origin": ('<origin xyz="0 0 -0.5"/>', "link 'upper' <inertial> <origin xyz>", '<origin xyz="0 0 {}"/>'),
    "joint_xyz": (
        '<origin xyz="0 0 0" rpy="0 0 0"/>',
        "joint 'shoulder' <origin xyz>",
        '<origin xyz="{} 0 0" rpy="0 0 0"/>',
    ),
    "joint_rpy": (
        '<origin xyz="0 0 0" rpy="0 0 0"/>',
        "joint 'shoulder' <origin rpy>",
        '<origin xyz="0 0 0" rpy="0 {} 0"/>',
    ),
    "axis": ('<axis xyz="0 1 0"/>', "joint 'shoulder' <axis xyz>", '<axis xyz="0 1 {}"/>'),
    "limit": ('lower="-3"', "joint 'shoulder' <limit lower>", 'lower="{}"'),
    "damping": ('damping="0.1"', "joint 'shoulder' <dynamics damping>", 'damping="{}"'),
}


@pytest.mark.parametrize("bad", quick(sorted(BAD_NUMBERS), keep="nan"))
@pytest.mark.parametrize("attribute", quick(sorted(NUMERIC), keep="mass"))
def test_every_number_must_be_a_finite_decimal(tmp_path, attribute, bad):
    """nan, inf, an overflowing decimal, text, hex or Python's underscores in any number of the
    file: exit 2 naming the element and attribute at its line (a NaN axis was exit 1 "SVD did not
    converge"; a NaN mass was exit 0 and a scene validate then refused)."""
    old, element, template = NUMERIC[attribute]
    text = mutate(ARM, old, template.format(BAD_NUMBERS[bad]))
    model = write(tmp_path, text)
    line = line_of(text, template.format(BAD_NUMBERS[bad]))
    err = refused(run_mbsim("import", model, timeout=TIMEOUT), f"{model}:{line}:", element, BAD_NUMBERS[bad])
    assert "not a finite" in err or "finite decimal" in err or "overflows" in err


@pytest.mark.parametrize("attribute", quick(["mass", "ixx", "axis", "joint_rpy"], keep="mass"))
def test_bad_numbers_through_a_scene_name_the_model_not_the_scene(tmp_path, attribute):
    """The same refusal through `models:`: the model file and its line, not a key of the scene."""
    old, element, template = NUMERIC[attribute]
    model = write(tmp_path, mutate(ARM, old, template.format("nan")))
    import_and_scene(tmp_path, model, element)


COUNTS = {
    "two_of_three": ('<axis xyz="0 1 0"/>', '<axis xyz="0 1"/>', "expected 3 numbers"),
    "four_of_three": ('<origin xyz="0 0 0" rpy="0 0 0"/>', '<origin xyz="0 0 0 0" rpy="0 0 0"/>', "expected 3 numbers"),
    "empty": ('value="1.0"', 'value=""', "expected 1 number"),
    "huge_list": ('<axis xyz="0 1 0"/>', '<axis xyz="' + "1 " * 100000 + '"/>', "expected 3 numbers"),
    "huge_token": ('value="1.0"', 'value="' + "9" * 200000 + '"', "overflows"),
}


@pytest.mark.parametrize("case", quick(sorted(COUNTS), keep="two_of_three"))
def test_wrong_counts_and_huge_attributes_are_one_short_message(tmp_path, case):
    """Too few, too many, none, 100 000 numbers where three belong, a 200 000-digit number: exit 2
    with one short message (the offending text cut), quickly."""
    old, new, needle = COUNTS[case]
    refused(run_mbsim("import", write(tmp_path, mutate(ARM, old, new)), timeout=TIMEOUT), needle)


PHYSICS = {
    "negative_mass": (('value="1.0"', 'value="-1"'), "link 'upper' <inertial> <mass>", "negative"),
    "zero_mass_moving": (('value="1.0"', 'value="0"'), "link 'upper'", "no mass"),
    "negative_ixx": (('ixx="0.1"', 'ixx="-0.1"'), "link 'upper' <inertial> <inertia>", "positive semi-definite"),
    "not_semidefinite": (('ixy="0"', 'ixy="0.5"'), "link 'upper' <inertial> <inertia>", "positive semi-definite"),
    "triangle": (('izz="0.01"', 'izz="0.5"'), "link 'upper' <inertial> <inertia>", "triangle inequality"),
    "point_mass_alone": (
        ('ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.01"', 'ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"'),
        "link 'upper'",
        "positive definite",
    ),
}


@pytest.mark.parametrize("case", quick(sorted(PHYSICS), keep="negative_mass"))
def test_unphysical_mass_properties_are_refused_in_the_model(tmp_path, case):
    """Negative mass, a massless moving link, an inertia that is not positive semi-definite or
    breaks the triangle inequality, a moving body with no rotational inertia: exit 2 from both
    doors naming the link (was exit 0 and a scene validate refused at a line that is not there)."""
    (old, new), element, needle = PHYSICS[case]
    model = write(tmp_path, mutate(ARM, old, new))
    import_and_scene(tmp_path, model, element, needle)


@pytest.mark.slow  # ~2 s (three processes)
def test_rotated_inertia_is_checked_as_a_whole(tmp_path):
    """A valid inertia with products of inertia (a rotated box) imports; the same with one
    principal moment past the triangle bound does not."""
    good = 'ixx="0.2" ixy="0.05" ixz="0" iyy="0.2" iyz="0" izz="0.3"'
    base = 'ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.01"'
    accepted(tmp_path, write(tmp_path, mutate(ARM, base, good)))
    bad = 'ixx="0.2" ixy="0.05" ixz="0" iyy="0.2" iyz="0" izz="0.5"'
    refused(run_mbsim("import", write(tmp_path, mutate(ARM, base, bad)), timeout=TIMEOUT), "triangle")


AXES = {
    "zero": ("0 0 0", None),
    "minus_zero": ("-0 0 -0.0", None),
    "subnormal": ("1e-320 0 0", [1, 0, 0]),
    "huge": ("1e200 1e200 1e200", [3**-0.5] * 3),
    "unnormalised": ("0 3 4", [0, 0.6, 0.8]),
}


@pytest.mark.parametrize("case", quick(sorted(AXES), keep="zero"))
def test_an_axis_is_a_direction_or_refused(tmp_path, case):
    """A zero axis is refused naming the joint; any other finite one is a direction, even when its
    squared length would under- or overflow."""
    axis, direction = AXES[case]
    model = write(tmp_path, mutate(ARM, '<axis xyz="0 1 0"/>', f'<axis xyz="{axis}"/>'))
    if direction is None:
        import_and_scene(tmp_path, model, "joint 'shoulder' <axis xyz>", "no direction")
    else:
        assert accepted(tmp_path, model)["joints"][0]["axis"] == pytest.approx(direction, abs=1e-15)


@pytest.mark.parametrize("value", quick(["1e300", "1e-300"], keep="1e300"))
@pytest.mark.slow  # ~3 s (four processes); a variant of test_every_number_must_be_a_finite_decimal
def test_extreme_but_finite_sizes_either_import_and_validate_or_are_refused(tmp_path, value):
    """Huge or tiny finite numbers: the import either writes a scene validate accepts or refuses
    with exit 2 — never a traceback, and a scene validate refuses only for the one key it names."""
    for old, new in (('value="1.0"', f'value="{value}"'), ('<origin xyz="0 0 -1"', f'<origin xyz="0 0 {value}"')):
        model = write(tmp_path, mutate(ARM, old, new))
        out = tmp_path / "x.yaml"
        code, _, err = run_mbsim("import", model, "-o", out, timeout=TIMEOUT)
        assert code in (0, 2) and "Traceback" not in err and "RuntimeWarning" not in err, err
        if code == 0:
            code, _, err = run_mbsim("validate", out, timeout=TIMEOUT)
            # the one refusal allowed: an arm 1e300 m long has no finite default for its limit's
            # compliant stop (its effective inertia overflows), and validate says which keys to give
            stop = "joints[0].limits" in err and "give limits.stiffness and limits.damping" in err
            assert code == 0 or (code == 2 and stop and "Traceback" not in err), err
        out.unlink(missing_ok=True)


@pytest.mark.parametrize("kind", quick(["planar", "", "REVOLUTE", "screw", "revolute "], keep="screw"))
def test_unknown_joint_types_are_refused(tmp_path, kind):
    model = write(tmp_path, mutate(ARM, 'type="continuous"', f'type="{kind}"'))
    import_and_scene(tmp_path, model, "joint 'elbow'", "is not supported")


def test_missing_joint_type_is_refused(tmp_path):
    model = write(tmp_path, mutate(ARM, ' type="continuous"', ""))
    refused(run_mbsim("import", model, timeout=TIMEOUT), "joint 'elbow'", "missing attribute 'type'")


# --- mimic ------------------------------------------------------------------------------------


def chain(n: int, mimics: dict[int, int], kinds: dict[int, str] | None = None) -> str:
    """A chain of n moving links; joint i mimics joint mimics[i]."""
    kinds = kinds or {}
    links = ['<link name="l0"/>'] + [f'<link name="l{i}">{INERTIAL}</link>' for i in range(1, n + 1)]
    joints = []
    for i in range(1, n + 1):
        mimic = f'<mimic joint="j{mimics[i]}" multiplier="0.5" offset="0.1"/>' if i in mimics else ""
        joints.append(
            f'<joint name="j{i}" type="{kinds.get(i, "revolute")}"><parent link="l{i - 1}"/><child link="l{i}"/>'
            f'<origin xyz="0 0 -1"/><axis xyz="0 1 0"/>{mimic}</joint>'
        )
    return '<robot name="chain">\n' + "\n".join(links + joints) + "\n</robot>\n"


MIMICS = {
    "self": ({2: 2}, None, "cannot follow itself"),
    "two_cycle": ({2: 3, 3: 2}, None, "cycle"),
    "three_cycle": ({1: 2, 2: 3, 3: 1}, None, "cycle"),
    "follows_fixed": ({2: 1}, {1: "fixed"}, "no coordinate"),
    "fixed_follows": ({1: 2}, {1: "fixed"}, "no coordinate"),
    "follows_floating": ({2: 1}, {1: "floating"}, "no coordinate"),
}


@pytest.mark.parametrize("case", quick(sorted(MIMICS), keep="two_cycle"))
def test_mimic_cycles_and_mimics_of_joints_without_coordinate_are_refused(tmp_path, case):
    mimics, kinds, needle = MIMICS[case]
    model = write(tmp_path, chain(4, mimics, kinds))
    import_and_scene(tmp_path, model, "<mimic>", needle)


@pytest.mark.slow  # ~2 s; mimics: test_import.py::test_urdf_mimic_is_a_coupling_and_the_panda_matches_pinocchio
def test_a_mimic_chain_imports_and_starts_consistent(tmp_path):
    """j3 follows j2 which follows j1 (a chain, not a cycle): imported as two couplings, and
    j3 starts where j2's start puts it (leaders placed first, whatever the order in the file)."""
    text = chain(3, {3: 2, 2: 1})
    model = write(tmp_path, text)
    scene = scene_with(tmp_path, model, joint_positions={"j1": 0.4})
    code, out, err = run_mbsim("validate", scene, "--strict", timeout=TIMEOUT)
    assert code == 0, err  # --strict: the start needs no assembly, so j3 = 0.5 * (0.5 * 0.4 + 0.1) + 0.1
    imported = accepted(tmp_path, model)
    assert sorted(c["joint"] for c in imported["couplings"]) == ["j2", "j3"]


# --- ground -----------------------------------------------------------------------------------


@pytest.mark.slow  # ~3 s; the quick loop keeps test_a_root_link_named_ground_is_the_ground
def test_a_link_named_ground_is_refused_unless_a_prefix_renames_it(tmp_path):
    """A moving link named 'ground' merged silently into the world; now exit 2 naming it and
    suggesting a prefix; with a prefix it is a body of its own that moves."""
    model = write(tmp_path, ARM.replace('"upper"', '"ground"'))
    import_and_scene(tmp_path, model, "link 'ground'", "prefix")
    scene = accepted(tmp_path, model, "--prefix", "r_")
    assert [b["name"] for b in scene["bodies"]] == ["r_ground", "r_fore"]
    assert scene["joints"][0]["body2"] == "r_ground" and scene["joints"][1]["body1"] == "r_ground"
    code, _, err = run_mbsim("validate", scene_with(tmp_path, model, prefix="r_"), timeout=TIMEOUT)
    assert code == 0, err


def test_a_root_link_named_ground_is_the_ground(tmp_path):
    """The root link welded to the world may be called ground (it is the ground); floating it
    would make a body named ground, refused."""
    model = write(tmp_path, ARM.replace('"base"', '"ground"'))
    scene = accepted(tmp_path, model)
    assert scene["joints"][0]["body1"] == "ground"
    refused(run_mbsim("import", model, "--base", "free", timeout=TIMEOUT), "link 'ground'", "prefix")


@pytest.mark.slow  # ~3 s; the quick loop keeps test_a_root_link_named_ground_is_the_ground
def test_an_mjcf_body_named_ground_is_refused_unless_prefixed(tmp_path):
    text = PENDULUM_MJCF.read_text().replace('name="lower"', 'name="ground"')
    model = write(tmp_path, text, "pendulum.xml")
    import_and_scene(tmp_path, model, "link 'ground'", "prefix")
    assert "m_ground" in [b["name"] for b in accepted(tmp_path, model, "--prefix", "m_")["bodies"]]


# --- model files that are not files (items 7 and 11) ------------------------------------------


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind", quick(["fifo", "directory", "device"], keep="fifo"))
def test_a_model_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    """A FIFO (said "not found", or blocked), a folder or a device as the model: exit 2 saying
    what it is, in seconds, through both doors."""
    if kind == "fifo":
        model, needle = fifo(tmp_path / "robot.urdf"), "is a FIFO (named pipe), not a regular file"
    elif kind == "directory":
        model, needle = tmp_path / "robot.urdf", "is a directory"
        model.mkdir()
    else:
        model, needle = Path("/dev/zero"), "is a character device"
    refused(run_mbsim("import", model, "--format", "urdf", timeout=10), needle)
    scene = scene_with(tmp_path, model, format="urdf")
    refused(run_mbsim("validate", scene, timeout=10), needle, "models[0].file")


MJCF_REFS = {
    # id: (the reference's element, put in the file; the file it names is made a FIFO)
    "include": '<include file="part.xml"/>',
    "mesh": '<asset><mesh name="m" file="part.stl"/></asset>',
    "mesh_in_meshdir": '<compiler meshdir="meshes"/><asset><mesh name="m" file="part.stl"/></asset>',
    "hfield": '<asset><hfield name="h" file="part.png"/></asset>',
    "texture": '<asset><texture name="t" type="2d" file="part.png"/></asset>',
    "cube_face": '<asset><texture name="t" type="cube" fileright="part.png" fileleft="a.png"/></asset>',
    "skin": '<deformable><skin name="s" file="part.skn"/></deformable>',
}


def mjcf_with(reference: str) -> str:
    return mutate(
        PENDULUM_MJCF.read_text(), '<option gravity="0 0 -9.81"/>', f'<option gravity="0 0 -9.81"/>\n  {reference}'
    )


@pytest.mark.parametrize("case", quick(sorted(MJCF_REFS), keep="mesh"))
def test_a_fifo_named_by_an_mjcf_file_never_blocks(tmp_path, case):
    """Each file an MJCF model names (include, mesh, height field, texture, skin; in a <compiler>
    folder too) is checked before MuJoCo reads any: a FIFO is exit 2 naming the element and the
    line, in seconds (it blocked forever)."""
    reference = MJCF_REFS[case]
    name = re.search(r'file(?:right)?="([^"]+)"', reference).group(1)
    folder = tmp_path / "meshes" if "meshdir" in reference else tmp_path
    folder.mkdir(exist_ok=True)
    fifo(folder / name)
    text = mjcf_with(reference)
    model = write(tmp_path, text, "model.xml")
    err = refused(run_mbsim("import", model, timeout=10), "FIFO", f"{model}:{line_of(text, reference)}:")
    assert name in err
    refused(run_mbsim("validate", scene_with(tmp_path, model), timeout=10), "FIFO")


def test_a_fifo_in_a_nested_include_is_named_in_the_including_file(tmp_path):
    (tmp_path / "parts").mkdir()
    write(tmp_path, '<mujocoinclude>\n\n<include file="deeper.xml"/>\n</mujocoinclude>\n', "parts/inner.xml")
    fifo(tmp_path / "parts" / "deeper.xml")
    model = write(tmp_path, mjcf_with('<include file="parts/inner.xml"/>'), "model.xml")
    refused(run_mbsim("import", model, timeout=10), f"{tmp_path / 'parts' / 'inner.xml'}:3:", "FIFO")


def test_urdf_meshes_that_are_fifos_are_refused(tmp_path):
    """A URDF <mesh filename> (relative or package://) that is a FIFO: exit 2 naming the link,
    with collisions imported and without."""
    (tmp_path / "pkg" / "meshes").mkdir(parents=True)
    fifo(tmp_path / "pkg" / "meshes" / "arm.stl")
    for uri in ("pkg/meshes/arm.stl", "package://pkg/meshes/arm.stl"):
        collision = f'<collision><geometry><mesh filename="{uri}"/></geometry></collision>'
        model = write(
            tmp_path, mutate(ARM, '</link>\n  <link name="fore">', f'{collision}</link>\n  <link name="fore">')
        )
        refused(run_mbsim("import", model, timeout=10), "link 'upper' <collision> <mesh>", "FIFO")
        scene = scene_with(tmp_path, model, collisions=True)
        refused(run_mbsim("validate", scene, timeout=10), "link 'upper' <collision> <mesh>", "FIFO")


INCLUDES = {
    "itself": ('<include file="model.xml"/>', None, "already included"),
    "each_other": (
        '<include file="b.xml"/>',
        ("b.xml", '<mujocoinclude><include file="model.xml"/></mujocoinclude>'),
        "already included",
    ),
    "a_directory": ('<include file="."/>', None, "is a directory"),
    "missing": ('<include file="nowhere.xml"/>', None, "is not found"),
    "empty_name": ('<include file=""/>', None, "<include> without a file"),
    "dev_zero": ('<include file="/dev/zero"/>', None, "is a character device"),
}


@pytest.mark.parametrize("case", quick(sorted(INCLUDES), keep="itself"))
def test_hostile_includes_are_refused_in_seconds(tmp_path, case):
    """An include of itself or a cycle, of a folder, of a missing file, of a device: exit 2 in
    seconds, naming the include."""
    reference, extra, needle = INCLUDES[case]
    if extra:
        write(tmp_path, extra[1], extra[0])
    model = write(tmp_path, mjcf_with(reference), "model.xml")
    refused(run_mbsim("import", model, timeout=10), needle)


@pytest.mark.parametrize("where", quick(["absolute", "dotdot"], keep="dotdot"))
@pytest.mark.slow  # ~2 s (import, then validate)
def test_includes_outside_the_model_folder_are_read(tmp_path, where):
    """An include by absolute path or through .. is an ordinary file of the user's: it is read
    (its bodies imported), checked like any other."""
    (tmp_path / "common").mkdir()
    (tmp_path / "robot").mkdir()
    part = write(tmp_path, '<mujocoinclude><option gravity="0 0 -1.5"/></mujocoinclude>', "common/gravity.xml")
    ref = str(part) if where == "absolute" else "../common/gravity.xml"
    text = PENDULUM_MJCF.read_text().replace('<option gravity="0 0 -9.81"/>', f'<include file="{ref}"/>')
    scene = accepted(tmp_path, write(tmp_path, text, "robot/model.xml"))
    assert scene["gravity"] == [0.0, 0.0, -1.5]


def test_nan_in_an_included_file_names_that_file(tmp_path):
    write(
        tmp_path, '<mujocoinclude>\n<default>\n<joint damping="nan"/>\n</default>\n</mujocoinclude>\n', "defaults.xml"
    )
    model = write(tmp_path, mjcf_with('<include file="defaults.xml"/>'), "model.xml")
    refused(run_mbsim("import", model, timeout=TIMEOUT), f"{tmp_path / 'defaults.xml'}:3:", "damping", "'nan'")


MJCF_NUMBERS = {
    "body_pos": ('<body name="upper" pos="0 0 2"', '<body name="upper" pos="0 0 nan"', "body 'upper' pos"),
    "axis": ('axis="0 1 0" pos="0 0 0"', 'axis="0 inf 0" pos="0 0 0"', "joint 'shoulder' axis"),
    "gravity": ('<option gravity="0 0 -9.81"/>', '<option gravity="0 0 -1e999"/>', "<option> gravity"),
    "density": ('density="2000"', 'density="-inf"', "<geom> density"),
    "damping": ('damping="0.1"', 'damping="NaN"', "joint 'shoulder' damping"),
}


@pytest.mark.parametrize("case", quick(sorted(MJCF_NUMBERS), keep="body_pos"))
def test_mjcf_non_finite_numbers_are_refused_before_mujoco(tmp_path, case):
    """MuJoCo takes nan and inf (and prints a warning into stdout, where `mbsim import` writes the
    scene); they are refused first, naming the element, attribute and line."""
    old, new, element = MJCF_NUMBERS[case]
    text = mutate(PENDULUM_MJCF.read_text(), old, new)
    model = write(tmp_path, text, "model.xml")
    code, out, err = run_mbsim("import", model, timeout=TIMEOUT)
    assert out == ""
    refused((code, out, err), element, f"{model}:{line_of(text, new)}:", "not a finite number")


def test_mjcf_huge_finite_sizes_that_overflow_in_the_compiler_are_refused(tmp_path):
    """A sphere of radius 1e120 has a mass MuJoCo's compiler computes as inf: exit 2 naming the body."""
    text = mutate(PENDULUM_MJCF.read_text(), '<geom type="sphere" size="0.1"', '<geom type="sphere" size="1e120"')
    code, out, err = run_mbsim("import", write(tmp_path, text, "model.xml"), timeout=TIMEOUT)
    assert code == 2 and "Traceback" not in err and "body 'tip'" in err, err


@pytest.mark.slow  # ~2 s
def test_an_mjcf_joint_and_equality_with_one_name_are_not_merged(tmp_path):
    """MuJoCo allows a joint and a connect with the same name; the scene's joints are one list:
    refused naming the equality (one of the two was silently dropped)."""
    capsule = '<geom type="capsule" size="0.1" fromto="0 0 0 1 0 0"/>'
    text = f"""<mujoco>
<worldbody>
<body name="a"><joint name="j" type="hinge" axis="0 1 0"/>{capsule}
<body name="b" pos="1 0 0"><joint name="k" type="hinge" axis="0 1 0"/>{capsule}</body></body>
<body name="c" pos="2 0 0"><joint name="m" type="hinge" axis="0 1 0"/>{capsule.replace("1 0 0", "0 0 -1")}</body>
</worldbody>
<equality><connect name="j" body1="b" body2="c" anchor="1 0 0"/></equality>
</mujoco>
"""
    model = write(tmp_path, text, "model.xml")
    import_and_scene(tmp_path, model, f"{model}:7:", "connect 'j'")


def test_an_unnamed_mjcf_body_never_takes_a_named_bodys_name(tmp_path):
    text = """<mujoco><worldbody>
<body name="body2" pos="0 0 0"><joint type="hinge"/><geom size="0.1"/></body>
<body pos="1 0 0"><joint type="hinge"/><geom size="0.1"/></body>
</worldbody></mujoco>
"""
    refused(run_mbsim("import", write(tmp_path, text, "model.xml"), timeout=TIMEOUT), "body 'body2'", "name it")


# --- empty and rootless models (item 11) ------------------------------------------------------

EMPTY = {
    "empty_robot": ("robot.urdf", '<robot name="r"/>', "the model has no links"),
    "only_junk": ("robot.urdf", '<robot name="r"><material name="m"/><gazebo/></robot>', "the model has no links"),
    "empty_mujoco": ("model.xml", "<mujoco/>", "the model has no bodies"),
    "world_geoms_only": (
        "model.xml",
        '<mujoco><worldbody><geom type="plane" size="1 1 1"/></worldbody></mujoco>',
        "the model has no bodies",
    ),
    "loop_no_root": (
        "robot.urdf",
        '<robot name="r"><link name="a"/><link name="b"/>'
        '<joint name="x" type="fixed"><parent link="a"/><child link="b"/></joint>'
        '<joint name="y" type="fixed"><parent link="b"/><child link="a"/></joint></robot>',
        "no root link",
    ),
    "several_roots": (
        "robot.urdf",
        '<robot name="r"><link name="a"/><link name="b"/><link name="c"/></robot>',
        "3 root links",
    ),
    "nothing_moves": ("robot.urdf", '<robot name="r"><link name="a"/></robot>', "nothing in the model moves"),
    "wrong_root_tag": ("robot.urdf", "<mujoco/>", "expected a URDF file"),
    "urdf_as_mjcf": ("model.xml", '<robot name="r"/>', "expected an MJCF file"),
}


@pytest.mark.parametrize("case", quick(sorted(EMPTY), keep="empty_robot"))
def test_empty_and_rootless_models_say_so(tmp_path, case):
    """An empty <robot/> said "the joints form a loop"; an empty MJCF imported nothing (exit 0)."""
    name, text, needle = EMPTY[case]
    model = write(tmp_path, text, name)
    refused(run_mbsim("import", model, timeout=TIMEOUT), str(model), needle)


# --- XML oddities -----------------------------------------------------------------------------

XML = {
    "internal_entity": (
        b'<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY m "1.0">]>\n',
        ('value="1.0"', 'value="&m;"'),
        "declares XML entities",
    ),
    "external_entity": (
        b'<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY m SYSTEM "/etc/hostname">]>\n',
        ('value="1.0"', 'value="&m;"'),
        "entit",
    ),
    "fifo_entity": (
        b'<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY m SYSTEM "FIFO">]>\n',
        ('<link name="base"/>', '<link name="base"/>&m;'),
        "declares XML entities",
    ),
    "billion_laughs": (
        b'<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">'.encode() for i in range(9))
        + b"]>\n",
        ('<link name="base"/>', '<link name="base"/>&j;'),
        "",
    ),
}


@pytest.mark.parametrize("case", quick(sorted(XML), keep="external_entity"))
def test_entities_are_refused_never_expanded_or_read(tmp_path, case):
    """DOCTYPEs declaring entities (internal, external, one naming a FIFO, billion laughs): exit 2
    in seconds; nothing is read through an entity."""
    prolog, (old, new), needle = XML[case]
    body = mutate(ARM, '<?xml version="1.0"?>\n', "")
    fifo(tmp_path / "FIFO")
    model = write(tmp_path, prolog + mutate(body, old, new).encode())
    refused(run_mbsim("import", model, timeout=10), str(model), needle)


ENCODINGS = {
    "doctype_without_entities": lambda t: t.replace(
        '<?xml version="1.0"?>\n', '<?xml version="1.0"?>\n<!DOCTYPE robot>\n'
    ).encode(),
    "utf8_bom": lambda t: b"\xef\xbb\xbf" + t.encode(),
    "utf16": lambda t: t.replace('version="1.0"', 'version="1.0" encoding="UTF-16"').encode("utf-16"),
    "latin1_comment": lambda t: (
        t.replace('version="1.0"', 'version="1.0" encoding="ISO-8859-1"')
        .replace("<robot", "<!-- caf\xe9 -->\n<robot")
        .encode("latin-1")
    ),
    "crlf": lambda t: t.replace("\n", "\r\n").encode(),
    "namespaced_extras": lambda t: t.replace(
        '<robot name="arm">', '<robot name="arm" xmlns:xacro="http://x"><xacro:property name="p" value="1"/>'
    ).encode(),
}


@pytest.mark.parametrize("case", quick(sorted(ENCODINGS), keep="utf8_bom"))
@pytest.mark.slow  # ~3 s each (import, then validate); the plain file: test_the_arm_itself_imports
def test_harmless_xml_variants_import_as_the_plain_file(tmp_path, case):
    """A DOCTYPE without entities, a BOM, UTF-16, Latin-1, CRLF lines, xacro leftovers in their
    namespace: the same scene as the plain file."""
    plain = accepted(tmp_path, write(tmp_path, ARM, "plain.urdf"))
    variant = accepted(tmp_path, write(tmp_path, ENCODINGS[case](ARM)))
    assert variant["bodies"] == plain["bodies"] and variant["joints"] == plain["joints"]


def test_invalid_utf8_is_refused(tmp_path):
    model = write(tmp_path, ARM.encode().replace(b'name="arm"', b'name="\xff\xfe"'))
    refused(run_mbsim("import", model, timeout=TIMEOUT), str(model), "not a well-formed XML file")


@pytest.mark.slow
def test_a_deep_chain_imports_in_bounded_time(tmp_path):
    """1500 links in a chain: no recursion limit, imported and validated within the timeout."""
    scene = accepted(tmp_path, write(tmp_path, chain(1500, {})))
    assert len(scene["bodies"]) == 1500


def test_collision_geometry_is_never_dropped(tmp_path):
    """collisions: a <capsule> (not URDF), an empty <geometry>, or a zero box size is refused
    naming the link; a box imports as a shape."""
    for geometry, needle in (
        ('<capsule radius="0.1" length="1"/>', "<capsule> is not a URDF collision geometry"),
        ("", "found nothing"),
        ('<box size="0 1 1"/>', "expected positive sizes"),
    ):
        collision = f"<collision><geometry>{geometry}</geometry></collision>"
        model = write(
            tmp_path, mutate(ARM, '</link>\n  <link name="fore">', f'{collision}</link>\n  <link name="fore">')
        )
        err = refused(run_mbsim("validate", scene_with(tmp_path, model, collisions=True), timeout=TIMEOUT), needle)
        assert "link 'upper' <collision>" in err
    model = write(
        tmp_path,
        mutate(
            ARM,
            '</link>\n  <link name="fore">',
            '<collision><geometry><box size="0.1 0.2 0.3"/></geometry></collision></link>\n  <link name="fore">',
        ),
    )
    code, _, err = run_mbsim("validate", scene_with(tmp_path, model, collisions=True), timeout=TIMEOUT)
    assert code == 0, err


def test_a_typed_scene_joint_named_as_an_imported_one_is_named_in_the_scene(tmp_path):
    """A scene joint with a type whose name an imported joint takes: exit 2 at that joint of the
    scene (it was reported at a joints[] index the scene does not have)."""
    model = write(tmp_path, ARM)
    scene = scene_with(tmp_path, model)
    data = yaml.safe_load(scene.read_text())
    data["bodies"] = [{"name": "extra", "mass": 1, "inertia": [1, 1, 1]}]
    data["joints"] = [{"name": "elbow", "type": "fixed", "body1": "ground", "body2": "extra"}]
    scene.write_text(yaml.safe_dump(data))
    refused(run_mbsim("validate", scene, timeout=TIMEOUT), "joints[0].name", "also imported")


@pytest.mark.slow  # ~2 s (import, then validate)
def test_copied_real_robot_still_imports(tmp_path):
    """The shipped UR5 copied elsewhere (its meshes along) imports as before: the strict reader
    refuses nothing a real file has."""
    src = ROOT / "scenes" / "robots" / "ur_description"
    shutil.copytree(src, tmp_path / "ur_description")
    scene = accepted(tmp_path, tmp_path / "ur_description" / "urdf" / "ur5_robot.urdf")
    assert len(scene["bodies"]) == 6


MJCF_ENCODINGS = {
    "latin1_name": (lambda t: t.replace("<mujoco", '<?xml version="1.0" encoding="ISO-8859-1"?>\n<mujoco', 1)
                    .replace('name="tip"', 'name="caf\xe9"').encode("latin-1"), "UTF-8 only"),
    "utf16": (lambda t: t.encode("utf-16"), "UTF-8 only"),
    "utf8_bom": (lambda t: b"\xef\xbb\xbf" + t.encode(), None),
    "crlf": (lambda t: t.replace("\n", "\r\n").encode(), None),
}  # fmt: skip


@pytest.mark.parametrize("case", quick(sorted(MJCF_ENCODINGS), keep="latin1_name"))
def test_mjcf_encodings_other_than_utf8_are_refused(tmp_path, case):
    """MuJoCo reads UTF-8 only: a Latin-1 body name was exit 1 (a UnicodeDecodeError), UTF-16 an
    XML error without a reason; now exit 2 saying so. A BOM or CRLF lines import as usual."""
    encode, needle = MJCF_ENCODINGS[case]
    model = write(tmp_path, encode(PENDULUM_MJCF.read_text()), "model.xml")
    if needle is None:
        assert [b["name"] for b in accepted(tmp_path, model)["bodies"]] == ["upper", "lower", "tip"]
    else:
        refused(run_mbsim("import", model, timeout=TIMEOUT), str(model), needle)


def test_a_fifo_in_an_attached_mjcf_model_never_blocks(tmp_path):
    """<asset><model file> attaches another MJCF file: its own references are checked too."""
    (tmp_path / "parts").mkdir()
    write(tmp_path, '<mujoco><asset><mesh name="m" file="hand.stl"/></asset><worldbody><body name="hand">'
          '<joint type="hinge"/><geom size="0.1"/></body></worldbody></mujoco>', "parts/hand.xml")  # fmt: skip
    fifo(tmp_path / "parts" / "hand.stl")
    text = mjcf_with('<asset><model name="hand" file="parts/hand.xml"/></asset>')
    model = write(tmp_path, text, "model.xml")
    refused(run_mbsim("import", model, timeout=10), f"{tmp_path / 'parts' / 'hand.xml'}:1:", "mesh 'm'", "FIFO")


@pytest.mark.parametrize(
    "kind", quick(["symlink_to_fifo", "symlink_loop", "file_uri_device", "package_folder"], keep="symlink_to_fifo")
)
def test_indirect_paths_to_what_is_not_a_file_are_refused(tmp_path, kind):
    """A symlink to a FIFO as the model, a symlink loop, a URDF mesh file:// URI to a device, a
    package:// mesh that is a folder: exit 2 saying what it is, in seconds."""
    if kind in ("symlink_to_fifo", "symlink_loop"):
        model = tmp_path / "robot.urdf"
        if kind == "symlink_to_fifo":
            model.symlink_to(fifo(tmp_path / "pipe"))
            needle = "FIFO"
        else:
            model.symlink_to(tmp_path / "other.urdf")
            (tmp_path / "other.urdf").symlink_to(model)
            needle = "cannot be read"
        refused(run_mbsim("import", model, timeout=10), needle)
        refused(run_mbsim("validate", scene_with(tmp_path, model), timeout=10), needle)
        return
    if kind == "file_uri_device":
        uri, needle = "file:///dev/zero", "is a character device"
    else:
        (tmp_path / "pkg" / "meshes" / "arm.stl").mkdir(parents=True)
        uri, needle = "package://pkg/meshes/arm.stl", "is a directory"
    visual = f'<visual><geometry><mesh filename="{uri}"/></geometry></visual>'
    model = write(tmp_path, mutate(ARM, '</link>\n  <link name="fore">', f'{visual}</link>\n  <link name="fore">'))
    refused(run_mbsim("import", model, timeout=10), "link 'upper' <visual> <mesh>", needle)


@pytest.mark.parametrize(("depth", "accepted_"), quick([(300, True), (3000, False)], keep=0))
def test_deeply_nested_mjcf_bodies(tmp_path, depth, accepted_):
    """300 nested bodies (MuJoCo takes them; the XML parser's default depth of 256 refused them)
    import; 3000 (past MuJoCo's own limit) are exit 2 at once."""
    text = "<mujoco><worldbody>" + "".join(
        f'<body name="b{i}" pos="0 0 -0.1"><joint type="hinge"/><geom size="0.01"/>' for i in range(depth)
    ) + "</body>" * depth + "</worldbody></mujoco>"  # fmt: skip
    model = write(tmp_path, text, "model.xml")
    if accepted_:
        code, out, err = run_mbsim("import", model, timeout=TIMEOUT)
        assert code == 0 and out.count("type: revolute") == depth, err
    else:
        refused(run_mbsim("import", model, timeout=TIMEOUT), "depth", "2048")


def test_a_refused_prefix_of_mbsim_import_is_named_as_the_option(tmp_path):
    """mbsim import builds its models: entry itself: a prefix the name rule refuses is blamed on
    --prefix, not on a models[0].prefix the user never wrote."""
    err = refused(run_mbsim("import", write(tmp_path, ARM), "--prefix", "a\x01", timeout=TIMEOUT), "--prefix")
    assert "models[0]" not in err
