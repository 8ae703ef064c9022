"""Shape types: their scene keys and their mass properties (density 1).

Each shape type is one entry of ``SHAPE_TYPES``: dimensions it exists in, its field table, and
a function giving (volume, centre of volume, inertia about that centre per unit density) in
the shape's own frame. In 2D "volume" is area (density in kg/m^2). Meshes go through
trimesh's mass properties and must be watertight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.scene.fields import Context, Custom, Field, Number, Raw, Text, Vector, read_mapping
from mbsim.scene.load import KeyPath

MassProps = tuple[float, np.ndarray, np.ndarray]  # volume, centre, inertia per unit density


def _pose_reader(ctx: Context, path: KeyPath, value: Any) -> dict[str, np.ndarray]:
    from mbsim.scene.spec import _read_orientation  # the one orientation reader of the scene

    got = read_mapping(
        ctx,
        path,
        value,
        {
            "position": Field(Vector("dim"), "shape origin in the body frame", None),
            "orientation": Field(Custom(_read_orientation, "orientation"), "shape axes in the body frame", None),
        },
    )
    d = ctx.dimension
    pos = got["position"] if got["position"] is not None else np.zeros(d)
    if d == 3:
        from mbsim.model.spatial import quat_to_matrix

        quat = got["orientation"] if got["orientation"] is not None else np.array([1.0, 0, 0, 0])
        rot = quat_to_matrix(quat)
    else:
        a = float(got["orientation"][0]) if got["orientation"] is not None else 0.0
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return {"position": pos, "rotation": rot}


POSE = Field(Custom(_pose_reader, "{position, orientation} in the body frame"), "local pose", None)
SHAPE_NAME = Field(Text(), "optional name, unique on its body (compliant contacts pick shapes by it)", None)


def _box(v):
    a, b, c = v["size"]
    vol = a * b * c
    return vol, np.zeros(3), vol / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])


def _sphere(v):
    r = v["radius"]
    vol = 4.0 / 3.0 * np.pi * r**3
    return vol, np.zeros(3), 0.4 * vol * r * r * np.eye(3)


def _cylinder(v):
    r, h = v["radius"], v["length"]
    vol = np.pi * r * r * h
    side = vol * (3 * r * r + h * h) / 12.0
    return vol, np.zeros(3), np.diag([side, side, 0.5 * vol * r * r])


def _capsule(v):
    r, h = v["radius"], v["length"]  # length: between the hemisphere centres, axis z
    m_cyl = np.pi * r * r * h
    m_hemi = 2.0 / 3.0 * np.pi * r**3
    axial = 0.5 * m_cyl * r * r + 2.0 * m_hemi * 0.4 * r * r
    side = m_cyl * (h * h / 12.0 + r * r / 4.0) + 2.0 * m_hemi * (0.4 * r * r + h * h / 4.0 + 3.0 * h * r / 8.0)
    return m_cyl + 2 * m_hemi, np.zeros(3), np.diag([side, side, axial])


def _circle(v):
    r = v["radius"]
    area = np.pi * r * r
    return area, np.zeros(2), np.array([[0.5 * area * r * r]])


def _rectangle(v):
    w, h = v["size"]
    area = w * h
    return area, np.zeros(2), np.array([[area * (w * w + h * h) / 12.0]])


def _massless(v):
    return 0.0, None, None


def load_mesh(file: Path, scale: float):
    """A trimesh mesh from any format trimesh reads, scaled."""
    import trimesh

    mesh = trimesh.load(str(file), force="mesh")
    if scale != 1.0:
        mesh.apply_scale(scale)
    return mesh


def _mesh(v):
    mesh = v["_mesh"]
    props = mesh.mass_properties
    return float(props["volume"]), np.asarray(props["center_mass"]), np.asarray(props["inertia"])


@dataclass(frozen=True)
class ShapeType:
    name: str
    dimensions: tuple[int, ...]
    fields: dict[str, Field]
    mass: Callable[[dict[str, Any]], MassProps]
    doc: str
    ground_only: bool = False


def _t(name):
    return Field(Text(), name)


SHAPE_TYPES: dict[str, ShapeType] = {
    s.name: s
    for s in (
        ShapeType(
            "box",
            (3,),
            {"type": _t("box"), "size": Field(Vector(3), "edge lengths along x, y, z, m"), "pose": POSE},
            _box,
            "cuboid centred on its frame",
        ),
        ShapeType(
            "sphere",
            (3,),
            {"type": _t("sphere"), "radius": Field(Number(positive=True), "m"), "pose": POSE},
            _sphere,
            "sphere centred on its frame",
        ),
        ShapeType(
            "cylinder",
            (3,),
            {
                "type": _t("cylinder"),
                "radius": Field(Number(positive=True), "m"),
                "length": Field(Number(positive=True), "along local z, m"),
                "pose": POSE,
            },
            _cylinder,
            "solid cylinder, axis local z, centred",
        ),
        ShapeType(
            "capsule",
            (3,),
            {
                "type": _t("capsule"),
                "radius": Field(Number(positive=True), "m"),
                "length": Field(Number(positive=True), "between hemisphere centres, m"),
                "pose": POSE,
            },
            _capsule,
            "cylinder with hemispherical caps, axis local z",
        ),
        ShapeType(
            "mesh",
            (3,),
            {
                "type": _t("mesh"),
                "file": Field(Text(), "relative to the scene file (or give generate)", None),
                "generate": Field(
                    Raw("{kind, ...}"), "a procedural mesh instead of a file (see Mesh generators)", None
                ),
                "scale": Field(Number(positive=True), "scale factor", 1.0),
                "pose": POSE,
            },
            _mesh,
            "triangle mesh (any format trimesh reads); watertight for mass properties",
        ),
        ShapeType(
            "point",
            (2, 3),
            {"type": _t("point"), "position": Field(Vector("dim"), "in the body frame")},
            _massless,
            "a contact point; no mass",
        ),
        ShapeType(
            "plane",
            (3,),
            {
                "type": _t("plane"),
                "point": Field(Vector(3), "a point of the plane"),
                "normal": Field(Vector(3, nonzero=True), "outward normal"),
            },
            _massless,
            "half-space boundary (ground only)",
            ground_only=True,
        ),
        ShapeType(
            "circle",
            (2,),
            {"type": _t("circle"), "radius": Field(Number(positive=True), "m"), "pose": POSE},
            _circle,
            "disc (planar)",
        ),
        ShapeType(
            "rectangle",
            (2,),
            {"type": _t("rectangle"), "size": Field(Vector(2), "width and height, m"), "pose": POSE},
            _rectangle,
            "rectangle centred on its frame (planar)",
        ),
        ShapeType(
            "line",
            (2,),
            {
                "type": _t("line"),
                "point": Field(Vector(2), "a point of the line"),
                "normal": Field(Vector(2, nonzero=True), "outward normal"),
            },
            _massless,
            "half-plane boundary (ground only, planar)",
            ground_only=True,
        ),
    )
}


for _shape_type in SHAPE_TYPES.values():
    _shape_type.fields["name"] = SHAPE_NAME


def read_shape(ctx: Context, path: KeyPath, value: Any, base_dir: Path, on_ground: bool) -> dict[str, Any]:
    """Check one shape entry and load its mesh if any; returns the checked values."""
    if not isinstance(value, dict) or "type" not in value:
        raise ctx.error(path, "expected a mapping with a 'type' key")
    kind = value["type"]
    names = [n for n, s in SHAPE_TYPES.items() if ctx.dimension in s.dimensions and (on_ground or not s.ground_only)]
    if kind not in names:
        raise ctx.error(
            (*path, "type"),
            f"unknown shape type '{kind}' here; expected one of {', '.join(names)}",
            did_you_mean(str(kind), names),
        )
    shape = SHAPE_TYPES[kind]
    got = read_mapping(ctx, path, value, shape.fields)
    if kind == "mesh" and got["generate"] is not None:
        if got["file"] is not None:
            raise ctx.error(path, "give either file or generate, not both")
        from mbsim.model.meshgen import read_generated_mesh

        got["_mesh"] = read_generated_mesh(ctx, (*path, "generate"), got["generate"])
        if got["scale"] != 1.0:
            got["_mesh"].apply_scale(got["scale"])
    elif kind == "mesh":
        if got["file"] is None:
            raise ctx.error(path, "a mesh needs file (any format trimesh reads) or generate")
        file = (base_dir / got["file"]).resolve()
        if not file.is_file():
            raise ctx.error((*path, "file"), f"mesh file not found: {file}")
        try:
            got["_mesh"] = load_mesh(file, got["scale"])
        except Exception as exc:  # trimesh raises many kinds for unreadable files
            raise ctx.error((*path, "file"), f"cannot read the mesh: {exc}") from None
        if len(got["_mesh"].faces) == 0:
            raise ctx.error((*path, "file"), "the mesh has no triangles")
    got["_path"] = path
    return got


def shape_mass_properties(ctx: Context, shape: dict[str, Any], dimension: int) -> MassProps | None:
    """Mass properties (density 1) in the body frame, or None for massless shapes."""
    kind = SHAPE_TYPES[shape["type"]]
    if kind.name == "mesh" and not shape["_mesh"].is_watertight:
        raise ctx.error(
            (*shape["_path"], "file"),
            "the mesh is not watertight, so it has no volume to derive mass from; "
            "give mass and inertia instead or repair the mesh",
        )
    vol, centre, inertia = kind.mass(shape)
    if vol == 0.0:
        return None
    if vol < 0:
        raise ctx.error((*shape["_path"], "file"), "the mesh has negative volume (inverted normals)")
    pose = shape.get("pose") or {"position": np.zeros(dimension), "rotation": np.eye(dimension)}
    rot = pose["rotation"]
    centre_body = pose["position"] + rot @ centre
    if dimension == 3:
        inertia = rot @ inertia @ rot.T
    return vol, centre_body, inertia


def composite_mass_properties(
    ctx: Context, path: KeyPath, shapes: list[dict[str, Any]], density: float, dimension: int
) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass (body frame) and inertia about it of shapes of one density."""
    parts = [p for p in (shape_mass_properties(ctx, s, dimension) for s in shapes) if p is not None]
    if not parts:
        raise ctx.error(
            path,
            "density needs at least one shape with volume (box, sphere, cylinder, capsule, "
            "mesh; circle or rectangle in 2D)",
        )
    volume = sum(p[0] for p in parts)
    com = sum(p[0] * p[1] for p in parts) / volume
    inertia = np.zeros((3, 3)) if dimension == 3 else np.zeros((1, 1))
    for vol, centre, inert in parts:
        d = centre - com
        if dimension == 3:
            inertia += inert + vol * (d @ d * np.eye(3) - np.outer(d, d))
        else:
            inertia += inert + vol * (d @ d)
    return density * volume, com, density * inertia
