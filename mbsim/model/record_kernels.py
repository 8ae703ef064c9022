"""The diagnostics of a recorded row, computed in compiled code (mbsim.diagnostics.record_row).

``row_into`` writes one row of the result file as flat columns, in the order of
mbsim.diagnostics.row_columns: time, q, v, body positions, velocities, orientations (3D) or
angles (2D), angular velocities (world axes), the energies, the constraint violations, the
contact and solver columns, the quaternion norm error (3D), the joint reactions and the drive
forces. It reads the state's frames, forces, constraint values and multipliers from the
FlatData, as the right-hand side at that state left them (mbsim.solvers.ode_kernels calls it
right after that evaluation), and allocates nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

import mbsim.model.kernel_cache  # noqa: F401  (before the @njit(cache=True) definitions below)
from mbsim.model.step_kernels import row_dot

_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "_nrt": False}


@njit(**_JIT)
def kinetic_energy(F, v):
    """1/2 v^T M v, body by body."""
    w = 6 if F.dim == 3 else 3
    total = 0.0
    for b in range(F.nbody):
        s = 0.0
        for a in range(w):
            for m in range(w):
                s += v[w * b + a] * F.body_mass_block[b, a, m] * v[w * b + m]
        total += s
    return 0.5 * total


@njit(**_JIT)
def potential_energy(F, D):
    """Gravity, spring-dampers and joint springs (the spring deflections already in D)."""
    d = F.dim
    pot = 0.0
    for b in range(F.nbody):
        for a in range(d):
            pot -= F.body_weight[b, a] * D.pos[b, a]
    pot += element_potential(F, D)
    for r in range(F.nspr):
        pot += 0.5 * F.spr_stiffness[r] * D.spr_value[r] * D.spr_value[r]
    return pot


@njit(**_JIT)
def element_potential(F, D):
    """The spring-dampers' elastic energy at the frames in D."""
    d = F.dim
    pot = 0.0
    R = D.rot
    for e in range(F.sd_k.shape[0]):
        b1, b2 = F.sd_b1[e], F.sd_b2[e]
        length2 = 0.0
        for a in range(d):
            r1 = 0.0
            r2 = 0.0
            for m in range(d):
                r1 += R[b1, a, m] * F.sd_s1[e, m]
                r2 += R[b2, a, m] * F.sd_s2[e, m]
            x = D.pos[b2, a] + r2 - D.pos[b1, a] - r1
            length2 += x * x
        stretch = np.sqrt(length2) - F.sd_rest[e]
        pot += 0.5 * F.sd_k[e] * stretch * stretch
    return pot


@njit(**_JIT)
def reactions_into(F, D, out, start):
    """Joint reactions (force and torque about the joint point in world axes on the reported
    body; 2D fx, fy, torque) and drive forces -lambda of the driven rows, from J and lambda in
    D, into out[start:]; returns the column after them (mbsim.diagnostics.reactions)."""
    nb, d = F.nbody, F.dim
    w = 6 if d == 3 else 3
    gen = D.joint_gen
    for j in range(gen.shape[0]):
        for m in range(w):
            gen[j, m] = 0.0
    for r in range(F.nc):  # -J^T lambda on each joint's reported body
        b = F.rx_body[r]
        if b < nb:
            for m in range(w):
                gen[F.rx_joint[r], m] -= D.J[r, w * b + m] * D.lam[r]
    c = start
    R = D.rot
    for j in range(gen.shape[0]):
        b = F.joint_body[j]
        if d == 3:
            ox = R[b, 0, 0] * F.joint_point[j, 0] + R[b, 0, 1] * F.joint_point[j, 1] + R[b, 0, 2] * F.joint_point[j, 2]
            oy = R[b, 1, 0] * F.joint_point[j, 0] + R[b, 1, 1] * F.joint_point[j, 1] + R[b, 1, 2] * F.joint_point[j, 2]
            oz = R[b, 2, 0] * F.joint_point[j, 0] + R[b, 2, 1] * F.joint_point[j, 1] + R[b, 2, 2] * F.joint_point[j, 2]
            off = (ox, oy, oz)
            fx, fy, fz = gen[j, 0], gen[j, 1], gen[j, 2]
            out[c], out[c + 1], out[c + 2] = fx, fy, fz
            for a in range(3):
                t = R[b, a, 0] * gen[j, 3] + R[b, a, 1] * gen[j, 4] + R[b, a, 2] * gen[j, 5]
                if a == 0:
                    t -= off[1] * fz - off[2] * fy
                elif a == 1:
                    t -= off[2] * fx - off[0] * fz
                else:
                    t -= off[0] * fy - off[1] * fx
                out[c + 3 + a] = t
            c += 6
        else:
            ox = R[b, 0, 0] * F.joint_point[j, 0] + R[b, 0, 1] * F.joint_point[j, 1]
            oy = R[b, 1, 0] * F.joint_point[j, 0] + R[b, 1, 1] * F.joint_point[j, 1]
            fx, fy = gen[j, 0], gen[j, 1]
            out[c], out[c + 1] = fx, fy
            out[c + 2] = gen[j, 2] - (ox * fy - oy * fx)
            c += 3
    for k in range(F.driven_rows.shape[0]):
        out[c] = -D.lam[F.driven_rows[k]]
        c += 1
    return c


@njit(**_JIT)
def state_columns_into(F, D, t, q, v, out):
    """A row's first columns: time, q, v, body positions and velocities (from the frames in D);
    returns the column after them (the orientations of a 3D row come next)."""
    nb, d = F.nbody, F.dim
    nq, nv = q.shape[0], v.shape[0]
    c = 0
    out[c] = t
    c += 1
    for k in range(nq):
        out[c + k] = q[k]
    c += nq
    for k in range(nv):
        out[c + k] = v[k]
    c += nv
    for b in range(nb):
        for a in range(d):
            out[c + d * b + a] = D.pos[b, a]
    c += d * nb
    for b in range(nb):
        for a in range(d):
            out[c + d * b + a] = D.vel[b, a]
    return c + d * nb


@njit(**_JIT)
def rotation_columns_into(F, D, out, c):
    """After a 3D row's orientations: the angular velocities (world axes); in 2D the angles, then
    the angular velocities. Returns the column after them."""
    nb = F.nbody
    if F.dim == 3:
        for b in range(nb):
            for a in range(3):
                out[c + 3 * b + a] = D.omega[b, a]
        return c + 3 * nb
    for b in range(nb):
        out[c + b] = D.angle[b]
    c += nb
    for b in range(nb):
        out[c + b] = D.omega2[b]
    return c + nb


@njit(**_JIT)
def row_into(F, D, t, q, v, work, iterations, h, out):
    """One recorded row of the state (t, q, v, work) into out (the columns of the module
    docstring); ``iterations`` and ``h`` are those of the step that reached it."""
    nb, nc, d = F.nbody, F.nc, F.dim
    c = state_columns_into(F, D, t, q, v, out)
    if d == 3:
        for b in range(nb):
            for a in range(4):
                out[c + 4 * b + a] = q[7 * b + 3 + a]
        c += 4 * nb
    c = rotation_columns_into(F, D, out, c)
    kinetic = kinetic_energy(F, v)
    potential = potential_energy(F, D)
    pos_violation, vel_violation = 0.0, 0.0
    for r in range(nc):
        pos_violation = max(pos_violation, abs(D.phi[r]))
        vel_violation = max(vel_violation, abs(row_dot(F, D.J, r, v) + D.phi_t[r]))
    total = kinetic + potential
    for x in (kinetic, potential, total, work, pos_violation, vel_violation, 0.0, 0.0, iterations, h):
        out[c] = x
        c += 1
    if d == 3:
        err = 0.0
        for b in range(nb):
            o = 7 * b + 3
            n = np.sqrt(q[o] * q[o] + q[o + 1] * q[o + 1] + q[o + 2] * q[o + 2] + q[o + 3] * q[o + 3])
            err = max(err, abs(n - 1.0))
        out[c] = err
        c += 1
    reactions_into(F, D, out, c)
