"""Broad phase of rigid contact: world bounding boxes of the shapes and the candidate pairs whose
boxes overlap (sort and sweep).

Bounded shapes get an axis-aligned box per shape type (``AABB_HALF_EXTENTS``, vectorised with
numpy); the sweep (compiled: mbsim.model.contact.broadphase_kernels) sorts the boxes' lower
bounds along each axis, finds each box's run of later boxes that start before it ends (binary
search), sweeps the axis with the fewest such pairs and keeps those that overlap on the other
axes too (Baraff's sort and sweep). Unbounded shapes (planes, lines) are tested apart: a box is
a candidate of a half-space when its lowest corner along the normal is within the margin
(``candidates``, with the bodies' contact entries).

This module knows geometry only; which bodies may touch (mbsim.model.contact.pairs) is applied
by the detector.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# the sweep and the candidates of a detection, compiled
from mbsim.model.contact.broadphase_kernels import candidates as candidates
from mbsim.model.contact.broadphase_kernels import sweep_and_prune as sweep_and_prune

UNBOUNDED = frozenset({"plane", "line"})


def _round(pos, rot, param):
    return np.repeat(param[:, :1], pos.shape[1], axis=1)


def _box(pos, rot, param):
    d = pos.shape[1]
    return np.einsum("mij,mj->mi", np.abs(rot), param[:, :d])


def _capsule(pos, rot, param):
    return np.abs(rot[:, :, 2]) * param[:, 1:2] + param[:, :1]


def _cylinder(pos, rot, param):
    u = rot[:, :, 2]
    return np.abs(u) * param[:, 1:2] + param[:, :1] * np.sqrt(np.maximum(0.0, 1.0 - u * u))


# half extents (m, d) of the world AABB of m shapes of a type, from (pos, rot, param) as in
# mbsim.model.contact.narrowphase.Side (rot is None for the round types)
AABB_HALF_EXTENTS: dict[str, Callable[[np.ndarray, np.ndarray | None, np.ndarray], np.ndarray]] = {
    "sphere": _round,
    "circle": _round,
    "point": _round,
    "box": _box,
    "rectangle": _box,
    "capsule": _capsule,
    "cylinder": _cylinder,
    "mesh": _box,  # param: half extents of a box about the shape origin that holds the mesh
}


def all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair of n boxes (the brute-force reference of ``sweep_and_prune``)."""
    a, b = np.triu_indices(n, k=1)
    return a.astype(np.int64), b.astype(np.int64)
