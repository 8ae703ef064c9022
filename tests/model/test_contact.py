"""Rigid contact detection (mbsim.model.contact) on scenes compiled from YAML.

Analytic cases for every supported shape pair (gap, normal, points, manifold size), the
conventions of ``ContactBatch`` (normal from body i to body j, gap = (point_j - point_i) . n,
the ground is body i), the broad phase against brute force on random scenes, stable feature
keys, the body sets of ``contacts`` (names, lists, patterns, later entry wins) and their scene
errors, and the time of one detection in a pile of 1,000 spheres (printed, not asserted).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from quick_loop import quick
from scipy.optimize import linprog
from scipy.spatial.transform import Rotation

from mbsim.errors import SceneError
from mbsim.model.compile import compile_model
from mbsim.model.contact import PAIR_FUNCTIONS, ContactBatch, ContactDetector
from mbsim.model.contact.narrowphase import Side
from mbsim.scene.spec import load_scene

S2 = np.sqrt(2.0)
FLOOR3 = {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}
FLOOR2 = {"type": "line", "point": [0, 0], "normal": [0, 1]}
ALL = [{"name": "all", "type": "rigid", "body1": "*", "body2": "*"}]


# ----------------------------------------------------------------------------- helpers


def write(tmp_path: Path, bodies: dict, ground=(), contacts=None, dimension=3, name="scene.yaml", density=None):
    """A scene file: bodies {name: [shape, ...]} at the origin, of unit mass (or of ``density``)."""
    mass = {"mass": 1.0, "inertia": [1.0, 1.0, 1.0] if dimension == 3 else 1.0}
    scene = {
        "mbsim": 1,
        "name": "contact test",
        "dimension": dimension,
        "time": {"end": 0.01, "step": 0.01},
        "ground": {"shapes": list(ground)},
        "bodies": [
            {
                "name": body,
                **(mass if density is None else {"density": density}),
                "position": [0.0] * dimension,
                "shapes": shapes,
            }
            for body, shapes in bodies.items()
        ],
        "contacts": ALL if contacts is None else contacts,
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scene, sort_keys=False), encoding="utf-8")
    return path


def build(tmp_path: Path, bodies: dict, ground=(), contacts=None, dimension=3):
    return compile_model(load_scene(str(write(tmp_path, bodies, ground, contacts, dimension))))


def frames(model, **poses):
    """Frames with body ``name`` at (position, rotation): a rotation vector (3D) or an angle (2D)."""
    q = model.q0.copy()
    w = model.body_qwidth
    for name, (position, rotation) in poses.items():
        b = model.body_names.index(name)
        q[w * b : w * b + model.dimension] = position
        if model.dimension == 3:
            x, y, z, s = Rotation.from_rotvec(rotation).as_quat()
            q[w * b + 3 : w * b + 7] = (s, x, y, z)
        else:
            q[w * b + 2] = rotation
    return model.frames(q, np.zeros(model.nv))


def detect(model, fr, margin=1e-3, broadphase="sweep") -> ContactBatch:
    batch = ContactDetector(model, broadphase).detect(fr, margin)
    check_conventions(model, batch)
    return batch


def check_conventions(model, batch: ContactBatch) -> None:
    """Unit normals, gap = (point_j - point_i) . normal, ground always body i."""
    k = len(batch)
    assert batch.body_i.shape == batch.body_j.shape == batch.entry.shape == batch.feature.shape == (k,)
    assert batch.point_i.shape == batch.point_j.shape == batch.normal.shape == (k, model.dimension)
    np.testing.assert_allclose(np.linalg.norm(batch.normal, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(
        np.einsum("ki,ki->k", batch.point_j - batch.point_i, batch.normal), batch.gap, atol=1e-12
    )
    assert not np.any(batch.body_j == model.nbody)
    assert np.all(batch.body_i != batch.body_j)
    assert batch.feature.dtype == np.int64
    assert len(np.unique(batch.feature)) == k, "one feature key per contact"


def seen_from(model, batch: ContactBatch, body: str):
    """(point on ``body``, point on the other, normal from ``body`` to the other, gap) per contact."""
    b = model.body_names.index(body) if body != "ground" else model.nbody
    first = batch.body_i == b
    assert np.all(first | (batch.body_j == b))
    f = first[:, None]
    return (
        np.where(f, batch.point_i, batch.point_j),
        np.where(f, batch.point_j, batch.point_i),
        np.where(f, batch.normal, -batch.normal),
        batch.gap,
    )


def sphere(r):
    return {"type": "sphere", "radius": r}


def box(*size):
    return {"type": "box", "size": list(size)}


def sorted_rows(*arrays, key):
    order = np.argsort(key)
    return [a[order] for a in arrays]


# ----------------------------------------------------------------------------- planes (3D)


@pytest.mark.parametrize(
    "z, margin, gap",
    [(0.1, 1e-3, 0.0), (0.09, 1e-3, -0.01), (0.105, 0.01, 0.005), (0.105, 1e-3, None)],
    ids=["resting", "penetrating", "above_within_margin", "above_beyond_margin"],
)
def test_plane_sphere(tmp_path, z, margin, gap):
    m = build(tmp_path, {"ball": [sphere(0.1)]}, [FLOOR3])
    batch = detect(m, frames(m, ball=([0.3, -0.2, z], [0.4, 0, 0])), margin)
    if gap is None:
        assert len(batch) == 0
        return
    assert len(batch) == 1
    assert batch.body_i[0] == m.nbody and batch.body_j[0] == 0  # the ground is body i
    assert batch.entry[0] == 0
    np.testing.assert_allclose(batch.gap, [gap], atol=1e-12)
    np.testing.assert_allclose(batch.normal[0], [0, 0, 1])
    np.testing.assert_allclose(batch.point_i[0], [0.3, -0.2, 0.0], atol=1e-12)
    np.testing.assert_allclose(batch.point_j[0], [0.3, -0.2, z - 0.1], atol=1e-12)


def test_plane_sphere_tilted_plane(tmp_path):
    n = np.array([0.0, 1.0, 1.0]) / S2
    m = build(tmp_path, {"ball": [sphere(0.1)]}, [{"type": "plane", "point": [0, 0, 0.5], "normal": [0, 2, 2]}])
    centre = np.array([0.0, 0.0, 0.5]) + 0.08 * n + np.array([0.3, 0.2, -0.2])  # offset along the plane
    batch = detect(m, frames(m, ball=(centre, [0, 0, 0])))
    np.testing.assert_allclose(batch.gap, [-0.02], atol=1e-12)
    np.testing.assert_allclose(batch.normal[0], n, atol=1e-12)
    np.testing.assert_allclose(batch.point_j[0], centre - 0.1 * n, atol=1e-12)


def box_corners(centre, rotvec, size):
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    return centre + Rotation.from_rotvec(rotvec).apply(signs * np.asarray(size) / 2)


def test_plane_box_flat_four_corners(tmp_path):
    m = build(tmp_path, {"block": [box(0.4, 0.3, 0.2)]}, [FLOOR3])
    batch = detect(m, frames(m, block=([1.0, 2.0, 0.099], [0, 0, 0.3])))
    assert len(batch) == 4
    np.testing.assert_allclose(batch.gap, -0.001, atol=1e-12)
    np.testing.assert_allclose(batch.normal, [[0, 0, 1]] * 4)
    expected = box_corners([1.0, 2.0, 0.099], [0, 0, 0.3], [0.4, 0.3, 0.2])
    expected = expected[expected[:, 2] < 0.05]
    got = batch.point_j
    for p in expected:
        assert np.min(np.linalg.norm(got - p, axis=1)) < 1e-12
    np.testing.assert_allclose(batch.point_i[:, 2], 0.0, atol=1e-15)


def test_plane_box_at_most_four_corners_with_a_large_margin(tmp_path):
    m = build(tmp_path, {"plate": [box(0.4, 0.4, 0.01)]}, [FLOOR3])
    batch = detect(m, frames(m, plate=([0, 0, 0.005], [0, 0, 0])), margin=0.1)
    assert len(batch) == 4
    np.testing.assert_allclose(batch.gap, 0.0, atol=1e-12)


@pytest.mark.parametrize(
    "rotvec, count", [([np.pi / 6, 0, 0], 2), ([0.3, 0.2, 0.0], 1)], ids=["on_an_edge", "on_a_corner"]
)
def test_plane_tilted_box_gives_its_lowest_corners(tmp_path, rotvec, count):
    size = [0.4, 0.4, 0.2]
    m = build(tmp_path, {"block": [box(*size)]}, [FLOOR3])
    corners = box_corners([0, 0, 0], rotvec, size)
    lowest = corners[:, 2].min()
    centre = np.array([0.1, 0.0, -lowest - 0.002])  # lowest corner 2 mm deep
    batch = detect(m, frames(m, block=(centre, rotvec)))
    assert len(batch) == count
    np.testing.assert_allclose(batch.gap, -0.002, atol=1e-12)
    expected = corners[np.argsort(corners[:, 2])[:count]] + centre
    for p in expected:
        assert np.min(np.linalg.norm(batch.point_j - p, axis=1)) < 1e-12


def test_plane_capsule_lying_two_contacts_upright_one(tmp_path):
    capsule = {"type": "capsule", "radius": 0.05, "length": 0.4}
    m = build(tmp_path, {"pill": [capsule]}, [FLOOR3])
    batch = detect(m, frames(m, pill=([0, 0, 0.049], [0, np.pi / 2, 0])))
    assert len(batch) == 2
    np.testing.assert_allclose(batch.gap, -0.001, atol=1e-12)
    np.testing.assert_allclose(np.sort(batch.point_j[:, 0]), [-0.2, 0.2], atol=1e-12)
    np.testing.assert_allclose(batch.point_j[:, 2], -0.001, atol=1e-12)
    batch = detect(m, frames(m, pill=([0, 0, 0.25], [0, 0, 0])))
    assert len(batch) == 1
    np.testing.assert_allclose(batch.gap, 0.0, atol=1e-12)


def test_plane_cylinder_standing_lying_tilted(tmp_path):
    r, length = 0.1, 0.3
    m = build(tmp_path, {"can": [{"type": "cylinder", "radius": r, "length": length}]}, [FLOOR3])
    # standing on its cap: a polygon of rim points, gap as set
    batch = detect(m, frames(m, can=([0.5, 0, 0.149], [0, 0, 0.2])))
    assert len(batch) == 4
    np.testing.assert_allclose(batch.gap, -0.001, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(batch.point_j[:, :2] - [0.5, 0], axis=1), r, atol=1e-12)
    np.testing.assert_allclose(batch.normal, [[0, 0, 1]] * 4)
    # lying on its side: the lowest rim points of both caps
    batch = detect(m, frames(m, can=([0, 0, r], [np.pi / 2, 0, 0])))
    assert len(batch) == 2
    np.testing.assert_allclose(batch.gap, 0.0, atol=1e-12)
    np.testing.assert_allclose(np.sort(batch.point_j[:, 1]), [-length / 2, length / 2], atol=1e-12)
    # tilted by 30 degrees: on one rim point, the lowest
    theta = np.pi / 6
    height = length / 2 * np.cos(theta) + r * np.sin(theta)
    batch = detect(m, frames(m, can=([0, 0, height - 0.003], [theta, 0, 0])))
    assert len(batch) == 1
    np.testing.assert_allclose(batch.gap, -0.003, atol=1e-12)
    np.testing.assert_allclose(batch.point_j[0, :2], [0, length / 2 * np.sin(theta) - r * np.cos(theta)], atol=1e-12)


def test_plane_point(tmp_path):
    m = build(tmp_path, {"probe": [{"type": "point", "position": [0.1, 0, -0.2]}]}, [FLOOR3])
    batch = detect(m, frames(m, probe=([0, 0, 0.19], [0, 0, np.pi / 2])))
    np.testing.assert_allclose(batch.gap, [-0.01], atol=1e-12)
    np.testing.assert_allclose(batch.point_j[0], [0, 0.1, -0.01], atol=1e-12)


# ----------------------------------------------------------------------------- spheres, boxes, capsules


def test_sphere_sphere_overlap(tmp_path):
    m = build(tmp_path, {"a": [sphere(0.1)], "b": [sphere(0.2)]})
    d = np.array([1.0, 2.0, 2.0]) / 3.0
    batch = detect(m, frames(m, a=([0, 0, 0], [0, 0, 0]), b=(0.25 * d, [0, 0, 0])))
    assert len(batch) == 1
    pa, pb, n, gap = seen_from(m, batch, "a")
    np.testing.assert_allclose(gap, [-0.05], atol=1e-12)
    np.testing.assert_allclose(n[0], d, atol=1e-12)
    np.testing.assert_allclose(pa[0], 0.1 * d, atol=1e-12)
    np.testing.assert_allclose(pb[0], 0.05 * d, atol=1e-12)  # behind point_a: penetration


@pytest.mark.parametrize(
    "centre, normal, on_box, gap",
    [
        ([0.05, 0, 0.29], [0, 0, 1], [0.05, 0, 0.2], -0.01),  # face region
        ([0.27, 0, 0.27], [1 / S2, 0, 1 / S2], [0.2, 0, 0.2], 0.07 * S2 - 0.1),  # edge region
        ([0.25, -0.25, 0.25], np.array([1, -1, 1]) / np.sqrt(3), [0.2, -0.2, 0.2], 0.05 * np.sqrt(3) - 0.1),
        ([0.02, 0.03, 0.15], [0, 0, 1], [0.02, 0.03, 0.2], -0.15),  # centre inside: out through the top
    ],
    ids=["face", "edge", "corner", "inside"],
)
def test_sphere_box_regions(tmp_path, centre, normal, on_box, gap):
    m = build(tmp_path, {"crate": [box(0.4, 0.4, 0.4)], "ball": [sphere(0.1)]})
    rot = Rotation.from_rotvec([0.2, -0.1, 0.4])
    fr = frames(m, crate=([1, 1, 1], rot.as_rotvec()), ball=(np.array([1, 1, 1]) + rot.apply(centre), [0, 0, 0]))
    batch = detect(m, fr)
    assert len(batch) == 1
    pa, pb, n, g = seen_from(m, batch, "crate")
    np.testing.assert_allclose(g, [gap], atol=1e-12)
    np.testing.assert_allclose(n[0], rot.apply(normal), atol=1e-12)
    np.testing.assert_allclose(pa[0], np.array([1, 1, 1]) + rot.apply(on_box), atol=1e-12)


def test_box_point_and_sphere_point(tmp_path):
    probe = {"type": "point", "position": [0, 0, 0]}
    m = build(tmp_path, {"crate": [box(0.4, 0.4, 0.4)], "ball": [sphere(0.1)], "probe": [probe]})
    fr = frames(m, crate=([0, 0, 0], [0, 0, 0]), ball=([1, 0, 0], [0, 0, 0]), probe=([0.19, 0, 0], [0, 0, 0]))
    batch = detect(m, fr)
    assert len(batch) == 1
    _, _, n, g = seen_from(m, batch, "crate")
    np.testing.assert_allclose(g, [-0.01], atol=1e-12)
    np.testing.assert_allclose(n[0], [1, 0, 0])
    fr = frames(m, crate=([5, 0, 0], [0, 0, 0]), ball=([0, 0, 0], [0, 0, 0]), probe=([0.0995, 0, 0], [0, 0, 0]))
    _, _, n, g = seen_from(m, detect(m, fr), "ball")
    np.testing.assert_allclose(g, [-0.0005], atol=1e-12)
    np.testing.assert_allclose(n[0], [1, 0, 0])


def test_box_box_stacked_four_contacts(tmp_path):
    m = build(tmp_path, {"base": [box(1.0, 1.0, 0.5)], "top": [box(0.5, 0.5, 0.5)]})
    batch = detect(m, frames(m, base=([0, 0, 0], [0, 0, 0]), top=([0.1, 0, 0.498], [0, 0, 0])))
    assert len(batch) == 4
    pa, pb, n, gap = seen_from(m, batch, "base")
    np.testing.assert_allclose(gap, -0.002, atol=1e-12)
    np.testing.assert_allclose(n, [[0, 0, 1]] * 4, atol=1e-12)
    np.testing.assert_allclose(pa[:, 2], 0.25, atol=1e-12)
    np.testing.assert_allclose(pb[:, 2], 0.248, atol=1e-12)
    got = sorted(map(tuple, np.round(pa[:, :2], 9)))
    assert got == sorted((0.1 + x, y) for x in (-0.25, 0.25) for y in (-0.25, 0.25))


def test_box_box_equal_aligned_no_duplicates(tmp_path):
    m = build(tmp_path, {"a": [box(0.5, 0.5, 0.5)], "b": [box(0.5, 0.5, 0.5)]})
    batch = detect(m, frames(m, a=([0, 0, 0], [0, 0, 0]), b=([0, 0, 0.499], [0, 0, 0])))
    assert len(batch) == 4
    np.testing.assert_allclose(batch.gap, -0.001, atol=1e-12)
    corners = np.round(np.abs(batch.point_i[:, :2]), 9)
    np.testing.assert_allclose(corners, 0.25)
    assert len({tuple(p) for p in np.round(batch.point_i[:, :2], 9)}) == 4


def test_box_box_rotated_45_on_top(tmp_path):
    m = build(tmp_path, {"a": [box(0.5, 0.5, 0.5)], "b": [box(0.5, 0.5, 0.5)]})
    batch = detect(m, frames(m, a=([0, 0, 0], [0, 0, 0]), b=([0, 0, 0.499], [0, 0, np.pi / 4])))
    assert len(batch) == 4
    pa, pb, n, gap = seen_from(m, batch, "a")
    np.testing.assert_allclose(gap, -0.001, atol=1e-12)
    np.testing.assert_allclose(n, [[0, 0, 1]] * 4, atol=1e-12)
    # every point lies in both squares: the overlap octagon
    xy = pa[:, :2]
    turned = xy @ Rotation.from_rotvec([0, 0, np.pi / 4]).as_matrix()[:2, :2]
    assert np.all(np.abs(xy) <= 0.25 + 1e-9) and np.all(np.abs(turned) <= 0.25 + 1e-9)
    # and they span a large part of it (not four points in a corner)
    spread = np.linalg.norm(xy[:, None] - xy[None], axis=2).max()
    assert spread > 0.4


def test_box_box_tilted_on_an_edge(tmp_path):
    m = build(tmp_path, {"a": [box(1.0, 1.0, 0.5)], "b": [box(0.4, 0.4, 0.4)]})
    rotvec = [np.pi / 6, 0, 0]
    lowest = box_corners([0, 0, 0], rotvec, [0.4, 0.4, 0.4])[:, 2].min()
    batch = detect(m, frames(m, a=([0, 0, 0], [0, 0, 0]), b=([0, 0, 0.25 - lowest - 0.002], rotvec)))
    assert len(batch) == 2
    pa, pb, n, gap = seen_from(m, batch, "a")
    np.testing.assert_allclose(gap, -0.002, atol=1e-12)
    np.testing.assert_allclose(n, [[0, 0, 1]] * 2, atol=1e-12)
    np.testing.assert_allclose(np.sort(pa[:, 0]), [-0.2, 0.2], atol=1e-12)


def test_box_box_edge_edge_crossing(tmp_path):
    m = build(tmp_path, {"a": [box(0.5, 0.5, 0.5)], "b": [box(0.5, 0.5, 0.5)]})
    ridge = 0.25 * S2  # a's top edge (along x) and b's bottom edge (along y) after 45 degree turns
    fr = frames(m, a=([0, 0, 0], [np.pi / 4, 0, 0]), b=([0.02, -0.03, 2 * ridge - 0.002], [0, np.pi / 4, 0]))
    batch = detect(m, fr)
    assert len(batch) == 1
    pa, pb, n, gap = seen_from(m, batch, "a")
    np.testing.assert_allclose(gap, [-0.002], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(pa[0], [0.02, 0, ridge], atol=1e-12)
    np.testing.assert_allclose(pb[0], [0.02, 0, ridge - 0.002], atol=1e-12)


def test_box_box_separated_within_and_beyond_margin(tmp_path):
    m = build(tmp_path, {"a": [box(0.5, 0.5, 0.5)], "b": [box(0.5, 0.5, 0.5)]})
    fr = frames(m, a=([0, 0, 0], [0, 0, 0]), b=([0.1, 0, 0.505], [0, 0, 0]))
    batch = detect(m, fr, margin=0.01)
    assert len(batch) == 4
    np.testing.assert_allclose(batch.gap, 0.005, atol=1e-12)
    assert len(detect(m, fr, margin=0.005)) == 0


def _box_sdf(points, centre, R, h):
    """Exact signed distance of world points to a box (closed form), m."""
    q = np.abs((points - centre) @ R) - h
    return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)


def _overlap_lp(ca, A, ha, cb, B, hb):
    """Largest s such that a point lies in both boxes shrunk by s (scipy linprog): > 0 iff the
    interiors overlap; independent of the separating-axis test."""
    # variables (x, s): maximise s subject to +-R^T (x - c) + s <= h for both boxes
    rows, rhs = [], []
    for c, R, h in ((ca, A, ha), (cb, B, hb)):
        for sign in (1.0, -1.0):
            rows.append(np.column_stack((sign * R.T, np.ones(3))))
            rhs.append(h + sign * R.T @ c)
    res = linprog([0, 0, 0, -1], A_ub=np.vstack(rows), b_ub=np.concatenate(rhs), bounds=[(None, None)] * 4)
    assert res.status == 0
    return -res.fun


def _penetration_depth(ca, A, ha, cb, B, hb, directions):
    """min over unit n of the overlap of the two boxes' projections on n (support functions): the
    penetration depth of overlapping convex bodies, over the 15 candidate axes and random ones."""
    edge = np.cross(A.T[:, None, :], B.T[None, :, :]).reshape(9, 3)
    edge = edge[np.linalg.norm(edge, axis=1) > 1e-9]
    n = np.vstack((A.T, B.T, edge, directions))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    reach = np.abs(n @ A) @ ha + np.abs(n @ B) @ hb
    return float(np.min(reach - np.abs(n @ (cb - ca))))


@pytest.mark.parametrize("seed", quick([0, 1, 2, 3], keep=0))
def test_box_box_random_pairs_against_brute_force(seed):
    """Random box pairs, from resting (b on a's top, small tilt) to deep and separated: contact
    with gap < 0 exactly when an LP finds a common interior point, every point on its box's
    surface (closed-form distance), and the deepest gap against the penetration depth of the
    projections (support functions over the candidate axes and 20,000 random directions): never
    deeper than the chosen face's 5 % preference, and equal to it when b rests on a's top."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(20000, 3))
    box_box = PAIR_FUNCTIONS[("box", "box")]
    resting = 0
    for k in range(60):
        ha, hb = rng.uniform(0.05, 0.5, 3), rng.uniform(0.05, 0.5, 3)
        A = Rotation.random(random_state=rng).as_matrix()
        if k % 2:  # b resting on a's top face, inside its outline, slightly tilted and sinking
            hb[:2] = rng.uniform(0.2, 0.45) * ha[:2].min() * np.array([1.0, rng.uniform(0.5, 1.0)])
            B = A @ Rotation.from_rotvec(np.r_[rng.normal(0, 0.05, 2), rng.uniform(-np.pi, np.pi)]).as_matrix()
            centre_local = np.r_[rng.uniform(-0.3, 0.3, 2) * ha[:2], ha[2]]
            lowest = np.min(((np.array(np.meshgrid(*[[-1, 1]] * 3)).reshape(3, -1).T * hb) @ B.T) @ A[:, 2])
            cb_local = centre_local - np.r_[0, 0, lowest + rng.uniform(1e-4, 0.02) * ha[2]]
            cb = A @ cb_local
        else:
            B = Rotation.random(random_state=rng).as_matrix()
            cb = rng.normal(0, 0.4, 3)
        ca = np.zeros(3)
        a = Side(ca[None], A[None], ha[None])
        b = Side(cb[None], B[None], hb[None])
        found = box_box(a, b, 0.0)
        depth_lp = _overlap_lp(ca, A, ha, cb, B, hb)
        if abs(depth_lp) < 1e-6:  # touching: either answer is right
            continue
        assert (len(found.gap) > 0) == (depth_lp > 0), (k, depth_lp, found.gap)
        if not len(found.gap):
            continue
        assert len(found.gap) <= 4 and np.all(found.gap < 0.0)
        np.testing.assert_allclose(np.linalg.norm(found.normal, axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(
            np.einsum("ki,ki->k", found.point_b - found.point_a, found.normal), found.gap, atol=1e-12
        )
        np.testing.assert_allclose(_box_sdf(found.point_a, ca, A, ha), 0.0, atol=1e-9)
        np.testing.assert_allclose(_box_sdf(found.point_b, cb, B, hb), 0.0, atol=1e-9)
        pd = _penetration_depth(ca, A, ha, cb, B, hb, directions)
        deepest = -found.gap.min()
        scale = (ha.sum() + hb.sum()) / 6.0
        assert deepest <= 1.05 * pd + 1e-5 * scale + 1e-12, (k, deepest, pd)
        if k % 2:
            resting += 1
            np.testing.assert_allclose(deepest, pd, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(np.abs(found.normal @ A[:, 2]), 1.0, atol=0.01)
            # one point per corner of b below a's top face (all inside its outline)
            corners = cb + (np.array(np.meshgrid(*[[-1, 1]] * 3)).reshape(3, -1).T * hb) @ B.T
            assert len(found.gap) == np.count_nonzero((corners - A[:, 2] * ha[2]) @ A[:, 2] < 0)
    assert resting >= 25


def test_capsule_capsule_parallel_and_crossing(tmp_path):
    capsule = {"type": "capsule", "radius": 0.05, "length": 0.4}
    m = build(tmp_path, {"a": [capsule], "b": [capsule]})
    along_x = [0, np.pi / 2, 0]
    batch = detect(m, frames(m, a=([0, 0, 0], along_x), b=([0.1, 0, 0.099], along_x)))
    assert len(batch) == 2
    pa, pb, n, gap = seen_from(m, batch, "a")
    np.testing.assert_allclose(gap, -0.001, atol=1e-12)
    np.testing.assert_allclose(np.sort(pa[:, 0]), [-0.1, 0.2], atol=1e-12)
    np.testing.assert_allclose(pa[:, 2], 0.05, atol=1e-12)
    np.testing.assert_allclose(n, [[0, 0, 1]] * 2, atol=1e-12)
    along_y = [np.pi / 2, 0, 0]
    batch = detect(m, frames(m, a=([0, 0, 0], along_x), b=([0.07, 0.03, 0.099], along_y)))
    assert len(batch) == 1
    pa, pb, n, gap = seen_from(m, batch, "a")
    np.testing.assert_allclose(gap, [-0.001], atol=1e-12)
    np.testing.assert_allclose(pa[0], [0.07, 0, 0.05], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, 0, 1], atol=1e-12)


def test_capsule_sphere_and_cylinder_sphere(tmp_path):
    capsule = {"type": "capsule", "radius": 0.05, "length": 0.4}
    cylinder = {"type": "cylinder", "radius": 0.1, "length": 0.4}
    contacts = [{"type": "rigid", "body1": "ball", "body2": ["pill", "can"]}]
    m = build(tmp_path, {"pill": [capsule], "can": [cylinder], "ball": [sphere(0.1)]}, contacts=contacts)
    far = ([10, 0, 0], [0, 0, 0])
    # capsule along x: the ball beyond its end cap
    fr = frames(m, pill=([0, 0, 0], [0, np.pi / 2, 0]), can=far, ball=([0.34, 0, 0], [0, 0, 0]))
    _, _, n, gap = seen_from(m, detect(m, fr), "pill")
    np.testing.assert_allclose(gap, [-0.01], atol=1e-12)
    np.testing.assert_allclose(n[0], [1, 0, 0], atol=1e-12)
    # cylinder upright: the ball on its top cap, then against its side
    fr = frames(m, pill=far, can=([0, 0, 0], [0, 0, 0]), ball=([0.05, 0, 0.295], [0, 0, 0]))
    pa, _, n, gap = seen_from(m, detect(m, fr), "can")
    np.testing.assert_allclose(gap, [-0.005], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(pa[0], [0.05, 0, 0.2], atol=1e-12)
    fr = frames(m, pill=far, can=([0, 0, 0], [0, 0, 0]), ball=([0, -0.19, 0.1], [0, 0, 0]))
    pa, _, n, gap = seen_from(m, detect(m, fr), "can")
    np.testing.assert_allclose(gap, [-0.01], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, -1, 0], atol=1e-12)
    np.testing.assert_allclose(pa[0], [0, -0.1, 0.1], atol=1e-12)


def test_shape_pose_and_density_bodies(tmp_path):
    """Shapes away from the body origin (pose) and bodies whose frame sits at the centre of mass."""
    offset = {"type": "sphere", "radius": 0.1, "pose": {"position": [0.5, 0, 0]}}
    m = compile_model(load_scene(str(write(tmp_path, {"arm": [offset]}, [FLOOR3], density=1000.0))))
    # the body frame is at the sphere's centre (its centre of mass), whatever the pose said
    batch = detect(m, frames(m, arm=([0.2, 0, 0.099], [0, 0, 1.0])))
    np.testing.assert_allclose(batch.gap, [-0.001], atol=1e-12)
    np.testing.assert_allclose(batch.point_j[0], [0.2, 0, -0.001], atol=1e-12)
    m = build(tmp_path, {"arm": [offset]}, [FLOOR3])
    batch = detect(m, frames(m, arm=([0, 0, 0.099], [0, 0, np.pi / 2])))
    np.testing.assert_allclose(batch.point_j[0], [0, 0.5, -0.001], atol=1e-12)


# ----------------------------------------------------------------------------- planar


def test_planar_line_circle_rectangle_point(tmp_path):
    shapes = {
        "disc": [{"type": "circle", "radius": 0.1}],
        "plank": [{"type": "rectangle", "size": [0.4, 0.2]}],
        "tip": [{"type": "point", "position": [0.1, 0]}],
    }
    m = build(tmp_path, shapes, [FLOOR2], dimension=2)
    far = ([10, 10], 0.0)
    batch = detect(m, frames(m, disc=([0, 0.095], 0.0), plank=far, tip=([5, 5], 0.0)))
    assert batch.body_i[0] == m.nbody
    np.testing.assert_allclose(batch.gap, [-0.005], atol=1e-12)
    np.testing.assert_allclose(batch.normal, [[0, 1]])
    batch = detect(m, frames(m, disc=far, plank=([1, 0.099], 0.0), tip=([5, 5], 0.0)))
    assert len(batch) == 2
    np.testing.assert_allclose(batch.gap, -0.001, atol=1e-12)
    np.testing.assert_allclose(np.sort(batch.point_j[:, 0]), [0.8, 1.2], atol=1e-12)
    theta = 0.3
    lowest = 0.2 * np.sin(theta) + 0.1 * np.cos(theta)
    batch = detect(m, frames(m, disc=far, plank=([1, lowest - 0.002], theta), tip=([5, 5], 0.0)))
    assert len(batch) == 1
    np.testing.assert_allclose(batch.gap, [-0.002], atol=1e-12)
    batch = detect(m, frames(m, disc=far, plank=([3, 3], 0.0), tip=([0, -0.0995], np.pi / 2)))
    np.testing.assert_allclose(batch.gap, [0.0005], atol=1e-12)  # the point at (0, 0.0005), within the margin
    np.testing.assert_allclose(batch.point_j[0], [0, 0.0005], atol=1e-12)


def test_planar_circle_circle_rectangle_point(tmp_path):
    shapes = {
        "a": [{"type": "circle", "radius": 0.1}],
        "b": [{"type": "circle", "radius": 0.2}],
        "plank": [{"type": "rectangle", "size": [0.4, 0.2]}],
        "tip": [{"type": "point", "position": [0, 0]}],
    }
    m = build(tmp_path, shapes, dimension=2)
    away = {"plank": ([10, 0], 0.0), "tip": ([20, 0], 0.0)}
    batch = detect(m, frames(m, a=([0, 0], 0.0), b=([0.18, 0.24], 0.0), **away))
    pa, pb, n, gap = seen_from(m, batch, "a")
    np.testing.assert_allclose(gap, [-0.0], atol=1e-12)
    np.testing.assert_allclose(n[0], [0.6, 0.8], atol=1e-12)
    np.testing.assert_allclose(pa[0], [0.06, 0.08], atol=1e-12)
    # circle on the rectangle's face, then at its corner
    fr = frames(m, a=([0.05, 0.195], 0.0), b=([5, 5], 0.0), plank=([0, 0], 0.0), tip=([20, 0], 0.0))
    pa, _, n, gap = seen_from(m, detect(m, fr), "plank")
    np.testing.assert_allclose(gap, [-0.005], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, 1], atol=1e-12)
    np.testing.assert_allclose(pa[0], [0.05, 0.1], atol=1e-12)
    fr = frames(m, a=([0.26, 0.18], 0.0), b=([5, 5], 0.0), plank=([0, 0], 0.0), tip=([20, 0], 0.0))
    pa, _, n, gap = seen_from(m, detect(m, fr), "plank")
    np.testing.assert_allclose(gap, [0.1 - 0.1], atol=1e-12)
    np.testing.assert_allclose(n[0], [0.6, 0.8], atol=1e-12)
    np.testing.assert_allclose(pa[0], [0.2, 0.1], atol=1e-12)
    # a point in the rectangle (out through the nearest side) and a point in a circle
    fr = frames(m, a=([5, 5], 0.0), b=([-5, 5], 0.0), plank=([0, 0], np.pi / 2), tip=([0.0, 0.19], 0.0))
    pa, _, n, gap = seen_from(m, detect(m, fr), "plank")
    np.testing.assert_allclose(gap, [-0.01], atol=1e-12)
    np.testing.assert_allclose(n[0], [0, 1], atol=1e-12)
    fr = frames(m, a=([0, 0], 0.0), b=([-5, 5], 0.0), plank=([10, 0], 0.0), tip=([0.0999, 0], 0.0))
    _, _, n, gap = seen_from(m, detect(m, fr), "a")
    np.testing.assert_allclose(gap, [-0.0001], atol=1e-12)
    np.testing.assert_allclose(n[0], [1, 0], atol=1e-12)


def test_planar_rectangle_rectangle(tmp_path):
    shapes = {"base": [{"type": "rectangle", "size": [1.0, 0.5]}], "top": [{"type": "rectangle", "size": [0.4, 0.4]}]}
    m = build(tmp_path, shapes, dimension=2)
    # stacked: two contacts, the top's bottom corners, gap as set
    batch = detect(m, frames(m, base=([0, 0], 0.0), top=([0.1, 0.447], 0.0)))
    assert len(batch) == 2
    pa, pb, n, gap = seen_from(m, batch, "base")
    np.testing.assert_allclose(gap, -0.003, atol=1e-12)
    np.testing.assert_allclose(n, [[0, 1]] * 2, atol=1e-12)
    np.testing.assert_allclose(np.sort(pa[:, 0]), [-0.1, 0.3], atol=1e-12)
    np.testing.assert_allclose(pa[:, 1], 0.25, atol=1e-12)
    # overhanging: clipped to the base's face
    batch = detect(m, frames(m, base=([0, 0], 0.0), top=([0.45, 0.447], 0.0)))
    pa, _, _, gap = seen_from(m, batch, "base")
    np.testing.assert_allclose(np.sort(pa[:, 0]), [0.25, 0.5], atol=1e-12)
    # turned 45 degrees: a corner into the face
    corner = 0.2 * S2
    batch = detect(m, frames(m, base=([0, 0], 0.0), top=([0.1, 0.25 + corner - 0.002], np.pi / 4)))
    assert len(batch) == 1
    pa, pb, n, gap = seen_from(m, batch, "base")
    np.testing.assert_allclose(gap, [-0.002], atol=1e-12)
    np.testing.assert_allclose(pb[0], [0.1, 0.248], atol=1e-12)
    # side by side: the normal along x
    batch = detect(m, frames(m, base=([0, 0], 0.0), top=([0.699, 0.1], 0.0)))
    _, _, n, gap = seen_from(m, batch, "base")
    assert len(batch) == 2
    np.testing.assert_allclose(n, [[1, 0]] * 2, atol=1e-12)
    np.testing.assert_allclose(gap, -0.001, atol=1e-12)


# ----------------------------------------------------------------------------- broad phase and features


def random_scene(tmp_path, n: int, seed: int, dimension: int = 3):
    """n spheres and boxes (circles and rectangles) of random sizes, crowded in a small region."""
    rng = np.random.default_rng(seed)
    bodies = {}
    for k in range(n):
        size = [float(x) for x in rng.uniform(0.05, 0.2, dimension)]
        if dimension == 3:
            shape = sphere(size[0] / 2) if k % 2 else box(*size)
        else:
            shape = {"type": "circle", "radius": size[0] / 2} if k % 2 else {"type": "rectangle", "size": list(size)}
        bodies[f"b{k}"] = [shape]
    ground = [FLOOR3] if dimension == 3 else [FLOOR2]
    model = build(tmp_path, bodies, ground, dimension=dimension)
    side = 0.11 * n ** (1 / dimension)
    poses = {}
    for k in range(n):
        position = rng.uniform(0, side, dimension)
        position[-1] -= 0.05
        rotation = rng.normal(size=3) if dimension == 3 else float(rng.uniform(-np.pi, np.pi))
        poses[f"b{k}"] = (position, rotation)
    return model, frames(model, **poses)


@pytest.mark.parametrize("dimension, seed", [(3, 1), (3, 2), (2, 3)])
def test_broad_phase_equals_brute_force(tmp_path, dimension, seed):
    model, fr = random_scene(tmp_path, 200, seed, dimension)
    for margin in (0.0, 0.01):
        sweep = detect(model, fr, margin, "sweep")
        brute = detect(model, fr, margin, "all")
        assert len(sweep) > 100, "a crowded scene"
        assert set(sweep.feature) == set(brute.feature)
        a = sorted_rows(*(getattr(sweep, f) for f in ContactBatch.__dataclass_fields__), key=sweep.feature)
        b = sorted_rows(*(getattr(brute, f) for f in ContactBatch.__dataclass_fields__), key=brute.feature)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
        assert np.all(sweep.gap < margin)
        # and the sweep got there by testing far fewer pairs
        assert len(ContactDetector(model).candidates(fr, margin)[0]) < 0.2 * len(
            ContactDetector(model, "all").candidates(fr, margin)[0]
        )


def test_feature_keys_stay_while_the_same_features_touch(tmp_path):
    m = build(tmp_path, {"a": [box(0.5, 0.5, 0.5)], "b": [box(0.5, 0.5, 0.5)]}, [FLOOR3])
    before = detect(m, frames(m, a=([0, 0, 0.249], [0, 0, 0]), b=([0.1, 0, 0.748], [0, 0, 0.5])))
    after = detect(m, frames(m, a=([1e-4, 0, 0.2489], [1e-5, 0, 0]), b=([0.1002, 0, 0.7479], [0, 1e-5, 0.5001])))
    assert len(before) == 8  # four on the floor, four on the (octagonal) overlap of the boxes
    assert set(before.feature) == set(after.feature)


def test_pair_order_does_not_depend_on_positions(tmp_path):
    """Shapes of one type are ordered by id, not by where the sweep meets them: same body i, same key."""
    m = build(tmp_path, {"a": [sphere(0.1)], "b": [sphere(0.1)]})
    left = detect(m, frames(m, a=([0, 0, 0], [0, 0, 0]), b=([0.19, 0, 0], [0, 0, 0])))
    right = detect(m, frames(m, a=([0, 0, 0], [0, 0, 0]), b=([-0.19, 0, 0], [0, 0, 0])))
    assert left.feature.tolist() == right.feature.tolist()
    assert left.body_i.tolist() == right.body_i.tolist() == [0]
    np.testing.assert_allclose(left.normal, -right.normal)


def test_batch_is_empty_without_contacts(tmp_path):
    m = build(tmp_path, {"a": [sphere(0.1)], "b": [sphere(0.1)]}, [FLOOR3], contacts=[])
    batch = ContactDetector(m).detect(frames(m, a=([0, 0, 0], [0, 0, 0]), b=([0, 0, 0], [0, 0, 0])), 0.1)
    assert len(batch) == 0 and batch.point_i.shape == (0, 3) and batch.feature.dtype == np.int64


# ----------------------------------------------------------------------------- contact pairs of the scene


def test_lists_patterns_and_the_later_entry_wins(tmp_path):
    bodies = {f"ball{k}": [sphere(0.1)] for k in range(1, 4)}
    bodies["crate"] = [box(0.5, 0.5, 0.5)]
    bodies["stick"] = []  # no shapes: patterns pass it over
    contacts = [
        {"name": "balls", "type": "rigid", "body1": "ball*", "body2": "ball*"},
        {"name": "floor", "type": "rigid", "body1": ["ground", "crate"], "body2": "ball?", "friction": 0.4},
        {"name": "special", "type": "rigid", "body1": "ball1", "body2": ["ball2"], "friction": 0.9},
        {"name": "off", "type": "rigid", "body1": "*", "body2": "*", "enabled": False},
        {"name": "soft", "type": "compliant", "body1": "crate", "body2": "stick", "enabled": False},
    ]
    m = build(tmp_path, bodies, [FLOOR3], contacts)
    index = {n: k for k, n in enumerate(m.body_names)}
    index["ground"] = m.nbody
    pairs = m.contact_pairs
    cases = [
        ("ball1", "ball2", 2),
        ("ball2", "ball1", 2),
        ("ball1", "ball3", 0),
        ("ball3", "ground", 1),
        ("crate", "ball2", 1),
        ("crate", "ground", -1),
        ("ball1", "ball1", -1),
        ("stick", "ball1", -1),
    ]
    got = pairs.entry([index[a] for a, _, _ in cases], [index[b] for _, b, _ in cases])
    assert got.tolist() == [e for _, _, e in cases]
    assert not pairs.body_active[index["stick"]]
    # the batch carries the entry of each contact
    fr = frames(m, ball1=([0, 0, 0.5], [0, 0, 0]), ball2=([0.19, 0, 0.5], [0, 0, 0]), ball3=([2, 0, 0.09], [0, 0, 0]))
    batch = detect(m, fr)
    assert sorted(batch.entry.tolist()) == [1, 2]


def test_star_pattern_includes_ground_and_large_sets(tmp_path):
    n = 80  # 81 x 80 pairs: stored as membership masks, not listed
    bodies = {f"p{k}": [sphere(0.1)] for k in range(n)}
    contacts = [
        {"type": "rigid", "body1": "*", "body2": "*"},
        {"type": "rigid", "body1": "p1*", "body2": ["p2", "p3", "ground"]},
        {"type": "rigid", "body1": "p3", "body2": "p4"},
    ]
    m = build(tmp_path, bodies, [FLOOR3], contacts)
    pairs = m.contact_pairs
    assert len(pairs.set_entries) == 1
    # reference: every entry in scene order overwrites the pairs it covers
    names = [*m.body_names, "ground"]
    sets = [
        (set(names), set(names)),
        ({x for x in names if x.startswith("p1")}, {"p2", "p3", "ground"}),
        ({"p3"}, {"p4"}),
    ]
    a, b = (x.ravel() for x in np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij"))
    expected = np.full(len(a), -1)
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        for e, (s1, s2) in enumerate(sets):
            if x != y and ((names[x] in s1 and names[y] in s2) or (names[y] in s1 and names[x] in s2)):
                expected[k] = e
    np.testing.assert_array_equal(pairs.entry(a, b), expected)
    assert set(expected.tolist()) == {-1, 0, 1, 2}


def scene_error(tmp_path, bodies, contacts, ground=(FLOOR3,), dimension=3) -> SceneError:
    path = write(tmp_path, bodies, ground, contacts, dimension)
    with pytest.raises(SceneError) as info:
        compile_model(load_scene(str(path)))
    err = info.value
    assert err.file == str(path) and err.line is not None
    return err


@pytest.mark.parametrize(
    "body1, body2, key_path, fragments",
    [
        ("ground", "bal1", "contacts[0].body2", ("unknown body 'bal1'", "did you mean 'ball1'?")),
        (["ground", "crat"], "ball1", "contacts[0].body1[1]", ("unknown body 'crat'", "did you mean 'crate'?")),
        ("ground", "rock*", "contacts[0].body2", ("pattern 'rock*' matches no body",)),
        ("ground", "stick", "contacts[0].body2", ("body 'stick' has no shapes",)),
        ("stick*", "ball1", "contacts[0].body1", ("matches stick", "none of them has shapes")),
        ("ball1", "ball1", "contacts[0].body2", ("cannot touch itself",)),
        ("ground", 3, "contacts[0].body2", ("expected a body name, a list of names or a pattern", "got the number 3")),
        ("ground", ["ball1", 2], "contacts[0].body2[1]", ("expected a body name", "got the number 2")),
        ("ground", [], "contacts[0].body2", ("expected a body name, a list of names or a pattern",)),
        ("crate", "pill", "contacts[0]", ("no rigid contact between 'box' and 'capsule' yet", "'crate' and 'pill'")),
    ],
    ids=[
        "unknown_body",
        "unknown_in_list",
        "pattern_matches_nothing",
        "no_shapes",
        "pattern_without_shapes",
        "itself",
        "number",
        "number_in_list",
        "empty_list",
        "unsupported_shape_pair",
    ],
)
def test_contact_scene_errors(tmp_path, body1, body2, key_path, fragments):
    bodies = {
        "ball1": [sphere(0.1)],
        "crate": [box(0.5, 0.5, 0.5)],
        "pill": [{"type": "capsule", "radius": 0.05, "length": 0.2}],
        "stick": [],
    }
    err = scene_error(tmp_path, bodies, [{"type": "rigid", "body1": body1, "body2": body2}])
    assert err.key_path == key_path, str(err)
    for fragment in fragments:
        assert fragment in str(err), str(err)


def test_ground_without_shapes_and_pairs_without_a_rule_are_refused(tmp_path):
    err = scene_error(tmp_path, {"ball1": [sphere(0.1)]}, [{"type": "rigid", "body1": "ground", "body2": "ball1"}], ())
    assert "body 'ground' has no shapes" in str(err) and "ground.shapes" in str(err)
    import trimesh

    trimesh.creation.box(extents=[0.2, 0.2, 0.2]).export(tmp_path / "cube.stl")
    capsule = {"type": "capsule", "radius": 0.1, "length": 0.3}
    bodies = {"rock": [{"type": "mesh", "file": "cube.stl"}], "pill": [capsule]}
    err = scene_error(tmp_path, bodies, [{"type": "rigid", "body1": "*", "body2": "*"}])
    assert "no rigid contact between 'capsule' and 'mesh' yet" in str(err) or "between 'mesh' and 'capsule'" in str(err)
    assert ("mesh", "capsule") not in PAIR_FUNCTIONS and ("capsule", "mesh") not in PAIR_FUNCTIONS
    # disabled or compliant entries do not ask for a function (names are still checked)
    contacts = [{"type": "rigid", "body1": "*", "body2": "*", "enabled": False}]
    compile_model(load_scene(str(write(tmp_path, bodies, [FLOOR3], contacts))))


def test_validate_exits_2_on_a_contact_error(tmp_path, mbsim):
    bodies = {"ball1": [sphere(0.1)]}
    path = write(tmp_path, bodies, [FLOOR3], [{"type": "rigid", "body1": "ground", "body2": "rock*"}])
    result = mbsim("validate", path)
    assert result.exit_code == 2
    assert f"{path}:" in result.stderr and "contacts[0].body2" in result.stderr
    assert "pattern 'rock*' matches no body" in result.stderr
    assert "Traceback" not in result.output


# ----------------------------------------------------------------------------- timing


@pytest.mark.slow  # ~1.5 s; a timing that is printed, not asserted
def test_time_of_a_pile_of_1000_spheres(tmp_path):
    """Printed, not asserted (machines differ): one detection in a pile of 1,000 spheres in a box."""
    r, n = 0.05, 10
    rng = np.random.default_rng(0)
    walls = [
        FLOOR3,
        {"type": "plane", "point": [-0.55, 0, 0], "normal": [1, 0, 0]},
        {"type": "plane", "point": [0.55, 0, 0], "normal": [-1, 0, 0]},
        {"type": "plane", "point": [0, -0.55, 0], "normal": [0, 1, 0]},
        {"type": "plane", "point": [0, 0.55, 0], "normal": [0, -1, 0]},
    ]
    grid = np.array([(i, j, k) for i in range(n) for j in range(n) for k in range(n)], dtype=float)
    positions = (grid - [(n - 1) / 2, (n - 1) / 2, 0]) * 2 * r * 0.99 + [0, 0, r] + rng.normal(0, 0.002, grid.shape)
    bodies = {f"ball{k}": [sphere(r)] for k in range(len(grid))}
    m = build(tmp_path, bodies, walls)
    fr = frames(m, **{f"ball{k}": (p, [0, 0, 0]) for k, p in enumerate(positions)})
    detector = ContactDetector(m)
    batch = detector.detect(fr, 1e-3)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        detector.detect(fr, 1e-3)
        times.append(time.perf_counter() - start)
    print(
        f"\n1,000-sphere pile: {len(batch)} contacts, detect median {1e3 * np.median(times):.2f} ms "
        f"(min {1e3 * min(times):.2f} ms)"
    )
    assert len(batch) > 1000
