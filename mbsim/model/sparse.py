"""Sparse matrices without paying for scipy at start-up.

Importing scipy (its ``_lib`` machinery) costs every command about 0.1 s; a model that is not
sparse never needs it, so scipy.sparse and scipy.linalg are imported where they are used, and
code that only asks "is this sparse?" asks here: nothing can be a scipy.sparse matrix before
scipy.sparse was imported.
"""

from __future__ import annotations

import sys

import numpy as np


def is_sparse(x: object) -> bool:
    """Whether ``x`` is a scipy.sparse matrix or array."""
    module = sys.modules.get("scipy.sparse")
    return module is not None and module.issparse(x)


def block_diagonal(blocks: np.ndarray, sparse: bool):
    """The block-diagonal matrix of ``blocks`` (n, w, w): dense, or scipy.sparse CSR."""
    if sparse:
        import scipy.sparse as sp

        return sp.block_diag(list(blocks), format="csr")
    n, w, _ = blocks.shape
    out = np.zeros((n * w, n * w))
    for k in range(n):
        out[k * w : (k + 1) * w, k * w : (k + 1) * w] = blocks[k]
    return out
