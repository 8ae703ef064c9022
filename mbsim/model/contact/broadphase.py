"""Broad phase of rigid contact: world bounding boxes of the shapes and the candidate pairs whose
boxes overlap (sort and sweep), all vectorised with numpy.

Bounded shapes get an axis-aligned box (each shape type's ``aabb_half``, mbsim.model.shapes); the sweep sorts
the boxes' lower bounds along the axis of largest spread, finds each box's run of later boxes
that start before it ends (``searchsorted``), expands the runs into index pairs (``repeat``)
and keeps those that overlap on the other axes too (Baraff's sort and sweep, vectorised as in
brax's and MJX's broad phases). Unbounded shapes (planes, lines) are tested apart: a box is a
candidate of a half-space when its lowest corner along the normal is within the margin.

This module knows geometry only; which bodies may touch (mbsim.model.contact.pairs) is applied
by the detector.
"""

from __future__ import annotations

import numpy as np


def sweep_and_prune(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All pairs of overlapping boxes (closed intervals: touching boxes overlap).

    The sweep axis is the one along which the sorted intervals overlap least (fewest pairs to
    expand), found with one argsort and searchsorted per axis.

    Args:
        lo, hi: (n, d) lower and upper corners.
    Returns:
        (a, b): (k,) indices with a != b, each unordered pair once.
    """
    n, d = lo.shape
    empty = np.zeros(0, dtype=np.int64)
    if n < 2:
        return empty, empty
    first = np.arange(1, n + 1)
    best = None
    for axis in range(d):
        order = np.argsort(lo[:, axis], kind="stable")
        start = lo[order, axis]
        # box p (sorted) overlaps along the axis the later boxes p+1 .. end-1, whose starts are <= its end
        count = np.maximum(np.searchsorted(start, hi[order, axis], side="right") - first, 0)
        total = int(count.sum())
        if best is None or total < best[0]:
            best = (total, axis, order, count)
    total, axis, order, count = best
    if total == 0:
        return empty, empty
    p = np.repeat(np.arange(n), count)
    q = np.arange(total) - np.repeat(np.cumsum(count) - count - first, count)
    # the other axes, one at a time, compacting the survivors (contiguous columns gather fastest)
    for k in range(d):
        if k == axis:
            continue
        lo_k, hi_k = lo[order, k], hi[order, k]
        keep = (lo_k[p] <= hi_k[q]) & (lo_k[q] <= hi_k[p])
        p, q = p[keep], q[keep]
    return order[p], order[q]


def all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair of n boxes (the brute-force reference of ``sweep_and_prune``)."""
    a, b = np.triu_indices(n, k=1)
    return a.astype(np.int64), b.astype(np.int64)


def halfspace_overlap(
    point: np.ndarray, normal: np.ndarray, centre: np.ndarray, half: np.ndarray, margin: float
) -> np.ndarray:
    """Whether boxes reach within ``margin`` of half-spaces: the lowest corner along the normal.

    Args:
        point, normal: (k, d) a point of the boundary and its unit outward normal.
        centre, half: (k, d) box centres and half extents.
    Returns:
        (k,) bool.
    """
    lowest = np.einsum("ki,ki->k", normal, centre - point) - np.einsum("ki,ki->k", np.abs(normal), half)
    return lowest < margin
