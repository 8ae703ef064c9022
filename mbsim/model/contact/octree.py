"""Octree over a slave body's sample points, and the query that skips whole cells far from a
master body's signed distance field (SDF): the local detection stage of
papers/sdf-octree-contact-dynamics.txt §2.1 (Figs. 2-3).

The tree is built once in the slave body's frame and stored as flat arrays in breadth-first
order (no Python object per node); both the build and the query run level by level,
vectorised over all nodes of a level. The query is a conservative filter: it returns candidate
points, and the caller evaluates the SDF at them to get the contacts. It is not an SDF and
knows nothing of bodies; pure numerics, imports nothing from mbsim.

Skip rule: a signed distance d is 1-Lipschitz, so every point p of a cell whose points lie
within ``node_radius`` r of its centre c has d(p) >= d(c) - r. If d(c) > r + margin, no point of
the cell is within the margin and the cell is skipped with its whole subtree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# octant offsets: bit k of the octant index is 1 when the child lies on the + side of axis k
_OCTANT_SIGN = np.array([[1.0 if (o >> k) & 1 else -1.0 for k in range(3)] for o in range(8)])

Transform = np.ndarray | tuple[np.ndarray, np.ndarray] | None


def transform_points(points: np.ndarray, transform: Transform) -> np.ndarray:
    """Map (m, 3) points by a rigid transform: a 4x4 matrix T (x' = T[:3,:3] x + T[:3,3]), a pair
    (R (3, 3), t (3,)) (x' = R x + t), or None (identity)."""
    if transform is None:
        return points
    if isinstance(transform, tuple):
        R, t = transform
    else:
        T = np.asarray(transform, dtype=float)
        if T.shape != (4, 4):
            raise ValueError(f"expected a 4x4 transform or a pair (R, t), got shape {T.shape}")
        R, t = T[:3, :3], T[:3, 3]
    return points @ np.asarray(R, dtype=float).T + np.asarray(t, dtype=float)


def distance_in_frame(distance: Callable[[np.ndarray], np.ndarray], transform: Transform):
    """The signed distance of a master body as a function of slave-frame points: x -> distance(T x).

    Args:
        distance: callable (m, 3) master-frame points -> (m,) signed distances.
        transform: slave-to-master transform (see ``transform_points``).
    """
    return lambda points: distance(transform_points(points, transform))


@dataclass(frozen=True)
class Octree:
    """A point octree in flat arrays, nodes in breadth-first order (node 0 is the root).

    Attributes:
        points: (n, 3) the sample points, in the slave body's frame.
        point_order: (n,) permutation of point indices; each node's points are
            ``point_order[node_point_start : node_point_start + node_point_count]``.
        node_centre: (nnode, 3) cell centres (cubic cells; the root is the points' bounding cube).
        node_half: (nnode,) cell half edge length.
        node_radius: (nnode,) radius about the centre of the node's points: their largest distance
            from the centre, at most the half-diagonal sqrt(3) * half (tighter, so more cells
            are skipped; any radius >= that distance keeps the query exact).
        node_child_start, node_child_count: (nnode,) the children are the nodes
            ``node_child_start .. + node_child_count`` (only non-empty octants; count 0 at leaves).
        node_point_start, node_point_count: (nnode,) range of the node's points in ``point_order``.
        level_start: (nlevel + 1,) nodes of level l are ``level_start[l] : level_start[l + 1]``.
    """

    points: np.ndarray
    point_order: np.ndarray
    node_centre: np.ndarray
    node_half: np.ndarray
    node_radius: np.ndarray
    node_child_start: np.ndarray
    node_child_count: np.ndarray
    node_point_start: np.ndarray
    node_point_count: np.ndarray
    level_start: np.ndarray

    @property
    def nnode(self) -> int:
        return len(self.node_half)

    @property
    def is_leaf(self) -> np.ndarray:
        return self.node_child_count == 0

    @classmethod
    def build(cls, points: np.ndarray, leaf_size: int = 16, max_depth: int = 12) -> Octree:
        """Split cells into their non-empty octants until a cell holds at most ``leaf_size``
        points or is at depth ``max_depth`` (the root is depth 0), one vectorised pass per level.

        Args:
            points: (n, 3) sample points in the slave body's frame, n >= 1.
            leaf_size: largest number of points of a leaf above max_depth, >= 1.
            max_depth: deepest level; cells there are leaves whatever their count.
        """
        points = np.ascontiguousarray(points, dtype=float)
        if points.ndim != 2 or points.shape[1] != 3 or len(points) == 0:
            raise ValueError(f"expected points of shape (n, 3) with n >= 1, got {points.shape}")
        if leaf_size < 1 or max_depth < 0:
            raise ValueError(f"expected leaf_size >= 1 and max_depth >= 0, got {leaf_size} and {max_depth}")
        n = len(points)
        lo, hi = points.min(axis=0), points.max(axis=0)
        order = np.arange(n)
        # per level: centres, halves, point starts and counts; children filled in when split
        centre = [0.5 * (lo + hi)[None]]
        half = [np.array([0.5 * float(np.max(hi - lo))])]
        pstart = [np.array([0])]
        pcount = [np.array([n])]
        cstart, ccount = [], []
        total = 1
        for depth in range(max_depth + 1):
            c, h, s, m = centre[-1], half[-1], pstart[-1], pcount[-1]
            split = np.flatnonzero(m > leaf_size) if depth < max_depth else np.zeros(0, dtype=np.int64)
            cs = np.zeros(len(h), dtype=np.int64)
            cc = np.zeros(len(h), dtype=np.int64)
            if len(split) == 0:
                cstart.append(cs)
                ccount.append(cc)
                break
            # positions in point_order of the points of the split cells, cell by cell
            sm = m[split]
            pos = np.repeat(s[split] - np.cumsum(sm) + sm, sm) + np.arange(int(sm.sum()))
            cell = np.repeat(np.arange(len(split)), sm)
            bits = points[order[pos]] >= c[split][cell]
            octant = bits[:, 0] + 2 * bits[:, 1] + 4 * bits[:, 2]
            key = cell * 8 + octant
            # pos is ascending and grouped by cell, so sorting by key keeps each cell in its range
            order[pos] = order[pos][np.argsort(key, kind="stable")]
            counts = np.bincount(key, minlength=8 * len(split)).reshape(-1, 8)
            parent, octs = np.nonzero(counts)
            child_count = counts[parent, octs]
            # child point starts: parent start + points of the earlier octants of the parent
            before = np.cumsum(counts, axis=1) - counts
            child_pstart = s[split][parent] + before[parent, octs]
            child_half = 0.5 * h[split][parent]
            child_centre = c[split][parent] + child_half[:, None] * _OCTANT_SIGN[octs]
            per_parent = counts.astype(bool).sum(axis=1)
            cs[split] = total + np.cumsum(per_parent) - per_parent
            cc[split] = per_parent
            cstart.append(cs)
            ccount.append(cc)
            total += len(parent)
            centre.append(child_centre)
            half.append(child_half)
            pstart.append(child_pstart)
            pcount.append(child_count)
        sizes = np.array([len(h) for h in half])
        node_centre = np.concatenate(centre)
        node_point_start = np.concatenate(pstart)
        node_point_count = np.concatenate(pcount)
        # radius: largest distance of a node's points from its centre, level by level
        node_radius = np.zeros(total)
        level_start = np.concatenate([[0], np.cumsum(sizes)])
        for l0, l1 in zip(level_start[:-1], level_start[1:], strict=True):
            s, m = node_point_start[l0:l1], node_point_count[l0:l1]
            pos = np.repeat(s - np.cumsum(m) + m, m) + np.arange(int(m.sum()))
            node = np.repeat(np.arange(l0, l1), m)
            dist = np.linalg.norm(points[order[pos]] - node_centre[node], axis=1)
            node_radius[l0:l1] = np.maximum.reduceat(dist, np.cumsum(m) - m)
        return cls(
            points=points,
            point_order=order,
            node_centre=node_centre,
            node_half=np.concatenate(half),
            node_radius=node_radius,
            node_child_start=np.concatenate(cstart),
            node_child_count=np.concatenate(ccount),
            node_point_start=node_point_start,
            node_point_count=node_point_count,
            level_start=level_start,
        )

    def query(
        self,
        distance: Callable[[np.ndarray], np.ndarray],
        margin: float = 0.0,
        transform: Transform = None,
        return_stats: bool = False,
    ):
        """Candidate points within ``margin`` of the master body: every point p with
        distance(T p) <= margin is returned (a superset; the caller evaluates the SDF at them).

        Breadth-first over the levels, one call of ``distance`` per level on the centres of that
        level's live nodes: a node is kept if distance(T centre) <= node_radius + margin (module
        docstring); kept inner nodes pass on their children, kept leaves return all their points.

        Args:
            distance: callable (m, 3) points in the MASTER's frame -> (m,) signed distances
                (negative inside). It must be 1-Lipschitz (a true distance); for an interpolated
                grid SDF whose slope can exceed 1, add the excess over the cell radius to margin.
            margin: contact distance, >= 0 (0 finds the points inside the master).
            transform: slave-to-master rigid transform of the points: 4x4 or (R, t); None is the
                identity (the points are already in the master's frame).
            return_stats: also return the number of distance evaluations (node centres).
        Returns:
            (k,) ascending indices into ``points``; with ``return_stats``, (indices, evaluations).
        """
        frontier = np.zeros(1, dtype=np.int64)
        leaves = []
        evaluations = 0
        while len(frontier):
            d = np.asarray(distance(transform_points(self.node_centre[frontier], transform)), dtype=float)
            evaluations += len(frontier)
            live = frontier[d <= self.node_radius[frontier] + margin]
            count = self.node_child_count[live]
            leaves.append(live[count == 0])
            inner = live[count > 0]
            count = count[count > 0]
            frontier = np.repeat(self.node_child_start[inner] - np.cumsum(count) + count, count) + np.arange(
                int(count.sum())
            )
        leaf = np.concatenate(leaves)
        s, m = self.node_point_start[leaf], self.node_point_count[leaf]
        pos = np.repeat(s - np.cumsum(m) + m, m) + np.arange(int(m.sum()))
        found = np.sort(self.point_order[pos])
        return (found, evaluations) if return_stats else found
