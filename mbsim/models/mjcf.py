"""MJCF reader: a MuJoCo model file as a :class:`mbsim.models.tree.ModelTree`.

The file goes through MuJoCo's own compiler (``mujoco.MjModel.from_xml_path``), so that defaults,
``<compiler angle>``, ``density``, ``inertiafromgeom`` and every other rule that decides mass
properties are exactly MuJoCo's: the compiled ``body_mass``, ``body_ipos`` and ``body_inertia``
about the principal axes ``body_iquat`` are read back. Each body has at most one joint: ``hinge``
-> revolute about ``jnt_axis`` through ``jnt_pos`` (body frame), ``slide`` -> prismatic, ``free`` ->
a free body, none -> welded to its parent; the coordinate of zero motion is qpos0 (the body's
pose in the file), as MuJoCo's kinematics. Joint ``damping``, ``stiffness`` and ``springref``
carry over; ``range`` is kept as the joint's limits. Actuators are listed as skipped. Content
that changes the dynamics and that mbsim cannot represent is a scene error naming the element:
tendons, joint ``frictionloss``, several joints on one body, a ``ball`` joint with stiffness,
damping or armature. A hinge's or slide's ``armature`` carries over (method recursive takes
it). ``ball`` -> spherical (its coordinates in joint_positions: the quaternion w, x, y, z; in
joint_velocities: the angular velocity in the body's frame, as MuJoCo's qvel); a free joint's
coordinates are MuJoCo's 7 qpos and 6 qvel too (mbsim.models.tree.place).
Equality constraints: ``connect`` -> a spherical joint between the two bodies, ``weld`` -> a
fixed joint, ``joint`` (linear) -> a coupling of the coordinates, so that loops stay closed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from mbsim.errors import SceneError
from mbsim.models.tree import Coupling, Link, Loop, ModelTree, TreeJoint, quaternion_matrix, transform


def _line_finder(path: Path):
    """(tag, name) -> line in the top file (lxml), for messages; None when not found."""
    try:
        from lxml import etree

        root = etree.parse(str(path), parser=etree.XMLParser(remove_comments=True, resolve_entities=False)).getroot()
        lines, named = {}, {}
        for el in root.iter():
            if isinstance(el.tag, str) and el.get("name") is not None:
                lines.setdefault((el.tag, el.get("name")), el.sourceline)
                named.setdefault(el.get("name"), el.sourceline)
    except Exception:  # the compiler has read it; lines are a courtesy
        lines, named = {}, {}
    # by tag and name, else by name (a tendon is a <fixed> or <spatial>, an equality a <connect> ...)
    return lambda tag, name: lines.get((tag, name), named.get(name))


def read_mjcf(path: str | Path, collisions: bool = False) -> ModelTree:
    """The kinematic tree of an MJCF file, as MuJoCo compiles it."""
    import mujoco

    path = Path(path)
    file = str(path)
    try:
        m = mujoco.MjModel.from_xml_path(file)
    except ValueError as exc:  # MuJoCo's compiler: "Error: ...\nElement 'joint', line 12"
        text = str(exc).strip()
        found = re.search(r"line (\d+)", text)
        element = re.search(r"Element name '([^']*)', id", text) or re.search(r"Element '([^']*)'", text)
        reason = text.splitlines()[0].removeprefix("Error: ").strip() if text else "MuJoCo cannot compile it"
        if text.startswith("XML Error"):
            reason = "not a valid MJCF/XML file: " + " ".join(text.split())
        raise SceneError(
            f"MuJoCo's compiler refuses the model: {reason}",
            file=file,
            line=int(found.group(1)) if found else None,
            key_path=f"<{element.group(1)}>" if element else "",
        ) from None
    line = _line_finder(path)

    def name(kind, i: int) -> str:
        return mujoco.mj_id2name(m, kind, i) or ""

    def refuse(reason: str, tag: str, label: str) -> SceneError:
        return SceneError(reason, file=file, line=line(tag, label), key_path=f"{tag} '{label}'")

    body_names = []
    for b in range(m.nbody):
        label = "world" if b == 0 else name(mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}"
        body_names.append(label)
    if m.ntendon:
        raise refuse("tendons change the dynamics and mbsim cannot represent them", "tendon",
                     name(mujoco.mjtObj.mjOBJ_TENDON, 0))  # fmt: skip
    links = {"world": Link("world")}
    joints: list[TreeJoint] = []
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
        jtype = int(m.jnt_type[j])
        qa, da = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        if jtype == mujoco.mjtJoint.mjJNT_FREE:
            joints.append(TreeJoint(jname, "free", parent, label, origin, line=line("joint", jname)))
            continue
        ndof = 3 if jtype == mujoco.mjtJoint.mjJNT_BALL else 1
        if jtype == mujoco.mjtJoint.mjJNT_BALL and np.any(m.dof_armature[da : da + 3] != 0.0):
            raise refuse("a ball joint's armature cannot be represented (mbsim's spherical joint has none)", "joint",
                         jname)  # fmt: skip
        for what, values in (("frictionloss", m.dof_frictionloss),):
            value = float(np.max(np.abs(values[da : da + ndof])))
            if value != 0.0:
                raise refuse(f"joint {what} {value:g} changes the dynamics and mbsim cannot represent it yet",
                             "joint", jname)  # fmt: skip
        if jtype == mujoco.mjtJoint.mjJNT_BALL:  # mbsim's spherical joint has no spring or damper
            if m.jnt_stiffness[j] != 0.0 or np.any(m.dof_damping[da : da + 3] != 0.0):
                raise refuse("a ball joint's stiffness or damping cannot be represented (mbsim's spherical joint "
                             "has none)", "joint", jname)  # fmt: skip
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
        joints.append(tj)
    if collisions:
        for g in range(m.ngeom):
            if m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0:
                continue  # a visual geom: it collides with nothing
            body = body_names[int(m.geom_bodyid[g])]
            label = name(mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
            links[body].shapes.append(_geom_shape(m, g, refuse, label))
    loops, couplings = _equalities(m, body_names, line, refuse, file)
    skipped = [f"actuator '{name(mujoco.mjtObj.mjOBJ_ACTUATOR, a) or a}'" for a in range(m.nu)]
    return ModelTree(
        file, "mjcf", "world", links, joints, np.array(m.opt.gravity, float), couplings, loops, skipped=skipped
    )


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
