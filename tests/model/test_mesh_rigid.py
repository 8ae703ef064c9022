"""The compiled rows of rigid mesh contact (narrowphase_kernels PLANE_MESH, MESH_SPHERE, BOX_MESH,
MESH_MESH; mbsim.model.contact.mesh_rigid) against the exact signed distance of the meshes
(trimesh.proximity.signed_distance, positive inside, so negated here).

A sample point looked up in a mesh's field reads the trilinear interpolant of the field's node
values (exact distances). The distance is 1-Lipschitz, so the interpolant is off by at most the
trilinear weights' mean distance to the nodes: |d_s(p) - d(p)| <= sum_i w_i |x_i - p| <=
h sqrt(sum_axes s (1 - s)) <= (sqrt(3) / 2) h (h the cell; Jensen). Where the distance is linear over
the cell's nodes (near the middle of a flat face) the interpolant is exact, to round-off. Points
against a plane or a box use their exact distance: round-off.
"""

from __future__ import annotations

import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from mbsim.model.contact.mesh_rigid import mesh_data
from mbsim.model.contact.narrowphase import MAX_FEATURE, Side, pair_function
from mbsim.model.meshgen import rippled_torus

HALF = MAX_FEATURE // 2
ROT = Rotation.from_rotvec([0.3, -0.5, 0.7]).as_matrix()
POS = np.array([0.4, -0.2, 1.0])


@pytest.fixture(scope="module")
def torus():
    mesh = rippled_torus(0.1, 0.03, 0.1, 6, (48, 24))
    return mesh, mesh_data(mesh, None)


def _exact(mesh: trimesh.Trimesh, pos: np.ndarray, rot: np.ndarray, world: np.ndarray) -> np.ndarray:
    """Exact signed distance (negative inside) of world points to the mesh at (pos, rot)."""
    return -trimesh.proximity.signed_distance(mesh, (world - pos) @ rot)


def _side(pos, rot, param, data, m):
    return Side(np.tile(pos, (m, 1)), None if rot is None else np.tile(rot, (m, 1, 1)), np.tile(param, (m, 1)), data)


def test_mesh_point_gaps_are_exact_on_flat_faces():
    """Points within 1 cm of a rotated, moved 0.3 x 0.2 x 0.1 m box mesh's faces, at least 4 cells
    from their edges (the distance is linear over every node the lookup reads): the gap is the
    exact distance, the normal the face's, point_a on the face, to 1e-12 m."""
    mesh = trimesh.creation.box(extents=[0.3, 0.2, 0.1])
    data = mesh_data(mesh, None)
    keep = 4 * data.field.cell
    rng = np.random.default_rng(3)
    half = np.array([0.15, 0.1, 0.05])
    local, normals = [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            p = rng.uniform(-1, 1, (30, 3)) * (half - keep)
            p[:, axis] = sign * half[axis] + rng.uniform(-0.01, 0.01, 30)
            n = np.zeros((30, 3))
            n[:, axis] = sign
            local.append(p)
            normals.append(n)
    local, normals = np.concatenate(local), np.concatenate(normals)
    world = POS + local @ ROT.T
    m = len(world)
    fn, swap = pair_function("mesh", "point")
    assert not swap
    found = fn(_side(POS, ROT, data.half_extent, [data] * m, m), Side(world, None, np.zeros((m, 3))), 1.0)
    assert len(found.gap) == m
    r = found.pair
    np.testing.assert_allclose(found.gap, _exact(mesh, POS, ROT, world[r]), atol=1e-12)
    np.testing.assert_allclose(found.normal, normals[r] @ ROT.T, atol=1e-12)
    np.testing.assert_allclose(_exact(mesh, POS, ROT, found.point_a), 0.0, atol=1e-12)


def test_mesh_sphere_gaps_meet_the_exact_distance(torus):
    """Sphere centres within 1 cm of a rotated rippled torus (non-convex, curved): gap + radius within
    (sqrt(3)/2) h of the exact distance of the centre, every centre reported (margin 1 m), point_b
    on the sphere."""
    mesh, data = torus
    pts, face = trimesh.sample.sample_surface(mesh, 300, seed=2)
    offset = np.random.default_rng(1).uniform(-0.01, 0.01, len(pts))
    world = POS + (pts + offset[:, None] * mesh.face_normals[face]) @ ROT.T
    m, radius = len(world), 0.02
    fn, _ = pair_function("mesh", "sphere")
    b = Side(world, None, np.tile([radius, 0.0, 0.0], (m, 1)))
    found = fn(_side(POS, ROT, data.half_extent, [data] * m, m), b, 1.0)
    assert np.array_equal(found.pair, np.arange(m))
    error = found.gap + radius - _exact(mesh, POS, ROT, world)
    assert np.abs(error).max() <= np.sqrt(3) / 2 * data.field.cell
    np.testing.assert_allclose(np.linalg.norm(found.point_b - world, axis=1), radius, rtol=1e-12)


def _worst(gap: np.ndarray, exact, points: np.ndarray) -> float:
    return float(np.abs(gap - exact(points)).max()) if len(points) else 0.0


def _check_rows(found, sample_a, sample_b, exact_to_a, exact_to_b, bound_to_a, bound_to_b, margin):
    """Every row's gap against the exact distance of its sample point (a's points: feature >= HALF,
    looked up in b; b's points: below, looked up in a), and every sample point clearly within the
    margin reported."""
    of_b = found.feature < HALF
    assert _worst(found.gap[of_b], exact_to_a, found.point_b[of_b]) <= bound_to_a
    assert _worst(found.gap[~of_b], exact_to_b, found.point_a[~of_b]) <= bound_to_b
    # the rows' sample points are the shapes' own (vertices, corners), each once
    np.testing.assert_allclose(found.point_b[of_b], sample_b[found.feature[of_b]], atol=1e-12)
    np.testing.assert_allclose(found.point_a[~of_b], sample_a[found.feature[~of_b] - HALF], atol=1e-12)
    assert len(np.unique(found.feature)) == len(found.feature)
    assert of_b.sum() >= np.sum(exact_to_a(sample_b) < margin - bound_to_a) > 0
    if len(sample_a):
        assert (~of_b).sum() >= np.sum(exact_to_b(sample_a) < margin - bound_to_b) > 0


@pytest.mark.parametrize("pair", ["plane_mesh", "box_mesh", "mesh_mesh"])
def test_pair_rows_meet_the_exact_distance(torus, pair):
    """The rows of plane, box and mesh against the torus mesh (b), overlapping it: each row's gap
    against the exact distance of its sample point to the other shape (a plane's or a box's: 1e-12;
    a mesh's field: (sqrt(3)/2) h), and every sample point within the margin less that bound found."""
    mesh_b, data_b = torus
    margin = 0.01
    rot_b = Rotation.from_rotvec([0.2, 0.1, 0.0]).as_matrix()
    pos_b = np.array([0.05, 0.0, 0.0])
    verts_b = pos_b + data_b.vertices @ rot_b.T
    bound_b = np.sqrt(3) / 2 * data_b.field.cell
    if pair == "plane_mesh":
        rot_a, pos_a = np.eye(3), np.array([0.0, 0.0, -0.01])
        a = _side(pos_a, rot_a, np.zeros(3), None, 1)
        sample_a = np.zeros((0, 3))

        def to_a(p):
            return p[:, 2] - pos_a[2]

        bound_a = 1e-12
    elif pair == "box_mesh":
        rot_a, pos_a, half = ROT, np.array([0.02, 0.13, 0.0]), np.array([0.05, 0.04, 0.03])
        a = _side(pos_a, rot_a, half, None, 1)
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
        sample_a = pos_a + (signs * half) @ rot_a.T

        def to_a(p):  # the box's distance in closed form
            q = np.abs((p - pos_a) @ rot_a) - half
            return np.where(q.max(axis=1) > 0, np.linalg.norm(np.maximum(q, 0.0), axis=1), q.max(axis=1))

        bound_a = 1e-12
    else:
        cube = trimesh.creation.box(extents=[0.08, 0.08, 0.08])
        data_a = mesh_data(cube.subdivide().subdivide(), None)
        rot_a, pos_a = ROT, np.array([0.02, 0.13, 0.0])
        a = _side(pos_a, rot_a, data_a.half_extent, [data_a], 1)
        sample_a = pos_a + data_a.vertices @ rot_a.T

        def to_a(p):
            return _exact(cube, pos_a, rot_a, p)

        bound_a = np.sqrt(3) / 2 * data_a.field.cell
    fn, swap = pair_function(pair.split("_")[0], "mesh")
    assert not swap
    found = fn(a, _side(pos_b, rot_b, data_b.half_extent, [data_b], 1), margin)

    def to_b(p):
        return _exact(mesh_b, pos_b, rot_b, p)

    _check_rows(found, sample_a, verts_b, to_a, to_b, bound_a, bound_b, margin)
