"""Contact Jacobians of a ContactBatch, and how far bodies can reach: shared by the rigid-contact
methods (timestepping, event_driven).

Rows of contact c between body i (ground or body) and body j, for a world direction u (the normal
n, or a tangent): the relative velocity of the two contact points along u,
u . (v_j + omega_j x r_j - v_i - omega_i x r_i), with r the contact point from each centre of mass
(in 3D the rotational part is taken in body axes, as the model's velocities are).
"""

from __future__ import annotations

import numpy as np

from mbsim.model.contact.detect import ContactBatch
from mbsim.model.contact.jacobian_kernels import contact_rows_csr as _rows_kernel
from mbsim.model.model import Frames, Model


def contact_rows_csr(model: Model, frames: Frames, batch: ContactBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All k d rows of a batch (normals, then tangents by tangent, then contact) as CSR arrays
    (indptr, indices, data), each row its bodies' whole width-w blocks, the lower body first
    (compiled: mbsim.model.contact.jacobian_kernels, whose docstring gives the rows and tangents)."""
    d, w = model.dimension, model.body_width
    nrows = len(batch.gap) * d
    indptr = np.empty(nrows + 1, dtype=np.int64)
    indices = np.empty(2 * w * nrows, dtype=np.int64)
    data = np.empty(2 * w * nrows)
    count = _rows_kernel(
        np.ascontiguousarray(batch.body_i, dtype=np.int64), np.ascontiguousarray(batch.body_j, dtype=np.int64),
        np.ascontiguousarray(batch.point_i, dtype=float), np.ascontiguousarray(batch.point_j, dtype=float),
        np.ascontiguousarray(batch.normal, dtype=float), np.ascontiguousarray(frames.pos, dtype=float),
        np.ascontiguousarray(frames.rot, dtype=float), model.nbody, indptr, indices, data,
    )  # fmt: skip
    return indptr, indices[:count], data[:count]


def contact_rows(model: Model, frames: Frames, batch: ContactBatch):
    """Normal and tangent rows (J_N (k, nv), J_T (k (d-1), nv)), dense or sparse like the model
    (contact_rows_csr). The tangent rows come ordered by tangent, then contact."""
    m = model
    k = len(batch.gap)
    nrows = k * m.dimension
    indptr, indices, data = contact_rows_csr(model, frames, batch)
    if m.sparse:
        import scipy.sparse as sp  # here, not at the top: mbsim.model.sparse

        J = sp.csr_matrix((data, indices, indptr), shape=(nrows, m.nv))
        return J[:k], J[k:]
    J = np.zeros((nrows, m.nv))
    J[np.repeat(np.arange(nrows), np.diff(indptr)), indices] = data
    return J[:k], J[k:]


def bounding_radii(model: Model) -> np.ndarray:
    """Per body, a radius around the centre of mass (the body frame's origin) that holds all its
    shapes (m): the largest |shape origin| + the shape's own bounding radius (``shape_rbound``)."""
    out = np.zeros(model.nbody)
    on_body = model.shape_body < model.nbody
    reach_of = np.linalg.norm(model.shape_pos[on_body], axis=1) + model.shape_rbound[on_body]
    np.maximum.at(out, model.shape_body[on_body], reach_of)
    return out


def reach(model: Model, radii: np.ndarray, v: np.ndarray) -> float:
    """Largest speed of any point of any body: max over bodies of |v_com| + |omega| R (m/s)."""
    nb, d, w = model.nbody, model.dimension, model.body_width
    vb = v.reshape(nb, w)
    omega = np.linalg.norm(vb[:, d:], axis=1)
    return float(np.max(np.linalg.norm(vb[:, :d], axis=1) + omega * radii, initial=0.0))
