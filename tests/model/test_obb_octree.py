"""Global and local SDF contact detection (papers/sdf-octree-contact-dynamics.txt §2.1).

OBB: tight boxes of box-shaped point sets, containment for any set, and the 15-axis
separating-axis test against exact convex overlap (a linear program) on random, touching,
edge-edge-only separated, nested and near-parallel box pairs, with and without margin.
Octree: structural invariants, and the query against brute force for analytic signed distances
(plane, sphere) on points sampled from a sphere mesh: every point within the margin is found
and few others are; build and query time for 230k points are printed, not asserted.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import trimesh
from quick_loop import quick
from scipy.optimize import linprog, minimize
from scipy.spatial.transform import Rotation

from mbsim.model.contact.obb import obb_from_points, obb_overlap, obb_world
from mbsim.model.contact.octree import Octree, distance_in_frame, transform_points

# ----------------------------------------------------------------------------- helpers


def lp_overlap(cA, RA, hA, cB, RB, hB) -> bool:
    """Exact convex overlap: is there s, u in [-1, 1]^3 with cA + RA hA s = cB + RB hB u?"""
    A_eq = np.hstack([RA * hA, -RB * hB])
    res = linprog(np.zeros(6), A_eq=A_eq, b_eq=cB - cA, bounds=[(-1, 1)] * 6, method="highs")
    assert res.status in (0, 2), res.message
    return res.status == 0


def box_distance(cA, RA, hA, cB, RB, hB) -> float:
    """Euclidean distance between two boxes (a convex bound-constrained least-squares problem)."""
    M = np.hstack([RA * hA, -RB * hB])
    r = cA - cB

    def f(x):
        e = M @ x + r
        return e @ e, 2 * M.T @ e

    res = minimize(f, np.zeros(6), jac=True, bounds=[(-1, 1)] * 6, method="L-BFGS-B", options={"ftol": 1e-15})
    return float(np.sqrt(max(res.fun, 0.0)))


def box_surface_points(half, per_edge=7):
    """Grid points on the surface of an axis-aligned box (corners included)."""
    g = np.linspace(-1, 1, per_edge)
    grid = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    return grid[np.any(np.abs(grid) == 1, axis=1)] * half


def random_pairs(rng, k, spread=2.0):
    cA = rng.uniform(-spread, spread, (k, 3))
    cB = rng.uniform(-spread, spread, (k, 3))
    RA = Rotation.random(k, random_state=rng).as_matrix()
    RB = Rotation.random(k, random_state=rng).as_matrix()
    hA = rng.uniform(0.1, 1.5, (k, 3))
    hB = rng.uniform(0.1, 1.5, (k, 3))
    return cA, RA, hA, cB, RB, hB


def rigid(rng, *boxes):
    """Apply one random rigid motion to boxes given as (c, R, h) triples."""
    R = Rotation.random(random_state=rng).as_matrix()
    t = rng.uniform(-3, 3, 3)
    return [(t + R @ c, R @ Rb, h) for c, Rb, h in boxes]


def check_against_lp(cA, RA, hA, cB, RB, hB, margin=0.0, tol=1e-6):
    """SAT must say True when the boxes shrunk by tol overlap, False when those grown by margin + tol don't."""
    got = obb_overlap(cA, RA, hA, cB, RB, hB, margin=margin)
    assert got.shape == (len(cA),)
    for p in range(len(cA)):
        args = (cA[p], RA[p], hA[p], cB[p], RB[p], hB[p])
        if lp_overlap(cA[p], RA[p], hA[p] - tol, cB[p], RB[p], hB[p] - tol):
            assert got[p], f"pair {p}: overlapping boxes reported apart"
        if not lp_overlap(cA[p], RA[p], hA[p] + margin + tol, cB[p], RB[p], hB[p] + margin + tol):
            assert not got[p], f"pair {p}: separated boxes reported overlapping"
        if margin > 0 and not got[p]:
            assert box_distance(*args) > margin - tol, f"pair {p}: pair within margin reported apart"
    return got


# ----------------------------------------------------------------------------- OBB fitting


@pytest.mark.parametrize("half", [(0.3, 0.7, 1.9), (1.0, 1.0, 1.0), (0.5, 0.5, 2.0)], ids=["box", "cube", "square"])
def test_obb_of_box_points_is_tight_and_aligned(half):
    rng = np.random.default_rng(1)
    half = np.array(half)
    for _ in range(5):
        R = Rotation.random(random_state=rng).as_matrix()
        t = rng.uniform(-5, 5, 3)
        pts = box_surface_points(half) @ R.T + t
        centre, axes, h = obb_from_points(pts)
        np.testing.assert_allclose(centre, t, atol=1e-9)
        np.testing.assert_allclose(axes.T @ axes, np.eye(3), atol=1e-12)
        assert np.linalg.det(axes) == pytest.approx(1.0)
        # each box axis is parallel to an edge direction, and the half extents match
        cos = np.abs(axes.T @ R)
        np.testing.assert_allclose(np.sort(cos.max(axis=1)), 1.0, atol=1e-9)
        np.testing.assert_allclose(np.sort(h), np.sort(half), atol=1e-9)


@pytest.mark.parametrize("n", [2000, 50_000], ids=["hull", "subsampled"])
def test_obb_of_volume_samples_contains_and_is_near_tight(n):
    rng = np.random.default_rng(2)
    half = np.array([0.4, 1.0, 2.5])
    R = Rotation.random(random_state=rng).as_matrix()
    pts = rng.uniform(-half, half, (n, 3)) @ R.T
    centre, axes, h = obb_from_points(pts)
    local = (pts - centre) @ axes
    assert np.all(np.abs(local) <= h + 1e-9)
    assert np.prod(h) < 1.05 * np.prod(half)


@pytest.mark.parametrize(
    "pts",
    [
        np.random.default_rng(3).normal(size=(300, 3)) * [3.0, 1.0, 0.2],
        np.random.default_rng(4).normal(size=(50, 2)) @ [[1.0, 2.0, 0.5], [0.0, 1.0, -1.0]],  # coplanar
        np.outer(np.linspace(0, 1, 10), [1.0, 2.0, 3.0]),  # collinear
        np.array([[1.0, 2.0, 3.0]]),  # one point
    ],
    ids=["gaussian", "coplanar", "collinear", "single"],
)
def test_obb_contains_points(pts):
    centre, axes, h = obb_from_points(pts)
    np.testing.assert_allclose(axes.T @ axes, np.eye(3), atol=1e-12)
    assert np.all(h >= 0)
    assert np.all(np.abs((pts - centre) @ axes) <= h + 1e-9)


def test_obb_world_places_body_box():
    rng = np.random.default_rng(5)
    pts = rng.normal(size=(200, 3))
    c, A, h = obb_from_points(pts)
    pos, rot = rng.normal(size=3), Rotation.random(random_state=rng).as_matrix()
    cw, Aw, hw = obb_world(c, A, h, pos, rot)
    world = pts @ rot.T + pos
    assert np.all(np.abs((world - cw) @ Aw) <= hw + 1e-9)
    # batched over bodies
    cw2, Aw2, _ = obb_world(np.stack([c, c]), np.stack([A, A]), np.stack([h, h]), np.stack([pos, pos]), rot)
    np.testing.assert_allclose(cw2[1], cw)
    np.testing.assert_allclose(Aw2[0], Aw)


# ----------------------------------------------------------------------------- separating-axis test


@pytest.mark.parametrize("margin", quick([0.0, 0.2], keep=0))
def test_sat_random_pairs_against_lp(margin):
    rng = np.random.default_rng(10)
    got = check_against_lp(*random_pairs(rng, 300), margin=margin)
    assert 0.2 < got.mean() < 0.8  # both outcomes are exercised


def test_sat_touching_pairs():
    rng = np.random.default_rng(11)
    cases = []
    for _ in range(40):
        hA, hB = rng.uniform(0.2, 1.0, 3), rng.uniform(0.2, 1.0, 3)
        RA = Rotation.random(random_state=rng).as_matrix()
        k = rng.integers(3)
        n = RA[:, k] * rng.choice([-1, 1])
        # face to face (same orientation, lateral offset) and corner of B on a face of A
        lateral = RA[:, (k + 1) % 3] * rng.uniform(-0.1, 0.1)
        cases.append((np.zeros(3), RA, hA, n * (hA[k] + hB[k]) + lateral, RA, hB))
        RB = Rotation.random(random_state=rng).as_matrix()
        corner = -RB @ (np.sign(RB.T @ n) * hB)  # B's lowest corner along n, from its centre
        cases.append((np.zeros(3), RA, hA, n * hA[k] + lateral - corner, RB, hB))
    cA, RA, hA, cB, RB, hB = (np.array(x) for x in zip(*cases, strict=True))
    got = check_against_lp(cA, RA, hA, cB, RB, hB)
    assert got.all()
    # just apart: separated (the epsilon only blurs ~1e-6 of the sizes)
    d = cB - cA
    assert not obb_overlap(cA, RA, hA, cA + d * 1.001, RB, hB).any()


def crossed_edges(gap):
    """Two unit cubes tilted 45 deg about x and y, one above the other: their closest features are
    crossing edges, so for small gaps only the edge axis x cross y = z separates them."""
    RA = Rotation.from_euler("x", 45, degrees=True).as_matrix()
    RB = Rotation.from_euler("y", 45, degrees=True).as_matrix()
    return (np.zeros(3), RA, np.ones(3)), (np.array([0.0, 0.0, 2 * np.sqrt(2) + gap]), RB, np.ones(3))


def test_sat_edge_edge_only_separation():
    rng = np.random.default_rng(12)
    cases = []
    for gap in [-0.05, -1e-3, 1e-3, 0.05, 0.3]:
        for _ in range(10):
            (cA, RA, hA), (cB, RB, hB) = rigid(rng, *crossed_edges(gap))
            cases.append((cA, RA, hA, cB, RB, hB))
    arrays = [np.array(x) for x in zip(*cases, strict=True)]
    got = check_against_lp(*arrays)
    np.testing.assert_array_equal(got, np.repeat([True, True, False, False, False], 10))
    # no face axis separates the gap 0.05 pair: without the 9 edge axes it would overlap
    (cA, RA, hA), (cB, RB, hB) = crossed_edges(0.05)
    t = RA.T @ (cB - cA)
    assert np.all(np.abs(t) <= hA + np.abs(RA.T @ RB) @ hB)
    assert np.all(np.abs(t @ RA.T @ RB) <= hA @ np.abs(RA.T @ RB) + hB)
    # margin: the distance along z is the gap
    assert obb_overlap(cA[None], RA[None], hA[None], cB[None], RB[None], hB[None], margin=0.051)[0]
    assert not obb_overlap(cA[None], RA[None], hA[None], cB[None], RB[None], hB[None], margin=0.049)[0]


def test_sat_nested_pairs():
    rng = np.random.default_rng(13)
    k = 50
    cA, RA, hA = rng.normal(size=(k, 3)), Rotation.random(k, random_state=rng).as_matrix(), rng.uniform(1, 2, (k, 3))
    RB = Rotation.random(k, random_state=rng).as_matrix()
    hB = rng.uniform(0.05, 0.2, (k, 3))
    cB = cA + np.einsum("kij,kj->ki", RA, rng.uniform(-0.5, 0.5, (k, 3)))
    assert check_against_lp(cA, RA, hA, cB, RB, hB).all()
    assert obb_overlap(cB, RB, hB, cA, RA, hA).all()  # symmetric


def test_sat_near_parallel_pairs():
    rng = np.random.default_rng(14)
    cases = []
    for angle in [0.0, 1e-12, 1e-9, 1e-6, 1e-4]:
        for _ in range(8):
            RA = Rotation.random(random_state=rng).as_matrix()
            RB = Rotation.from_rotvec(rng.normal(size=3) / np.sqrt(3) * angle).as_matrix() @ RA
            hA, hB = rng.uniform(0.2, 1.0, 3), rng.uniform(0.2, 1.0, 3)
            u = RA @ rng.uniform(-1, 1, 3)
            # overlapping (centres closer than the sum of halves) and separated along a face axis
            cases.append((np.zeros(3), RA, hA, u * 0.5 * (hA + hB).min(), RB, hB))
            k = rng.integers(3)
            cases.append((np.zeros(3), RA, hA, RA[:, k] * (hA[k] + hB[k] + 0.01), RB, hB))
    arrays = [np.array(x) for x in zip(*cases, strict=True)]
    got = check_against_lp(*arrays)
    np.testing.assert_array_equal(got, np.tile([True, False], len(cases) // 2))


def test_sat_broadcasts_and_identical_boxes():
    c, R, h = np.zeros(3), np.eye(3), np.ones(3)
    assert obb_overlap(c, R, h, c, R, h).shape == ()
    assert bool(obb_overlap(c, R, h, c, R, h))
    assert obb_overlap(c[None], R[None], h[None], c + [[2.0, 0, 0], [2.1, 0, 0]], R, h).tolist() == [True, False]


# ----------------------------------------------------------------------------- octree


def sphere_samples(n, seed=0, radius=1.0):
    mesh = trimesh.creation.icosphere(subdivisions=4, radius=radius)
    pts, _ = trimesh.sample.sample_surface(mesh, n, seed=seed)
    return np.asarray(pts)


@pytest.fixture(scope="module")
def sphere_tree():
    pts = sphere_samples(100_000)
    return Octree.build(pts, leaf_size=16)


def test_octree_invariants(sphere_tree):
    t = sphere_tree
    n = len(t.points)
    assert sorted(t.point_order.tolist()) == list(range(n))
    leaf = t.is_leaf
    # the leaves partition the points
    assert t.node_point_count[leaf].sum() == n
    cover = np.zeros(n, dtype=int)
    for s, m in zip(t.node_point_start[leaf], t.node_point_count[leaf], strict=True):
        cover[s : s + m] += 1
    assert np.all(cover == 1)
    # children partition their parent's range and lie in the parent's cell
    inner = np.flatnonzero(~leaf)
    for p in inner[:: max(1, len(inner) // 500)]:
        ch = np.arange(t.node_child_start[p], t.node_child_start[p] + t.node_child_count[p])
        assert t.node_point_start[ch[0]] == t.node_point_start[p]
        assert t.node_point_count[ch].sum() == t.node_point_count[p]
        np.testing.assert_allclose(t.node_half[ch], 0.5 * t.node_half[p])
        assert np.all(np.abs(t.node_centre[ch] - t.node_centre[p]) <= t.node_half[p] + 1e-12)
    # points lie within their node's radius, which is at most the half-diagonal
    node = np.repeat(np.arange(t.nnode), t.node_point_count)
    pos = np.repeat(t.node_point_start - np.cumsum(t.node_point_count) + t.node_point_count, t.node_point_count)
    pos = pos + np.arange(len(pos))
    dist = np.linalg.norm(t.points[t.point_order[pos]] - t.node_centre[node], axis=1)
    assert np.all(dist <= t.node_radius[node] + 1e-12)
    assert np.all(t.node_radius <= np.sqrt(3) * t.node_half + 1e-12)
    assert np.all(t.node_point_count[leaf] <= 16)
    assert np.all(np.diff(t.level_start) > 0) and t.level_start[-1] == t.nnode


def test_octree_max_depth_and_duplicates():
    pts = np.vstack([np.zeros((100, 3)), np.ones((5, 3))])
    t = Octree.build(pts, leaf_size=4, max_depth=3)
    assert len(t.level_start) - 1 <= 4
    assert t.node_point_count[t.is_leaf].sum() == 105
    assert Octree.query(t, lambda x: np.linalg.norm(x, axis=1)).tolist() == list(range(100))


def brute(points, distance, margin, transform):
    return np.flatnonzero(distance(transform_points(points, transform)) <= margin)


@pytest.mark.parametrize("margin", [0.0, 0.01, 0.05])
def test_octree_query_plane(sphere_tree, margin):
    rng = np.random.default_rng(20)
    for _ in range(5):
        # slave sphere of radius 1 rotated and lowered to 0.97 above the master's floor z = 0
        R = Rotation.random(random_state=rng).as_matrix()
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, [rng.normal(), rng.normal(), 0.97]

        def floor(x):
            return x[:, 2]

        found, evals = sphere_tree.query(floor, margin, transform=T, return_stats=True)
        expected = brute(sphere_tree.points, floor, margin, T)
        assert np.isin(expected, found).all()
        assert len(expected) > 0
        # the cap within the margin is (0.03 + margin) / 2 of the sphere's area
        assert len(found) < 1.5 * len(expected) + 0.01 * len(sphere_tree.points)
        assert evals < 0.1 * sphere_tree.nnode


def test_octree_query_sphere(sphere_tree):
    rng = np.random.default_rng(21)
    for _ in range(5):
        # master sphere of radius 0.4 overlapping the slave sphere's surface by 0.02
        c = rng.normal(size=3)
        c *= 1.38 / np.linalg.norm(c)
        R, t = Rotation.random(random_state=rng).as_matrix(), rng.normal(size=3)

        def ball(x, c=R @ c + t):
            return np.linalg.norm(x - c, axis=1) - 0.4

        margin = 0.01
        found = sphere_tree.query(ball, margin, transform=(R, t))
        expected = brute(sphere_tree.points, ball, margin, (R, t))
        assert len(expected) > 0
        assert np.isin(expected, found).all()
        assert len(found) < 0.05 * len(sphere_tree.points)
        # the same through distance_in_frame and no transform
        np.testing.assert_array_equal(sphere_tree.query(distance_in_frame(ball, (R, t)), margin), found)


def test_octree_query_far_and_everything(sphere_tree):
    found, evals = sphere_tree.query(lambda x: x[:, 2] + 5.0, 0.1, return_stats=True)
    assert len(found) == 0 and evals == 1
    assert len(sphere_tree.query(lambda x: x[:, 2] - 5.0, 0.0)) == len(sphere_tree.points)


def test_octree_timing_230k():
    pts = sphere_samples(230_000, seed=1)
    t0 = time.perf_counter()
    tree = Octree.build(pts, leaf_size=16)
    t1 = time.perf_counter()
    T = np.eye(4)
    T[2, 3] = 0.98
    runs = 20
    for _ in range(runs):
        found, evals = tree.query(lambda x: x[:, 2], 0.01, transform=T, return_stats=True)
    t2 = time.perf_counter()
    brute_found = brute(pts, lambda x: x[:, 2], 0.01, T)
    t3 = time.perf_counter()
    assert np.isin(brute_found, found).all()
    print(
        f"\noctree 230k points: build {1e3 * (t1 - t0):.1f} ms, {tree.nnode} nodes, "
        f"{len(tree.level_start) - 1} levels; "
        f"query {1e3 * (t2 - t1) / runs:.2f} ms ({evals} centre evaluations, {len(found)} candidates, "
        f"{len(brute_found)} within margin); brute force {1e3 * (t3 - t2):.2f} ms"
    )


# ----------------------------------------------------------------------------- compiled cull (compliant_kernels)


def _compiled_lookup(tree, points, field, mesh, R, t, use_tree, pyramid=None):
    """penetrating_points' (index, distance, gradient) of the slave points inside the master, by index
    (with ``pyramid``, the field's slope pyramid, for the skip tests)."""
    from mbsim.model.contact.compliant_kernels import penetrating_points

    n = len(points)
    idx, d, g = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros((n, 3))
    lo, hi = (np.ascontiguousarray(b, dtype=float) for b in mesh.bounds)
    origin = np.asarray(field.origin, dtype=float)
    count = penetrating_points(
        points, tree.point_order, tree.node_centre, tree.node_radius, tree.node_child_start, tree.node_child_count,
        tree.node_point_start, tree.node_point_count, use_tree, np.ascontiguousarray(R), np.ascontiguousarray(t),
        field.values, origin, field.cell, lo, hi, field.cell, idx, d, g, 0.0, *(pyramid or (None, None)),
    )  # fmt: skip
    order = np.argsort(idx[:count])
    return idx[:count][order], d[:count][order], g[:count][order]


CULL_CASES = [("plate", 0.1, 4), ("plate", 0.03, 16), ("annulus", 0.03, 16)]
CULL_IDS = ["coarse", "plate", "annulus"]


@pytest.mark.parametrize(("master", "cell", "leaf"), quick(CULL_CASES, keep="coarse", ids=CULL_IDS))
def test_compiled_cull_finds_every_point_of_the_full_lookup(master, cell, leaf):
    """The octree's skip tests (cell bound sqrt(3) r on the interpolant, or G r by the field's slope
    pyramid, a leaf's bounds by its grid cells' slopes, the 1-norm bound per point, the mesh box)
    drop no point that looking every point up finds: the same points,
    distances and gradients to the last bit, for a slave ball straddling the faces, edges and
    corners of a master. On the coarse grid (cell twice the plate's thickness) the interpolant's
    slope exceeds 1 near the corners: a bound of r instead of sqrt(3) r drops points there."""
    from mbsim.model.contact.sdf import build_sdf

    if master == "plate":
        mesh = trimesh.creation.box(extents=(0.3, 0.2, 0.05))
    else:
        mesh = trimesh.creation.annulus(r_min=0.05, r_max=0.12, height=0.04)
    field = build_sdf(mesh, cell, 0.05)
    points = np.ascontiguousarray(trimesh.creation.icosphere(subdivisions=3, radius=0.06).vertices, dtype=float)
    tree = Octree.build(points, leaf_size=leaf)
    slopes = field.slope_pyramid()
    rng = np.random.default_rng(31)
    surface = np.vstack([np.asarray(mesh.vertices), np.asarray(trimesh.sample.sample_surface(mesh, 40, seed=3)[0])])
    found = 0
    for _ in range(300):
        R = Rotation.random(random_state=rng).as_matrix()
        t = surface[rng.integers(len(surface))] + rng.normal(scale=0.04, size=3)
        full = _compiled_lookup(tree, points, field, mesh, R, t, False)
        for pyramid in (None, slopes):
            culled = _compiled_lookup(tree, points, field, mesh, R, t, True, pyramid)
            np.testing.assert_array_equal(culled[0], full[0])
            np.testing.assert_array_equal(culled[1], full[1])
            np.testing.assert_array_equal(culled[2], full[2])
        found += len(full[0])
    assert found > 1000  # the poses do touch (not a vacuous comparison)


def test_the_slope_pyramid_bounds_the_interpolants_gradient():
    """SignedDistanceField.slope_pyramid's bound G over a box (compliant_kernels.region_slope) is at
    least |grad I| at every point of the box (I sampled densely with the field's own gradient) for
    boxes of 1 to 40 mm about an annulus's faces, edges and hole; it is 1 to round-off on a flat face
    away from edges (the skip test then takes r, not sqrt(3) r), and sqrt(3) off the grid."""
    from mbsim.model.contact.compliant_kernels import region_slope
    from mbsim.model.contact.sdf import build_sdf

    mesh = trimesh.creation.annulus(r_min=0.05, r_max=0.12, height=0.04)
    field = build_sdf(mesh, 0.01, 0.03)
    bound, meta = field.slope_pyramid()
    origin = np.asarray(field.origin, dtype=float)
    lo, hi = np.asarray(field.origin), field.upper
    rng = np.random.default_rng(5)
    tight = []
    for _ in range(300):
        r = 10 ** rng.uniform(-3, -1.4)
        c = rng.uniform(lo + r, hi - r)
        G = region_slope(bound, meta, origin, field.cell, c, r)
        samples = c + rng.uniform(-r, r, size=(400, 3))
        worst = np.linalg.norm(field.gradient(samples), axis=1).max()
        assert worst <= G * (1 + 1e-12), (c, r, worst, G)
        tight.append(worst / G)
    assert np.median(tight) > 0.8  # a bound, not a blanket sqrt(3)
    face = np.array([0.085, 0.0, 0.02 + 0.015])  # above the top face, mid-ring
    assert region_slope(bound, meta, origin, field.cell, face, 0.004) == pytest.approx(1.0, abs=1e-9)
    assert region_slope(bound, meta, origin, field.cell, hi + 0.01, 0.004) == pytest.approx(np.sqrt(3))
