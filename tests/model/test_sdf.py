"""Signed distance fields (mbsim.model.contact.sdf): exact nodes, eq. (5) interpolation, eq. (6) gradient, cache."""

from __future__ import annotations

import time

import numpy as np
import pytest
import trimesh

from mbsim.model.contact import sdf as sdf_module
from mbsim.model.contact.sdf import SignedDistanceField, build_sdf, cached_sdf

CELL = 0.05
PAD = 0.2
R_MAJOR, R_MINOR = 1.0, 0.35
BOX = np.array([1.0, 0.6, 0.4])


# ------------------------------------------------------------------- shapes and an independent reference


def _sphere_exact(p):
    return np.linalg.norm(p, axis=1) - 1.0


def _box_exact(p):
    q = np.abs(p) - 0.5 * BOX
    return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)


def _torus_exact(p):
    ring = np.hypot(p[:, 0], p[:, 1]) - R_MAJOR
    return np.hypot(ring, p[:, 2]) - R_MINOR


SHAPES = {
    "sphere": (lambda: trimesh.creation.icosphere(subdivisions=4), _sphere_exact),
    "box": (lambda: trimesh.creation.box(extents=BOX), _box_exact),
    "torus": (
        lambda: trimesh.creation.torus(R_MAJOR, R_MINOR, major_sections=48, minor_sections=24),
        _torus_exact,
    ),
}


def _segment_dist2(p, a, b):
    """(m, 1, 3) points, (nt, 3) segment ends -> (m, nt) squared distances."""
    ab = b - a
    t = np.clip(((p - a) * ab).sum(-1) / (ab * ab).sum(-1), 0.0, 1.0)
    d = p - (a + t[..., None] * ab)
    return (d * d).sum(-1)


def _mesh_distance_brute(mesh, points, chunk=256):
    """Unsigned distance to the mesh by brute force: plane distance if the projection is inside, else edges."""
    tri = mesh.triangles
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    n = np.cross(b - a, c - a)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    out = np.empty(len(points))
    for s in range(0, len(points), chunk):
        p = points[s : s + chunk, None, :]
        h = ((p - a) * n).sum(-1)
        q = p - h[..., None] * n
        inside = np.ones(h.shape, dtype=bool)
        for u, v in ((a, b), (b, c), (c, a)):
            inside &= (np.cross(v - u, q - u) * n).sum(-1) >= 0.0
        d2 = np.minimum(_segment_dist2(p, a, b), np.minimum(_segment_dist2(p, b, c), _segment_dist2(p, c, a)))
        d2 = np.where(inside, h * h, d2)
        out[s : s + chunk] = np.sqrt(d2.min(axis=1))
    return out


def _facet_error(mesh, exact):
    """Bound on how far the faceted mesh strays from the analytic surface (centroids and edge midpoints, x1.5)."""
    tri = mesh.triangles
    probes = np.concatenate([tri.mean(axis=1), 0.5 * (tri[:, 0] + tri[:, 1]), 0.5 * (tri[:, 1] + tri[:, 2])])
    return 1.5 * float(np.abs(exact(probes)).max())


@pytest.fixture(scope="module")
def fields():
    out = {}
    for name, (make, exact) in SHAPES.items():
        mesh = make()
        assert mesh.is_watertight
        out[name] = (mesh, exact, build_sdf(mesh, CELL, PAD))
    return out


def _inside_grid(field, n, seed):
    return np.random.default_rng(seed).uniform(field.origin, field.upper, (n, 3))


# ------------------------------------------------------------------- grid and nodes


@pytest.mark.parametrize("name", SHAPES)
def test_grid_covers_padded_box(fields, name):
    mesh, _, field = fields[name]
    assert isinstance(field, SignedDistanceField)
    assert field.values.shape == field.shape and field.values.dtype == np.float64
    assert np.all(field.origin <= mesh.bounds[0] - PAD + 1e-12)
    assert np.all(field.upper >= mesh.bounds[1] + PAD - 1e-12)
    assert np.all(field.upper - field.origin < mesh.extents + 2 * PAD + 2 * CELL)


@pytest.mark.parametrize("name", SHAPES)
def test_node_values_are_exact_distances_to_the_mesh(fields, name):
    mesh, exact, field = fields[name]
    rng = np.random.default_rng(1)
    idx = np.stack([rng.integers(0, n, 400) for n in field.shape], axis=1)
    nodes = field.origin + CELL * idx
    got = field.values[idx[:, 0], idx[:, 1], idx[:, 2]]
    np.testing.assert_allclose(np.abs(got), _mesh_distance_brute(mesh, nodes), atol=1e-12)
    far = np.abs(exact(nodes)) > CELL  # the sign where the analytic shape is unambiguous
    assert np.all(np.sign(got[far]) == np.sign(exact(nodes)[far]))


def _tilted_rippled_torus():
    """A non-convex, genus-one mesh whose patches are tilted against the grid axes (the build's
    tree bounds patches by boxes along their normals)."""
    from scipy.spatial.transform import Rotation

    from mbsim.model.meshgen import rippled_torus

    mesh = rippled_torus(1.0, 0.35, 0.25, 5, (32, 16))
    pose = np.eye(4)
    pose[:3, :3] = Rotation.from_rotvec([0.4, -0.7, 0.3]).as_matrix()
    pose[:3, 3] = [0.13, -0.07, 0.05]
    mesh.apply_transform(pose)
    assert mesh.is_watertight and mesh.volume > 0.0
    return mesh


def test_nodes_match_brute_force_and_trimesh_sign():
    # independent references at 3,000 nodes, near ones included: the distance by brute force over
    # all triangles, the sign by trimesh's inside test (ray casting); trimesh's own closest point
    # strays by up to 4e-8 at a few nodes, so it checks the distance loosely
    mesh = _tilted_rippled_torus()
    field = build_sdf(mesh, 0.1, 0.3)
    idx = np.stack(np.meshgrid(*(np.arange(n) for n in field.shape), indexing="ij"), axis=-1).reshape(-1, 3)
    idx = np.random.default_rng(7).permutation(idx)[:3000]
    nodes = field.origin + field.cell * idx
    got = field.values[idx[:, 0], idx[:, 1], idx[:, 2]]
    assert (got < 0).sum() > 100 and (np.abs(got) < field.cell).sum() > 200
    np.testing.assert_allclose(np.abs(got), _mesh_distance_brute(mesh, nodes), rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(got, -trimesh.proximity.signed_distance(mesh, nodes), rtol=0.0, atol=1e-6)
    inside = mesh.contains(nodes)
    clear = np.abs(got) > 1e-9  # ray casting decides the sign on the surface itself arbitrarily
    assert np.all((got[clear] < 0) == inside[clear])


def test_sphere_mesh_inside_is_the_nearest_face_plane():
    # analytic: inside a convex polyhedron the distance to its boundary is the least distance to
    # its face planes (exact), outside it is at least the largest (a lower bound)
    mesh = trimesh.creation.icosphere(subdivisions=1)
    field = build_sdf(mesh, 0.08, 0.25)  # 36k nodes: built by two threads
    assert field.values.size > 1 << 15
    idx = np.stack(np.meshgrid(*(np.arange(n) for n in field.shape), indexing="ij"), axis=-1).reshape(-1, 3)
    idx = np.random.default_rng(8).permutation(idx)[:4000]
    nodes = field.origin + field.cell * idx
    got = field.values[idx[:, 0], idx[:, 1], idx[:, 2]]
    n = mesh.face_normals
    plane = np.einsum("ij,ij->i", n, mesh.triangles[:, 0])
    height = nodes @ n.T - plane  # (nodes, faces): negative behind every face = inside
    inside = height.max(axis=1) < -1e-12
    assert inside.sum() > 200
    np.testing.assert_allclose(got[inside], height[inside].max(axis=1), rtol=0.0, atol=1e-12)
    outside = height.max(axis=1) > 1e-12
    assert np.all(got[outside] >= height[outside].max(axis=1) - 1e-12)
    np.testing.assert_allclose(got[outside], _mesh_distance_brute(mesh, nodes[outside]), rtol=0.0, atol=1e-12)


# ------------------------------------------------------------------- eq. (5): interpolated distance and sign


@pytest.mark.slow
@pytest.mark.parametrize("name", SHAPES)
def test_interpolated_distance_within_half_a_cell(fields, name):
    mesh, exact, field = fields[name]
    p = _inside_grid(field, 2000, 2)
    d = field.distance(p)
    ref = _mesh_distance_brute(mesh, p)
    sign = np.sign(exact(p))
    clear = np.abs(exact(p)) > CELL
    # against the mesh itself (unsigned; the sign is checked where the shape is unambiguous)
    assert np.abs(np.abs(d) - ref).max() < 0.5 * CELL
    assert np.abs(d[clear] - sign[clear] * ref[clear]).max() < 0.5 * CELL
    # against the analytic shape, allowing for the faceting of the mesh
    assert np.abs(d - exact(p)).max() < 0.5 * CELL + _facet_error(mesh, exact)


@pytest.mark.parametrize("name", SHAPES)
def test_sign_at_ten_thousand_points(fields, name):
    _, exact, field = fields[name]
    p = _inside_grid(field, 10_000, 3)
    ref = exact(p)
    clear = np.abs(ref) > CELL
    assert clear.sum() > 5000
    assert np.all(np.sign(field.distance(p[clear])) == np.sign(ref[clear]))
    assert (ref[clear] < 0).sum() > 300  # enough points inside to mean something


def test_far_points_read_as_far(fields):
    _, _, field = fields["sphere"]
    p = np.array([[10.0, 0.0, 0.0], [0.0, -7.0, 3.0], [-4.0, 4.0, 4.0]])
    d = field.distance(p)
    true = np.linalg.norm(p, axis=1) - 1.0
    assert np.all(d >= true - 0.5 * CELL)  # clamp + box distance is an upper bound outside
    assert np.all(d <= true + 0.5)  # and not wildly off
    g = field.gradient(p)
    assert np.all(np.einsum("ij,ij->i", g, p) > 0)


# ------------------------------------------------------------------- eq. (6): gradient and normal


@pytest.mark.parametrize("name", SHAPES)
def test_gradient_matches_central_differences(fields, name):
    _, _, field = fields[name]
    rng = np.random.default_rng(4)
    lo, hi = field.origin - 1.0, field.upper + 1.0  # some points outside the grid as well
    p = rng.uniform(lo, hi, (4000, 3))
    h = 1e-6
    # keep points whose coordinates stay away from cell faces (the interpolant is only C0 there)
    u = (np.clip(p, field.origin, field.upper) - field.origin) / CELL
    away = np.all(np.abs(u - np.round(u)) > 1e-3, axis=1) & np.all(
        (np.abs(p - field.origin) > 1e-3) & (np.abs(p - field.upper) > 1e-3), axis=1
    )
    p = p[away]
    fd = np.stack(
        [(field.distance(p + h * e) - field.distance(p - h * e)) / (2 * h) for e in np.eye(3)],
        axis=1,
    )
    np.testing.assert_allclose(field.gradient(p), fd, atol=1e-6)
    d, g = field.distance_and_gradient(p)
    np.testing.assert_array_equal(d, field.distance(p))
    np.testing.assert_array_equal(g, field.gradient(p))


def test_sphere_normal_points_outward_radially(fields):
    _, _, field = fields["sphere"]
    rng = np.random.default_rng(5)
    v = rng.normal(size=(3000, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    # inside and outside; the trilinear gradient errs by about cell * curvature, so keep away from the centre
    p = v * rng.uniform(0.75, 1.25, (3000, 1))
    g = field.gradient(p)
    n = g / np.linalg.norm(g, axis=1, keepdims=True)
    angle = np.degrees(np.arccos(np.clip(np.einsum("ij,ij->i", n, v), -1.0, 1.0)))
    assert angle.max() < 4.0


# ------------------------------------------------------------------- mesh checks


def test_open_mesh_raises():
    mesh = trimesh.creation.icosphere(subdivisions=2)
    open_mesh = trimesh.Trimesh(mesh.vertices, mesh.faces[1:], process=False)
    with pytest.raises(ValueError, match="not watertight"):
        build_sdf(open_mesh, CELL, PAD)


def test_inside_out_mesh_keeps_negative_inside():
    mesh = trimesh.creation.box(extents=BOX)
    flipped = mesh.copy()
    flipped.invert()
    field = build_sdf(flipped, 0.1, 0.1)
    np.testing.assert_allclose(field.values, build_sdf(mesh, 0.1, 0.1).values, atol=1e-12)
    assert field.distance(np.zeros((1, 3)))[0] < -0.1


@pytest.mark.parametrize("cell, padding", [(0.0, 0.1), (-1.0, 0.1), (0.1, -0.1), (float("nan"), 0.1)])
def test_bad_grid_settings_raise(cell, padding):
    with pytest.raises(ValueError):
        build_sdf(trimesh.creation.box(), cell, padding)


def test_bad_points_shape_raises(fields):
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        fields["box"][2].distance(np.zeros((4, 2)))


# ------------------------------------------------------------------- disk cache


def test_cache_builds_once_then_loads(tmp_path, monkeypatch):
    calls = []
    real_build = sdf_module.build_sdf

    def counting_build(mesh, cell, padding):
        calls.append((cell, padding))
        return real_build(mesh, cell, padding)

    monkeypatch.setattr(sdf_module, "build_sdf", counting_build)
    mesh = trimesh.creation.box(extents=BOX)
    first = cached_sdf(mesh, 0.1, 0.1, tmp_path)
    second = cached_sdf(mesh, 0.1, 0.1, tmp_path)
    assert len(calls) == 1
    assert len(list(tmp_path.glob("*.npz"))) == 1
    np.testing.assert_array_equal(first.values, second.values)
    np.testing.assert_array_equal(first.origin, second.origin)
    assert (first.cell, first.shape) == (second.cell, second.shape)
    # other settings or another mesh are other keys
    cached_sdf(mesh, 0.05, 0.1, tmp_path)
    moved = mesh.copy()
    moved.apply_translation([0.1, 0.0, 0.0])
    cached_sdf(moved, 0.1, 0.1, tmp_path)
    assert len(calls) == 3
    # a corrupt file is rebuilt
    for f in tmp_path.glob("*.npz"):
        f.write_bytes(b"not an npz")
    again = cached_sdf(mesh, 0.1, 0.1, tmp_path)
    assert len(calls) == 4
    np.testing.assert_array_equal(again.values, first.values)


# ------------------------------------------------------------------- performance report (printed, not asserted)


@pytest.mark.slow
def test_report_build_time_and_query_rate():
    mesh = trimesh.creation.icosphere(subdivisions=6)  # 81,920 triangles
    cell = float(mesh.extents.max() + 0.2) / 64  # 64 cells across the padded box
    start = time.perf_counter()
    field = build_sdf(mesh, cell, 0.1)
    build = time.perf_counter() - start
    p = np.random.default_rng(6).uniform(field.origin, field.upper, (1_000_000, 3))
    field.distance(p[:8])
    field.gradient(p[:8])
    start = time.perf_counter()
    field.distance(p)
    rate_d = len(p) / (time.perf_counter() - start)
    start = time.perf_counter()
    field.gradient(p)
    rate_g = len(p) / (time.perf_counter() - start)
    print(
        f"\nsdf: icosphere {len(mesh.faces)} triangles, grid {field.shape}: build {build:.2f} s; "
        f"distance {rate_d:.3g} points/s, gradient {rate_g:.3g} points/s"
    )
    assert np.abs(field.distance(p[:1000]) - _sphere_exact(p[:1000])).max() < 0.5 * cell + 1e-3
