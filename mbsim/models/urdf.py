"""URDF reader: a ``<robot>`` file as a :class:`mbsim.models.tree.ModelTree`.

Parsed by yourdfpy (a maintained URDF parser: origins as matrices, mimic, limits, dynamics); the
element lines for error messages come from lxml's own parse of the same file. Mass properties
are the ``<inertial>`` elements (the inertia tensor rotated from the inertial frame into the
link frame); a link without one has no mass (allowed on a fixed joint, or welded to the ground).
Joint types: revolute and continuous -> revolute, prismatic, fixed, floating -> a free body;
``planar`` is a scene error. ``<dynamics damping>`` becomes a joint damper; ``<mimic>`` a
coupling of the two joints' coordinates; ``<limit>`` is carried as the joint's limits.
``package://NAME/...`` resolves through ``package_paths`` and then the URDF's parent folders (a
folder called NAME, or one that contains NAME).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mbsim.errors import SceneError
from mbsim.models.tree import Coupling, Link, ModelTree, TreeJoint

GRAVITY = np.array([0.0, 0.0, -9.81])  # what `mbsim import` writes for a URDF (it has none)
JOINT_KIND = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic", "fixed": "fixed",
              "floating": "free"}  # fmt: skip


def _lines(path: Path, text: bytes):
    """(tag, name) -> line of the file's elements, and the parsed root (lxml)."""
    from lxml import etree

    try:
        root = etree.fromstring(text, parser=etree.XMLParser(remove_comments=True, resolve_entities=False))
    except etree.XMLSyntaxError as exc:
        line = exc.position[0] if exc.position else None
        raise SceneError(f"not a well-formed XML file: {exc.msg}", file=str(path), line=line) from None
    lines: dict[tuple[str, str], int] = {}
    for el in root.iter():
        if isinstance(el.tag, str) and el.get("name") is not None:
            lines.setdefault((el.tag, el.get("name")), el.sourceline)
        if el.tag == "mesh" and el.get("filename") is not None:
            lines.setdefault(("mesh", el.get("filename")), el.sourceline)
    return root, lines


def resolve_uri(uri: str, urdf: Path, package_paths: dict[str, Path]) -> Path | None:
    """The file a mesh URI names, or None when it does not exist."""
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
    return next((c.resolve() for c in candidates if c.is_file()), None)


def read_urdf(path: str | Path, package_paths: dict[str, Path] | None = None, collisions: bool = False) -> ModelTree:
    """The kinematic tree of a URDF file (exit-2 errors name the file, element and line)."""
    import yourdfpy

    path = Path(path)
    file = str(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise SceneError(f"cannot read the model file: {exc.strerror or exc}", file=file) from None
    root, lines = _lines(path, text)
    if root.tag != "robot":
        found = f"found <{root.tag}>"
        raise SceneError(f"expected a URDF file (<robot> at the top), {found}", file=file, line=root.sourceline)
    for el in root.iter("link", "joint"):
        if el.getparent() is root and not el.get("name"):
            raise SceneError(f"a <{el.tag}> without a name", file=file, line=el.sourceline, key_path=el.tag)
    for el in root.iter("joint"):  # checked here, with lines: yourdfpy would take the type as given
        if el.getparent() is root and el.get("type") not in JOINT_KIND:
            raise SceneError(
                f"joint type '{el.get('type')}' is not supported; expected one of {', '.join(JOINT_KIND)}",
                file=file,
                line=el.sourceline,
                key_path=f"joint '{el.get('name')}'",
            )
    try:
        robot = yourdfpy.URDF.load(
            file, build_scene_graph=False, load_meshes=False, build_collision_scene_graph=False,
            load_collision_meshes=False,
        ).robot  # fmt: skip
    except Exception as exc:  # yourdfpy's own checks (missing attributes, bad numbers)
        raise SceneError(f"cannot read the URDF: {exc}", file=file) from None
    packages = {k: Path(v) for k, v in (package_paths or {}).items()}
    links: dict[str, Link] = {}
    for link in robot.links:
        line = lines.get(("link", link.name))
        if link.name in links:
            raise SceneError(f"duplicate link name '{link.name}'", file=file, line=line, key_path=f"link '{link.name}'")
        item = Link(link.name, line=line)
        inertial = link.inertial
        if inertial is not None and inertial.mass is not None:
            T = inertial.origin if inertial.origin is not None else np.eye(4)
            R = T[:3, :3]
            I = np.asarray(inertial.inertia if inertial.inertia is not None else np.zeros((3, 3)), float)
            item.mass, item.com, item.inertia = float(inertial.mass), T[:3, 3].copy(), R @ I @ R.T
            if item.mass < 0:
                raise SceneError(
                    f"negative mass {item.mass:g}", file=file, line=line, key_path=f"link '{link.name}' <inertial>"
                )
        for kind, elements in (("visual", link.visuals), ("collision", link.collisions)):
            for el in elements:
                mesh = getattr(el.geometry, "mesh", None) if el.geometry is not None else None
                if mesh is None:
                    continue
                if resolve_uri(mesh.filename, path, packages) is None:
                    raise SceneError(
                        f"the mesh '{mesh.filename}' cannot be found (package:// URIs resolve through the model's "
                        "package_paths, then the file's parent folders)",
                        file=file,
                        line=lines.get(("mesh", mesh.filename), line),
                        key_path=f"link '{link.name}' <{kind}> <mesh>",
                    )
        if collisions:
            item.shapes = [_shape(el, path, packages, link.name, line) for el in link.collisions]
            item.shapes = [s for s in item.shapes if s is not None]
        links[link.name] = item
    joints: list[TreeJoint] = []
    parent_of: dict[str, str] = {}
    couplings = []
    for j in robot.joints:
        line = lines.get(("joint", j.name))
        where = f"joint '{j.name}'"
        for role, name in (("parent", j.parent), ("child", j.child)):
            if name not in links:
                raise SceneError(f"its {role} link '{name}' is not in the file", file=file, line=line, key_path=where)
        if j.child in parent_of:
            raise SceneError(
                f"link '{j.child}' is the child of two joints ('{parent_of[j.child]}' and '{j.name}'); "
                "a URDF is a tree",
                file=file,
                line=line,
                key_path=where,
            )
        parent_of[j.child] = j.name
        axis = np.asarray(j.axis if j.axis is not None else (1.0, 0.0, 0.0), float)
        norm = float(np.linalg.norm(axis))
        if JOINT_KIND[j.type] in ("revolute", "prismatic") and norm == 0.0:
            raise SceneError("the joint axis is zero", file=file, line=line, key_path=f"{where} <axis>")
        tj = TreeJoint(
            j.name, JOINT_KIND[j.type], j.parent, j.child,
            np.asarray(j.origin if j.origin is not None else np.eye(4), float), axis / (norm or 1.0), line=line,
        )  # fmt: skip
        if j.dynamics is not None:
            tj.damping = _number(j.dynamics.damping, file, line, f"{where} <dynamics damping>")
            friction = _number(j.dynamics.friction, file, line, f"{where} <dynamics friction>")
            if friction:
                raise SceneError(
                    f"joint friction {friction:g} changes the dynamics and mbsim has no joint friction; "
                    "remove it (or set it to 0) to import the model",
                    file=file,
                    line=line,
                    key_path=f"{where} <dynamics>",
                )
        limit = j.limit if j.type in ("revolute", "prismatic") else None  # continuous: none
        if limit is not None and limit.lower is not None and limit.upper is not None:
            tj.limits = (float(limit.lower), float(limit.upper))
        if j.mimic is not None:
            couplings.append(
                Coupling(
                    j.name,
                    j.mimic.joint,
                    float(1.0 if j.mimic.multiplier is None else j.mimic.multiplier),
                    float(j.mimic.offset or 0.0),
                    f"{where} <mimic>",
                    line,
                )  # fmt: skip
            )
        joints.append(tj)
    roots = [name for name in links if name not in parent_of]
    if len(roots) != 1:
        what = "no root link (the joints form a loop)" if not roots else f"{len(roots)} root links ({', '.join(roots)})"
        raise SceneError(f"a URDF is one tree; found {what}", file=file, line=root.sourceline, key_path="robot")
    order = _tree_order(roots[0], joints)
    if len(order) != len(joints):
        raise SceneError("the joints form a loop; a URDF is a tree", file=file, line=root.sourceline, key_path="robot")
    names = {j.name for j in joints}
    for c in couplings:
        if c.leader not in names:
            raise SceneError(f"it mimics joint '{c.leader}', which is not in the file", file=file, line=c.line,
                             key_path=c.element)  # fmt: skip
    return ModelTree(file, "urdf", roots[0], links, order, GRAVITY.copy(), couplings)


def _number(value, file: str, line: int | None, element: str) -> float:
    """A number yourdfpy left as text (it does for some attributes)."""
    if value is None:
        return 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SceneError(f"expected a number, got '{value}'", file=file, line=line, key_path=element) from None


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


def _shape(el, path: Path, packages: dict[str, Path], link: str, line: int | None) -> dict | None:
    """A collision element as a scene shape (pose in the link frame)."""
    from mbsim.models.tree import quaternion

    g = el.geometry
    T = el.origin if el.origin is not None else np.eye(4)
    pose = {"position": [float(x) for x in T[:3, 3]], "orientation": {"quaternion": quaternion(T[:3, :3])}}
    where = f"link '{link}' <collision>"
    if g.box is not None:
        return {"type": "box", "size": [float(x) for x in g.box.size], "pose": pose}
    if g.sphere is not None:
        return {"type": "sphere", "radius": float(g.sphere.radius), "pose": pose}
    if g.cylinder is not None:
        radius, length = float(g.cylinder.radius), float(g.cylinder.length)
        return {"type": "cylinder", "radius": radius, "length": length, "pose": pose}
    if g.mesh is not None:
        scale = np.ones(3) if g.mesh.scale is None else np.broadcast_to(np.asarray(g.mesh.scale, float), (3,))
        if not np.allclose(scale, scale[0]):
            raise SceneError(
                f"a non-uniform mesh scale {scale.tolist()} is not supported (mesh shapes take one scale)",
                file=str(path),
                line=line,
                key_path=f"{where} <mesh>",
            )
        file = resolve_uri(g.mesh.filename, path, packages)
        return {"type": "mesh", "file": str(file), "scale": float(scale[0]), "pose": pose}
    return None
