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
from mbsim.model.model import Frames, Model


def contact_rows(model: Model, frames: Frames, batch: ContactBatch):
    """Normal and tangent rows (J_N (k, nv), J_T (k (d-1), nv)), dense or sparse like the model.
    Tangents: in 3D t1 = n x (a helper axis not along n) normalised, t2 = n x t1; in 2D the
    normal turned by +90 degrees. The tangent rows come ordered by tangent, then contact."""
    m, d, w = model, model.dimension, model.body_width
    k = len(batch.gap)
    n = batch.normal
    if d == 3:  # tangents: n x (a helper axis not along n), then n x t1
        helper = np.where(np.abs(n[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
        t1 = np.cross(n, helper)
        t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
        t2 = np.cross(n, t1)
        directions = [n, t1, t2]
    else:
        directions = [n, np.stack((-n[:, 1], n[:, 0]), axis=1)]
    ri = batch.point_i - frames.pos[batch.body_i]
    rj = batch.point_j - frames.pos[batch.body_j]
    blocks_i, blocks_j = [], []
    for u in directions:
        if d == 3:
            rot_i = np.einsum("kji,kj->ki", frames.rot[batch.body_i], np.cross(ri, u))
            rot_j = np.einsum("kji,kj->ki", frames.rot[batch.body_j], np.cross(rj, u))
        else:
            rot_i = (ri[:, 0] * u[:, 1] - ri[:, 1] * u[:, 0])[:, None]
            rot_j = (rj[:, 0] * u[:, 1] - rj[:, 1] * u[:, 0])[:, None]
        blocks_i.append(-np.concatenate((u, rot_i), axis=1))
        blocks_j.append(np.concatenate((u, rot_j), axis=1))
    nrows = k * len(directions)
    bi = np.tile(batch.body_i, len(directions))
    bj = np.tile(batch.body_j, len(directions))
    Bi, Bj = np.concatenate(blocks_i), np.concatenate(blocks_j)
    rows = np.arange(nrows)
    data, r_idx, c_idx = [], [], []
    for body, block in ((bi, Bi), (bj, Bj)):
        keep = body < m.nbody
        cols = body[keep][:, None] * w + np.arange(w)
        data.append(block[keep].ravel())
        r_idx.append(np.repeat(rows[keep], w))
        c_idx.append(cols.ravel())
    import scipy.sparse as sp  # here, not at the top: mbsim.model.sparse

    J = sp.csr_matrix((np.concatenate(data), (np.concatenate(r_idx), np.concatenate(c_idx))), shape=(nrows, m.nv))
    if not m.sparse:
        J = J.toarray()
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
