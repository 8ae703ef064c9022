"""URDF reader: a ``<robot>`` file as a :class:`mbsim.models.tree.ModelTree`.

Read with lxml (mbsim.models.files: no entities, no network, nothing that blocks), element by
element, so that every refusal names the file, the element (tag and name) and its line. The
reader is strict where a lenient one would change the dynamics without a word:

- every number is a finite decimal number (no nan, inf, overflow or text), vectors have exactly
  three; an element that may appear once (``<origin>``, ``<axis>``, ``<inertial>``, ``<mass>`` ...)
  appears once; ``<inertial>`` has ``<mass value>`` and all six ``<inertia>`` entries (as ROS's
  parser requires);
- names of links and of joints are unique, every joint has one existing parent and child link,
  no link has two parents, the links form one tree (one root);
- masses are not negative and inertias are physical (positive semi-definite, principal moments
  obeying the triangle inequality) — :func:`mbsim.models.tree.check_links`;
- a revolute, continuous or prismatic joint has a non-zero axis; ``<mimic>`` names another joint
  with a coordinate, without cycles — :func:`mbsim.models.tree.check_couplings`.

Mass properties are the ``<inertial>`` elements (the inertia tensor rotated from the inertial
frame into the link frame); a link without one has no mass (allowed on a fixed joint, or welded
to the ground). Joint types: revolute and continuous -> revolute, prismatic, fixed, floating -> a
free body; ``planar`` is a scene error. ``<dynamics damping>`` becomes a joint damper and
``<dynamics friction>`` its Coulomb friction; ``<mimic>`` a coupling of the two joints'
coordinates; ``<limit lower upper>`` the joint's ``limits`` (revolute, prismatic; both absent or
both 0: none), ``<limit effort>`` > 0 its ``effort`` (the bound of the actuators a scene puts on
it; URDF has no actuators); ``velocity`` is not imported (a controller's bound, not dynamics).
``package://NAME/...`` resolves through ``package_paths`` and then the URDF's parent folders (a
folder called NAME, or one that contains NAME).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from mbsim.errors import SceneError, shorten
from mbsim.models.files import exists, not_regular, parse_xml, read_regular
from mbsim.models.tree import Coupling, Link, ModelTree, TreeJoint, check_couplings, check_links, quaternion

GRAVITY = np.array([0.0, 0.0, -9.81])  # what `mbsim import` writes for a URDF (it has none)
JOINT_KIND = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic", "fixed": "fixed",
              "floating": "free"}  # fmt: skip
# a decimal number as URDF parsers read it: no nan, inf, hex, underscores (Python's float takes them)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")


class _Reader:
    """Numbers and single elements of one file, refused with the element's line."""

    def __init__(self, file: str) -> None:
        self.file = file

    def error(self, reason: str, el, element: str) -> SceneError:
        return SceneError(reason, file=self.file, line=el.sourceline, key_path=element)

    def numbers(self, el, attr: str, where: str, count: int | tuple[int, ...], default=None) -> np.ndarray | None:
        """The numbers of attribute ``attr`` (``count`` of them); ``default`` when absent (None:
        required)."""
        element = f"{where} <{el.tag} {attr}>"
        text = el.get(attr)
        if text is None:
            if default is None:
                raise self.error(f"missing attribute '{attr}'", el, f"{where} <{el.tag}>")
            return np.asarray(default, float)
        tokens = text.split()
        counts = (count,) if isinstance(count, int) else count
        if len(tokens) not in counts:
            what = " or ".join(str(c) for c in counts)
            raise self.error(f"expected {what} number{'s' * (counts[-1] > 1)}, got '{shorten(text)}'", el, element)
        for token in tokens:
            if not _NUMBER.match(token):
                raise self.error(f"expected a finite decimal number, got '{shorten(token)}'", el, element)
        values = np.array([float(t) for t in tokens])
        bad = next((t for t, v in zip(tokens, values, strict=True) if not np.isfinite(v)), None)
        if bad is not None:  # 1e999: a decimal that overflows
            raise self.error(f"'{shorten(bad)}' overflows (not a finite number)", el, element)
        return values

    def number(self, el, attr: str, where: str, default: float | None = None) -> float:
        return float(self.numbers(el, attr, where, 1, None if default is None else [default])[0])

    def single(self, el, tag: str, where: str, required: bool = False):
        """The one child ``<tag>`` of ``el`` (None when absent and not required)."""
        found = el.findall(tag)
        if len(found) > 1:
            raise self.error(f"more than one <{tag}> (also line {found[0].sourceline})", found[1], f"{where} <{tag}>")
        if not found and required:
            raise self.error(f"missing element <{tag}>", el, where)
        return found[0] if found else None

    def origin(self, el, where: str) -> np.ndarray:
        """The (4, 4) transform of ``el``'s ``<origin xyz rpy>`` (identity without one)."""
        T = np.eye(4)
        o = self.single(el, "origin", where)
        if o is None:
            return T
        xyz = self.numbers(o, "xyz", where, 3, (0.0, 0.0, 0.0))
        rpy = self.numbers(o, "rpy", where, 3, (0.0, 0.0, 0.0))
        T[:3, :3] = rpy_matrix(*rpy)
        T[:3, 3] = xyz
        return T

    def name(self, el, what: str) -> str:
        name = el.get("name")
        if not name:
            raise self.error(f"a <{el.tag}> without a name", el, what)
        return name


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's rpy: about the fixed axes x, then y, then z: Rz(yaw) Ry(pitch) Rx(roll), written out
    as ROS and Pinocchio do (so that cos(pi/2) rounds alike)."""
    cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])  # fmt: skip


def resolve_uri(uri: str, urdf: Path, package_paths: dict[str, Path]) -> Path | None:
    """The file a mesh URI names (the first candidate that exists, whatever it is), or None."""
    if uri.startswith("package://"):
        name, _, rest = uri[len("package://") :].partition("/")
        candidates = []
        if name in package_paths:
            candidates.append(package_paths[name] / rest)
        for folder in [urdf.parent, *urdf.parent.parents]:
            if folder.name == name:
                candidates.append(folder / rest)
            candidates.append(folder / name / rest)
    elif uri.startswith("file://"):
        candidates = [Path(uri[len("file://") :])]
    else:
        candidates = [urdf.parent / uri]
    found = next((c for c in candidates if exists(c)), None)
    if found is None:
        return None
    try:
        return found.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the path as it is (not_regular says what it is)
        return found.absolute()


def read_urdf(path: str | Path, package_paths: dict[str, Path] | None = None, collisions: bool = False) -> ModelTree:
    """The kinematic tree of a URDF file (exit-2 errors name the file, element and line)."""
    path = Path(path)
    file = str(path)
    root = parse_xml(read_regular(path), file)
    r = _Reader(file)
    if root.tag != "robot":
        raise SceneError(f"expected a URDF file (<robot> at the top), found <{root.tag}>", file=file,
                         line=root.sourceline)  # fmt: skip
    packages = {k: Path(v) for k, v in (package_paths or {}).items()}
    link_els = [el for el in root if el.tag == "link"]
    joint_els = [el for el in root if el.tag == "joint"]
    if not link_els:
        raise SceneError("the model has no links (a URDF is a tree of <link> elements)", file=file,
                         line=root.sourceline, key_path="robot")  # fmt: skip
    links: dict[str, Link] = {}
    for el in link_els:
        name = r.name(el, "link")
        if name in links:
            raise r.error(f"duplicate link name '{name}' (also line {links[name].line})", el, f"link '{name}'")
        links[name] = _link(r, el, name, path, packages, collisions)
    joints: dict[str, TreeJoint] = {}
    parent_of: dict[str, str] = {}
    couplings = []
    for el in joint_els:
        name = r.name(el, "joint")
        where = f"joint '{name}'"
        if name in joints:
            raise r.error(f"duplicate joint name '{name}' (also line {joints[name].line})", el, where)
        kind = el.get("type")
        if kind is None:
            raise r.error("missing attribute 'type'", el, where)
        if kind not in JOINT_KIND:
            raise r.error(f"joint type '{shorten(str(kind))}' is not supported; expected one of "
                          f"{', '.join(JOINT_KIND)}", el, where)  # fmt: skip
        ends = {}
        for role in ("parent", "child"):
            end = r.single(el, role, where, required=True)
            ends[role] = end.get("link")
            if not ends[role]:
                raise r.error(f"<{role}> without a link", end, f"{where} <{role}>")
            if ends[role] not in links:
                raise r.error(f"its {role} link '{ends[role]}' is not in the file", end, f"{where} <{role}>")
        parent, child = ends["parent"], ends["child"]
        if parent == child:
            raise r.error(f"it joins link '{child}' to itself", el, where)
        if child in parent_of:
            raise r.error(f"link '{child}' is the child of two joints ('{parent_of[child]}' and '{name}'); a URDF "
                          "is a tree", el, where)  # fmt: skip
        parent_of[child] = name
        tj = TreeJoint(name, JOINT_KIND[kind], parent, child, r.origin(el, where), line=el.sourceline)
        axis_el = r.single(el, "axis", where)
        axis = np.array([1.0, 0.0, 0.0]) if axis_el is None else r.numbers(axis_el, "xyz", where, 3)
        if tj.kind in ("revolute", "prismatic"):
            scale = float(np.max(np.abs(axis)))  # scaled first: 1e200 or 1e-320 entries are a direction too
            if scale == 0.0:
                raise r.error(f"the joint axis {axis.tolist()} has no direction", axis_el, f"{where} <axis xyz>")
            tj.axis = (axis / scale) / np.linalg.norm(axis / scale)
        dynamics = r.single(el, "dynamics", where)
        if dynamics is not None:
            tj.damping = r.number(dynamics, "damping", where, 0.0)
            if tj.damping < 0.0:
                raise r.error(f"negative damping {tj.damping:g} would feed energy in", dynamics,
                              f"{where} <dynamics damping>")  # fmt: skip
            tj.friction = r.number(dynamics, "friction", where, 0.0)
            if tj.friction < 0.0:
                raise r.error(f"negative friction {tj.friction:g} would feed energy in", dynamics,
                              f"{where} <dynamics friction>")  # fmt: skip
        limit = r.single(el, "limit", where)
        if limit is not None:
            values = {k: None if limit.get(k) is None else r.number(limit, k, where)
                      for k in ("lower", "upper", "effort", "velocity")}  # fmt: skip
            # URDF's lower and upper default to 0; both absent or both 0 is read as "not given" (a
            # joint locked at 0 would be a fixed joint), so the joint is free (continuous: never limited)
            lower, upper = values["lower"] or 0.0, values["upper"] or 0.0
            if kind in ("revolute", "prismatic") and (lower, upper) != (0.0, 0.0):
                if lower > upper:
                    raise r.error(f"lower {lower:g} is above upper {upper:g}", limit, f"{where} <limit>")
                tj.limits = (lower, upper)
            if values["effort"] is not None and values["effort"] < 0.0:
                raise r.error(f"negative effort {values['effort']:g}", limit, f"{where} <limit effort>")
            if values["effort"] and tj.kind in ("revolute", "prismatic"):  # 0: files write it for "not given"
                tj.effort = values["effort"]
        mimic = r.single(el, "mimic", where)
        if mimic is not None:
            leader = mimic.get("joint")
            if not leader:
                raise r.error("<mimic> without a joint", mimic, f"{where} <mimic>")
            couplings.append(
                Coupling(
                    name,
                    leader,
                    r.number(mimic, "multiplier", where, 1.0),
                    r.number(mimic, "offset", where, 0.0),
                    f"{where} <mimic>",
                    mimic.sourceline,
                )  # fmt: skip
            )
        joints[name] = tj
    roots = [name for name in links if name not in parent_of]
    if len(roots) != 1:
        if roots:
            what = f"{len(roots)} root links ({', '.join(repr(n) for n in roots[:8])}{', ...' * (len(roots) > 8)})"
        else:
            what = "no root link (the joints form a loop)"
        raise SceneError(f"a URDF is one tree; found {what}", file=file, line=root.sourceline, key_path="robot")
    order = _tree_order(roots[0], list(joints.values()))
    if len(order) != len(joints):  # a loop besides the tree: its links have a parent but no path to the root
        stray = next(j for j in joints.values() if j not in order)
        raise SceneError("the joints form a loop; a URDF is a tree", file=file, line=stray.line,
                         key_path=f"joint '{stray.name}'")  # fmt: skip
    tree = ModelTree(file, "urdf", roots[0], links, order, GRAVITY.copy(), couplings)
    check_links(tree)
    check_couplings(tree)
    return tree


def _link(r: _Reader, el, name: str, path: Path, packages: dict[str, Path], collisions: bool) -> Link:
    """One ``<link>``: its mass properties, and its collision shapes when asked."""
    where = f"link '{name}'"
    item = Link(name, line=el.sourceline)
    inertial = r.single(el, "inertial", where)
    if inertial is not None:
        wi = f"{where} <inertial>"
        mass_el = r.single(inertial, "mass", wi, required=True)
        item.mass = r.number(mass_el, "value", wi)
        item.mass_line = mass_el.sourceline
        I_el = r.single(inertial, "inertia", wi, required=True)
        ixx, ixy, ixz, iyy, iyz, izz = (r.number(I_el, k, wi) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
        I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        T = r.origin(inertial, wi)
        R = T[:3, :3]
        item.com, item.inertia = T[:3, 3].copy(), R @ I @ R.T
        item.inertia_line = I_el.sourceline
    for kind in ("visual", "collision"):
        for part in el.findall(kind):
            wk = f"{where} <{kind}>"
            geometry = r.single(part, "geometry", wk, required=kind == "collision" and collisions)
            mesh = None if geometry is None else r.single(geometry, "mesh", wk)
            if mesh is not None:
                _mesh_file(r, mesh, path, packages, f"{wk} <mesh>")
            if kind == "collision" and collisions:
                item.shapes.append(_shape(r, part, geometry, path, packages, wk))
    return item


def _mesh_file(r: _Reader, mesh, path: Path, packages: dict[str, Path], where: str) -> Path:
    """The regular file a ``<mesh filename>`` names, or exit 2 saying why not."""
    uri = mesh.get("filename")
    if not uri:
        raise r.error("<mesh> without a filename", mesh, where)
    found = resolve_uri(uri, path, packages)
    if found is None:
        raise r.error(
            f"the mesh '{shorten(uri)}' cannot be found (package:// URIs resolve through the model's "
            "package_paths, then the file's parent folders)",
            mesh,
            where,
        )
    problem = not_regular(found)
    if problem:
        raise r.error(f"the mesh '{shorten(uri)}' ({found}) {problem}", mesh, where)
    return found


def _tree_order(root: str, joints: list[TreeJoint]) -> list[TreeJoint]:
    """The joints ordered parents first (breadth first from the root)."""
    children: dict[str, list[TreeJoint]] = {}
    for j in joints:
        children.setdefault(j.parent, []).append(j)
    out, queue = [], [root]
    while queue:
        link = queue.pop(0)
        for j in children.get(link, []):
            out.append(j)
            queue.append(j.child)
    return out


def _shape(r: _Reader, part, geometry, path: Path, packages: dict[str, Path], where: str) -> dict:
    """A ``<collision>`` element as a scene shape (pose in the link frame)."""
    T = r.origin(part, where)
    pose = {"position": [float(x) for x in T[:3, 3]], "orientation": {"quaternion": quaternion(T[:3, :3])}}
    kinds = [g for g in geometry if isinstance(g.tag, str)]
    if len(kinds) != 1:
        found = ", ".join(f"<{g.tag}>" for g in kinds) or "nothing"
        raise r.error(f"expected one of <box>, <sphere>, <cylinder>, <mesh> in <geometry>, found {found}", geometry,
                      f"{where} <geometry>")  # fmt: skip
    g = kinds[0]
    wg = f"{where} <{g.tag}>"

    def positive(values: np.ndarray, attr: str) -> list[float]:
        if not np.all(values > 0.0):
            raise r.error(f"expected positive sizes, got {values.tolist()}", g, f"{where} <{g.tag} {attr}>")
        return [float(v) for v in values]

    if g.tag == "box":
        return {"type": "box", "size": positive(r.numbers(g, "size", where, 3), "size"), "pose": pose}
    if g.tag == "sphere":
        return {"type": "sphere", "radius": positive(r.numbers(g, "radius", where, 1), "radius")[0], "pose": pose}
    if g.tag == "cylinder":
        radius = positive(r.numbers(g, "radius", where, 1), "radius")[0]
        length = positive(r.numbers(g, "length", where, 1), "length")[0]
        return {"type": "cylinder", "radius": radius, "length": length, "pose": pose}
    if g.tag == "mesh":
        scale = np.broadcast_to(r.numbers(g, "scale", where, (1, 3), (1.0,)), (3,))
        positive(scale, "scale")
        if not np.allclose(scale, scale[0]):
            raise r.error(f"a non-uniform mesh scale {scale.tolist()} is not supported (mesh shapes take one scale)",
                          g, wg)  # fmt: skip
        file = _mesh_file(r, g, path, packages, wg)
        return {"type": "mesh", "file": str(file), "scale": float(scale[0]), "pose": pose}
    raise r.error(f"<{shorten(g.tag)}> is not a URDF collision geometry (box, sphere, cylinder, mesh)", g, wg)
