"""Rigid (timestepping) contact of triangle meshes through their signed distance fields.

The rows of the collision table for ``mesh`` against plane, sphere, point, box and mesh
(papers/sdf-octree-contact-dynamics.txt, used for unilateral contacts): sample points of one
shape (mesh vertices, box corners, sphere centres) are looked up in the other's signed distance
field (meshes; cached on disk, mbsim.model.contact.sdf) or its exact distance (planes, boxes);
each point within the margin is one contact row with the gap d (or d - radius), the unit normal
of the field's gradient, and the point's projection on the other surface. Mesh against box and
mesh against mesh test both directions, so vertex-face contacts are found either way (edge-edge
contacts between sample points are not: refine the mesh where it matters).

Each mesh shape's field and vertices live in ``MeshData`` (one per shape, in the shape frame),
handed to these functions through ``Side.data``. The field's grid: cell 1/64 of the mesh's
bounding-box diagonal, padding 1/10 of it (the compliant contact's defaults).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.model.contact.narrowphase import MAX_FEATURE, Found, Side, register
from mbsim.model.contact.sdf import SignedDistanceField

HALF_FEATURE = MAX_FEATURE // 2  # features below: points of a; above: points of b (warm-start keys)


@dataclass
class MeshData:
    """One mesh shape: its field and sample points, in the shape's frame."""

    field: SignedDistanceField
    vertices: np.ndarray  # (n, 3)
    half_extent: np.ndarray  # (3,) max |coordinate| per axis: a box about the shape origin holding the mesh


def mesh_data(mesh, cache_dir) -> MeshData:
    """The field (built, or loaded from the cache) and vertices of a mesh in its shape frame.

    ``cache_dir`` may be None (no cache); an unusable cache is bypassed with a warning (``cached_sdf``).
    """
    from mbsim.model.contact.sdf import cached_sdf

    size = float(np.linalg.norm(mesh.extents))
    field = cached_sdf(mesh, size / 64.0, 0.1 * size, cache_dir)
    vertices = np.asarray(mesh.vertices, dtype=float)
    return MeshData(field, vertices, np.abs(vertices).max(axis=0))


def _world_points(side: Side, row: int, local: np.ndarray) -> np.ndarray:
    return side.pos[row] + local @ side.rot[row].T


def _in_field(data: MeshData, side: Side, row: int, points: np.ndarray, radius: float = 0.0):
    """Points (world) against the mesh of ``side`` row: gap (d - radius), unit outward normal
    (world), the closest surface point of the mesh."""
    R = side.rot[row]
    local = (points - side.pos[row]) @ R
    d, grad = data.field.distance_and_gradient(local)
    n = grad @ R.T
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    return d - radius, n, points - d[:, None] * n


def _box_distance(side: Side, row: int, points: np.ndarray):
    """Exact signed distance of world points to the box of ``side`` row, unit outward normal,
    closest surface point."""
    R, h = side.rot[row], side.param[row]
    local = (points - side.pos[row]) @ R
    q = np.abs(local) - h
    outside = np.maximum(q, 0.0)
    out_len = np.linalg.norm(outside, axis=1)
    inside = out_len == 0.0
    # inside: the nearest face; outside: towards the point from the clamped one
    axis = np.argmax(q, axis=1)
    n_in = np.zeros_like(local)
    n_in[np.arange(len(local)), axis] = np.sign(local[np.arange(len(local)), axis]) + (
        local[np.arange(len(local)), axis] == 0
    )
    clamped = np.clip(local, -h, h)
    n_out = (local - clamped) / np.maximum(out_len, 1e-300)[:, None]
    n_local = np.where(inside[:, None], n_in, n_out)
    d = np.where(inside, q.max(axis=1), out_len)
    n = n_local @ R.T
    return d, n, points - d[:, None] * n


def _corners(side: Side, row: int) -> np.ndarray:
    signs = np.array(np.meshgrid([-1.0, 1.0], [-1.0, 1.0], [-1.0, 1.0], indexing="ij")).reshape(3, -1).T
    return _world_points(side, row, signs * side.param[row])


def _rows(parts: list[tuple]) -> Found:
    """Found from the blocks of ``_block``."""
    if not parts:
        return Found.empty(3)
    return Found(*(np.concatenate(x) for x in zip(*parts, strict=True)))


def _block(row, pa, pb, normal, gap, feature, margin):
    """The rows of one candidate pair with gap < margin: (pair, point_a, point_b, normal a->b, gap, feature)."""
    keep = gap < margin
    k = int(keep.sum())
    return (np.full(k, row), pa[keep], pb[keep], normal[keep], gap[keep], feature[keep])


@register(("plane", "mesh"))
def plane_mesh(a: Side, b: Side, margin: float) -> Found:
    """Plane a against mesh b: every vertex within the margin of the plane."""
    parts = []
    for r in range(len(b.pos)):
        v = _world_points(b, r, b.data[r].vertices)
        n = a.rot[r][:, 2]
        gap = v @ n - a.pos[r] @ n
        normal = np.broadcast_to(n, v.shape)
        idx = np.arange(len(v))
        parts.append(_block(r, v - gap[:, None] * n, v, normal, gap, idx % HALF_FEATURE, margin))
    return _rows(parts)


@register(("mesh", "sphere"), ("mesh", "point"))
def mesh_sphere(a: Side, b: Side, margin: float) -> Found:
    """Mesh a against sphere (point) b: the centre in a's field."""
    parts = []
    for r in range(len(a.pos)):
        radius = b.param[r, 0]
        c = b.pos[r][None]
        gap, n, on_a = _in_field(a.data[r], a, r, c, radius)
        parts.append(_block(r, on_a, c - radius * n, n, gap, np.zeros(1, dtype=np.int64), margin))
    return _rows(parts)


@register(("box", "mesh"))
def box_mesh(a: Side, b: Side, margin: float) -> Found:
    """Box a against mesh b: the mesh's vertices against the box, the box's corners in the mesh's field."""
    parts = []
    for r in range(len(a.pos)):
        v = _world_points(b, r, b.data[r].vertices)
        gap, n, on_a = _box_distance(a, r, v)
        idx = np.arange(len(v))
        parts.append(_block(r, on_a, v, n, gap, idx % HALF_FEATURE, margin))
        c = _corners(a, r)
        gap, n_b, on_b = _in_field(b.data[r], b, r, c)
        parts.append(_block(r, c, on_b, -n_b, gap, HALF_FEATURE + np.arange(8), margin))
    return _rows(parts)


@register(("mesh", "mesh"))
def mesh_mesh(a: Side, b: Side, margin: float) -> Found:
    """Two meshes: each one's vertices in the other's field."""
    parts = []
    for r in range(len(a.pos)):
        v = _world_points(b, r, b.data[r].vertices)
        gap, n, on_a = _in_field(a.data[r], a, r, v)
        parts.append(_block(r, on_a, v, n, gap, np.arange(len(v)) % HALF_FEATURE, margin))
        u = _world_points(a, r, a.data[r].vertices)
        gap, n_b, on_b = _in_field(b.data[r], b, r, u)
        parts.append(_block(r, u, on_b, -n_b, gap, HALF_FEATURE + np.arange(len(u)) % HALF_FEATURE, margin))
    return _rows(parts)
