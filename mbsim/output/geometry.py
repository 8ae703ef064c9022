"""The shapes' geometry in the result file (``/geometry``, CONTRACT §7) and their triangle meshes.

A result file carries what its bodies look like, so that it exports (``mbsim export``) on a
machine without the scene folder and its mesh files:

- ``/geometry`` (attributes ``dimension``, ``up``: the scene's up direction, ``bodies``: the
  body names in the scene's order) holds one group per owner: each body by name (one escaped
  link, mbsim.names, with the exact name as attribute ``name``), and ``ground`` (a name no body
  may take); each owner one group per shape, ``0``, ``1``, ... in the scene's order. What mbsim
  itself stores there is attributes, so no body name can clash with it.
- A shape group's attributes are its scene values (``type``, ``name``, ``radius``, ``length``,
  ``size``, ``point``, ``normal``, ``scale``, ``file``) and its pose in the body frame as
  ``position`` (d,) and ``rotation`` (d, d), both after the move of the body frame to the centre
  of mass; a ``point`` shape's ``position`` is its point.
- A mesh's triangles are the datasets ``vertices`` (n, 3), in metres (``scale`` applied) in the
  shape's frame, and ``faces`` (m, 3) vertex indices; a mesh used by several shapes is stored
  once (the others are HDF5 hard links to it).

:func:`shape_triangles` turns one stored shape into triangles in its body's frame (for 2D scenes,
in the plane z = 0, extruded along z) through its type in :data:`mbsim.model.shapes.SHAPE_TYPES`
(``display_mesh``; a half-space's patch); what is stored and checked on reading comes from the
type's field table (tests/output/test_geometry.py checks that no type lacks triangles).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from mbsim.model.shapes import SHAPE_TYPES, ShapeType
from mbsim.names import hdf5_name, name_from_hdf5
from mbsim.scene.fields import Number, Text, Vector

GROUP = "geometry"


def up_direction(gravity: np.ndarray) -> np.ndarray:
    """The scene's up (CONTRACT §7): against gravity; without gravity +z in 3D, +y in 2D."""
    g = np.zeros(3)
    g[: len(gravity)] = gravity
    big = float(np.max(np.abs(g)))
    if big > 0 and np.isfinite(big):
        g = g / big  # first: the norm of a gravity of 1e200 overflows
        return -g / float(np.linalg.norm(g))
    return np.array([0.0, 1.0, 0.0]) if len(gravity) == 2 else np.array([0.0, 0.0, 1.0])


def write_geometry(
    f: h5py.File, shapes: dict[str, list[dict[str, Any]]], body_names: tuple[str, ...], gravity: np.ndarray
) -> None:
    """``/geometry`` from the compiled model's shapes (``Model.shapes``: owner -> checked values)
    and the scene's up direction (attribute ``up``, world coordinates, 3 components)."""
    dim = len(gravity)
    root = f.create_group(GROUP)
    root.attrs["dimension"] = dim
    root.attrs["up"] = up_direction(gravity)
    root.attrs["bodies"] = list(body_names)  # the scene's order (HDF5 lists groups alphabetically)
    stored: dict[str, h5py.Group] = {}  # mesh digest -> the first group that holds it
    for owner in ("ground", *body_names):
        group = root.create_group(hdf5_name(owner))
        group.attrs["name"] = owner
        for k, shape in enumerate(shapes.get(owner, [])):
            g = group.create_group(str(k))
            kind = SHAPE_TYPES[shape["type"]]
            g.attrs["type"] = shape["type"]
            if shape.get("name") is not None:
                g.attrs["name"] = shape["name"]
            # its scene values: numbers, vectors and file names of its field table
            for key, item in kind.fields.items():
                value = shape.get(key)
                if value is None or key in ("type", "name"):
                    continue
                if isinstance(item.reader, Number):
                    g.attrs[key] = float(value)
                elif isinstance(item.reader, Vector):
                    g.attrs[key] = np.asarray(value, dtype=float)
                elif isinstance(item.reader, Text):
                    g.attrs[key] = str(value)
            if "pose" in kind.fields:
                pose = shape.get("pose")
                g.attrs["position"] = np.zeros(dim) if pose is None else np.asarray(pose["position"], float)
                g.attrs["rotation"] = np.eye(dim) if pose is None else np.asarray(pose["rotation"], float)
            if kind.stored_triangles:
                vertices, faces = kind.triangles(shape)
                vertices = np.ascontiguousarray(vertices, dtype=float)
                faces = np.ascontiguousarray(faces, dtype=np.int64)
                digest = hashlib.sha1(vertices.tobytes() + faces.tobytes()).hexdigest()
                if digest in stored:  # the same triangles on another shape: one copy, linked
                    g["vertices"] = stored[digest]["vertices"]
                    g["faces"] = stored[digest]["faces"]
                else:
                    # compressed: a scanned mesh can have a million triangles
                    g.create_dataset("vertices", data=vertices, compression="gzip", compression_opts=4)
                    g.create_dataset("faces", data=faces.astype(np.int32), compression="gzip", compression_opts=4)
                    stored[digest] = g


MAX_STORED_VERTICES = 20_000_000  # a /geometry holding more is refused (memory), not read


class GeometryError(ValueError):
    """/geometry that mbsim did not write as it is (edited, truncated): the message says where."""


def _required(kind: ShapeType) -> dict[str, tuple[int | str, bool]]:
    """The stored attributes a shape type must have: its required numbers (length 0) and vectors
    (length n, or "d": the dimension), and whether a vector must not be zero."""
    out: dict[str, tuple[int | str, bool]] = {}
    for key, item in kind.fields.items():
        if not item.required:
            continue
        if isinstance(item.reader, Number):
            out[key] = (0, False)
        elif isinstance(item.reader, Vector):
            length = item.reader.length
            out[key] = ("d" if length == "dim" else int(length), item.reader.nonzero)
    return out


_REQUIRED = {name: _required(kind) for name, kind in SHAPE_TYPES.items()}


def _checked(g: h5py.Group, dim: int, where: str, budget: list[int]) -> dict[str, Any]:
    """One stored shape as Python values, checked: a known type, its values finite and of their
    sizes, a mesh's faces indexing its vertices."""
    shape: dict[str, Any] = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()}
    kind = shape.get("type")
    if kind not in _REQUIRED:
        raise GeometryError(f"{where}: unknown shape type {kind!r}")
    for key, (size, nonzero) in _REQUIRED[kind].items():
        if key not in shape:
            raise GeometryError(f"{where}: a {kind} without '{key}'")
        value = np.asarray(shape[key], dtype=float)
        want = () if size == 0 else (dim if size == "d" else size,)
        if value.shape != want or not np.all(np.isfinite(value)):
            raise GeometryError(f"{where}/{key}: expected {'a number' if not want else f'{want[0]} numbers'}")
        if nonzero and not np.any(value):
            raise GeometryError(f"{where}/{key}: a zero {key}")
        shape[key] = float(value) if size == 0 else value
    for key, want in (("position", (dim,)), ("rotation", (dim, dim))):
        if key in shape and "pose" in SHAPE_TYPES[kind].fields:
            value = np.asarray(shape[key], dtype=float)
            if value.shape != want or not np.all(np.isfinite(value)):
                raise GeometryError(f"{where}/{key}: expected an array of shape {want}")
            shape[key] = value
    if SHAPE_TYPES[kind].stored_triangles:
        vertices, faces = g.get("vertices"), g.get("faces")
        if not isinstance(vertices, h5py.Dataset) or not isinstance(faces, h5py.Dataset):
            raise GeometryError(f"{where}: a mesh without vertices and faces")
        if vertices.ndim != 2 or vertices.shape[1] != 3 or faces.ndim != 2 or faces.shape[1] != 3:
            raise GeometryError(f"{where}: vertices and faces must be (n, 3) arrays")
        budget[0] -= len(vertices) + len(faces)
        if budget[0] < 0:
            raise GeometryError(f"{where}: the meshes hold more than {MAX_STORED_VERTICES} vertices and faces")
        shape["vertices"] = np.asarray(vertices[:], dtype=float)
        shape["faces"] = np.asarray(faces[:]).astype(np.int64)
        if not np.all(np.isfinite(shape["vertices"])) or (
            shape["faces"].size and (shape["faces"].min() < 0 or shape["faces"].max() >= len(vertices))
        ):
            raise GeometryError(f"{where}: non-finite vertices or faces outside the vertex list")
    return shape


def read_geometry(f: h5py.File) -> dict[str, list[dict[str, Any]]] | None:
    """owner -> list of shapes (attributes as Python values, a mesh's ``vertices`` and ``faces``
    as arrays), or None for a result file written before ``/geometry`` existed. Raises
    GeometryError where it is not as mbsim writes it."""
    if GROUP not in f:
        return None
    root = f[GROUP]
    dim = int(root.attrs.get("dimension", 3))
    if dim not in (2, 3) or not isinstance(root, h5py.Group):
        raise GeometryError(f"/{GROUP}: dimension must be 2 or 3")
    out: dict[str, list[dict[str, Any]]] = {}
    budget = [MAX_STORED_VERTICES]
    for owner, group in root.items():
        keys = list(group) if isinstance(group, h5py.Group) else None
        if keys is None or not all(k.isdigit() for k in keys):
            raise GeometryError(f"/{GROUP}/{owner}: expected groups named 0, 1, ...")
        out[name_from_hdf5(owner)] = [
            _checked(group[k], dim, f"/{GROUP}/{owner}/{k}", budget) for k in sorted(keys, key=int)
        ]
    return out


@dataclass(frozen=True)
class Sizes:
    """What shapes without a size of their own are drawn at: ``marker`` (a contact point's ball,
    metres), ``depth`` (the extrusion of planar shapes along z) and the world box ``lo``..``hi``
    that the motion fills (a ground plane or line becomes a patch covering it)."""

    marker: float
    depth: float
    lo: np.ndarray
    hi: np.ndarray


Triangles = tuple[np.ndarray, np.ndarray, np.ndarray]  # vertices (n, 3), normals (n, 3), faces (m, 3)


def triangle_arrays(triangles: Triangles) -> tuple[bytes, bytes, bytes]:
    """The bytes a file stores of a triangle set: float32 vertices and normals, uint32 indices
    (little-endian); equal bytes, equal mesh."""
    vertices, normals, faces = triangles
    return (
        np.asarray(vertices, dtype="<f4").tobytes(),
        np.asarray(normals, dtype="<f4").tobytes(),
        np.asarray(faces, dtype="<u4").reshape(-1).tobytes(),
    )


def _shaded(mesh: Any, angle_deg: float = 35.0) -> Triangles:
    """Vertices, unit normals and faces of a trimesh mesh: smooth within a surface, split at
    edges sharper than ``angle_deg`` (a box's corners stay sharp, a sphere round)."""
    import trimesh

    smooth = trimesh.graph.smooth_shade(mesh, angle=np.radians(angle_deg), facet_minarea=None)
    normals = np.asarray(smooth.vertex_normals, dtype=float)
    return np.asarray(smooth.vertices, dtype=float), normals, np.asarray(smooth.faces, dtype=np.int64)


def _box(size: np.ndarray) -> Triangles:
    import trimesh

    return _shaded(trimesh.creation.box(extents=np.asarray(size, dtype=float)))


def _patch(point: np.ndarray, normal: np.ndarray, sizes: Sizes, dim: int) -> Triangles:
    """A finite slab for an infinite plane (3D) or line (2D): its top face in the plane, covering
    the motion's box projected onto it (plus a margin), thickness ``sizes.marker``."""
    n = np.zeros(3)
    n[:dim] = normal
    n /= np.linalg.norm(n)
    p = np.zeros(3)
    p[:dim] = point
    if dim == 2:  # the line's direction in the plane, and z
        u = np.array([-n[1], n[0], 0.0])
        w = np.array([0.0, 0.0, 1.0])
    else:
        u = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
        u /= np.linalg.norm(u)
        w = np.cross(n, u)
    corners = np.array(np.meshgrid(*zip(sizes.lo, sizes.hi, strict=True))).reshape(3, -1).T
    margin = 0.25 * float(np.max(sizes.hi - sizes.lo)) + 2.0 * sizes.marker
    along_u = (corners - p) @ u
    centre = p + u * 0.5 * (along_u.min() + along_u.max())
    width_u = along_u.max() - along_u.min() + 2 * margin
    if dim == 2:
        centre = centre + w * (-centre @ w)  # centred on z = 0
        width_w = sizes.depth * 1.5
    else:
        along_w = (corners - p) @ w
        centre = centre + w * 0.5 * (along_w.min() + along_w.max())
        width_w = along_w.max() - along_w.min() + 2 * margin
    thickness = sizes.marker
    vertices, normals, faces = _box(np.array([width_u, width_w, thickness]))
    rotation = np.column_stack([u, w, n])
    offset = centre - n * (0.5 * thickness)  # the top face in the plane
    return vertices @ rotation.T + offset, normals @ rotation.T, faces


def _planar_rotation(rotation: np.ndarray) -> np.ndarray:
    out = np.eye(3)
    out[:2, :2] = rotation
    return out


# every shape type has triangles: its own (ShapeType.display_mesh), or a patch for a half-space
SHAPE_MESHES = frozenset(
    name
    for name, kind in SHAPE_TYPES.items()
    if kind.unbounded or kind.solid or type(kind).display_mesh is not ShapeType.display_mesh
)


def shape_triangles(shape: dict[str, Any], dim: int, sizes: Sizes) -> Triangles:
    """One stored shape as triangles in its body's frame (3D; a 2D body's plane is z = 0)."""
    kind = SHAPE_TYPES[shape["type"]]
    if kind.unbounded:  # a patch of the boundary: its point and outward normal (the last axis)
        point, axes = kind.local_pose(shape, dim)
        return _patch(point, axes[:, -1], sizes, dim)
    vertices, normals, faces = _shaded(kind.display_mesh(shape, sizes.marker, sizes.depth))
    position = np.zeros(3)
    position[:dim] = shape.get("position", np.zeros(dim))
    if "rotation" in shape:
        rotation = np.asarray(shape["rotation"], dtype=float)
        rotation = _planar_rotation(rotation) if dim == 2 else rotation
    else:
        rotation = np.eye(3)
    return vertices @ rotation.T + position, normals @ rotation.T, faces


def inertia_box(mass: float, inertia: np.ndarray, dim: int) -> Triangles:
    """The uniform box with the body's mass and inertia (as MuJoCo's viewer draws a body without
    geometry): edges a_i = sqrt(6 (I_j + I_k - I_i) / m) along the principal axes; in 2D the
    square of side sqrt(6 I / m)."""
    inertia = np.atleast_2d(np.asarray(inertia, dtype=float))
    if dim == 2 or inertia.shape == (1, 1):
        side = float(np.sqrt(max(6.0 * inertia[0, 0] / mass, 0.0))) if mass > 0 else 0.0
        side = side or 0.05
        return _box(np.array([side, side, side]))
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    total = moments.sum()
    edges = np.sqrt(np.clip(6.0 * (total - 2.0 * moments) / mass, 0.0, None)) if mass > 0 else np.zeros(3)
    floor = 0.05 * max(float(edges.max()), 1e-3)  # a rod's box keeps some thickness
    vertices, normals, faces = _box(np.maximum(edges, floor))
    if np.linalg.det(axes) < 0:
        axes[:, 0] = -axes[:, 0]
    return vertices @ axes.T, normals @ axes.T, faces


__all__ = [
    "MAX_STORED_VERTICES",
    "SHAPE_MESHES",
    "GeometryError",
    "Sizes",
    "inertia_box",
    "read_geometry",
    "shape_triangles",
    "triangle_arrays",
    "up_direction",
    "write_geometry",
]
