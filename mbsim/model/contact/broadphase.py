"""Broad phase of rigid contact: world bounding boxes of the shapes and the candidate pairs whose
boxes overlap (sort and sweep).

Bounded shapes get an axis-aligned box (each shape type's ``aabb_half``, mbsim.model.shapes); the
sweep (compiled: mbsim.model.contact.broadphase_kernels) sorts the boxes' lower bounds along each
axis, finds each box's run of later boxes that start before it ends (binary search), sweeps the
axis with the fewest such pairs and keeps those that overlap on the other axes too (Baraff's sort
and sweep). Unbounded shapes (planes, lines) are tested apart: a box is a candidate of a
half-space when its lowest corner along the normal is within the margin (``candidates``, with the
bodies' contact entries).

This module knows geometry only; which bodies may touch (mbsim.model.contact.pairs) is applied
by the detector.
"""

from __future__ import annotations

import numpy as np

# the sweep and the candidates of a detection, compiled
from mbsim.model.contact.broadphase_kernels import candidates as candidates
from mbsim.model.contact.broadphase_kernels import sweep_and_prune as sweep_and_prune


def all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair of n boxes (the brute-force reference of ``sweep_and_prune``)."""
    a, b = np.triu_indices(n, k=1)
    return a.astype(np.int64), b.astype(np.int64)
