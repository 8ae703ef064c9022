"""Names (issue 28 item 5, docs/user-guide.md "Which names are allowed"), through the real CLI.

Every name a scene gives follows one rule (mbsim/names.py): any text of 1 to 200 characters
without control characters is allowed -- `/`, `.`, `..`, `%`, spaces, markup, Unicode -- and
kept exactly: the result file stores it as one escaped HDF5 link (`%` -> `%25`, `/` -> `%2F`,
a name of dots -> `%2E`...), and `info`, `export`, `plot` and `verify` show and take the
original name. Everything else is refused when the scene loads: exit 2 naming the key, no
traceback, no file.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import h5py
import pytest
from cli_process import run_mbsim
from quick_loop import quick

# names a scene may give (bodies, joints, shapes and forces all take each of them): the ids
# say what each one attacks
ALLOWED = {
    "slash": "upper/arm",
    "dot": ".",
    "dotdot": "..",
    "three_dots": "...",
    "escape_lookalike": "a%2Fb",
    "escaped_dot_lookalike": "%2E",
    "percent": "%",
    "geometry_attribute_up": "up",
    "order": "order",
    "root_dataset_time": "time",
    "root_dataset_q": "q",
    "group_bodies": "bodies",
    "group_geometry": "geometry",
    "unicode": "élève 漢字 ☃",
    "markup": "<!--<script>",
    "spaces": " sp ace ",
    "prefix_of_next": "a",
    "equal_to_dataset_path": "a/position",  # a/position was body a's dataset in the old layout
    "placeholder_body": "{body}",
    "placeholder_joint": "{joint}",
    "dotted": "a.b",
    "comma": "x,y",
    "capital_ground": "Ground",
    "longest": "n" * 200,
    "format_characters": "\u202eevil\u2028line\ufeff",  # RTL override, JS line separator, BOM
}
NAMES = list(ALLOWED.values())
TIMEOUT = 300


def expected_link(name: str) -> str:
    """The documented escaping, written out independently of mbsim.names."""
    link = name.replace("%", "%25").replace("/", "%2F")
    return "%2E" * len(link) if set(link) == {"."} else link


def q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's): control characters arrive as such."""
    return json.dumps(text)


def names_scene(names: list[str]) -> str:
    """A planar scene: one pendulum per name -- body, hinge, shape and torque all called NAME."""
    lines = [
        "mbsim: 1",
        f"name: {q('names ' + ' | '.join(['<!--<script>', 'upper/arm', '%']))}",
        "dimension: 2",
        "gravity: [0, -9.81]",
        "time: {end: 0.03, step: 0.01}",
        "solver: {method: lagrange, integrator: rk4}",
        "bodies:",
    ]
    for i, name in enumerate(names):
        lines.append(
            f"  - {{name: {q(name)}, mass: 1.0, inertia: 1.0e-3, position: [{i}, -1],"
            f" shapes: [{{type: circle, radius: 0.1, name: {q(name)}}}]}}"
        )
    lines.append("joints:")
    for i, name in enumerate(names):
        lines.append(f"  - {{name: {q(name)}, type: revolute, body1: ground, body2: {q(name)}, point: [{i}, 0]}}")
    lines.append("forces:")
    for name in names:
        lines.append(f"  - {{name: {q(name)}, type: torque, body: {q(name)}, value: 0}}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def names_result(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("names")
    scene = folder / "names.yaml"
    scene.write_text(names_scene(NAMES), encoding="utf-8")
    out = folder / "names.h5"
    code, stdout, stderr = run_mbsim("run", scene, "-o", out, "--quiet", timeout=TIMEOUT)
    assert code == 0, stderr
    assert "Traceback" not in stderr
    return out


def info_json(path: Path) -> dict:
    code, stdout, stderr = run_mbsim("info", path, "--json", timeout=TIMEOUT)
    assert code == 0, stderr
    return json.loads(stdout)


def test_info_lists_exactly_the_scene_names(names_result):
    info = info_json(names_result)
    assert info["status"] == "completed"
    assert info["scene_name"] == "names <!--<script> | upper/arm | %"
    assert sorted(info["bodies"]) == sorted(NAMES)
    assert sorted(info["joints"]) == sorted(NAMES)
    # the dataset paths show the names too (no nested groups, no escapes)
    assert "bodies/upper/arm/position (4, 2)" in info["datasets"]
    assert "bodies/a/position/position (4, 2)" in info["datasets"]


@pytest.mark.parametrize("name", NAMES, ids=list(ALLOWED))
def test_each_name_is_one_group_with_its_exact_name(names_result, name):
    link = expected_link(name)
    with h5py.File(names_result, "r") as f:
        assert len(f["bodies"]) == len(NAMES) and len(f["joints"]) == len(NAMES)
        body = f["bodies"][link]
        assert body.attrs["name"] == name
        assert set(body) == {"position", "velocity", "angle", "angular_velocity"}
        assert body["position"].shape == (4, 2)
        assert f["joints"][link].attrs["name"] == name
        assert set(f["joints"][link]) == {"reaction", "position", "velocity"}  # revolute: its coordinate too
        geometry = f["geometry"][link]
        assert geometry.attrs["name"] == name and geometry["0"].attrs["name"] == name
        assert list(f["geometry"].attrs["bodies"]) == NAMES  # the scene's order, as given
    # the column names of /q are attributes: kept as they are
    with h5py.File(names_result, "r") as f:
        assert f"{name}.x" in list(f["q"].attrs["names"])


def glb_node_names(path: Path) -> list[str]:
    data = path.read_bytes()
    (length,) = struct.unpack("<I", data[12:16])
    document = json.loads(data[20 : 20 + length])
    return [node.get("name") for node in document["nodes"]]


def test_export_glb_nodes_carry_the_original_names(names_result, tmp_path):
    out = tmp_path / "names.glb"
    code, _, stderr = run_mbsim("export", names_result, "-o", out, timeout=TIMEOUT)
    assert code == 0, stderr
    nodes = glb_node_names(out)
    assert sorted(n for n in nodes if n not in ("mbsim root", "ground")) == sorted(NAMES)


def test_a_file_of_the_previous_layout_still_exports(names_result, tmp_path):
    """Before the rule, names were links as they are (no escapes, no ``name`` attributes): such a
    file (here: the names that stored the same) still exports with its names."""
    old = tmp_path / "old.h5"
    old.write_bytes(names_result.read_bytes())
    with h5py.File(old, "r+") as f:
        for group in ("bodies", "joints", "geometry"):
            f[group].move("%25", "%")  # the one stored name the escapes changed that stays readable
            for member in f[group].values():
                del member.attrs["name"]
    out = tmp_path / "old.glb"
    code, _, stderr = run_mbsim("export", old, "-o", out, timeout=TIMEOUT)
    assert code == 0, stderr
    assert "%" in glb_node_names(out) and "upper/arm" in glb_node_names(out)
    assert "%" in info_json(old)["bodies"]


def test_export_html_takes_every_name(names_result, tmp_path):
    out = tmp_path / "names.html"
    code, _, stderr = run_mbsim("export", names_result, "-o", out, timeout=TIMEOUT)
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert out.stat().st_size > 1000


@pytest.mark.parametrize(
    "what",
    quick(
        [
            "upper/arm",
            ".",
            "..",
            "..angle",  # body '.' and its angle: the longest name that leaves a quantity wins
            "a.b.position.y",
            "x,y",  # a comma inside a name is not a separator
            " sp ace ",
            "<!--<script>.reaction.torque",  # the body has no reaction: the joint of that name
            "%,a%2Fb",
            "a/position.position.x",
        ],
        keep="slash",
        ids=[
            "slash",
            "dot",
            "dotdot",
            "dot_angle",
            "dotted_component",
            "comma",
            "spaces",
            "markup",
            "percents",
            "path",
        ],
    ),
)
def test_plot_what_takes_the_original_names(names_result, tmp_path, what):
    out = tmp_path / "plot.png"
    code, stdout, stderr = run_mbsim("plot", names_result, "--what", what, "-o", out, timeout=TIMEOUT)
    assert code == 0, stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_unknown_name_is_a_usage_error(names_result, tmp_path):
    code, _, stderr = run_mbsim("plot", names_result, "--what", "upper/arm.nothing", "-o", tmp_path / "p.png")
    assert code == 2
    assert "'upper/arm' has no 'nothing'" in stderr and "Traceback" not in stderr


# ----------------------------------------------------------------------------- refusals

BASE = """\
mbsim: 1
name: NAME0
dimension: 2
gravity: [0, -9.81]
time: {end: 0.03, step: 0.01}
solver: {method: lagrange, integrator: rk4}
bodies:
  - {name: NAME1, mass: 1.0, inertia: 1.0e-3, position: [0, -1], shapes: [{type: circle, radius: 0.1, name: NAME2}]}
  - {name: b, mass: 1.0, inertia: 1.0e-3, position: [0, -2], shapes: [{type: circle, radius: 0.1}]}
ground: {shapes: [{type: line, point: [0, -5], normal: [0, 1]}]}
joints:
  - {name: NAME3, type: revolute, body1: ground, body2: bob, point: [0, 0]}
  - {name: hinge, type: revolute, body1: bob, body2: b, point: [0, -1.5]}
forces:
  - {name: NAME4, type: torque, body: bob, value: 0}
contacts:
  - {name: NAME5, type: rigid, body1: ground, body2: b, enabled: false}
couplings:
  - {name: NAME6, joint: hinge, leader: NAME3}
"""
KEYS = {
    0: "name",
    1: "bodies[0].name",
    2: "bodies[0].shapes[0].name",
    3: "joints[0].name",
    4: "forces[0].name",
    5: "contacts[0].name",
    6: "couplings[0].name",
}
GOOD = {0: "refusals", 1: "bob", 2: "disc", 3: "pivot", 4: "spin", 5: "floor", 6: "gear"}


def refusal_scene(slot: int, bad: str) -> str:
    names = dict(GOOD)
    names[slot] = bad
    text = BASE
    for k, name in names.items():
        text = text.replace(f"NAME{k}", name if k != slot else bad)
    if slot == 1:  # the others refer to the body by its (bad) name
        text = text.replace("body2: bob", f"body2: {bad}").replace("body1: bob", f"body1: {bad}")
        text = text.replace("body: bob", f"body: {bad}")
    if slot == 3:
        text = text.replace("leader: pivot", f"leader: {bad}")
    return text


REFUSED = [
    # (id, slot, the name as YAML, what the message says)
    ("nul_in_body", 1, q("a\x00b"), "U+0000"),
    ("soh_in_joint", 3, q("a\x01"), "U+0001"),
    ("tab_in_shape", 2, q("a\tb"), "U+0009"),
    ("newline_in_force", 4, q("two\nlines"), "U+000A"),
    ("escape_in_contact", 5, q("\x1b[31mred"), "U+001B"),
    ("del_in_coupling", 6, q("x\x7f"), "U+007F"),
    ("c1_control_in_scene_name", 0, q("x\x85y"), "U+0085"),
    ("c1_last_in_body", 1, q("\x9f"), "U+009F"),
    ("empty_body", 1, '""', "empty"),
    ("empty_joint", 3, '""', "empty"),
    ("empty_force", 4, '""', "empty"),
    ("too_long_body", 1, "n" * 201, "201 characters"),
    ("too_long_scene_name", 0, "s" * 5000, "5000 characters"),
    ("number_body", 1, "12", "expected a name"),
    ("list_joint", 3, "[a, b]", "expected a name"),
    ("mapping_shape", 2, "{a: 1}", "expected a name"),
    ("boolean_force", 4, "true", "expected a name"),
    ("reserved_contact_count", 5, "count", "reserved"),
    ("reserved_contact_max_penetration", 5, "max_penetration", "reserved"),
    ("reserved_contact_normal_impulse", 5, "normal_impulse", "reserved"),
]


@pytest.mark.parametrize(
    ("slot", "bad", "says"), quick([c[1:] for c in REFUSED], keep="nul_in_body", ids=[c[0] for c in REFUSED])
)
def test_refused_names_exit_2_naming_the_key_and_leave_no_file(tmp_path, slot, bad, says):
    scene = tmp_path / "bad.yaml"
    scene.write_text(refusal_scene(slot, bad), encoding="utf-8")
    out = tmp_path / "bad.h5"
    code, stdout, stderr = run_mbsim("run", scene, "-o", out, timeout=TIMEOUT)
    assert code == 2, stderr
    assert f"{scene}:" in stderr and f": {KEYS[slot]}: " in stderr, stderr
    assert says in stderr, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert len(stderr.strip().splitlines()) == 1  # the control character is escaped, not printed
    assert not out.exists()  # refused before any file: nothing left "running"


def test_good_refusal_scene_runs(tmp_path):
    """The scene the refusals start from is itself fine (so each refusal is the name's doing)."""
    scene = tmp_path / "good.yaml"
    scene.write_text(refusal_scene(0, "fine"), encoding="utf-8")
    code, _, stderr = run_mbsim("validate", scene, timeout=TIMEOUT)
    assert code == 0, stderr


@pytest.mark.parametrize(
    ("assignment", "key"),
    quick(
        [
            ('bodies[0].name="nul\\0"', "bodies[0].name"),
            ('name="\\u0007bell"', "name"),
            ("joints.pivot.name=" + "j" * 300, "joints[0].name"),
        ],
        keep="set_body_nul",
        ids=["set_body_nul", "set_scene_bell", "set_joint_too_long"],
    ),
)
def test_refused_names_from_set(tmp_path, assignment, key):
    scene = tmp_path / "good.yaml"
    scene.write_text(refusal_scene(0, "fine"), encoding="utf-8")
    out = tmp_path / "set.h5"
    code, _, stderr = run_mbsim("run", scene, "--set", assignment, "-o", out, timeout=TIMEOUT)
    assert code == 2, stderr
    assert f"--set: {key}: " in stderr and "Traceback" not in stderr
    assert not out.exists()


# ----------------------------------------------------------------------------- contacts

CONTACTS = """\
mbsim: 1
name: contact names
time: {end: 0.0005, step: 1.0e-5}
solver: {method: lagrange, integrator: rk4}
output: {every: 10}
bodies:
  - {name: max, density: 1000, position: [0.1, 0, 0], velocity: [-5, 0, 0],
     shapes: [{type: box, size: [0.1, 0.1, 0.1]}]}
  - {name: penetration, density: 1000, position: [-0.0005, 0, 0], shapes: [{type: box, size: [0.1, 0.2, 0.2]}]}
contacts:
  - {type: compliant, body1: max, body2: penetration, stiffness: 1.0e7, sdf: &grid {cell: 0.01, padding: 0.02}}
  - {name: "{body}", type: compliant, body1: penetration, body2: max, stiffness: 1.0e7, sdf: *grid}
  - {name: "x/y", type: compliant, body1: penetration, body2: max, stiffness: 1.0e7, sdf: *grid}
"""


@pytest.mark.slow
def test_compliant_contact_names_never_clash_with_mbsim_series(tmp_path):
    """An unnamed pair of bodies `max` and `penetration` was called `max_penetration`, the name of
    the all-contacts series beside it; a contact `{body}` looked like the writer's placeholder."""
    scene = tmp_path / "contacts.yaml"
    scene.write_text(CONTACTS, encoding="utf-8")
    out = tmp_path / "contacts.h5"
    code, _, stderr = run_mbsim("run", scene, "-o", out, "--quiet", timeout=900)
    assert code == 0, stderr
    with h5py.File(out, "r") as f:
        group = f["diagnostics/contacts"]
        assert set(group) == {"count", "max_penetration", "max_penetration_2", "{body}", "x%2Fy"}
        assert group["max_penetration_2"].attrs["name"] == "max_penetration_2"
        assert group["x%2Fy"].attrs["name"] == "x/y" and set(group["x%2Fy"]) == {"count", "max_penetration"}
        assert group["{body}"].attrs["name"] == "{body}"
        assert group["max_penetration"].shape == group["count"].shape  # still the all-contacts series
    info = info_json(out)
    assert "diagnostics/contacts/x/y/count (6,)" in info["datasets"]


# ----------------------------------------------------------------------------- imported models

URDF = """\
<robot name="r">
  <link name="base"/>
  <link name="LINK"><inertial><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="sh.oulder/1" type="revolute"><parent link="base"/><child link="LINK"/>
    <axis xyz="0 0 1"/><origin xyz="0 0 0"/></joint>
</robot>
"""


def model_scene(folder: Path, link: str, prefix: str) -> Path:
    (folder / "arm.urdf").write_text(URDF.replace("LINK", link), encoding="utf-8")
    scene = folder / "model.yaml"
    scene.write_text(
        "mbsim: 1\nname: model names\ntime: {end: 0.01, step: 0.01}\n"
        f"models:\n  - {{file: arm.urdf, prefix: {q(prefix)}}}\n",
        encoding="utf-8",
    )
    return scene


MJCF = """\
<mujoco model="m">
  <worldbody>
    <body name="BODY" pos="0 0 0">
      <joint name="left/shoulder" type="hinge" axis="0 0 1"/>
      <geom type="capsule" size="0.05" fromto="0 0 0 0.3 0 0"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize(
    ("body", "code", "says"),
    quick(
        [("left/upper arm", 0, ""), ("left&#10;arm", 2, "arm.xml:3: body 'left\\narm'")],
        keep="mjcf_attach_prefix_names",
        ids=["mjcf_attach_prefix_names", "mjcf_body_newline"],
    ),
)
def test_imported_mjcf_names(tmp_path, body, code, says):
    (tmp_path / "arm.xml").write_text(MJCF.replace("BODY", body), encoding="utf-8")
    scene = tmp_path / "mj.yaml"
    scene.write_text(
        'mbsim: 1\nname: mj\ntime: {end: 0.01, step: 0.01}\nmodels:\n  - {file: arm.xml, prefix: "r/"}\n',
        encoding="utf-8",
    )
    out = tmp_path / "mj.h5"
    got, _, stderr = run_mbsim("run", scene, "-o", out, "--quiet", timeout=TIMEOUT)
    assert got == code, stderr
    assert "Traceback" not in stderr
    if code:
        assert says in stderr and "U+000A" in stderr and not out.exists()
    else:
        info = info_json(out)
        assert info["bodies"] == ["r/left/upper arm"] and info["joints"] == ["r/left/shoulder"]


def test_imported_names_with_a_slash_prefix_keep_their_names(tmp_path):
    scene = model_scene(tmp_path, "upper/arm", "left/")
    out = tmp_path / "model.h5"
    code, _, stderr = run_mbsim("run", scene, "-o", out, "--quiet", timeout=TIMEOUT)
    assert code == 0, stderr
    info = info_json(out)
    assert info["bodies"] == ["left/upper/arm"] and info["joints"] == ["left/sh.oulder/1"]
    with h5py.File(out, "r") as f:
        assert list(f["bodies"]) == ["left%2Fupper%2Farm"]


@pytest.mark.parametrize(
    ("link", "prefix", "where", "says"),
    quick(
        [
            ("upper&#10;arm", "", "arm.urdf:3: link 'upper\\narm'", "U+000A"),
            ("tab&#9;bed", "left/", "arm.urdf:3: link 'tab\\tbed'", "U+0009"),
            ("arm", "p\x01", "model.yaml:5:", "U+0001"),
            ("arm", "p" * 199, "model.yaml:5:", "at most 200 are allowed"),
        ],
        keep="link_newline",
        ids=["link_newline", "link_tab", "prefix_control", "prefix_too_long"],
    ),
)
def test_imported_names_are_checked_naming_the_model_file(tmp_path, link, prefix, where, says):
    scene = model_scene(tmp_path, link, prefix)
    out = tmp_path / "model.h5"
    code, _, stderr = run_mbsim("run", scene, "-o", out, timeout=TIMEOUT)
    assert code == 2, stderr
    assert where in stderr and says in stderr, stderr
    if where.startswith("model.yaml"):
        assert "models[0].prefix: " in stderr
    assert "Traceback" not in stderr and not out.exists()


# ----------------------------------------------------------------------------- verify


def test_verify_quantity_takes_a_name_with_a_slash(tmp_path):
    folder = tmp_path / "slash_problem"
    folder.mkdir()
    (folder / "scene.yaml").write_text(names_scene(["upper/arm", "a"]), encoding="utf-8")
    (folder / "reference.csv").write_text("t,x,y\n0,0,-1\n", encoding="utf-8")
    (folder / "problem.yaml").write_text(
        "id: slash\ntitle: a body named upper/arm\nsource: test\nreference: its start\n"
        "methods: [lagrange]\n"
        "checks:\n  - {quantity: bodies/upper/arm/position, reference: reference.csv, tolerance: 1.0e-9}\n",
        encoding="utf-8",
    )
    code, stdout, stderr = run_mbsim("verify", folder, "--json", "-o", tmp_path / "out", timeout=TIMEOUT)
    assert code == 0, stdout + stderr
    assert "Traceback" not in stderr


# ----------------------------------------------------------------------------- glob characters

GLOB = """\
mbsim: 1
name: glob names
dimension: 2
gravity: [0, -9.81]
time: {end: 0.6, step: 0.01}
solver: {method: timestepping}
ground: {shapes: [{type: line, point: [0, 0], normal: [0, 1]}]}
bodies:
  - {name: "ball[1]", mass: 1.0, inertia: 1.0e-3, position: [0, 0.5], shapes: [{type: circle, radius: 0.1}]}
  - {name: "ball*", mass: 1.0, inertia: 1.0e-3, position: [1, 0.5], shapes: [{type: circle, radius: 0.1}]}
  - {name: ball1, mass: 1.0, inertia: 1.0e-3, position: [2, 0.5], shapes: [{type: circle, radius: 0.1}]}
contacts:
  - {type: rigid, body1: ground, body2: BODY2}
"""


@pytest.mark.parametrize(
    ("body2", "resting"),
    quick(
        [
            ('"ball[1]"', {"ball[1]"}),
            ('"ball*"', {"ball*"}),
            ('"ball?"', {"ball1", "ball*"}),
            ('"ball?1?"', {"ball[1]"}),
        ],
        keep="exact_name_with_brackets",
        ids=[
            "exact_name_with_brackets",
            "exact_name_with_star",
            "pattern_still_a_pattern",
            "pattern_matching_brackets",
        ],
    ),
)
def test_a_contact_body_that_is_a_name_means_that_body(tmp_path, body2, resting):
    """A body's exact name in body1/body2 is that body even when it holds glob characters
    (`ball[1]` used to be the pattern matching `ball1`); anything else is still a pattern."""
    scene = tmp_path / "glob.yaml"
    scene.write_text(GLOB.replace("BODY2", body2), encoding="utf-8")
    out = tmp_path / "glob.h5"
    code, _, stderr = run_mbsim("run", scene, "-o", out, "--quiet", timeout=TIMEOUT)
    assert code == 0, stderr
    with h5py.File(out, "r") as f:
        heights = {g.attrs["name"]: float(g["position"][-1, 1]) for g in f["bodies"].values()}
    assert {name for name, y in heights.items() if y > 0.05} == resting, heights
