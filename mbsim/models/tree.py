"""A robot description file as a kinematic tree, and the scene's bodies and joints made from it.

The readers (mbsim.models.urdf, mbsim.models.mjcf) fill a :class:`ModelTree`: links with their
mass properties in the link frame, and one joint per non-root link to its parent, placed as

    T_child = T_parent @ joint.origin @ motion(q),

with ``motion`` the joint's own displacement about (or along) its axis through its point, both
in the child's frame: a rotation by (q - ref) for ``revolute``, a translation by (q - ref) for
``prismatic`` (URDF: point 0, ref 0; MJCF: the joint's ``pos`` and qpos0). :func:`scene_parts`
then places the links at the initial joint coordinates, merges links on ``fixed`` joints into
their parent (masses and inertias added about the common centre of mass), makes links welded to
the ground part of the ground, and writes bodies and joints in CONTRACT §1's format (world
positions and axes at t = 0; the joint coordinates of mbsim's scene are zero there), each joint
with its limits, friction and effort (CONTRACT §8), and the file's actuators as the scene's
(:func:`actuator_entry`).
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field

import numpy as np

from mbsim.errors import SceneError
from mbsim.scene.readers import check_inertia
from mbsim.scene.rotations import quat_from_axis_angle

JOINT_KINDS = ("revolute", "prismatic", "fixed", "spherical", "free")


@dataclass
class Link:
    """A link (MJCF: body): mass properties about its centre of mass, in its own frame."""

    name: str
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    shapes: list[dict] = field(default_factory=list)  # scene shapes with poses in the link frame
    line: int | None = None
    mass_line: int | None = None  # the lines of the file's mass and inertia, where known (URDF)
    inertia_line: int | None = None


@dataclass
class TreeJoint:
    """The joint of ``child`` to ``parent`` (see the module docstring)."""

    name: str
    kind: str  # one of JOINT_KINDS
    parent: str
    child: str
    origin: np.ndarray  # (4, 4) parent frame -> child frame at motion zero
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))  # child frame, unit
    point: np.ndarray = field(default_factory=lambda: np.zeros(3))  # child frame
    ref: float = 0.0  # the coordinate of zero motion
    default: float | list = 0.0  # the coordinate when joint_positions does not name the joint
    damping: float = 0.0
    stiffness: float = 0.0
    spring_ref: float = 0.0  # the coordinate where the stiffness is relaxed
    limits: tuple[float, float] | None = None
    line: int | None = None
    tag: str = "joint"
    armature: float = 0.0  # inertia on the coordinate (MJCF armature)
    friction: float = 0.0  # Coulomb friction on the coordinate (URDF <dynamics friction>, MJCF frictionloss)
    effort: float | None = None  # the bound of the actuators' summed force (URDF <limit effort>)


@dataclass
class TreeActuator:
    """An actuator on a joint coordinate with MuJoCo's transmission: length L = gear q, rate
    Ld = gear qd, force f = (g0 + g1 L + g2 Ld) ctrl + b0 + b1 L + b2 Ld clamped to ``forcerange``,
    ctrl clamped to ``ctrlrange`` first; the joint gets gear f (:func:`actuator_entry`)."""

    name: str
    joint: str
    gear: float
    gain: tuple[float, float, float]
    bias: tuple[float, float, float]
    ctrlrange: tuple[float, float] | None = None
    forcerange: tuple[float, float] | None = None
    line: int | None = None


@dataclass
class Coupling:
    """A linear relation between two joints' coordinates: q_joint = multiplier * q_leader + offset
    (URDF ``<mimic>``, MJCF equality ``joint`` with a linear polynomial)."""

    joint: str
    leader: str
    multiplier: float
    offset: float
    element: str
    line: int | None = None
    name: str = ""  # the coupling's name in the scene (default: JOINT_mimic)


@dataclass
class Loop:
    """A constraint that closes a loop between two links: ``spherical`` (MJCF equality connect:
    anchors in each link's frame coincide) or ``fixed`` (equality weld: the links keep their
    relative pose of the file)."""

    kind: str
    name: str
    link1: str
    link2: str
    anchor1: np.ndarray
    anchor2: np.ndarray
    element: str
    line: int | None = None


@dataclass
class ModelTree:
    """What a reader found in one file."""

    file: str
    format: str
    root: str
    links: dict[str, Link]
    joints: list[TreeJoint]  # one per non-root link
    gravity: np.ndarray
    couplings: list[Coupling] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # ignored content that a user may miss, for validate
    actuators: list[TreeActuator] = field(default_factory=list)
    free_root: bool = False  # the file itself makes the root a floating base (MJCF free joint)

    def error(self, reason: str, element: str, line: int | None = None, hint: str = "") -> SceneError:
        return SceneError(reason, file=self.file, line=line, key_path=element, hint=hint)


def inertia_problem(inertia: np.ndarray) -> str | None:
    """What makes a link's inertia (about its centre of mass) unphysical, or None: not finite, not
    symmetric, not positive semi-definite, or principal moments that break I1 + I2 >= I3 (every
    rigid body obeys it), each within 1e-9 of the largest moment (as the scene's check)."""
    with np.errstate(all="ignore"):  # entries near 1e308 overflow: refused below, without warnings
        if not np.all(np.isfinite(inertia)):
            return "the inertia is not finite"
        scale = float(np.max(np.abs(inertia)))
        if not np.allclose(inertia, inertia.T, rtol=1e-9, atol=1e-12 * scale):
            return "the inertia matrix is not symmetric"
        eig = np.linalg.eigvalsh(inertia)
        if not np.all(np.isfinite(eig)) or not np.isfinite(eig[0] + eig[1]):
            return "the inertia is too large: its principal values overflow"
    values = [float(f"{x:.9g}") for x in eig]
    tol = 1e-9 * max(abs(eig[-1]), abs(eig[0]))
    if eig[0] < -tol:
        return f"the inertia is not positive semi-definite (principal values {values})"
    if eig[0] + eig[1] < eig[2] - tol:
        return f"the principal inertias {values} break the triangle inequality I1 + I2 >= I3 of every rigid body"
    return None


def check_links(tree: ModelTree) -> None:
    """Every link's mass is finite and not negative, and its inertia physical (:func:`inertia_problem`)."""
    for link in tree.links.values():
        where = f"link '{link.name}'"
        if not np.isfinite(link.mass) or link.mass < 0.0:
            what = "negative" if np.isfinite(link.mass) else "not finite:"
            raise tree.error(f"the mass is {what} {link.mass:g}", f"{where} <inertial> <mass>",
                             link.mass_line or link.line)  # fmt: skip
        if not np.all(np.isfinite(link.com)):
            raise tree.error(f"the centre of mass {link.com.tolist()} is not finite", f"{where} <inertial>", link.line)
        problem = inertia_problem(link.inertia)
        if problem:
            raise tree.error(problem, f"{where} <inertial> <inertia>", link.inertia_line or link.line)


def check_couplings(tree: ModelTree) -> None:
    """Each coupling (URDF mimic, MJCF joint equality) ties a joint with a coordinate (revolute or
    prismatic) to another such joint of the file, each joint follows at most one, without cycles."""
    kinds = {j.name: j.kind for j in tree.joints}
    follows: dict[str, Coupling] = {}
    for c in tree.couplings:
        if c.leader == c.joint:
            raise tree.error(f"joint '{c.joint}' cannot follow itself", c.element, c.line)
        if c.leader not in kinds:
            from mbsim.errors import did_you_mean

            raise tree.error(f"it follows joint '{c.leader}', which is not in the file", c.element, c.line,
                             did_you_mean(c.leader, kinds))  # fmt: skip
        for role, name in (("the follower", c.joint), ("the joint it follows", c.leader)):
            if kinds.get(name) not in ("revolute", "prismatic"):
                raise tree.error(f"{role}, '{name}', is a {kinds.get(name)} joint: it has no coordinate to couple",
                                 c.element, c.line)  # fmt: skip
        if not np.isfinite(c.multiplier) or not np.isfinite(c.offset):
            raise tree.error("its multiplier and offset must be finite numbers", c.element, c.line)
        if c.joint in follows:
            first = follows[c.joint]
            raise tree.error(f"joint '{c.joint}' already follows '{first.leader}' ({first.element}); a joint "
                             "follows at most one", c.element, c.line)  # fmt: skip
        follows[c.joint] = c
    leaders_first(tree)  # refuses a cycle


def leaders_first(tree: ModelTree) -> list[Coupling]:
    """The couplings ordered so that a leader's own coupling comes before its followers' (chains
    of mimics start in order); a cycle of joints following each other is refused."""
    follows = {c.joint: c for c in tree.couplings}
    out: list[Coupling] = []
    done: set[str] = set()
    for c in tree.couplings:
        path: list[Coupling] = []  # from c up its leaders, until one that is done or leads freely
        on_path: set[str] = set()
        item: Coupling | None = c
        while item is not None and item.joint not in done:
            if item.joint in on_path:
                names = [p.joint for p in path[[p.joint for p in path].index(item.joint) :]]
                cycle = " -> ".join(repr(n) for n in [*names, item.joint])
                raise tree.error(f"the joints follow each other in a cycle ({cycle})", item.element, item.line)
            path.append(item)
            on_path.add(item.joint)
            item = follows.get(item.leader)
        for p in reversed(path):
            done.add(p.joint)
            out.append(p)
    return out


def transform(rotation: np.ndarray | None = None, translation: np.ndarray | None = None) -> np.ndarray:
    T = np.eye(4)
    if rotation is not None:
        T[:3, :3] = rotation
    if translation is not None:
        T[:3, 3] = translation
    return T


def quaternion_matrix(q) -> np.ndarray:
    """The rotation matrix of a quaternion (w, x, y, z), normalised first (the files' and the
    scene's order; the one conversion the readers and the placing share)."""
    from scipy.spatial.transform import Rotation  # here: only an import pays for scipy.spatial

    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return Rotation.from_quat([x, y, z, w]).as_matrix()


def motion(joint: TreeJoint, q: float) -> np.ndarray:
    """The child's displacement by its joint coordinate ``q`` (child frame)."""
    if joint.kind == "revolute":
        R = quaternion_matrix(quat_from_axis_angle(joint.axis, q - joint.ref))
        return transform(R, joint.point - R @ joint.point)
    if joint.kind == "prismatic":
        return transform(None, joint.axis * (q - joint.ref))
    if joint.kind == "spherical":  # q: the quaternion (w, x, y, z) of the child relative to its pose
        R = quaternion_matrix(q)
        return transform(R, joint.point - R @ joint.point)
    return np.eye(4)


@dataclass
class Placed:
    """World poses and twists of the links at the initial state."""

    pose: dict[str, np.ndarray]  # link -> (4, 4) world
    omega: dict[str, np.ndarray]  # link -> world angular velocity
    velocity: dict[str, np.ndarray]  # link -> world velocity of the link frame's origin


def place(
    tree: ModelTree,
    root_pose: np.ndarray,
    positions: dict[str, float],
    velocities: dict[str, float],
    root_velocity: np.ndarray,
    root_omega: np.ndarray,
) -> Placed:
    """Forward kinematics (poses, then twists base to tip) at the initial joint coordinates."""
    pose = {tree.root: root_pose}
    omega = {tree.root: np.asarray(root_omega, float)}
    velocity = {tree.root: np.asarray(root_velocity, float)}
    for j in tree.joints:  # parents before children (the readers order them so)
        q = positions.get(j.name, j.default)
        qd = velocities.get(j.name, 0.0)
        parent = pose[j.parent]
        if j.kind == "free" and j.name in positions:  # MuJoCo's free qpos: the body's pose in the world
            T = root_pose @ transform(quaternion_matrix(q[3:7]), q[:3])
        else:
            T = parent @ j.origin @ motion(j, q)
        pose[j.child] = T
        R = T[:3, :3]
        w, v = omega[j.parent], velocity[j.parent]
        o_parent, o_child = parent[:3, 3], T[:3, 3]
        v_child = v + np.cross(w, o_child - o_parent)
        axis_w = R @ j.axis
        if j.kind == "revolute":
            p_w = T[:3, :3] @ j.point + o_child
            w = w + axis_w * qd
            v_child = v_child + np.cross(axis_w * qd, o_child - p_w)
        elif j.kind == "prismatic":
            v_child = v_child + axis_w * qd
        elif j.kind == "free" and j.name in velocities:  # MuJoCo's free qvel: world v, body-frame omega
            qd = np.asarray(qd, float)
            w, v_child = R @ qd[3:6], root_pose[:3, :3] @ qd[:3]
        elif j.kind == "spherical":  # qd: angular velocity in the child's frame (MuJoCo's ball qvel)
            p_w = T[:3, :3] @ j.point + o_child
            turn = R @ np.asarray(qd if np.ndim(qd) else np.zeros(3), float)
            w = w + turn
            v_child = v_child + np.cross(turn, o_child - p_w)
        omega[j.child], velocity[j.child] = w, v_child
    return Placed(pose, omega, velocity)


def combine(parts: list[tuple[float, np.ndarray, np.ndarray]]) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass and inertia about it of rigidly joined parts, each (mass, com, inertia
    about its com), all in one frame."""
    mass = sum(m for m, _, _ in parts)
    if mass <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    com = sum(m * c for m, c, _ in parts) / mass
    inertia = np.zeros((3, 3))
    for m, c, I in parts:
        d = c - com
        inertia += I + m * (d @ d * np.eye(3) - np.outer(d, d))
    return mass, com, inertia


def quaternion(R: np.ndarray) -> list[float]:
    """[w, x, y, z] of a rotation matrix (scalar first, as the scene format)."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return [float(w), float(x), float(y), float(z)]


def _floats(x: np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(x).ravel()]


@dataclass
class SceneParts:
    """Bodies, joints and ground shapes in the scene format, and what was left out."""

    bodies: list[dict]
    joints: list[dict]
    ground_shapes: list[dict]
    joint_names: dict[str, str]  # the file's joint name -> the scene's (prefix added)
    body_of_link: dict[str, str]  # link -> scene body (or "ground")
    skipped: list[str]
    actuators: list[dict]  # the scene's actuators: entries (prefix added)


def scene_parts(
    tree: ModelTree,
    prefix: str,
    free_base: bool,
    root_pose: np.ndarray,
    positions: dict[str, float],
    velocities: dict[str, float],
    root_velocity: np.ndarray,
    root_omega: np.ndarray,
    ctrl: dict[str, str] | None = None,
) -> SceneParts:
    """The scene's bodies, joints and actuators of ``tree`` (see the module docstring); ``ctrl``:
    the control expression of each actuator by its name in the file (default 0)."""
    with np.errstate(all="ignore"):  # overflow of huge finite sizes: refused by _check_finite, without warnings
        return _scene_parts(tree, prefix, free_base, root_pose, positions, velocities, root_velocity, root_omega,
                            ctrl)  # fmt: skip


def _scene_parts(
    tree: ModelTree,
    prefix: str,
    free_base: bool,
    root_pose: np.ndarray,
    positions: dict[str, float],
    velocities: dict[str, float],
    root_velocity: np.ndarray,
    root_omega: np.ndarray,
    ctrl: dict[str, str] | None,
) -> SceneParts:
    placed = place(tree, root_pose, positions, velocities, root_velocity, root_omega)
    free_root = free_base or tree.free_root
    # the links welded to the ground are the group None (no link name can collide with it: a link
    # named "ground" is a body of its own, refused below unless a prefix renames it)
    group: dict[str, str | None] = {tree.root: tree.root if free_root else None}
    for j in tree.joints:
        group[j.child] = group[j.parent] if j.kind == "fixed" else j.child
    members: dict[str | None, list[str]] = {}
    for link, g in group.items():
        members.setdefault(g, []).append(link)

    def shape_world(link: str, shape: dict) -> tuple[dict, np.ndarray]:
        pose = shape.get("pose", {})
        local = transform(pose_rotation(pose), np.array(pose.get("position", [0.0, 0.0, 0.0]), float))
        return {k: v for k, v in shape.items() if k != "pose"}, placed.pose[link] @ local

    def plane_world(link: str, shape: dict) -> dict:
        """A plane (ground only) given by a point and a normal: moved by its link's pose."""
        T = placed.pose[link]
        point = T[:3, :3] @ np.asarray(shape["point"], float) + T[:3, 3]
        return {"type": "plane", "point": _floats(point), "normal": _floats(T[:3, :3] @ np.asarray(shape["normal"]))}

    bodies, ground_shapes = [], []
    body_of_link = {link: ("ground" if g is None else prefix + g) for link, g in group.items()}
    for g, links in members.items():
        if g is None:
            for link in links:
                for shape in tree.links[link].shapes:
                    if shape["type"] == "plane":
                        ground_shapes.append(plane_world(link, shape))
                        continue
                    base, T = shape_world(link, shape)
                    ground_shapes.append({**base, "pose": _pose_dict(T)})
            continue
        root_link = tree.links[g]
        if prefix + g == "ground":
            raise tree.error(
                "a moving link named 'ground' would become a body named 'ground', the scene's name of the fixed "
                "world; give the model a prefix (prefix: in the scene's models: entry, --prefix for mbsim import)",
                f"link '{g}'",
                root_link.line,
            )
        T_g = placed.pose[g]
        R_g, o_g = T_g[:3, :3], T_g[:3, 3]
        parts = []
        for link in links:
            L, T = tree.links[link], placed.pose[link]
            R_l = T[:3, :3]
            com_w = T[:3, :3] @ L.com + T[:3, 3]
            R = R_g.T @ R_l
            parts.append((L.mass, R_g.T @ (com_w - o_g), R @ L.inertia @ R.T))
        mass, com_g, inertia = combine(parts)
        merged = f" (with {', '.join(repr(n) for n in links if n != g)} merged into it)" if len(links) > 1 else ""
        if mass <= 0.0:
            raise tree.error(
                f"the moving link '{g}'{merged} has no mass; give it an <inertial> with a positive mass "
                "(a moving body needs one)",
                f"link '{g}'",
                root_link.line,
            )
        com_w = R_g @ com_g + o_g
        inertia = 0.5 * (inertia + inertia.T)
        _check_body_inertia(tree, g, merged, inertia)
        w = placed.omega[g]
        body = {
            "name": prefix + g,
            "mass": float(mass),
            "inertia": [_floats(row) for row in inertia],
            "position": _floats(com_w),
            "orientation": {"quaternion": quaternion(R_g)},
            "velocity": _floats(placed.velocity[g] + np.cross(w, com_w - o_g)),
            "angular_velocity": _floats(w),
        }
        T_body = transform(R_g, com_w)
        shapes = []
        for link in links:
            for shape in tree.links[link].shapes:
                base, T = shape_world(link, shape)
                shapes.append({**base, "pose": _pose_dict(np.linalg.inv(T_body) @ T)})
        if shapes:
            body["shapes"] = shapes
        bodies.append(body)

    joints, joint_names = [], {}
    for j in tree.joints:
        joint_names[j.name] = prefix + j.name
        if j.kind in ("fixed", "free"):
            continue
        T = placed.pose[j.child]
        item = {
            "name": prefix + j.name,
            "type": j.kind,
            "body1": body_of_link[j.parent],
            "body2": body_of_link[j.child],
            "point": _floats(T[:3, :3] @ j.point + T[:3, 3]),
        }
        if j.kind in ("revolute", "prismatic"):
            item["axis"] = _floats(T[:3, :3] @ j.axis)
            q0 = float(positions.get(j.name, j.default))
            if q0:  # the file's coordinate: drives, springs and /q count from it
                item["initial"] = q0
            if j.armature > 0.0:
                item["armature"] = float(j.armature)
            if j.damping > 0.0 or j.stiffness > 0.0:
                item["spring"] = {
                    "stiffness": float(j.stiffness),
                    "damping": float(j.damping),
                    "rest": float(j.spring_ref),
                }
            if j.limits is not None:  # in the file's coordinate, which the scene's counts from (initial)
                item["limits"] = {"lower": float(j.limits[0]), "upper": float(j.limits[1])}
            if j.friction > 0.0:
                item["friction"] = {"coulomb": float(j.friction)}
            if j.effort is not None:
                item["effort"] = float(j.effort)
        joints.append(item)
    frames = {"ground": (np.eye(3), np.zeros(3))}
    for body in bodies:
        frames[body["name"]] = (pose_rotation(body) if "orientation" in body else np.eye(3), np.array(body["position"]))
    taken = {j.name for j in tree.joints if j.kind not in ("fixed", "free")}  # the ones written as joints
    for loop in tree.loops:
        if loop.name in taken:  # MJCF: a joint and an equality may share a name; the scene's joints may not
            raise tree.error(f"the joint made of it would be named '{prefix + loop.name}', as another imported "
                             "joint; rename one of them", loop.element, loop.line)  # fmt: skip
        taken.add(loop.name)
        b1, b2 = body_of_link[loop.link1], body_of_link[loop.link2]
        if b1 == b2:
            raise tree.error(f"it joins link '{loop.link1}' to '{loop.link2}', which move as one body", loop.element,
                             loop.line)  # fmt: skip
        p1 = placed.pose[loop.link1] @ np.append(loop.anchor1, 1.0)
        p2 = placed.pose[loop.link2] @ np.append(loop.anchor2, 1.0)
        item = {"name": prefix + loop.name, "type": loop.kind, "body1": b1, "body2": b2}
        if loop.kind == "fixed" or np.linalg.norm(p1[:3] - p2[:3]) <= 1e-12:
            item["point"] = _floats(p1[:3])
        else:  # anchors apart at the start: each body's own point (the start is assembled)
            for key, body, p in (("point1", b1, p1), ("point2", b2, p2)):
                R, com = frames[body]
                item[key] = _floats(R.T @ (p[:3] - com))
        joints.append(item)
    for item, element in [*((b, "link") for b in bodies), *((j, "joint") for j in joints)]:
        _check_finite(tree, item, element, prefix)
    actuators = [actuator_entry(a, prefix, (ctrl or {}).get(a.name, "0")) for a in tree.actuators]
    return SceneParts(bodies, joints, ground_shapes, joint_names, body_of_link, list(tree.skipped), actuators)


def signal(kind: str, joint: str) -> str:
    """The signal ``q.JOINT`` (kind ``q``) or ``qd.JOINT``; ``q["JOINT"]`` for a name that is not
    an identifier (CONTRACT §8)."""
    if joint.isidentifier() and not keyword.iskeyword(joint):
        return f"{kind}.{joint}"
    return f"{kind}[{joint!r}]"


def actuator_entry(act: TreeActuator, prefix: str, ctrl: str) -> dict:
    """The scene's ``actuators:`` entry of ``act`` driven by the control expression ``ctrl``.

    One rule for every kind the file's compiler reduced to gain and bias (MuJoCo: motor, position,
    velocity, general): f = gain ctrl + bias on L = gear q, Ld = gear qd is a position servo when
    it is kp (ctrl - L) - kv Ld, a velocity servo when kv (ctrl - Ld), a torque of g0 ctrl when it
    has no bias, and else a torque whose value spells the affine law out."""
    joint = prefix + act.joint
    if act.ctrlrange is not None:  # the control is clamped before the law reads it (MuJoCo's ctrllimited)
        ctrl = f"min(max({ctrl}, {float(act.ctrlrange[0])!r}), {float(act.ctrlrange[1])!r})"
    (g0, g1, g2), (b0, b1, b2) = act.gain, act.bias
    item: dict = {"name": prefix + act.name, "joint": joint}
    fixed = g1 == 0.0 and g2 == 0.0
    if fixed and b0 == 0.0 and b1 == 0.0 and b2 == 0.0:
        item.update(type="torque", value=ctrl if g0 == 1.0 else f"{g0!r}*({ctrl})")
    elif fixed and g0 > 0.0 and b0 == 0.0 and b1 == -g0 and b2 <= 0.0:
        item.update(type="position", kp=float(g0), kd=0.0 - b2, target=ctrl, rate=0)  # no target rate
    elif fixed and g0 > 0.0 and b0 == 0.0 and b1 == 0.0 and b2 == -g0:
        item.update(type="velocity", kd=float(g0), target=ctrl)
    else:
        gear = "" if act.gear == 1.0 else f"{float(act.gear)!r}*"
        length, rate = f"({gear}{signal('q', joint)})", f"({gear}{signal('qd', joint)})"

        def affine(c0: float, c1: float, c2: float) -> list[str]:
            terms = [f"{c0!r}"] if c0 != 0.0 else []
            return terms + [f"{c!r}*{x}" for c, x in ((c1, length), (c2, rate)) if c != 0.0]

        gain, bias = affine(g0, g1, g2), affine(b0, b1, b2)
        terms = ([f"({' + '.join(gain)})*({ctrl})"] if gain else []) + bias
        item.update(type="torque", value=" + ".join(terms) or "0")
    if act.gear != 1.0:
        item["gear"] = float(act.gear)
    if act.forcerange is not None:
        item["forcerange"] = [float(act.forcerange[0]), float(act.forcerange[1])]
    return item


def _check_body_inertia(tree: ModelTree, link: str, merged: str, inertia: np.ndarray) -> None:
    """The scene's own check of a body's inertia (mbsim.scene.readers.check_inertia: positive definite,
    triangle inequality), refused here naming the link, so that an import never writes a body the
    scene then refuses at a line of the scene that does not exist."""

    class _AtTheLink:  # the one method of Context that check_inertia calls
        @staticmethod
        def error(path, reason: str, hint: str = "") -> SceneError:
            what = f"the body's inertia{merged} (about its centre of mass)"
            return tree.error(f"{what}: {reason}", f"link '{link}'", tree.links[link].line, hint)

    check_inertia(_AtTheLink(), (), inertia)  # type: ignore[arg-type]


def _check_finite(tree: ModelTree, item: dict, element: str, prefix: str) -> None:
    """Every number of an imported body or joint is finite (a sum or product of the file's finite
    numbers can overflow), else exit 2 naming the link or joint."""

    def numbers(value):
        if isinstance(value, dict):
            for v in value.values():
                yield from numbers(v)
        elif isinstance(value, list):
            for v in value:
                yield from numbers(v)
        elif isinstance(value, float):
            yield value

    if all(np.isfinite(x) for x in numbers(item)):
        return
    name = item["name"][len(prefix) :]
    owner = tree.links.get(name) if element == "link" else next((j for j in tree.joints if j.name == name), None)
    raise tree.error(
        "its initial pose, velocity or mass properties overflow (not finite numbers); check the file's sizes",
        f"{element} '{name}'",
        getattr(owner, "line", None),
    )


def pose_rotation(pose: dict) -> np.ndarray | None:
    q = pose.get("orientation", {}).get("quaternion") if isinstance(pose.get("orientation"), dict) else None
    return None if q is None else quaternion_matrix(q)


def _pose_dict(T: np.ndarray) -> dict:
    return {"position": _floats(T[:3, 3]), "orientation": {"quaternion": quaternion(T[:3, :3])}}
