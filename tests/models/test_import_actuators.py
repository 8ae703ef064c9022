"""What the importers carry over besides bodies and joints (CONTRACT §5, §8): MJCF actuators as
the scene's actuators (driven by the models entry's ``ctrl``), joint limits, friction and effort
from URDF and MJCF. Checked against MuJoCo itself (its compiled actuator forces at a state, and a
1 s run of an actuated arm under its RK4), against the files' own numbers for the keys, and for
bad input (exit 2 naming the file, line and key or element)."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from quick_loop import quick

from mbsim.scene.spec import load_scene

mujoco = pytest.importorskip("mujoco")

ROOT = Path(__file__).resolve().parents[2]
ARM = ROOT / "tests" / "data" / "robots" / "actuated_arm.xml"

# every actuator kind mbsim imports, on two hinges (limited in degrees; frictionloss and a
# symmetric actuatorfrcrange on one)
KINDS_MJCF = """<mujoco>
  <compiler angle="degree"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-90 45" frictionloss="0.2" actuatorfrcrange="-5 5"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
      <body name="b" pos="0.5 0 0">
        <joint name="slider" type="hinge" axis="1 0 0" range="-10 20"/>
        <geom size="0.05" pos="0.1 0.1 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m" joint="hinge" gear="3" ctrlrange="-1 1" forcerange="-0.5 0.5"/>
    <position name="p" joint="hinge" kp="50" kv="4"/>
    <position name="pd" joint="slider" kp="80" dampratio="1"/>
    <velocity joint="slider" kv="6"/>
    <damper name="d" joint="hinge" kv="0.7" ctrlrange="0 1"/>
    <general name="g" joint="slider" gear="-2" gainprm="1.5" biastype="affine" biasprm="0.5 -2 0.25"/>
  </actuator>
</mujoco>
"""
KINDS_CTRL = {"m": "1.5", "p": 0.2, "pd": "0.05", "actuator3": "-0.3", "d": 0.8, "g": "0.4"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def scene_file(tmp_path: Path, entry: dict, method: str = "lagrange", end: float = 1.0, step: float = 1e-4) -> Path:
    scene = {
        "mbsim": 1, "name": "imported", "gravity": [0, 0, -9.81], "time": {"end": end, "step": step},
        "solver": {"method": method, "integrator": "rk4"}, "models": [entry],
    }  # fmt: skip
    return write(tmp_path, "scene.yaml", yaml.safe_dump(scene, sort_keys=False))


def test_mjcf_actuators_limits_friction_effort_become_scene_keys(tmp_path, mbsim):
    """Each MJCF actuator kind becomes the scene's actuator the compiled gain and bias describe
    (motor -> torque, position -> position with rate 0, velocity -> velocity; a damper and a
    general with a bias -> a torque spelling the affine law out), ctrlrange clamps the control and
    forcerange carries over; range (degrees) -> limits, frictionloss -> friction, actuatorfrcrange
    -> effort. Each actuator's force at a general state and control equals MuJoCo's
    actuator_force to 1e-12 (measured 1.4e-14)."""
    model = write(tmp_path, "kinds.xml", KINDS_MJCF)
    q, qd = {"hinge": 0.3, "slider": 0.05}, {"hinge": -0.7, "slider": 0.4}
    entry = {"file": str(model), "ctrl": KINDS_CTRL, "joint_positions": q, "joint_velocities": qd}
    path = scene_file(tmp_path, entry, end=1e-3, step=1e-3)
    data = load_scene(str(path)).raw.data
    joints = {j["name"]: j for j in data["joints"]}
    assert joints["hinge"]["limits"]["lower"] == pytest.approx(-math.pi / 2, rel=1e-15)
    assert joints["hinge"]["limits"]["upper"] == pytest.approx(math.pi / 4, rel=1e-15)
    assert joints["hinge"]["friction"] == {"coulomb": 0.2} and joints["hinge"]["effort"] == 5.0
    assert joints["slider"]["limits"]["lower"] == pytest.approx(-math.pi / 18, rel=1e-15)
    assert "friction" not in joints["slider"] and "effort" not in joints["slider"]
    acts = {a["name"]: a for a in data["actuators"]}
    assert list(acts) == ["m", "p", "pd", "actuator3", "d", "g"]
    assert acts["m"] == {"name": "m", "joint": "hinge", "type": "torque", "value": "min(max(1.5, -1.0), 1.0)",
                         "gear": 3.0, "forcerange": [-0.5, 0.5]}  # fmt: skip
    assert acts["p"] == {"name": "p", "joint": "hinge", "type": "position", "kp": 50.0, "kd": 4.0,
                         "target": "0.2", "rate": 0}  # fmt: skip
    assert acts["pd"]["type"] == "position" and acts["pd"]["kp"] == 80.0 and acts["pd"]["kd"] > 0.0
    assert acts["actuator3"] == {"name": "actuator3", "joint": "slider", "type": "velocity", "kd": 6.0,
                                 "target": "-0.3"}  # fmt: skip
    assert acts["d"]["type"] == "torque" and "qd.hinge" in acts["d"]["value"] and "min(max(0.8" in acts["d"]["value"]
    assert acts["g"]["type"] == "torque" and acts["g"]["gear"] == -2.0 and "q.slider" in acts["g"]["value"]
    result = mbsim("validate", path)
    assert result.exit_code == 0 and "6 actuators imported" in result.output and "skipped" not in result.output
    assert mbsim("run", path, "-o", tmp_path / "kinds.h5", "-q").exit_code == 0
    m = mujoco.MjModel.from_xml_path(str(model))
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = list(q.values()), list(qd.values())
    d.ctrl[:] = [float(KINDS_CTRL[name]) for name in acts]
    mujoco.mj_forward(m, d)
    with h5py.File(tmp_path / "kinds.h5") as f:
        got = [f[f"actuators/{name}/force"][0] for name in acts]
    np.testing.assert_allclose(got, d.actuator_force, rtol=0, atol=1e-12)
    assert d.actuator_force[0] == 0.5  # the motor's control (1.5 -> 1) and force (1 -> 0.5) both clamped


def mujoco_run(xml: Path, ctrl, qpos, qvel, seconds: float = 1.0, h: float = 1e-4) -> object:
    """MuJoCo's RK4 at step h with the controls ``ctrl(t)`` held over each step at their value
    at the step's midpoint t + h/2 (MuJoCo holds data.ctrl over a step; the midpoint makes the
    hold second order, as mbsim's RK4 reads the control at its stages; the start of the step
    would shift the control by h/2, 7e-5 rad after 1 s here). Contacts off."""
    m = mujoco.MjModel.from_xml_path(str(xml))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    m.opt.timestep, m.opt.integrator = h, mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    if qpos is not None:  # else qpos0
        d.qpos[:] = qpos
    d.qvel[:] = qvel
    for _ in range(round(seconds / h)):
        d.ctrl[:] = ctrl(d.time + 0.5 * h)
        mujoco.mj_step(m, d)
    return d


@pytest.mark.parametrize("method", quick(["lagrange", "recursive"], keep="recursive"))
def test_actuated_mjcf_arm_matches_mujoco(tmp_path, mbsim, method):
    """The three-hinge arm of tests/data/robots/actuated_arm.xml (a position servo whose control
    passes its ctrlrange, a geared motor whose force passes its forcerange, a general actuator with
    affine gain and bias), controls sin/cos of t given in models: ctrl, gravity and joint damping
    on: lagrange and recursive (rk4 at 1e-4 s) against MuJoCo's RK4 at 1e-4 s (mujoco_run): the
    joint positions (/joints/NAME/position, MuJoCo's qpos) within 1e-6 rad after 1 s (measured 1.7e-8)."""
    ctrl = {"servo": "0.8*sin(3*t)", "motor": "2*cos(2*t) - 0.3", "gen": "0.5*sin(5*t) + 0.2"}
    names = ("shoulder", "elbow", "wrist")
    q0, qd0 = [0.3, -0.4, 0.2], [0.0, 0.5, -0.2]
    entry = {"file": str(ARM), "ctrl": ctrl, "joint_positions": dict(zip(names, q0, strict=True)),
             "joint_velocities": dict(zip(names, qd0, strict=True))}  # fmt: skip
    path = scene_file(tmp_path, entry, method)
    assert mbsim("run", path, "-o", tmp_path / "arm.h5", "-q").exit_code == 0

    def controls(t: float) -> list[float]:
        return [0.8 * math.sin(3 * t), 2 * math.cos(2 * t) - 0.3, 0.5 * math.sin(5 * t) + 0.2]

    d = mujoco_run(ARM, controls, q0, qd0)
    with h5py.File(tmp_path / "arm.h5") as f:
        assert f["time"][-1] == pytest.approx(d.time, abs=1e-9)
        got = [f[f"joints/{name}/position"][-1] for name in names]
        assert np.max(f["actuators/motor/force"][:]) == 1.5  # the forcerange acted
        assert np.max(f["actuators/servo/force"][:]) > 0.0
    np.testing.assert_allclose(got, d.qpos, rtol=0, atol=1e-6)
    assert np.max(np.abs(d.qpos - q0)) > 0.1  # it moved


def test_import_writes_the_actuators_and_runs_as_the_models_entry(tmp_path, mbsim):
    """`mbsim import` writes the arm's actuators with their control 0 (clamped to the ctrlrange)
    and the scene runs as the models: entry with no ctrl (lagrange: the same motion to 1e-12 rad),
    which MuJoCo's run with ctrl 0 confirms (1e-6 rad; gravity and the general actuator's bias act)."""
    out = tmp_path / "arm.yaml"
    assert mbsim("import", ARM, "-o", out).exit_code == 0
    written = yaml.safe_load(out.read_text())
    assert [a["name"] for a in written["actuators"]] == ["servo", "motor", "gen"]
    assert written["actuators"][0]["target"] == "min(max(0, -0.6), 0.6)"
    assert written["actuators"][1]["value"] == "0"
    written["solver"]["method"] = "lagrange"
    written["time"] = {"end": 1.0, "step": 1e-4}
    out.write_text(yaml.safe_dump(written, sort_keys=False))
    assert mbsim("run", out, "-o", tmp_path / "a.h5", "-q").exit_code == 0
    assert mbsim("run", scene_file(tmp_path, {"file": str(ARM)}), "-o", tmp_path / "b.h5", "-q").exit_code == 0
    d = mujoco_run(ARM, lambda t: [0.0, 0.0, 0.0], None, [0.0, 0.0, 0.0])  # from qpos0 (the wrist's ref)
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        for k, name in enumerate(("shoulder", "elbow", "wrist")):
            qa, qb = a[f"joints/{name}/position"][:], b[f"joints/{name}/position"][:]
            assert np.max(np.abs(qa - qb)) < 1e-12
            assert abs(qa[-1] - d.qpos[k]) < 1e-6
        assert np.max(np.abs(a["actuators/gen/force"][:])) > 0.05  # the bias acted


URDF = """<robot name="r">
  <link name="base"/>
  {links}
  <joint name="rev" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="2" effort="30" velocity="1"/><dynamics damping="0.1" friction="0.4"/></joint>
  <joint name="cont" type="continuous"><parent link="l1"/><child link="l2"/><axis xyz="0 1 0"/>
    <origin xyz="0.5 0 0"/><limit effort="5" velocity="3"/></joint>
  <joint name="pris" type="prismatic"><parent link="l2"/><child link="l3"/><axis xyz="1 0 0"/>
    <origin xyz="0.5 0 0"/><limit effort="0" velocity="1"/></joint>
  <joint name="zero" type="revolute"><parent link="l3"/><child link="l4"/><axis xyz="1 0 0"/>
    <limit lower="0" upper="0" effort="2" velocity="1"/></joint>
  <joint name="half" type="prismatic"><parent link="l4"/><child link="l5"/><axis xyz="0 0 1"/>
    <limit upper="0.3" effort="1" velocity="1"/></joint>
</robot>
""".replace(
    "{links}",
    "\n  ".join(
        f'<link name="l{i}"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" '
        'izz="0.1"/></inertial></link>'
        for i in range(1, 6)
    ),
)


def test_urdf_limits_friction_effort_become_joint_keys(tmp_path, mbsim):
    """URDF <limit lower upper> -> limits (continuous: none; both absent or both 0: none; one
    absent: URDF's default 0), <limit effort> > 0 -> effort, <dynamics friction> -> Coulomb
    friction, damping as before; the same keys through models: and through mbsim import."""
    model = write(tmp_path, "r.urdf", URDF)
    expanded = {j["name"]: j for j in load_scene(str(scene_file(tmp_path, {"file": str(model)}))).raw.data["joints"]}
    out = tmp_path / "r.yaml"
    assert mbsim("import", model, "-o", out).exit_code == 0
    written = {j["name"]: j for j in yaml.safe_load(out.read_text())["joints"]}
    for joints in (expanded, written):
        assert joints["rev"]["limits"] == {"lower": -1.0, "upper": 2.0}
        assert joints["rev"]["effort"] == 30.0 and joints["rev"]["friction"] == {"coulomb": 0.4}
        assert joints["rev"]["spring"] == {"stiffness": 0.0, "damping": 0.1, "rest": 0.0}
        assert "limits" not in joints["cont"] and joints["cont"]["effort"] == 5.0
        assert "limits" not in joints["pris"] and "effort" not in joints["pris"]
        assert "limits" not in joints["zero"] and joints["zero"]["effort"] == 2.0
        assert joints["half"]["limits"] == {"lower": 0.0, "upper": 0.3}
        assert not any("friction" in joints[n] for n in ("cont", "pris", "zero", "half"))
    assert "actuators" not in yaml.safe_load(out.read_text())


def test_a_drive_amending_an_imported_joint_replaces_its_limits_and_actuators(tmp_path):
    """A joint amended with a drive (prescribed motion) keeps none of the file's limits, friction,
    effort or actuators (a driven joint takes none); the other joints keep theirs."""
    model = write(tmp_path, "kinds.xml", KINDS_MJCF)
    path = scene_file(tmp_path, {"file": str(model)})
    data = yaml.safe_load(path.read_text())
    data["joints"] = [{"name": "hinge", "drive": {"position": "0.1*sin(t)"}}]
    path.write_text(yaml.safe_dump(data))
    raw = load_scene(str(path)).raw.data
    hinge = next(j for j in raw["joints"] if j["name"] == "hinge")
    assert not {"limits", "friction", "effort"} & set(hinge)
    assert [a["name"] for a in raw["actuators"]] == ["pd", "actuator3", "g"]


# bad controls: (ctrl, message, key path, the text of the line named: the value's)
BAD_CTRL = {
    "wrong_length": ([0.1, 0.2], "expected 3 controls, one per actuator", "models[0].ctrl", "- 0.1"),
    "unknown_name": ({"servo": 0.1, "motr": 0.2}, "no actuator 'motr' in", "models[0].ctrl.motr", "motr:"),
    "unknown_signal": (
        {"servo": "q.shoulderr"},
        "unknown signal 'q.shoulderr'; did you mean 'q.shoulder'",
        "models[0].ctrl.servo",
        "servo:",
    ),  # fmt: skip
    "not_an_expression": ({"gen": [1, 2]}, "expected a number", "models[0].ctrl.gen", "- 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_CTRL))
def test_bad_ctrl_is_exit_2_naming_the_scene_line_and_key(tmp_path, mbsim, case):
    """A ctrl list of the wrong length, an unknown actuator name (with did-you-mean), an unknown
    signal in a control, a control that is not an expression: exit 2 naming the scene file, the
    line of the ctrl key and its key path."""
    ctrl, message, key, needle = BAD_CTRL[case]
    path = scene_file(tmp_path, {"file": str(ARM), "ctrl": ctrl})
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)
    result = mbsim("validate", path)
    assert result.exit_code == 2, result.output
    assert f"{path}:{line}:" in result.output and f"{key}: " in result.output and message in result.output


def test_ctrl_for_a_urdf_is_exit_2(tmp_path, mbsim):
    model = write(tmp_path, "r.urdf", URDF)
    result = mbsim("validate", scene_file(tmp_path, {"file": str(model), "ctrl": {"rev": 1.0}}))
    assert result.exit_code == 2 and "no actuator 'rev'" in result.output and "has no actuators" in result.output


ARM_TEMPLATE = """<mujoco>
<worldbody>
<body name="a">
<joint name="j" type="{jtype}" axis="0 1 0" {joint_attrs}/>
<geom size="0.1"/>
<site name="s"/>
</body>
</worldbody>
<actuator>
{actuator}
</actuator>
</mujoco>
"""
# an MJCF file mbsim cannot represent: (joint type, joint attributes, actuator, message, element, line)
UNSUPPORTED = {
    "filter_dynamics": (
        "hinge",
        "",
        '<cylinder name="c" joint="j"/>',
        "activation dynamics (filter)",
        "actuator 'c'",
        10,
    ),  # fmt: skip
    "integrator": (
        "hinge",
        "",
        '<intvelocity name="iv" joint="j" kp="1" actrange="-1 1"/>',
        "activation dynamics (integrator)",
        "actuator 'iv'",
        10,
    ),  # fmt: skip
    "muscle": (
        "slide",
        'range="-0.1 0.1"',
        '<muscle name="mu" joint="j" lengthrange="0.5 1.5"/>',
        "cannot be represented",
        "actuator 'mu'",
        10,
    ),  # fmt: skip
    "site": (
        "hinge",
        "",
        '<motor name="st" site="s" gear="0 0 0 0 1 0"/>',
        "its transmission is a site",
        "actuator 'st'",
        10,
    ),  # fmt: skip
    "ball_joint": ("ball", "", '<motor name="b" joint="j"/>', "a spherical joint", "actuator 'b'", 10),
    "asymmetric_frcrange": (
        "hinge",
        'actuatorfrcrange="-1 2"',
        '<motor name="m" joint="j"/>',
        "actuatorfrcrange [-1, 2] that is not symmetric",
        "joint 'j'",
        4,
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_mjcf_actuators_are_exit_2_naming_file_element_and_line(tmp_path, mbsim, case):
    """Activation dynamics (cylinder, intvelocity), a muscle, a site transmission, an actuator on
    a ball joint, an asymmetric actuatorfrcrange: never dropped; exit 2 from validate (models:)
    and from mbsim import, naming the model file, the line and the element."""
    jtype, attrs, actuator, message, element, line = UNSUPPORTED[case]
    model = write(tmp_path, "bad.xml", ARM_TEMPLATE.format(jtype=jtype, joint_attrs=attrs, actuator=actuator))
    for args in (("validate", scene_file(tmp_path, {"file": str(model)})), ("import", model)):
        result = mbsim(*args)
        assert result.exit_code == 2, result.output
        assert f"{model}:{line}" in result.output and element in result.output, result.output
        assert message in result.output, result.output


def test_prefixed_actuators_and_a_name_taken_by_the_scene(tmp_path, mbsim):
    """A prefix names the actuators and the joints their laws read (``q['a-wrist']`` for a name
    that is not an identifier), and a ctrl may read the prefixed signals; a scene actuator with an
    imported actuator's name is exit 2 at its own name's line."""
    path = scene_file(tmp_path, {"file": str(ARM), "prefix": "a-", "ctrl": {"gen": "0.1*q['a-wrist']"}}, end=0.01)
    data = load_scene(str(path)).raw.data
    acts = {a["name"]: a for a in data["actuators"]}
    assert set(acts) == {"a-servo", "a-motor", "a-gen"} and acts["a-motor"]["joint"] == "a-elbow"
    assert "(0.5*q['a-wrist'])" in acts["a-gen"]["value"] and ")*(0.1*q['a-wrist'])" in acts["a-gen"]["value"]
    assert mbsim("run", path, "-o", tmp_path / "p.h5", "-q").exit_code == 0
    scene = yaml.safe_load(path.read_text())
    scene["actuators"] = [{"name": "a-motor", "joint": "a-elbow", "type": "torque", "value": 1}]
    path.write_text(yaml.safe_dump(scene, sort_keys=False))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "name: a-motor" in text)
    result = mbsim("validate", path)
    assert result.exit_code == 2 and f"{path}:{line}:" in result.output, result.output
    assert "actuators[0].name: actuator 'a-motor' is also imported" in result.output
