"""MJCF reader: a MuJoCo model file as a :class:`mbsim.models.tree.ModelTree`.

The file goes through MuJoCo's own compiler (``mujoco.MjModel.from_xml_path``), so that defaults,
``<compiler angle>``, ``density``, ``inertiafromgeom`` and every other rule that decides mass
properties are exactly MuJoCo's: the compiled ``body_mass``, ``body_ipos`` and ``body_inertia``
about the principal axes ``body_iquat`` are read back. Each body has at most one joint: ``hinge``
-> revolute about ``jnt_axis`` through ``jnt_pos`` (body frame), ``slide`` -> prismatic, ``free`` ->
a free body, none -> welded to its parent; the coordinate of zero motion is qpos0 (the body's
pose in the file), as MuJoCo's kinematics. Joint ``damping``, ``stiffness`` and ``springref``
carry over; ``range`` (limited) becomes the joint's ``limits``, ``frictionloss`` its Coulomb
``friction``, a symmetric ``actuatorfrcrange`` (limited) its ``effort``. Actuators on a hinge or
slide become the scene's actuators (mbsim.models.tree.actuator_entry, from the compiled gain and
bias). Content that changes the dynamics and that mbsim cannot represent is a scene error naming
the element: tendons, several joints on one body, a ``ball`` joint with stiffness, damping,
frictionloss or armature, an asymmetric ``actuatorfrcrange``, actuators with activation dynamics,
other transmissions or gains (_actuators). A hinge's or slide's ``armature`` carries over (method
recursive takes it). ``ball`` -> spherical (its coordinates in joint_positions: the quaternion w, x, y, z; in
joint_velocities: the angular velocity in the body's frame, as MuJoCo's qvel); a free joint's
coordinates are MuJoCo's 7 qpos and 6 qvel too (mbsim.models.tree.place).
Equality constraints: ``connect`` -> a spherical joint between the two bodies, ``weld`` -> a
fixed joint, ``joint`` (linear) -> a coupling of the coordinates, so that loops stay closed.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbsim.errors import SceneError, shorten
from mbsim.models.files import not_regular, parse_xml, read_regular
from mbsim.models.tree import (
    Coupling,
    Link,
    Loop,
    ModelTree,
    TreeActuator,
    TreeJoint,
    check_couplings,
    check_links,
    quaternion_matrix,
    transform,
)

_DIRS = ("meshdir", "texturedir", "assetdir")  # <compiler> folders that file references resolve in
MAX_FILES = 1000  # files one model may include


@dataclass
class _Source:
    """One XML file of the model (the top file or an include), parsed by lxml."""

    path: Path
    root: object


def _label(el) -> str:
    """``body 'arm'``; an unnamed element after its nearest named ancestor: ``body 'arm' <inertial>``."""
    if el.get("name"):
        return f"{el.tag} '{el.get('name')}'"
    owner = next((a for a in el.iterancestors() if a.get("name")), None)
    return f"<{el.tag}>" if owner is None else f"{owner.tag} '{owner.get('name')}' <{el.tag}>"


def _candidates(ref: str, bases: list[Path], subs: list[str]) -> list[Path]:
    """Where MuJoCo may look for a referenced file: absolute as it is, else relative to the model's
    and the including file's folders, in each <compiler> folder (checked all: refusing a FIFO that
    MuJoCo might not have chosen is safe, reading one is not)."""
    if Path(ref).is_absolute():
        return [Path(ref)]
    out = []
    for base in bases:
        for sub in ["", *subs]:
            out.append(base / sub / ref)
    return list(dict.fromkeys(out))


def prescan(path: Path) -> list[_Source]:
    """Every XML file of an MJCF model (the top file and its includes, followed here), each
    checked to be a regular file, parsed without entities or network; every other file they name
    (meshes, height fields, textures, skins) checked to be a regular file where it exists; every
    number finite. Done before MuJoCo's compiler reads any of them: a FIFO would block it."""
    file = str(path)
    sources = [_Source(path, parse_xml(_utf8(read_regular(path), file), file))]
    if sources[0].root.tag != "mujoco":
        raise SceneError(f"expected an MJCF file (<mujoco> at the top), found <{sources[0].root.tag}>", file=file,
                         line=sources[0].root.sourceline)  # fmt: skip
    seen = {os.path.realpath(path)}
    model_dir = path.parent
    for src in sources:  # grows as includes are found (breadth first)
        for el in src.root.iter("include", "model"):  # <asset><model file>: an MJCF file to attach from
            ref = el.get("file")
            where = {"file": str(src.path), "line": el.sourceline, "key_path": f"<{el.tag} file>"}
            what = "included file" if el.tag == "include" else "model file"
            if not ref:
                raise SceneError(f"<{el.tag}> without a file", **where)
            found = None
            for candidate in _candidates(ref, [model_dir, src.path.parent], []):
                problem = not_regular(candidate)
                if problem is None:
                    found = found or candidate
                elif problem != "not found":
                    raise SceneError(f"the {what} '{shorten(ref)}' ({candidate}) {problem}", **where)
            if found is None:
                raise SceneError(f"the {what} '{shorten(ref)}' is not found", **where)
            real = os.path.realpath(found)
            if real in seen:
                continue  # MuJoCo refuses a file included twice (or itself), naming it
            seen.add(real)
            if len(seen) > MAX_FILES:
                raise SceneError(f"the model includes more than {MAX_FILES} files", **where)
            text = read_regular(found, label=str(src.path), element=f"<{el.tag} file>", line=el.sourceline)
            sources.append(_Source(found, parse_xml(_utf8(text, str(found)), str(found))))
    subs = [v for s in sources for el in s.root.iter("compiler") for k in _DIRS if (v := el.get(k))]
    names = {el.get("name") for s in sources for el in s.root.iter() if el.get("name")}
    for src in sources:
        for el in src.root.iter():
            for attr, value in el.attrib.items():
                where = {"file": str(src.path), "line": el.sourceline, "key_path": f"{_label(el)} {attr}"}
                if attr.startswith("file") and el.tag not in ("include", "model"):
                    for candidate in _candidates(value, [model_dir, src.path.parent], subs):
                        problem = not_regular(candidate)
                        if problem not in (None, "not found"):
                            raise SceneError(f"the file '{shorten(value)}' ({candidate}) {problem}", **where)
                elif attr not in ("name", "class", "childclass", *_DIRS) and value not in names:
                    _finite(value, where)
    return sources


def _utf8(text: bytes, file: str) -> bytes:
    """``text`` when it is UTF-8 (MuJoCo's XML reader knows no other encoding: Latin-1 names would
    reach mbsim as broken UTF-8, UTF-16 as a parse error without a reason)."""
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = text[: exc.start].count(b"\n") + 1
        raise SceneError(
            "MuJoCo reads MJCF files in UTF-8 only, and this one is not (save it as UTF-8)", file=file, line=line
        ) from None
    return text


def _finite(value: str, where: dict) -> None:
    """An attribute that is a list of numbers has only finite ones (MuJoCo takes nan and inf, and
    writes a warning into stdout, where mbsim import writes the scene)."""
    tokens = value.split()
    try:
        numbers = [float(t) for t in tokens]
    except ValueError:
        return  # a name, a keyword, a reference: MuJoCo's compiler judges it
    bad = next((t for t, x in zip(tokens, numbers, strict=True) if not math.isfinite(x)), None)
    if bad is not None:
        raise SceneError(f"'{shorten(bad)}' is not a finite number", **where)


def _locator(sources: list[_Source]):
    """(tag, name) -> (file, line) of the element among the model's files (the top file first), by
    tag and name, else by name (a tendon is a <fixed> or <spatial>, an equality a <connect> ...)."""
    tagged, named = {}, {}
    for src in sources:
        for el in src.root.iter():
            if isinstance(el.tag, str) and el.get("name") is not None:
                tagged.setdefault((el.tag, el.get("name")), (str(src.path), el.sourceline))
                named.setdefault(el.get("name"), (str(src.path), el.sourceline))
    top = (str(sources[0].path), None)
    return lambda tag, name: tagged.get((tag, name), named.get(name, top))


def _compiler_error(exc: ValueError, sources: list[_Source]) -> SceneError:
    """MuJoCo's refusal ("Error: ...\nElement name 'a', id 1, line 12") naming the file and the
    element's tag, found among the model's files by name and line."""
    text = str(exc).strip()
    found = re.search(r"line (\d+)", text)
    line = int(found.group(1)) if found else None
    named = re.search(r"Element name '([^']+)', id", text)  # '' for an unnamed element: told by the line only
    tagged = re.search(r"Element '([^']*)'", text)
    reason = text.splitlines()[0].removeprefix("Error: ").strip() if text else "MuJoCo cannot compile it"
    if text.startswith("XML Error"):
        reason = "not a valid MJCF/XML file: " + " ".join(text.split())
    file, element = str(sources[0].path), ""
    for src in sources:  # the element at that line (MuJoCo's lines are its own file's)
        hit = next(
            (el for el in src.root.iter() if isinstance(el.tag, str) and el.sourceline == line
             and ((named and el.get("name") == named.group(1)) or (tagged and el.tag == tagged.group(1)))),
            None,
        )  # fmt: skip
        if hit is not None:
            file, element = str(src.path), _label(hit)
            break
    else:
        element = f"<{tagged.group(1)}>" if tagged else (f"'{named.group(1)}'" if named else "")
    return SceneError(f"MuJoCo's compiler refuses the model: {reason}", file=file, line=line, key_path=element)


def read_mjcf(path: str | Path, collisions: bool = False) -> ModelTree:
    """The kinematic tree of an MJCF file, as MuJoCo compiles it (after :func:`prescan`)."""
    import mujoco

    path = Path(path)
    file = str(path)
    sources = prescan(path)
    try:
        m = mujoco.MjModel.from_xml_path(file)
    except ValueError as exc:  # MuJoCo's compiler: "Error: ...\nElement 'joint', line 12"
        raise _compiler_error(exc, sources) from None
    locate = _locator(sources)

    def line(tag: str, label: str) -> int | None:
        where, at = locate(tag, label)
        return at if where == file else None  # a line of an included file is told by refuse

    def name(kind, i: int) -> str:
        return mujoco.mj_id2name(m, kind, i) or ""

    def refuse(reason: str, tag: str, label: str) -> SceneError:
        where, at = locate(tag, label)
        return SceneError(reason, file=where, line=at, key_path=f"{tag} '{label}'")

    if m.nbody == 1:
        raise SceneError("the model has no bodies (its <worldbody> holds none)", file=file,
                         line=sources[0].root.sourceline, key_path="mujoco")  # fmt: skip
    body_names = []
    for b in range(m.nbody):
        label = "world" if b == 0 else name(mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}"
        if label in body_names:  # an unnamed body's label taken by a named one: never merge the two
            raise refuse(f"an unnamed body would be called '{label}', the name of another body; name it", "body",
                         label)  # fmt: skip
        body_names.append(label)
    _check_finite(m, refuse)
    if m.ntendon:
        raise refuse("tendons change the dynamics and mbsim cannot represent them", "tendon",
                     name(mujoco.mjtObj.mjOBJ_TENDON, 0))  # fmt: skip
    links = {"world": Link("world")}
    joints: list[TreeJoint] = []
    joint_of_id: dict[int, str] = {}  # MuJoCo's joint id -> the tree's joint name
    for b in range(1, m.nbody):
        label = body_names[b]
        R_in = quaternion_matrix(m.body_iquat[b])
        links[label] = Link(
            label, float(m.body_mass[b]), np.array(m.body_ipos[b], float),
            R_in @ np.diag(m.body_inertia[b]) @ R_in.T, line=line("body", label),
        )  # fmt: skip
        parent = body_names[int(m.body_parentid[b])]
        origin = transform(quaternion_matrix(m.body_quat[b]), np.array(m.body_pos[b], float))
        count = int(m.body_jntnum[b])
        if count == 0:
            joints.append(TreeJoint(f"{label}_weld", "fixed", parent, label, origin, line=line("body", label)))
            continue
        if count > 1:
            raise refuse(f"the body has {count} joints; mbsim joins two bodies by one joint", "body", label)
        j = int(m.body_jntadr[b])
        jname = name(mujoco.mjtObj.mjOBJ_JOINT, j) or f"{label}_joint"
        if any(tj.name == jname for tj in joints):  # an unnamed joint's label taken by a named one
            raise refuse(f"an unnamed joint would be called '{jname}', the name of another joint; name it", "body",
                         label)  # fmt: skip
        joint_of_id[j] = jname
        jtype = int(m.jnt_type[j])
        qa, da = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        if jtype == mujoco.mjtJoint.mjJNT_FREE:
            joints.append(TreeJoint(jname, "free", parent, label, origin, line=line("joint", jname)))
            continue
        if jtype == mujoco.mjtJoint.mjJNT_BALL and np.any(m.dof_armature[da : da + 3] != 0.0):
            raise refuse("a ball joint's armature cannot be represented (mbsim's spherical joint has none)", "joint",
                         jname)  # fmt: skip
        if jtype == mujoco.mjtJoint.mjJNT_BALL:  # mbsim's spherical joint has no spring, damper or friction
            if m.jnt_stiffness[j] != 0.0 or np.any(m.dof_damping[da : da + 3] != 0.0):
                raise refuse("a ball joint's stiffness or damping cannot be represented (mbsim's spherical joint "
                             "has none)", "joint", jname)  # fmt: skip
            if np.any(m.dof_frictionloss[da : da + 3] != 0.0):
                raise refuse("a ball joint's frictionloss cannot be represented (mbsim's joint friction acts on "
                             "one coordinate)", "joint", jname)  # fmt: skip
            quat = [float(x) for x in m.qpos0[qa : qa + 4]]
            joints.append(TreeJoint(jname, "spherical", parent, label, origin, point=np.array(m.jnt_pos[j], float),
                                    default=quat, line=line("joint", jname)))  # fmt: skip
            continue
        kind = "revolute" if jtype == mujoco.mjtJoint.mjJNT_HINGE else "prismatic"
        tj = TreeJoint(
            jname, kind, parent, label, origin, np.array(m.jnt_axis[j], float), np.array(m.jnt_pos[j], float),
            ref=float(m.qpos0[qa]), default=float(m.qpos0[qa]), damping=float(m.dof_damping[da]),
            stiffness=float(m.jnt_stiffness[j]), spring_ref=float(m.qpos_spring[qa]), line=line("joint", jname),
            armature=float(m.dof_armature[da]),
        )  # fmt: skip
        if m.jnt_limited[j]:
            tj.limits = (float(m.jnt_range[j][0]), float(m.jnt_range[j][1]))
        tj.friction = float(m.dof_frictionloss[da])
        if m.jnt_actfrclimited[j]:  # MuJoCo clamps the actuators' summed force on the joint: effort
            lo, hi = (float(x) for x in m.jnt_actfrcrange[j])
            if lo != -hi or hi <= 0.0:
                raise refuse(f"an actuatorfrcrange [{lo:g}, {hi:g}] that is not symmetric about 0 cannot be "
                             "represented (a joint's effort bounds the actuators' force to [-effort, effort])",
                             "joint", jname)  # fmt: skip
            tj.effort = hi
        joints.append(tj)
    if collisions:
        for g in range(m.ngeom):
            if m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0:
                continue  # a visual geom: it collides with nothing
            body = body_names[int(m.geom_bodyid[g])]
            label = name(mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
            links[body].shapes.append(_geom_shape(m, g, refuse, label))
    loops, couplings = _equalities(m, body_names, line, refuse, file)
    actuators = _actuators(m, joints, joint_of_id, refuse)
    tree = ModelTree(
        file, "mjcf", "world", links, joints, np.array(m.opt.gravity, float), couplings, loops, actuators=actuators
    )
    check_links(tree)
    check_couplings(tree)
    return tree


def _actuators(m, joints: list[TreeJoint], joint_of_id: dict[int, str], refuse) -> list[TreeActuator]:
    """The actuators, each on a hinge's or slide's coordinate, by the compiled gain and bias
    (every shortcut -- motor, position, velocity, damper, general -- as MuJoCo's compiler reduced
    it); named as in the file, an unnamed one ``actuatorN`` (N its index in the file's order).
    What mbsim cannot represent is refused, naming the actuator: activation dynamics, a
    transmission other than a joint's, a gain or bias other than fixed or affine, and MuJoCo's
    newer actuator options (armature, damping, delay, several controls, plugins)."""
    import mujoco

    kinds = {j.name: j.kind for j in joints}
    named = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in range(m.nu)}
    gains = (mujoco.mjtGain.mjGAIN_FIXED, mujoco.mjtGain.mjGAIN_AFFINE)
    biases = (mujoco.mjtBias.mjBIAS_NONE, mujoco.mjtBias.mjBIAS_AFFINE)
    out = []
    for a in range(m.nu):
        label = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"actuator{a}"
        if not mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) and label in named:
            raise refuse(f"an unnamed actuator would be called '{label}', the name of another actuator; name it",
                         "actuator", label)  # fmt: skip

        def no(reason: str, label: str = label) -> SceneError:
            return refuse(f"{reason}; mbsim's actuators act on a hinge's or slide's coordinate with a fixed or "
                          "affine gain and bias (motor, position, velocity, general)", "actuator", label)  # fmt: skip

        trn = int(m.actuator_trntype[a])
        if trn not in (mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtTrn.mjTRN_JOINTINPARENT):
            what = str(mujoco.mjtTrn(trn).name).removeprefix("mjTRN_").lower()
            raise no(f"its transmission is a {what}, which mbsim cannot represent")
        joint = joint_of_id[int(m.actuator_trnid[a][0])]
        if kinds.get(joint) not in ("revolute", "prismatic"):
            raise no(f"it drives joint '{joint}', a {kinds.get(joint)} joint, which has no single coordinate")
        if int(m.actuator_dyntype[a]) != mujoco.mjtDyn.mjDYN_NONE:
            what = str(mujoco.mjtDyn(int(m.actuator_dyntype[a])).name).removeprefix("mjDYN_").lower()
            raise no(f"its activation dynamics ({what}) cannot be represented")
        if int(m.actuator_gaintype[a]) not in gains or int(m.actuator_biastype[a]) not in biases:
            gain = str(mujoco.mjtGain(int(m.actuator_gaintype[a])).name).removeprefix("mjGAIN_").lower()
            bias = str(mujoco.mjtBias(int(m.actuator_biastype[a])).name).removeprefix("mjBIAS_").lower()
            raise no(f"its gain ({gain}) and bias ({bias}) cannot be represented")
        for attr, what in (("actuator_armature", "armature"), ("actuator_damping", "damping"),
                           ("actuator_dampingpoly", "damping"), ("actuator_delay", "delay")):  # fmt: skip
            values = np.asarray(getattr(m, attr, np.zeros((m.nu, 1))), float).reshape(m.nu, -1)[a]
            if np.any(values != 0.0):
                raise no(f"its {what} cannot be represented")
        if int(getattr(m, "actuator_ctrlnum", np.ones(m.nu))[a]) != 1 or int(m.actuator_plugin[a]) != -1:
            raise no("several controls or a plugin cannot be represented")
        gear = np.asarray(m.actuator_gear[a], float)
        gain, bias = np.asarray(m.actuator_gainprm[a][:3], float), np.asarray(m.actuator_biasprm[a][:3], float)
        if not np.all(np.isfinite([*gear, *gain, *bias, *m.actuator_ctrlrange[a], *m.actuator_forcerange[a]])):
            raise no("its compiled parameters are not finite")
        if gear[0] == 0.0:
            raise no("its gear is 0")
        if int(m.actuator_gaintype[a]) == mujoco.mjtGain.mjGAIN_FIXED:
            gain[1:] = 0.0
        if int(m.actuator_biastype[a]) == mujoco.mjtBias.mjBIAS_NONE:
            bias[:] = 0.0
        out.append(
            TreeActuator(
                label,
                joint,
                float(gear[0]),
                (float(gain[0]), float(gain[1]), float(gain[2])),
                (float(bias[0]), float(bias[1]), float(bias[2])),
                tuple(float(x) for x in m.actuator_ctrlrange[a]) if m.actuator_ctrllimited[a] else None,
                tuple(float(x) for x in m.actuator_forcerange[a]) if m.actuator_forcelimited[a] else None,
            )  # fmt: skip
        )
    return out


def _check_finite(m, refuse) -> None:
    """Every compiled number mbsim reads is finite (huge finite sizes can overflow in MuJoCo's
    compiler, e.g. a density times a volume), else exit 2 naming the element."""
    import mujoco

    o = mujoco.mjtObj
    arrays = (
        (o.mjOBJ_BODY, "body", ("body_pos", "body_quat", "body_ipos", "body_iquat", "body_mass", "body_inertia")),
        (o.mjOBJ_JOINT, "joint", ("jnt_pos", "jnt_axis", "jnt_stiffness", "jnt_range")),
        (o.mjOBJ_GEOM, "geom", ("geom_size", "geom_pos", "geom_quat")),
        (o.mjOBJ_EQUALITY, "equality", ("eq_data",)),
    )
    for kind, tag, names in arrays:
        for attr in names:
            values = np.asarray(getattr(m, attr), float)
            if values.size == 0:
                continue
            values = values.reshape(len(values), -1)
            bad = np.flatnonzero(~np.all(np.isfinite(values), axis=1))
            if bad.size:
                i = int(bad[0])
                label = mujoco.mj_id2name(m, kind, i) or f"{tag}{i}"
                raise refuse(f"its compiled {attr.split('_', 1)[1]} is not finite (the file's sizes overflow)", tag,
                             label)  # fmt: skip
    for attr, owner in (("qpos0", "jnt_qposadr"), ("qpos_spring", "jnt_qposadr"), ("dof_damping", "jnt_dofadr"),
                        ("dof_armature", "jnt_dofadr")):  # fmt: skip
        values = np.asarray(getattr(m, attr), float)
        if not np.all(np.isfinite(values)):
            i = int(np.flatnonzero(~np.isfinite(values))[0])
            j = int(np.searchsorted(np.asarray(getattr(m, owner)), i, side="right") - 1)
            label = mujoco.mj_id2name(m, o.mjOBJ_JOINT, j) or f"joint{j}"
            raise refuse(f"its compiled {attr} is not finite (the file's sizes overflow)", "joint", label)
    if not np.all(np.isfinite(m.opt.gravity)):
        raise refuse("the gravity is not finite", "option", "")


def _geom_shape(m, g: int, refuse, label: str) -> dict:
    """A colliding geom as a scene shape in its body's frame (collisions: true)."""
    import mujoco

    from mbsim.models.tree import quaternion

    kind, size = int(m.geom_type[g]), np.array(m.geom_size[g], float)
    R, p = quaternion_matrix(m.geom_quat[g]), np.array(m.geom_pos[g], float)
    pose = {"position": [float(x) for x in p], "orientation": {"quaternion": quaternion(R)}}
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return {"type": "sphere", "radius": float(size[0]), "pose": pose}
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return {"type": "capsule", "radius": float(size[0]), "length": 2.0 * float(size[1]), "pose": pose}
    if kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return {"type": "cylinder", "radius": float(size[0]), "length": 2.0 * float(size[1]), "pose": pose}
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
        return {"type": "box", "size": [2.0 * float(x) for x in size], "pose": pose}
    if kind == mujoco.mjtGeom.mjGEOM_PLANE:
        if int(m.geom_bodyid[g]) != 0:
            raise refuse("a plane geom on a moving body cannot be a shape (planes are ground only)", "geom", label)
        return {"type": "plane", "point": [float(x) for x in p], "normal": [float(x) for x in R[:, 2]]}
    what = {mujoco.mjtGeom.mjGEOM_MESH: "mesh", mujoco.mjtGeom.mjGEOM_ELLIPSOID: "ellipsoid"}.get(kind, "height field")
    raise refuse(
        f"a colliding {what} geom cannot be imported as a shape (sphere, capsule, cylinder, box and plane can); "
        "import without collisions, or give the geom contype=0 conaffinity=0",
        "geom",
        label,
    )


def _equalities(m, body_names, line, refuse, file):
    """MJCF equality constraints: connect -> a spherical loop joint, weld -> a fixed one (the
    bodies' relative pose in the file), joint (linear) -> a coupling; inactive ones are left out."""
    import mujoco

    loops, couplings = [], []
    data = mujoco.MjData(m)
    mujoco.mj_kinematics(m, data)  # at qpos0: the poses the file describes
    for e in range(m.neq):
        label = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, e) or f"equality{e}"
        etype, a, b, d = int(m.eq_type[e]), int(m.eq_obj1id[e]), int(m.eq_obj2id[e]), np.array(m.eq_data[e])
        kind = {mujoco.mjtEq.mjEQ_CONNECT: "connect", mujoco.mjtEq.mjEQ_WELD: "weld", mujoco.mjtEq.mjEQ_JOINT: "joint"}
        tag = kind.get(etype, "equality")
        if not m.eq_active0[e]:
            continue
        if etype in (mujoco.mjtEq.mjEQ_CONNECT, mujoco.mjtEq.mjEQ_WELD) and m.eq_objtype[e] != mujoco.mjtObj.mjOBJ_BODY:
            raise refuse("an equality between sites is not supported; name the bodies", tag, label)
        if etype == mujoco.mjtEq.mjEQ_CONNECT:
            loops.append(Loop("spherical", label, body_names[a], body_names[b], d[0:3], d[3:6], f"{tag} '{label}'",
                              line(tag, label)))  # fmt: skip
        elif etype == mujoco.mjtEq.mjEQ_WELD:
            R1, R2 = data.xmat[a].reshape(3, 3), data.xmat[b].reshape(3, 3)
            rel_pos, rel_rot = R1.T @ (data.xpos[b] - data.xpos[a]), R1.T @ R2
            if np.linalg.norm(rel_pos - d[3:6]) > 1e-9 or np.linalg.norm(rel_rot - quaternion_matrix(d[6:10])) > 1e-9:
                raise refuse("a weld whose relpose differs from the bodies' relative pose in the file is not "
                             "supported (mbsim welds the pose they have)", tag, label)  # fmt: skip
            anchor = d[0:3]  # in body 2's frame
            world = R2 @ anchor + data.xpos[b]
            loops.append(Loop("fixed", label, body_names[a], body_names[b], R1.T @ (world - data.xpos[a]), anchor,
                              f"{tag} '{label}'", line(tag, label)))  # fmt: skip
        elif etype == mujoco.mjtEq.mjEQ_JOINT:
            if np.any(d[2:5] != 0.0):
                raise refuse("a joint equality with a nonlinear polynomial is not supported (only a0 + a1 x)", tag,
                             label)  # fmt: skip
            follower = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, a)
            if b < 0:
                raise refuse("a joint equality that fixes a joint is not supported; use a drive", tag, label)
            leader = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, b)
            y0, x0 = m.qpos0[m.jnt_qposadr[a]], m.qpos0[m.jnt_qposadr[b]]
            couplings.append(Coupling(follower, leader, float(d[1]), float(y0 + d[0] - d[1] * x0), f"{tag} '{label}'",
                                      line(tag, label), label))  # fmt: skip
        else:
            raise refuse("this kind of equality constraint changes the dynamics and mbsim cannot represent it", tag,
                         label)  # fmt: skip
    return loops, couplings
