"""Oriented bounding boxes (OBB) of point sets and their overlap by the separating-axis test,
vectorised over many box pairs with numpy.

This is the global detection stage of papers/sdf-octree-contact-dynamics.txt §2.1: two bodies
can be in contact only if their OBBs overlap (within a margin); the local stage
(mbsim.model.contact.octree) then looks for the contact points. It is not a distance or
contact-point routine.

Conventions: a box is ``(centre (3,), axes (3, 3), half (3,))``; the columns of ``axes`` are the
box's orthonormal edge directions, ``half`` the half extents along them. The overlap test is
the 15-axis separating-axis test of Gottschalk, Lin & Manocha (OBBTree, 1996) as written in
Ericson, Real-Time Collision Detection §4.4.1, with an epsilon added to the absolute rotation
matrix so that near-parallel edge pairs (whose cross product is nearly zero) never separate on
round-off.

Pure numerics: imports nothing from mbsim.
"""

from __future__ import annotations

import numpy as np

# absolute rotation entries are increased by this (Ericson §4.4.1, "add in an epsilon term")
EPS = 1e-6
# number of hull facet normals (largest total area first) tried as box axes in obb_from_points
MAX_FACE_NORMALS = 24
# larger point sets choose the frame from a fixed-seed random subset of this size (extents use all points)
MAX_HULL_POINTS = 4096


def _frame(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Right-handed orthonormal frames (..., 3, 3) with columns u, v' (v made orthogonal to u), u x v'."""
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    v = v - np.sum(u * v, axis=-1, keepdims=True) * u
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    return np.stack([u, v, np.cross(u, v)], axis=-1)


def _pca_axes(points: np.ndarray) -> np.ndarray:
    """Eigenvectors (columns) of the covariance of the points, largest variance first, right-handed."""
    centred = points - points.mean(axis=0)
    _, vec = np.linalg.eigh(centred.T @ centred)
    vec = vec[:, ::-1]
    if np.linalg.det(vec) < 0:
        vec[:, 2] = -vec[:, 2]
    return vec


def obb_from_points(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An oriented bounding box of a point set: the smallest-volume box among candidate frames.

    The candidate frames are (1) the principal axes (PCA) of the convex hull's vertices and
    (2) frames built from the hull's facet normals: the ``MAX_FACE_NORMALS`` distinct normals
    of largest total facet area, each paired with every other of them that is not nearly
    parallel, and each with the principal axis of the hull vertices projected onto its plane.
    Every box is the extent of the hull vertices along the frame, so it contains all points.
    For a box-shaped point set (e.g. a box's corners or samples of its surface) two of the
    face normals are edge directions, so the box is tight and aligned with the edges, even for
    a cube where PCA alone is degenerate. This is a heuristic, not the exact minimum-volume
    box (O'Rourke 1985). Degenerate sets (fewer than 4 points, coplanar, collinear) skip the
    hull and use PCA of the points; a zero half extent is then possible. Sets of more than
    ``MAX_HULL_POINTS`` points choose the frame from a random subset of that size (seed 0, so
    deterministic); the extents along it still use every point, so the box contains them all,
    but it may be slightly less tight (about 0.1 s for 230k points instead of seconds).

    Args:
        points: (n, 3) points, n >= 1.
    Returns:
        centre: (3,) box centre, in the frame of the points.
        axes: (3, 3) rotation whose columns are the box axes (right-handed).
        half: (3,) half extents along the axes, >= 0.
    """
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) == 0:
        raise ValueError(f"expected points of shape (n, 3) with n >= 1, got {points.shape}")
    frames = []
    sample = points
    if len(points) > MAX_HULL_POINTS:
        pick = np.random.default_rng(0).choice(len(points), MAX_HULL_POINTS, replace=False)
        sample = points[np.sort(pick)]
    from scipy.spatial import ConvexHull, QhullError  # here: importing scipy.spatial costs every command ~0.1 s

    try:
        hull = ConvexHull(sample)
    except (QhullError, ValueError):
        hull = None
    if hull is None:
        verts = sample
        frames.append(_pca_axes(verts))
    else:
        verts = sample[hull.vertices]
        frames.append(_pca_axes(verts))
        # distinct facet normals weighted by total facet area (facets of one face share a normal)
        normal = hull.equations[:, :3]
        tri = sample[hull.simplices]
        area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
        _, inverse = np.unique(np.round(normal, 6), axis=0, return_inverse=True)
        inverse = inverse.ravel()
        total = np.bincount(inverse, weights=area)
        # the group's normal: area-weighted mean of the exact facet normals (not the rounded key)
        mean = np.stack([np.bincount(inverse, weights=area * normal[:, k]) for k in range(3)], axis=1)
        best = np.argsort(-total)[:MAX_FACE_NORMALS]
        n = mean[best] / np.linalg.norm(mean[best], axis=1, keepdims=True)
        # pairs of non-parallel normals
        i, j = np.triu_indices(len(n), k=1)
        ok = np.abs(np.sum(n[i] * n[j], axis=1)) < 0.999
        if ok.any():
            frames.extend(_frame(n[i[ok]], n[j[ok]]))
        # each normal with the principal in-plane direction of the vertices: eigenvectors of P C P,
        # C the vertices' scatter matrix and P = I - n n^T the projection onto the facet plane
        centred = verts - verts.mean(axis=0)
        C = centred.T @ centred
        P = np.eye(3) - n[:, :, None] * n[:, None, :]
        _, vec = np.linalg.eigh(P @ C @ P)
        major = vec[:, :, 2]
        ok = np.abs(np.sum(major * n, axis=1)) < 0.999
        if ok.any():
            frames.extend(_frame(n[ok], major[ok]))
    frames = np.asarray(frames)
    # extents of the vertices along every candidate frame: (f, n, 3)
    proj = np.einsum("nj,fjk->fnk", verts, frames)
    lo, hi = proj.min(axis=1), proj.max(axis=1)
    volume = np.prod(hi - lo, axis=1)
    # flat boxes all have volume 0: rank by the area of the two largest extents, then by the sum
    ext = np.sort(hi - lo, axis=1)
    axes = frames[np.lexsort((ext.sum(axis=1), ext[:, 1] * ext[:, 2], volume))[0]]
    # extents of every point along the chosen frame (the vertices sufficed unless subsampled)
    proj = (verts if sample is points else points) @ axes
    lo, hi = proj.min(axis=0), proj.max(axis=0)
    half = 0.5 * (hi - lo)
    centre = axes @ (0.5 * (hi + lo))
    return centre, axes, half


def obb_world(
    centre_local: np.ndarray, axes_local: np.ndarray, half: np.ndarray, pos: np.ndarray, rot: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Place body-frame boxes in the world: x_world = pos + rot @ x_body.

    All arguments broadcast over leading axes (one box per body, or many bodies at once).

    Args:
        centre_local: (..., 3) box centres in the body frame.
        axes_local: (..., 3, 3) box axes (columns) in the body frame.
        half: (..., 3) half extents (unchanged by a rigid motion).
        pos: (..., 3) body origin in the world.
        rot: (..., 3, 3) body-to-world rotation.
    Returns:
        (centre_world (..., 3), axes_world (..., 3, 3), half (..., 3)).
    """
    centre = pos + np.einsum("...ij,...j->...i", rot, centre_local)
    axes = np.einsum("...ij,...jk->...ik", rot, axes_local)
    return centre, axes, np.asarray(half, dtype=float)


def obb_overlap(
    cA: np.ndarray,
    RA: np.ndarray,
    hA: np.ndarray,
    cB: np.ndarray,
    RB: np.ndarray,
    hB: np.ndarray,
    margin: float = 0.0,
    eps: float = EPS,
) -> np.ndarray:
    """Whether box pairs overlap (or come within ``margin``): the 15-axis separating-axis test.

    The boxes are disjoint iff their projections are disjoint on one of the 15 axes A_i, B_j,
    A_i x B_j (Ericson §4.4.1). In A's frame, with R = A^T B, t = A^T (cB - cA) and
    |R| + eps, the tests are
      L = A_i:        |t_i| > a_i + sum_j b_j |R_ij|
      L = B_j:        |t . R_:j| > sum_i a_i |R_ij| + b_j
      L = A_i x B_j:  |t_i2 R_i1j - t_i1 R_i2j| > a_i1 |R_i2j| + a_i2 |R_i1j| + b_j1 |R_ij2| + b_j2 |R_ij1|
    ((i, i1, i2) and (j, j1, j2) cyclic). A margin m adds m |L| to the right side (|L| = 1 for
    face axes, sqrt(1 - R_ij^2) for edge axes), i.e. the boxes are tested for projections
    closer than m on every axis.

    Touching boxes overlap. With margin = 0 the answer is exact up to the epsilon, which makes
    near-parallel edge pairs conservative (their edge axes never separate). With margin > 0 it
    is conservative: every pair at distance <= margin is reported; a pair at a larger distance
    may be reported too (the largest projected gap on the 15 axes can be smaller than the
    distance, e.g. corner to corner), but never one whose boxes, each grown by margin on every
    side, are disjoint.

    Args:
        cA, cB: (k, 3) box centres (any leading shape broadcasts; the last axes are as stated).
        RA, RB: (k, 3, 3) box axes as columns.
        hA, hB: (k, 3) half extents.
        margin: distance below which boxes count as overlapping, >= 0.
        eps: added to |R| against round-off for near-parallel edges.
    Returns:
        (k,) bool.
    """
    a = np.asarray(hA, dtype=float)
    b = np.asarray(hB, dtype=float)
    R = np.einsum("...ji,...jk->...ik", RA, RB)
    t = np.einsum("...ji,...j->...i", RA, np.asarray(cB, dtype=float) - np.asarray(cA, dtype=float))
    absR = np.abs(R) + eps
    # face axes of A (3) and of B (3)
    sep = np.any(np.abs(t) > a + np.einsum("...ij,...j->...i", absR, b) + margin, axis=-1)
    tB = np.einsum("...i,...ij->...j", t, R)
    sep |= np.any(np.abs(tB) > np.einsum("...i,...ij->...j", a, absR) + b + margin, axis=-1)
    # the 9 edge axes A_i x B_j, all at once through cyclic index tables
    i = np.repeat(np.arange(3), 3)
    j = np.tile(np.arange(3), 3)
    i1, i2, j1, j2 = (i + 1) % 3, (i + 2) % 3, (j + 1) % 3, (j + 2) % 3
    lhs = np.abs(t[..., i2] * R[..., i1, j] - t[..., i1] * R[..., i2, j])
    ra = a[..., i1] * absR[..., i2, j] + a[..., i2] * absR[..., i1, j]
    rb = b[..., j1] * absR[..., i, j2] + b[..., j2] * absR[..., i, j1]
    length = np.sqrt(np.maximum(0.0, 1.0 - R[..., i, j] ** 2))
    sep |= np.any(lhs > ra + rb + margin * length, axis=-1)
    return ~sep
