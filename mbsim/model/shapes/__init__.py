"""Shape types: one module each holding every fact of its type; ``SHAPE_TYPES`` maps the scene's
``type`` to its object (mbsim.model.shapes.base.ShapeType says what each holds).

``compile_shapes`` turns the checked shapes of a model into flat arrays, once (MuJoCo's
``geom_*``): detection, Jacobians, event_driven, the compliant contact and the export read the
arrays or the registry and never a type's name; only the narrow phase's pair table is keyed by
type pairs (mbsim.model.contact.narrowphase). Mass properties are per unit density; in 2D
"volume" is area (density in kg/m^2). Meshes go through trimesh's mass properties and must be
watertight.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.model.shapes.base import POSE, SHAPE_NAME, MassProps, ShapeType
from mbsim.model.shapes.box import BOX
from mbsim.model.shapes.capsule import CAPSULE
from mbsim.model.shapes.circle import CIRCLE
from mbsim.model.shapes.cylinder import CYLINDER
from mbsim.model.shapes.line import LINE
from mbsim.model.shapes.mesh import MAX_MESH_BYTES, MESH, MeshFileError, load_mesh
from mbsim.model.shapes.plane import PLANE
from mbsim.model.shapes.point import POINT
from mbsim.model.shapes.rectangle import RECTANGLE
from mbsim.model.shapes.sphere import SPHERE
from mbsim.scene.fields import Context, read_mapping
from mbsim.scene.load import KeyPath

# the registry; its order is the scene reference's and the type codes' (shape_type)
SHAPE_TYPES: dict[str, ShapeType] = {
    s.name: s for s in (BOX, SPHERE, CYLINDER, CAPSULE, MESH, POINT, PLANE, CIRCLE, RECTANGLE, LINE)
}
SHAPE_KINDS: tuple[ShapeType, ...] = tuple(SHAPE_TYPES.values())  # by type code
SHAPE_CODES: dict[str, int] = {name: code for code, name in enumerate(SHAPE_TYPES)}

for _shape_type in SHAPE_KINDS:
    _shape_type.fields["name"] = SHAPE_NAME


def read_shape(ctx: Context, path: KeyPath, value: Any, base_dir: Path, on_ground: bool) -> dict[str, Any]:
    """Check one shape entry and load what its type needs (a mesh's file); returns the checked values."""
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
    shape.load(ctx, path, got, base_dir)
    got["_path"] = path
    return got


def compile_shapes(shapes: dict[str, list[dict[str, Any]]], body_names: tuple[str, ...], d: int) -> dict[str, Any]:
    """The shapes of all owners (``Model.shapes``: ground and bodies, in that dict's order, each
    owner's in its order) as flat arrays, k shapes:

    - ``shape_type`` (k,) type code (index into ``SHAPE_KINDS``), ``shape_body`` (k,) extended body
      index (ground = nbody);
    - ``shape_param`` (k, 3) the narrow phase's parameters; ``shape_pos`` (k, d), ``shape_rot``
      (k, d, d) the local pose in the body frame (a half-space's normal as the last axis);
    - ``shape_rbound`` (k,) radius about the shape origin holding the shape (inf: unbounded);
    - ``shape_isotropic``, ``shape_rounded``, ``shape_solid`` (k,) bool (ShapeType's flags);
    - ``shape_values``: the checked values of each (their dicts in ``Model.shapes``).
    """
    body_of = {name: k for k, name in enumerate(body_names)}
    body_of["ground"] = len(body_names)
    rows = [(body_of[owner], s) for owner, owned in shapes.items() for s in owned]
    k = len(rows)
    kinds = [SHAPE_TYPES[s["type"]] for _, s in rows]
    poses = [kind.local_pose(s, d) for kind, (_, s) in zip(kinds, rows, strict=True)]
    return {
        "nshape": k,
        "shape_type": np.array([SHAPE_CODES[kind.name] for kind in kinds], dtype=np.int64),
        "shape_body": np.array([b for b, _ in rows], dtype=np.int64),
        "shape_param": np.array([kind.param(s) for kind, (_, s) in zip(kinds, rows, strict=True)]).reshape(k, 3),
        "shape_pos": np.array([p for p, _ in poses], dtype=float).reshape(k, d),
        "shape_rot": np.array([r for _, r in poses], dtype=float).reshape(k, d, d),
        "shape_rbound": np.array([kind.rbound(s) for kind, (_, s) in zip(kinds, rows, strict=True)]).reshape(k),
        "shape_isotropic": np.array([kind.isotropic for kind in kinds], dtype=bool),
        "shape_rounded": np.array([kind.rounded for kind in kinds], dtype=bool),
        "shape_solid": np.array([kind.solid for kind in kinds], dtype=bool),
        "shape_values": [s for _, s in rows],
    }


def shape_mass_properties(ctx: Context, shape: dict[str, Any], dimension: int) -> MassProps | None:
    """Mass properties (density 1) in the body frame, or None for massless shapes."""
    kind = SHAPE_TYPES[shape["type"]]
    kind.check_mass(ctx, shape)
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


__all__ = [
    "MAX_MESH_BYTES",
    "POSE",
    "SHAPE_CODES",
    "SHAPE_KINDS",
    "SHAPE_NAME",
    "SHAPE_TYPES",
    "MassProps",
    "MeshFileError",
    "ShapeType",
    "compile_shapes",
    "composite_mass_properties",
    "load_mesh",
    "read_shape",
    "shape_mass_properties",
]
