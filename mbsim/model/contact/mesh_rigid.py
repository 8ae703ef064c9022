"""Rigid (timestepping) contact of triangle meshes through their signed distance fields.

The rows of the collision table for ``mesh`` against plane, sphere, point, box and mesh
(papers/sdf-octree-contact-dynamics.txt, used for unilateral contacts): sample points of one
shape (mesh vertices, box corners, sphere centres) are looked up in the other's signed distance
field (meshes; cached on disk, mbsim.model.contact.sdf) or its exact distance (planes, boxes);
each point within the margin is one contact row with the gap d (or d - radius), the unit normal
of the field's gradient, and the point's projection on the other surface. Mesh against box and
mesh against mesh test both directions, so vertex-face contacts are found either way (edge-edge
contacts between sample points are not: refine the mesh where it matters). Features (warm-start
keys): a sample point of shape a is its vertex number modulo MAX_FEATURE / 2, one of shape b
MAX_FEATURE / 2 plus its vertex (or box corner) number.

The rows are the compiled kernels PLANE_MESH, MESH_SPHERE, BOX_MESH and MESH_MESH of
mbsim.model.contact.narrowphase_kernels (registered in narrowphase.py's table, run by the
detector's compiled pass and by the compiled timestepping step alike). This module makes their
data: each mesh shape's field and vertices in a ``MeshData`` (one per shape, in the shape frame),
which the kernels read through ``narrowphase_kernels.MeshTable`` (the detector's ``mesh_table``,
or ``Side.data`` for a row of the table). The field's grid: cell 1/64 of the mesh's bounding-box
diagonal, padding 1/10 of it (the compliant contact's defaults).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.model.contact.sdf import SignedDistanceField


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
