"""Generalized forces and energies of a Model at a state.

Equations of motion in mbsim's coordinates (see mbsim.model.model):
``M v_dot = Q(q, v, t) - J^T lambda`` with the constant block-diagonal mass matrix
M = diag(m I, I_body) per body, and Q holding gravity, force elements, joint springs and,
in 3D, the gyroscopic term ``-omega x (I omega)`` (body axes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbsim.model.constraints import assemble_jacobian, evaluate_groups
from mbsim.model.model import Frames, Model
from mbsim.model.spatial import cross


@dataclass
class ForceValues:
    """Q (nv,), the power of the non-conservative forces (W) and the potential energy (J)."""

    q_force: np.ndarray
    power_nc: float
    potential: float


def generalized_forces(
    model: Model, frames: Frames, v: np.ndarray, t: float, with_potential: bool = True
) -> ForceValues:
    """All applied and inertial generalized forces at one state.

    ``with_potential=False`` skips the gravity potential (the right-hand side does not need it).
    """
    nb, d, w = model.nbody, model.dimension, model.body_width
    Q = np.zeros((nb + 1, w))
    Q[:nb, :d] = model.weight
    potential = -float(model.body_mass @ (frames.pos[:nb] @ model.gravity)) if with_potential else 0.0
    if d == 3:
        omega = frames.omega_body[:nb]
        Q[:nb, 3:] = -cross(omega, np.einsum("nij,nj->ni", model.body_inertia, omega))
    power_nc = 0.0
    v_ext = np.zeros((nb + 1, w))
    v_ext[:nb] = v.reshape(nb, w)
    for group in model.forces:
        q_cons, q_nc, pot = group.evaluate(frames, t)
        potential += pot
        if q_cons is not None:
            Q += q_cons
        if q_nc is not None:
            Q += q_nc
            power_nc += float(np.sum(q_nc[:nb] * v_ext[:nb]))
    Qf = Q[:nb].reshape(-1)
    for springs in model.springs:
        deflection, _, _, blocks = evaluate_groups(springs.groups, frames, t, springs.ncoord, d)
        J = assemble_jacobian(blocks, springs.ncoord, nb, w, model.sparse)
        rate = J @ v
        damping_force = springs.damping * rate
        Qf = Qf - J.T @ (springs.stiffness * deflection + damping_force)
        potential += float(0.5 * np.sum(springs.stiffness * deflection**2))
        power_nc -= float(damping_force @ rate)
    return ForceValues(Qf, power_nc, potential)


def kinetic_energy(model: Model, v: np.ndarray) -> float:
    """1/2 v^T M v."""
    vb = v.reshape(model.nbody, model.body_width)
    return 0.5 * float(np.einsum("ni,nij,nj->", vb, model.mass_diag_blocks, vb))
