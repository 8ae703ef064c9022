"""Compiled (Cython) steps of method ``recursive`` (mbsim.solvers.recursive) over flat arrays.

The method's right-hand side -- the kinematics sweep, the force elements (spring-dampers and
applied loads, with their expressions compiled: mbsim.model.step_kernels), the joint springs and
dampers, and the articulated-body sweep (mbsim.solvers.recursive.soa_kernels) -- is a ``TreeSystem``, the
System of the integrators written once (mbsim.solvers.ode.integrate: the fixed steps and the
embedded pairs RK45 / DOP853 with scipy's step control). A step runs them, then rescales the
quaternions, exactly as the Python path does, writing into the buffers of a ``TreeData`` and the
integrator's ``Work`` and allocating nothing. Python is entered once per block of steps (up to
the next recorded row), not per step.

Scenes with drives (the prescribed joints and their impulsive kinks, recursive.py
``_drive_velocity_step``) and scipy's implicit integrators (Radau, BDF) step through the Python path.
"""

import numpy as np

from libc.math cimport fabs, isfinite, sqrt

from mbsim.model.contact.compliant_kernels cimport frames_near
from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.model.record_kernels cimport (
    contact_columns_into,
    driven_columns_into,
    element_potential,
    rotation_columns_into,
    state_columns_into,
)
from mbsim.model.joint_force_kernels cimport actuator_forces_at, coordinate_force_at, joint_spring_potential_at
from mbsim.model.step_kernels cimport (
    constraint_blocks_into,
    element_forces_into,
    load_frames,
    outputs_into,
    row_blocks_dot,
    signals_into,
)
from mbsim.solvers.ode.integrate cimport (
    A_OK,
    I_DOP853,
    I_EULER,
    I_RK4,
    I_RK45,
    I_SEMI_IMPLICIT_EULER,
    System,
    Work,
    adaptive_continue,
    adaptive_start,
    adaptive_step,
    fixed_step,
    implicit_step,
)
from mbsim.solvers.ode.stiff_kernels cimport ContactJacobian, ContactSystem, CoordinateMap
from mbsim.solvers.recursive.soa_kernels cimport AbaWork, articulated_body_into_c, kinematics_into_c


# the integrators with a compiled step (scene names -> mbsim.solvers.ode.integrate's codes)
INTEGRATORS = {
    "euler": I_EULER,
    "semi_implicit_euler": I_SEMI_IMPLICIT_EULER,
    "rk4": I_RK4,
    "scipy:RK45": I_RK45,
    "scipy:DOP853": I_DOP853,
}
# statuses of tree_steps
OK, NOT_FINITE, STEP_FAILED = S_OK, S_NOT_FINITE, S_STEP_FAILED


cdef class Tree(Record):
    """The tree's arrays (mbsim.solvers.recursive.JointSpace, the model's mass properties).

    Attributes:
        order ... nvj: the kinematics and articulated-body sweeps' arrays (soa_kernels).
        mass (nb,), inertia (nb, 3, 3), gravity (3,); presc (nv,) int8 all 0 and
            qdd_presc (nv,) zeros (no drives here); armature (nv,) the joints' armatures.
        quat_q (k, 4), quat_v (k, 3), scalar_q, scalar_v: the quaternion and scalar coordinates.
        jc_v, jc_q: (ncoord,) the velocity and position index of each row of the model's
            joint-coordinate table (JointSpace.coordinates; the forces on it: FlatModel jc_*).
        body_inertia (nb, 3, 3): the model's (2D: [0, 0]) for the kinetic energy.
        owner (nv,): the body whose inboard joint owns each velocity; body_joint (nb,): the scene
            joint carrying each body (-1: a free root).
        carrier, back (int8), body2, joint_point, joint_body (njoint,): per scene joint, the body
            that carries it, whether it is walked back to a body2 that is not the ground (its
            reaction is reported on body2's side), body2, the joint point in body2's axes (3D), and
            the body whose axes the local reaction is given in (recursive.py ``_reactions``).
        nq, nv; elements: 1 when the model has force elements (spring-dampers, loads); integrator
            (INTEGRATORS: mbsim.solvers.ode.integrate's code).
    """

    def __init__(self, **fields):
        self.order = self.constant(fields, 'order', 'int64')
        self.parent = self.constant(fields, 'parent', 'int64')
        self.jtype = self.constant(fields, 'jtype', 'int64')
        self.qadr = self.constant(fields, 'qadr', 'int64')
        self.vadr = self.constant(fields, 'vadr', 'int64')
        self.rp = self.constant(fields, 'rp', 'float64')
        self.rc = self.constant(fields, 'rc', 'float64')
        self.qrel0 = self.constant(fields, 'qrel0', 'float64')
        self.ax1 = self.constant(fields, 'ax1', 'float64')
        self.ax2 = self.constant(fields, 'ax2', 'float64')
        self.ang0 = self.constant(fields, 'ang0', 'float64')
        self.nvj = self.constant(fields, 'nvj', 'int64')
        self.mass = self.constant(fields, 'mass', 'float64')
        self.inertia = self.constant(fields, 'inertia', 'float64')
        self.gravity = self.constant(fields, 'gravity', 'float64')
        self.presc = self.constant(fields, 'presc', 'int8')
        self.qdd_presc = self.constant(fields, 'qdd_presc', 'float64')
        self.armature = self.constant(fields, 'armature', 'float64')
        self.quat_q = self.constant(fields, 'quat_q', 'int64')
        self.quat_v = self.constant(fields, 'quat_v', 'int64')
        self.scalar_q = self.constant(fields, 'scalar_q', 'int64')
        self.scalar_v = self.constant(fields, 'scalar_v', 'int64')
        self.jc_v = self.constant(fields, 'jc_v', 'int64')
        self.jc_q = self.constant(fields, 'jc_q', 'int64')
        self.body_inertia = self.constant(fields, 'body_inertia', 'float64')
        self.owner = self.constant(fields, 'owner', 'int64')
        self.body_joint = self.constant(fields, 'body_joint', 'int64')
        self.carrier = self.constant(fields, 'carrier', 'int64')
        self.back = self.constant(fields, 'back', 'int8')
        self.body2 = self.constant(fields, 'body2', 'int64')
        self.joint_point = self.constant(fields, 'joint_point', 'float64')
        self.joint_body = self.constant(fields, 'joint_body', 'int64')
        self.nq = self.value(fields, 'nq')
        self.nv = self.value(fields, 'nv')
        self.elements = self.value(fields, 'elements')
        self.integrator = self.value(fields, 'integrator')


cdef class TreeData(Record):
    """The buffers of one run: the kinematics sweep's (soa_kernels.kinematics), ext (nb, 6),
    tau (nv,), the articulated-body sweep's qdd, f, alpha and scratch ``aba`` (soa_kernels.AbaWork),
    a step's y, ynew and k1 (nq + nv + 1,: k1 the derivative at a recorded state, the integrator's
    stages are its Work's, mbsim.solvers.ode.integrate); a recorded row's scratch: vbody (the
    model's body velocities), jrows (nc, 2 w: each joint equation's two body blocks of J,
    step_kernels.constraint_blocks_into) and joint_force (njoint, 6); seg (4,): a run of steps' report;
    k1_valid (1,): 1 while k1 holds the derivative at y (a recorded state's evaluation is the next
    step's first stage, as in mbsim.solvers.ode.ode_kernels)."""

    def __init__(self, **fields):
        self.quat = self.buffer(fields, 'quat', 'float64')
        self.rot = self.buffer(fields, 'rot', 'float64')
        self.o = self.buffer(fields, 'o', 'float64')
        self.com = self.buffer(fields, 'com', 'float64')
        self.V = self.buffer(fields, 'V', 'float64')
        self.vcom = self.buffer(fields, 'vcom', 'float64')
        self.angle = self.buffer(fields, 'angle', 'float64')
        self.Hs = self.buffer(fields, 'Hs', 'float64')
        self.acor = self.buffer(fields, 'acor', 'float64')
        self.rel = self.buffer(fields, 'rel', 'float64')
        self.ext = self.buffer(fields, 'ext', 'float64')
        self.tau = self.buffer(fields, 'tau', 'float64')
        self.qdd = self.buffer(fields, 'qdd', 'float64')
        self.f = self.buffer(fields, 'f', 'float64')
        self.alpha = self.buffer(fields, 'alpha', 'float64')
        self.aba = self.value(fields, 'aba')
        self.y = self.buffer(fields, 'y', 'float64')
        self.ynew = self.buffer(fields, 'ynew', 'float64')
        self.k1 = self.buffer(fields, 'k1', 'float64')
        self.vbody = self.buffer(fields, 'vbody', 'float64')
        self.jrows = self.buffer(fields, 'jrows', 'float64')
        self.joint_force = self.buffer(fields, 'joint_force', 'float64')
        self.seg = self.buffer(fields, 'seg', 'float64')
        self.k1_valid = self.buffer(fields, 'k1_valid', 'int64')


def make_tree_data(
    Py_ssize_t nb, Py_ssize_t nq, Py_ssize_t nv, Py_ssize_t body_nv, Py_ssize_t njoint, Py_ssize_t nc,
    Py_ssize_t width,
):
    """Fresh buffers for one run of a tree of nb bodies with nq, nv joint coordinates (body_nv
    body velocities, njoint scene joints, nc joint equations over bodies of ``width`` velocities)."""
    ny = nq + nv + 1
    return TreeData(
        quat=np.zeros((nb + 1, 4)),
        rot=np.zeros((nb + 1, 3, 3)),
        o=np.zeros((nb + 1, 3)),
        com=np.zeros((nb + 1, 3)),
        V=np.zeros((nb + 1, 6)),
        vcom=np.zeros((nb + 1, 3)),
        angle=np.zeros(nb + 1),
        Hs=np.zeros((nv, 6)),
        acor=np.zeros((nb + 1, 6)),
        rel=np.zeros(6),
        ext=np.zeros((nb, 6)),
        tau=np.zeros(nv),
        qdd=np.zeros(nv),
        f=np.zeros((nb, 6)),
        alpha=np.zeros((nb + 1, 6)),
        aba=AbaWork(nb, nv),  # the articulated-body sweep's scratch
        y=np.zeros(ny),
        ynew=np.zeros(ny),
        k1=np.zeros(ny),
        vbody=np.zeros(body_nv),
        jrows=np.zeros((nc, 2 * width)),
        joint_force=np.zeros((njoint, 6)),
        seg=np.zeros(4),
        k1_valid=np.zeros(1, dtype=np.int64),
    )


cdef void frames_into(FlatData D, TreeData W) noexcept nogil:
    """The sweep's body frames into D, as the force elements and joint equations read them
    (mbsim.model.step_kernels), ground row last."""
    cdef Py_ssize_t k, a, b
    for k in range(W.com.shape[0]):
        for a in range(3):
            D.pos[k, a] = W.com[k, a]
            D.vel[k, a] = W.vcom[k, a]
            D.omega[k, a] = W.V[k, a]
            for b in range(3):
                D.rot[k, a, b] = W.rot[k, a, b]
        for a in range(3):
            D.omega_body[k, a] = W.rot[k, 0, a] * W.V[k, 0] + W.rot[k, 1, a] * W.V[k, 1] + W.rot[k, 2, a] * W.V[k, 2]
        D.omega2[k] = W.V[k, 2]
        D.angle[k] = W.angle[k]


cdef double _applied_into(FlatModel F, FlatData D, Tree T, TreeData W, double t, const double[::1] q,
                          const double[::1] v) noexcept nogil:
    """Force elements at the sweep's body states into W.ext ((torque, force) at the centres of
    mass, world), the forces on the joint coordinates into W.tau; returns their non-conservative
    power (recursive.py ``_applied``)."""
    cdef Py_ssize_t nb = T.order.shape[0]
    cdef Py_ssize_t k, r
    for k in range(nb):
        for r in range(6):
            W.ext[k, r] = 0.0
    for k in range(T.nv):
        W.tau[k] = 0.0
    if not T.elements and not F.jc_forces:  # nothing acts: the records read the coordinates themselves
        return 0.0
    # the body frames where an element or a signal reads them
    if T.elements or F.nsig:
        frames_into(D, W)
    cdef double[::1] Qc = D.Q
    cdef double[::1] Qn = D.Qn
    if T.elements:
        for k in range(Qc.shape[0]):
            Qc[k] = 0.0
            Qn[k] = 0.0
    cdef double power = _tree_forces_into(F, D, T.jc_q, T.jc_v, t, q, v, Qc, Qn, W.tau)
    if T.elements:
        power += _external_into(F, D, T, W, Qc, Qn)  # the elements' forces just computed
    return power


cdef double _tree_forces_into(FlatModel F, FlatData D, const long long[::1] jc_q, const long long[::1] jc_v, double t,
                              const double[::1] q, const double[::1] v, double[::1] Qc, double[::1] Qn,
                              double[::1] tau) noexcept nogil:
    """At the body frames in D: the joint coordinates from the tree's (q + the joint's initial; the
    rates v), the signals, the force elements into Qc, Qn (body axes) and the forces on the joint
    coordinates (joint_force_kernels.coordinate_force_at) added to tau; returns the latter's
    non-conservative power."""
    cdef Py_ssize_t r
    cdef double elastic, other
    cdef double power = 0.0
    for r in range(F.njc):
        D.jc_value[r] = q[jc_q[r]] + F.jc_initial[r]
        D.jc_qd[r] = v[jc_v[r]]
    if F.nsig:
        signals_into(F, D)
    element_forces_into(F, D, t, Qc, Qn)
    if F.njc:
        if F.nact:
            D.regs[0] = t
            actuator_forces_at(F, D)
        for r in range(F.njc):
            elastic = coordinate_force_at(F, D, r, &other, False)  # the smooth stop and friction
            tau[jc_v[r]] += elastic + other
            power += other * D.jc_qd[r]
    return power


cdef double _external_into(FlatModel F, FlatData D, Tree T, TreeData W, const double[::1] Qc,
                           const double[::1] Qn) noexcept nogil:
    """The force elements' generalized forces Qc, Qn (body axes) as W.ext; returns Qn's power."""
    cdef Py_ssize_t nb = T.order.shape[0]
    cdef Py_ssize_t k, a
    cdef double power = 0.0
    cdef double t0, t1, t2
    if F.dim == 3:
        for k in range(nb):
            for a in range(3):
                power += Qn[6 * k + a] * D.vel[k, a]
            for a in range(3):
                power += Qn[6 * k + 3 + a] * D.omega_body[k, a]
            for a in range(3):
                W.ext[k, 3 + a] = Qc[6 * k + a] + Qn[6 * k + a]
            t0 = Qc[6 * k + 3] + Qn[6 * k + 3]
            t1 = Qc[6 * k + 4] + Qn[6 * k + 4]
            t2 = Qc[6 * k + 5] + Qn[6 * k + 5]
            for a in range(3):
                W.ext[k, a] = W.rot[k, a, 0] * t0 + W.rot[k, a, 1] * t1 + W.rot[k, a, 2] * t2
    else:
        for k in range(nb):
            for a in range(2):
                power += Qn[3 * k + a] * D.vel[k, a]
            power += Qn[3 * k + 2] * D.omega2[k]
            W.ext[k, 3] = Qc[3 * k] + Qn[3 * k]
            W.ext[k, 4] = Qc[3 * k + 1] + Qn[3 * k + 1]
            W.ext[k, 2] = Qc[3 * k + 2] + Qn[3 * k + 2]
    return power


def tree_forces(FlatModel F not None, FlatData D not None, const long long[::1] jc_q, const long long[::1] jc_v,
                double t, frames, const double[::1] q, const double[::1] v, double[::1] Qc, double[::1] Qn,
                double[::1] tau):
    """Python's single evaluations (recursive.py ``_applied``) of what the compiled step's
    _applied_into computes, at the body Frames of a state: the force elements added into Qc, Qn
    (body axes), the forces on the joint coordinates into tau. Returns (their non-conservative
    power, the potential of the elements and the joint springs)."""
    cdef double power, potential
    if Qc.shape[0] != F.nv or Qn.shape[0] != F.nv:
        raise ValueError(f"tree_forces: expected Qc, Qn of {F.nv}")
    load_frames(F, D, frames)
    with nogil:
        power = _tree_forces_into(F, D, jc_q, jc_v, t, q, v, Qc, Qn, tau)
        potential = element_potential(F, D) + joint_spring_potential_at(F.jc_stiffness, F.jc_rest, D.jc_value)
    return power, potential


cdef inline void derivative(
    FlatModel F, FlatData D, Tree T, TreeData W, double t, const double[::1] y, double[::1] out
) noexcept nogil:
    """out = (q_dot, q_ddot, power) at y = (q, v, work) (recursive.py ``derivative``)."""
    cdef Py_ssize_t nq = T.nq, nv = T.nv
    cdef Py_ssize_t k, s, d
    cdef double power, damping_power, rate
    cdef const double[::1] q = y[:nq]
    cdef const double[::1] v = y[nq : nq + nv]
    kinematics_into_c(
        T.order, T.parent, T.jtype, T.qadr, T.vadr, T.rp, T.rc, T.qrel0, T.ax1, T.ax2, T.ang0, q, v,
        W.quat, W.rot, W.o, W.com, W.V, W.vcom, W.angle, W.Hs, W.acor, W.rel,
    )
    # force elements and the forces on the joint coordinates (recursive.py ``_applied``)
    power = _applied_into(F, D, T, W, t, q, v)
    articulated_body_into_c(
        T.order, T.parent, T.vadr, T.nvj, T.mass, T.inertia, T.gravity, W.rot, W.o, W.com, W.V, W.Hs, W.acor,
        W.ext, W.tau, T.presc, T.qdd_presc, T.armature, W.aba, W.qdd, W.f, W.alpha,
    )
    q_rate_into(T, q, v, out[:nq])
    for k in range(nv):
        out[nq + k] = W.qdd[k]
    out[nq + nv] = power


cdef void q_rate_into(Tree T, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
    """dq/dt: v for scalar coordinates, 1/2 p (x) (0, omega) for quaternions."""
    cdef Py_ssize_t i, a0, a1, a2, a3
    cdef double p0, p1, p2, p3, w0, w1, w2
    for i in range(T.scalar_q.shape[0]):
        out[T.scalar_q[i]] = v[T.scalar_v[i]]
    for i in range(T.quat_q.shape[0]):
        a0, a1, a2, a3 = T.quat_q[i, 0], T.quat_q[i, 1], T.quat_q[i, 2], T.quat_q[i, 3]
        p0, p1, p2, p3 = q[a0], q[a1], q[a2], q[a3]
        w0, w1, w2 = v[T.quat_v[i, 0]], v[T.quat_v[i, 1]], v[T.quat_v[i, 2]]
        out[a0] = -0.5 * (p1 * w0 + p2 * w1 + p3 * w2)
        out[a1] = 0.5 * (p0 * w0 + (p2 * w2 - p3 * w1))
        out[a2] = 0.5 * (p0 * w1 + (p3 * w0 - p1 * w2))
        out[a3] = 0.5 * (p0 * w2 + (p1 * w1 - p2 * w0))


cdef void increment_velocities(Tree T, const double[::1] q, const double[::1] dq, double[::1] out) noexcept nogil:
    """N(q)^+ dq: the joint velocities whose q_rate_into at q is dq along the unit quaternions
    (scalar coordinates: dq; a quaternion p: the rotation vector 2 (p* (x) dp)_vec)."""
    cdef Py_ssize_t i, a0, a1, a2, a3
    cdef double w, x, y, z, dw, dx, dy, dz
    for i in range(T.scalar_q.shape[0]):
        out[T.scalar_v[i]] = dq[T.scalar_q[i]]
    for i in range(T.quat_q.shape[0]):
        a0, a1, a2, a3 = T.quat_q[i, 0], T.quat_q[i, 1], T.quat_q[i, 2], T.quat_q[i, 3]
        w, x, y, z = q[a0], q[a1], q[a2], q[a3]
        dw, dx, dy, dz = dq[a0], dq[a1], dq[a2], dq[a3]
        out[T.quat_v[i, 0]] = 2.0 * (w * dx - dw * x - (y * dz - z * dy))
        out[T.quat_v[i, 1]] = 2.0 * (w * dy - dw * y - (z * dx - x * dz))
        out[T.quat_v[i, 2]] = 2.0 * (w * dz - dw * z - (x * dy - y * dx))


cdef class TreeCoordinates(CoordinateMap):
    """The joint coordinates' q' = N(q) v (q_rate_into) and N(q)^+ dq (increment_velocities)."""

    cdef Tree T

    def __init__(self, Tree T):
        self.T = T

    cdef void rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
        q_rate_into(self.T, q, v, out)

    cdef void increment(self, const double[::1] q, const double[::1] dq, double[::1] out) noexcept nogil:
        increment_velocities(self.T, q, dq, out)


# the implicit contact step's B and U are taken again once a coordinate moved this far (rad, m) from
# where they were taken (TreeSystem.stiff_derivative)
cdef double _REUSE = 1e-2


cdef class TreeSystem(ContactSystem):
    """The method's right-hand side (derivative) of F, D, T into W as the integrators' System
    (mbsim.solvers.ode.integrate): y = (q, v, work). It cannot fail: a non-finite state is caught
    after the step (tree_steps). ``implicit``: the steps near compliant contact are implicit
    (solver.contact_integration), with the contacts' Jacobian in joint coordinates
    (stiff_kernels.ContactJacobian with E = B, the contact bodies' Jacobian, and U = M^-1 B^T,
    the articulated-body responses to unit wrenches)."""

    cdef FlatModel F
    cdef Tree T
    cdef TreeData W
    cdef bint implicit
    cdef double[::1] unit
    cdef double[::1] qdd0
    cdef double[::1] q_mapped  # the configuration of B and U
    cdef bint mapped

    def __init__(self, FlatModel F not None, FlatData D not None, Tree T not None, TreeData W not None,
                 bint implicit=False):
        self.F, self.D, self.T, self.W = F, D, T, W
        self.nq, self.nv, self.n = T.nq, T.nv, T.nq + T.nv + 1
        self.implicit = implicit
        self.has_jac = implicit and F.ncc > 0 and F.dim == 3
        self.jac = ContactJacobian(F, TreeCoordinates(T), T.nq, T.nv, True) if self.has_jac else None
        self.unit, self.qdd0 = np.zeros(T.nv), np.zeros(T.nv)
        self.q_mapped, self.mapped = np.zeros(T.nq), False

    cdef bint derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        derivative(self.F, self.D, self.T, self.W, t, y, out)
        return True

    cdef bint first_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        """A fixed step's first stage: the derivative at the state just recorded when advance kept
        it in W.k1 (W.k1_valid)."""
        cdef Py_ssize_t k
        if not self.W.k1_valid[0]:
            derivative(self.F, self.D, self.T, self.W, t, y, out)
            return True
        self.W.k1_valid[0] = 0
        for k in range(self.n):
            out[k] = self.W.k1[k]
        return True

    cdef void q_rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
        q_rate_into(self.T, q, v, out)

    cdef void _aba_at_rest(self) noexcept nogil:
        """The articulated-body accelerations at q0, v = 0 with the wrenches in self.W.ext only (no
        joint forces; gravity, drives and armatures as always) into self.W.qdd."""
        cdef Py_ssize_t k
        for k in range(self.T.nv):
            self.W.tau[k] = 0.0
        articulated_body_into_c(
            self.T.order, self.T.parent, self.T.vadr, self.T.nvj, self.T.mass, self.T.inertia, self.T.gravity, self.W.rot, self.W.o, self.W.com, self.W.V, self.W.Hs, self.W.acor,
            self.W.ext, self.W.tau, self.T.presc, self.T.qdd_presc, self.T.armature, self.W.aba, self.W.qdd, self.W.f, self.W.alpha,
        )

    cdef bint stiff_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        """f(t, y) with the compliant contacts' slopes taken on the way (D.cc_linear), then their
        Jacobian in joint coordinates: B (the slots' centre-of-mass velocity, world, and angular
        velocity, body axes, of each unit joint velocity: the kinematics sweep at q0) and U = M^-1
        B^T (the articulated-body accelerations of unit wrenches at rest, less those of none)."""
        cdef double moved
        cdef Py_ssize_t nb = self.T.order.shape[0]
        cdef Py_ssize_t j, k, si, b, a, r, col
        self.W.k1_valid[0] = 0
        if not self.has_jac:
            derivative(self.F, self.D, self.T, self.W, t, y, out)
            return True
        self.jac.slopes(self.D, True)
        derivative(self.F, self.D, self.T, self.W, t, y, out)
        self.jac.slopes(self.D, False)
        for k in range(self.T.nq):
            self.jac.q0[k] = y[k]
        self.jac.prepare(self.D)
        if not self.jac.active:
            return True
        # B and U change with the configuration only: kept while no coordinate moved by more than
        # _REUSE (the W-method keeps its order with any J; the contacts' slopes are always fresh)
        if self.mapped:
            moved = 0.0
            for k in range(self.T.nq):
                moved = max(moved, fabs(self.jac.q0[k] - self.q_mapped[k]))
            if moved <= _REUSE:
                return True
        self.mapped = True
        for k in range(self.T.nq):
            self.q_mapped[k] = self.jac.q0[k]
        # B column by column: the kinematics of a unit joint velocity
        for j in range(self.T.nv):
            for k in range(self.T.nv):
                self.unit[k] = 1.0 if k == j else 0.0
            kinematics_into_c(
                self.T.order, self.T.parent, self.T.jtype, self.T.qadr, self.T.vadr, self.T.rp, self.T.rc, self.T.qrel0, self.T.ax1, self.T.ax2, self.T.ang0, self.jac.q0,
                self.unit, self.W.quat, self.W.rot, self.W.o, self.W.com, self.W.V, self.W.vcom, self.W.angle, self.W.Hs, self.W.acor, self.W.rel,
            )
            for si in range(self.jac.nslots):
                b = self.jac.body[si]
                for a in range(3):
                    self.jac.B[6 * si + a, j] = self.W.vcom[b, a]
                    self.jac.B[6 * si + 3 + a, j] = self.W.rot[b, 0, a] * self.W.V[b, 0] + self.W.rot[b, 1, a] * self.W.V[b, 1] + self.W.rot[b, 2, a] * self.W.V[b, 2]
        # U: at rest, the accelerations of each slot's unit force (world) and torque (body axes)
        for k in range(self.T.nv):
            self.unit[k] = 0.0
        kinematics_into_c(
            self.T.order, self.T.parent, self.T.jtype, self.T.qadr, self.T.vadr, self.T.rp, self.T.rc, self.T.qrel0, self.T.ax1, self.T.ax2, self.T.ang0, self.jac.q0,
            self.unit, self.W.quat, self.W.rot, self.W.o, self.W.com, self.W.V, self.W.vcom, self.W.angle, self.W.Hs, self.W.acor, self.W.rel,
        )
        for k in range(nb):
            for r in range(6):
                self.W.ext[k, r] = 0.0
        self._aba_at_rest()
        for k in range(self.T.nv):
            self.qdd0[k] = self.W.qdd[k]
        for si in range(self.jac.nslots):
            b = self.jac.body[si]
            for a in range(6):
                col = 6 * si + a
                # self.W.ext rows: (torque, force) at the centre of mass, world
                for r in range(6):
                    self.W.ext[b, r] = 0.0
                if a < 3:
                    self.W.ext[b, 3 + a] = 1.0
                else:
                    for r in range(3):
                        self.W.ext[b, r] = self.W.rot[b, r, a - 3]
                self._aba_at_rest()
                for k in range(self.T.nv):
                    self.jac.U[k, col] = self.W.qdd[k] - self.qdd0[k]
                for r in range(6):
                    self.W.ext[b, r] = 0.0
        return True

    cdef bint near(self, const double[::1] q, const double[::1] v, double h) noexcept nogil:
        """Whether some compliant pair's boxes overlap at (q, v) or may within h (the kinematics
        sweep, then compliant_kernels.frames_near)."""
        if not self.has_jac:
            return False
        kinematics_into_c(
            self.T.order, self.T.parent, self.T.jtype, self.T.qadr, self.T.vadr, self.T.rp, self.T.rc, self.T.qrel0, self.T.ax1, self.T.ax2, self.T.ang0, q, v,
            self.W.quat, self.W.rot, self.W.o, self.W.com, self.W.V, self.W.vcom, self.W.angle, self.W.Hs, self.W.acor, self.W.rel,
        )
        frames_into(self.D, self.W)
        return frames_near(self.F, self.D, h)


cdef bint _same(const double[::1] a, const double[::1] b) noexcept nogil:
    """a == b elementwise (np.array_equal)."""
    cdef Py_ssize_t k
    for k in range(a.shape[0]):
        if not (a[k] == b[k]):
            return False
    return True


cdef int tree_steps(
    Tree T, TreeData W, TreeSystem S, Work K, double t, double[::1] q, double[::1] v, double work, double h, double t_end,
    Py_ssize_t nmax, double[::1] out,
) noexcept nogil:
    """Up to ``nmax`` steps of K.method (the last one shortened to land on t_end, as
    mbsim.simulate.run does), q and v updated in place. Under an embedded pair (RK45, DOP853) each
    step is one accepted step (scipy's step control, the last one landing on K.t_bound; h its
    first step when it starts afresh: it is not at t), continued from the state the step left,
    with the derivative recomputed where the quaternions' rescaling moved it (as the Python path's
    mbsim.solvers.ode.integrators.EmbeddedPair does). Stops before a step that would leave a
    non-finite state (NOT_FINITE) or fell below the smallest step (STEP_FAILED): the Python path
    takes it and reports. ``out`` (float64, 4): t, work, steps taken, the size of the last step.
    Returns the status. S: the system of T into W."""
    cdef Py_ssize_t nq = T.nq, nv = T.nv
    cdef Py_ssize_t ny = nq + nv + 1
    cdef double[::1] y = W.y
    cdef double[::1] ynew = W.ynew
    cdef bint adaptive = K.method == I_RK45 or K.method == I_DOP853
    cdef Py_ssize_t steps = 0, i, k, a0, a1, a2, a3
    cdef int status = S_OK
    cdef int a
    cdef double h_last = 0.0
    cdef double scale = max(1.0, t_end)
    cdef double h_try, n, t_new
    cdef bint finite
    while steps < nmax and t_end - t > 1e-12 * scale:
        h_try = min(h, t_end - t)
        if t_end - (t + h_try) < 1e-9 * h_try:  # land exactly on t_end
            h_try = t_end - t
            # a whole step short of t_end by round-off of the time only: the step itself (the loop ends
            # within 1e-12 scale of t_end), the steps of a run that goes on (mbsim run --from: bit for bit)
            if (h_try - h if h_try > h else h - h_try) <= 1e-12 * scale:
                h_try = h
        for k in range(nq):
            y[k] = q[k]
        for k in range(nv):
            y[nq + k] = v[k]
        y[ny - 1] = work
        if adaptive:
            # a fresh start away from the pair's point; a continuation where the state moved
            a = A_OK
            if not K.started or K.t != t:
                a = adaptive_start(S, K, t, y, min(h_try, t_end - t))
            elif not _same(K.y, y):
                a = adaptive_continue(S, K, y)
            if a == A_OK:
                a = adaptive_step(S, K)
            if a != A_OK:
                status = S_STEP_FAILED
                break
            for k in range(ny):
                ynew[k] = K.y[k]
            t_new = K.t
        elif S.implicit and S.near(q, v, h_try):
            # solver.contact_integration implicit: a Rosenbrock-W step near compliant contact
            if not implicit_step(S, K, t, h_try, y, ynew):
                status = S_NOT_FINITE
                break
            t_new = t + h_try
        else:
            fixed_step(S, K, K.method, t, h_try, y, ynew)
            t_new = t + h_try
        # quaternions rescaled to unit norm (recursive.py ``normalize``)
        for i in range(T.quat_q.shape[0]):
            a0, a1, a2, a3 = T.quat_q[i, 0], T.quat_q[i, 1], T.quat_q[i, 2], T.quat_q[i, 3]
            n = sqrt(ynew[a0] * ynew[a0] + ynew[a1] * ynew[a1] + ynew[a2] * ynew[a2] + ynew[a3] * ynew[a3])
            ynew[a0], ynew[a1], ynew[a2], ynew[a3] = ynew[a0] / n, ynew[a1] / n, ynew[a2] / n, ynew[a3] / n
        finite = True
        for k in range(ny):
            if not isfinite(ynew[k]):
                finite = False
        if not finite:
            status = S_NOT_FINITE
            break
        for k in range(nq):
            q[k] = ynew[k]
        for k in range(nv):
            v[k] = ynew[nq + k]
        work = ynew[ny - 1]
        h_last = t_new - t  # as the Python step reports it
        t = t_new
        steps += 1
    out[0], out[1], out[2], out[3] = t, work, steps, h_last
    return status


cdef Py_ssize_t _reactions_into(FlatModel F, Tree T, TreeData W, double[::1] out, Py_ssize_t c) noexcept nogil:
    """Per scene joint: force and torque (about the joint point) on body2, or on body1 when body2
    is the ground, in world axes into out[c:], then in the axes of that body (2D fx, fy, torque)
    after them, both from one pass over the joints; returns the column after them
    (recursive.py ``_reactions``). Joint springs are applied forces, not reactions."""
    cdef Py_ssize_t nj = T.carrier.shape[0]
    cdef Py_ssize_t k = 6 if F.dim == 3 else 3  # columns of one joint
    cdef Py_ssize_t local = c + k * nj  # the first column in body axes
    cdef double[:, ::1] f = W.joint_force
    cdef double[:, :, ::1] R = W.rot
    cdef Py_ssize_t j, r, s, d, p, b, o
    cdef double t0, t1, t2, f0, f1, f2, s0, s1, s2, x0, x1, x2, l0, l1, l2, u0, u1, u2, m0, m1, m2
    for j in range(nj):
        for r in range(6):
            f[j, r] = W.f[T.carrier[j], r]
    for s in range(T.jc_v.shape[0]):  # the forces on the joint coordinates: applied, not reactions
        d = T.jc_v[s]
        j = T.body_joint[T.owner[d]]
        for r in range(6):
            f[j, r] -= W.Hs[d, r] * W.tau[d]
    for j in range(nj):
        t0, t1, t2, f0, f1, f2 = f[j, 0], f[j, 1], f[j, 2], f[j, 3], f[j, 4], f[j, 5]
        if T.back[j]:  # body2's side: the opposite force, at body2's joint point
            p, o = T.body2[j], T.carrier[j]
            s0, s1, s2 = T.joint_point[j, 0], T.joint_point[j, 1], T.joint_point[j, 2]
            x0 = W.com[p, 0] + R[p, 0, 0] * s0 + R[p, 0, 1] * s1 + R[p, 0, 2] * s2
            x1 = W.com[p, 1] + R[p, 1, 0] * s0 + R[p, 1, 1] * s1 + R[p, 1, 2] * s2
            x2 = W.com[p, 2] + R[p, 2, 0] * s0 + R[p, 2, 1] * s1 + R[p, 2, 2] * s2
            l0, l1, l2 = W.o[o, 0] - x0, W.o[o, 1] - x1, W.o[o, 2] - x2
            f0, f1, f2 = -f0, -f1, -f2
            t0 = -t0 + (l1 * f2 - l2 * f1)
            t1 = -t1 + (l2 * f0 - l0 * f2)
            t2 = -t2 + (l0 * f1 - l1 * f0)
        # the same in the axes of the joint's body: R^T f, R^T t
        b = T.joint_body[j]
        u0 = R[b, 0, 0] * f0 + R[b, 1, 0] * f1 + R[b, 2, 0] * f2
        u1 = R[b, 0, 1] * f0 + R[b, 1, 1] * f1 + R[b, 2, 1] * f2
        u2 = R[b, 0, 2] * f0 + R[b, 1, 2] * f1 + R[b, 2, 2] * f2
        m0 = R[b, 0, 0] * t0 + R[b, 1, 0] * t1 + R[b, 2, 0] * t2
        m1 = R[b, 0, 1] * t0 + R[b, 1, 1] * t1 + R[b, 2, 1] * t2
        m2 = R[b, 0, 2] * t0 + R[b, 1, 2] * t1 + R[b, 2, 2] * t2
        if F.dim == 3:
            out[c], out[c + 1], out[c + 2], out[c + 3], out[c + 4], out[c + 5] = f0, f1, f2, t0, t1, t2
            out[local], out[local + 1], out[local + 2] = u0, u1, u2
            out[local + 3], out[local + 4], out[local + 5] = m0, m1, m2
        else:
            out[c], out[c + 1], out[c + 2] = f0, f1, t2
            out[local], out[local + 1], out[local + 2] = u0, u1, m2
        c += k
        local += k
    return local


cdef void row_into(
    FlatModel F, FlatData D, Tree T, TreeData W, double t, const double[::1] q, const double[::1] v, double work,
    double h, double[::1] out,
) noexcept nogil:
    """One recorded row of the state (t, q, v, work) into out, the columns of recursive.py
    ``Solver.row_columns`` (mbsim.diagnostics.row_columns in joint coordinates, then the joints'
    reactions in body axes), from the evaluation at that state ``derivative`` left in W."""
    cdef Py_ssize_t nb = T.order.shape[0]
    cdef Py_ssize_t d = F.dim
    cdef Py_ssize_t c, b, a, i, j, k, r, s, w
    cdef double translation, rotation, kinetic, potential, deflection, pos_violation, vel_violation, total
    cdef double sj, err, n
    cdef double tail[10]
    frames_into(D, W)
    c = state_columns_into(F, D, t, q, v, out)
    if d == 3:
        for b in range(nb):
            for a in range(4):
                out[c + 4 * b + a] = W.quat[b, a]
        c += 4 * nb
    c = rotation_columns_into(F, D, out, c)
    # energies (recursive.py ``kinetic_energy``, ``forward_dynamics(with_potential=True)``)
    translation, rotation = 0.0, 0.0
    for b in range(nb):
        translation += T.mass[b] * (
            W.vcom[b, 0] * W.vcom[b, 0] + W.vcom[b, 1] * W.vcom[b, 1] + W.vcom[b, 2] * W.vcom[b, 2]
        )
        if d == 3:
            for i in range(3):
                for j in range(3):
                    rotation += D.omega_body[b, i] * T.body_inertia[b, i, j] * D.omega_body[b, j]
        else:
            rotation += T.body_inertia[b, 0, 0] * W.V[b, 2] * W.V[b, 2]
    for k in range(T.armature.shape[0]):
        rotation += T.armature[k] * v[k] * v[k]  # the joints' armatures (inertia on the coordinate)
    kinetic = 0.5 * (translation + rotation)
    potential = 0.0
    for b in range(nb):
        potential -= T.mass[b] * (W.com[b, 0] * T.gravity[0] + W.com[b, 1] * T.gravity[1] + W.com[b, 2] * T.gravity[2])
    potential += element_potential(F, D) + joint_spring_potential_at(F.jc_stiffness, F.jc_rest, D.jc_value)
    # the scene's joint equations at the body states (zero up to round-off, by construction)
    pos_violation, vel_violation = 0.0, 0.0
    if F.nc:
        constraint_blocks_into(F, D, t, W.jrows)
        w = 6 if d == 3 else 3
        for b in range(nb):
            for a in range(d):
                W.vbody[w * b + a] = W.vcom[b, a]
            if d == 3:
                for a in range(3):
                    W.vbody[w * b + 3 + a] = D.omega_body[b, a]
            else:
                W.vbody[w * b + 2] = W.V[b, 2]
        for r in range(F.nc):
            pos_violation = max(pos_violation, fabs(D.phi[r]))
            sj = row_blocks_dot(F, W.jrows, r, W.vbody)
            vel_violation = max(vel_violation, fabs(sj + D.phi_t[r]))
    total = kinetic + potential
    # the scalar columns (mbsim.diagnostics.SCALAR_COLUMNS): no iterations
    tail[0], tail[1], tail[2], tail[3], tail[4] = kinetic, potential, total, work, pos_violation
    tail[5], tail[8], tail[9] = vel_violation, 0.0, h
    tail[6] = D.cc_total[0] if F.ncc else 0.0
    tail[7] = D.cc_total[1] if F.ncc else 0.0
    for i in range(10):
        out[c] = tail[i]
        c += 1
    if d == 3:
        err = 0.0
        for i in range(T.quat_q.shape[0]):
            n = 0.0
            for a in range(4):
                n += q[T.quat_q[i, a]] * q[T.quat_q[i, a]]
            err = max(err, fabs(sqrt(n) - 1.0))
        out[c] = err
        c += 1
    if T.carrier.shape[0]:
        c = _reactions_into(F, T, W, out, c)
    # CONTRACT §8's columns and the outputs (the evaluation at this state left them in D, unless
    # nothing acted on the coordinates: then they are read here)
    if not T.elements and not F.jc_forces:
        for r in range(F.njc):
            D.jc_value[r] = q[T.jc_q[r]] + F.jc_initial[r]
            D.jc_qd[r] = v[T.jc_v[r]]
    c = driven_columns_into(F, D, out, c)
    c = outputs_into(F, D, t, out, c)
    contact_columns_into(F, D, out, c)


def advance(
    FlatModel F not None, FlatData D not None, Tree T not None, TreeData W not None, double t, double[::1] q,
    double[::1] v, double work, double h, double t_end, Py_ssize_t every, Py_ssize_t done, Py_ssize_t max_steps,
    Py_ssize_t max_rows, Py_ssize_t max_block, double[:, ::1] rows, double[::1] out, Work work_=None,
    bint implicit=False,
):
    """Steps and recorded rows, q and v updated in place, as mbsim.solvers.ode.ode_kernels.advance
    (without constraint violations to watch: joint coordinates meet the joints by construction):
    a row after every step whose number is a multiple of ``every`` and after the last, with the
    step number in its last column; at most ``max_block`` steps, ``max_rows`` rows, and no step
    past ``max_steps`` + 1. ``out`` (float64, 5): t, work, steps taken, rows, the size of the
    last step. Returns the status (OK, or NOT_FINITE / STEP_FAILED: the next step goes through
    Python).

    ``work_`` (integrate.Work): the integrator's buffers and, for an embedded pair (RK45, DOP853),
    its state across calls (the next step size, the derivative at the last state). None: a fixed
    step of T.integrator with buffers of this call. ``implicit``: Rosenbrock-W steps near compliant
    contact (solver.contact_integration; TreeSystem)."""
    cdef int status
    cdef TreeSystem S = TreeSystem(F, D, T, W, implicit)
    cdef Work K = work_ if work_ is not None else Work(S.n, <int>T.integrator)
    with nogil:
        status = _advance(
            F, D, T, W, S, K, t, q, v, work, h, t_end, every, done, max_steps, max_rows, max_block, rows, out
        )
    return status


cdef int _advance(
    FlatModel F, FlatData D, Tree T, TreeData W, TreeSystem S, Work K, double t, double[::1] q, double[::1] v, double work, double h, double t_end,
    Py_ssize_t every, Py_ssize_t done, Py_ssize_t max_steps, Py_ssize_t max_rows, Py_ssize_t max_block,
    double[:, ::1] rows, double[::1] out,
) noexcept nogil:
    """advance's loop (see there), without the GIL; S the system of F, D, T into W."""
    # a fixed step's first stage is the recorded state's derivative; an embedded pair keeps its own
    cdef bint fixed = not (K.method == I_RK45 or K.method == I_DOP853)
    cdef Py_ssize_t nq = T.nq, nv = T.nv
    cdef Py_ssize_t ny = nq + nv + 1
    cdef double[::1] seg = W.seg
    cdef double[::1] y
    cdef Py_ssize_t taken = 0, nrec = 0, n, k, i, number
    cdef int status = S_OK
    cdef double h_last = 0.0
    cdef double scale = max(1.0, t_end)
    cdef bint last
    W.k1_valid[0] = 0  # the state may have changed since the last call
    while nrec < max_rows and taken < max_block and t_end - t > 1e-12 * scale:
        n = min(every - (done + taken) % every, max_steps + 1 - (done + taken), max_block - taken)
        status = tree_steps(T, W, S, K, t, q, v, work, h, t_end, n, seg)
        k = <Py_ssize_t> seg[2]
        if k > 0:
            t, work, h_last = seg[0], seg[1], seg[3]
            taken += k
        number = done + taken
        last = not (t_end - t > 1e-12 * scale)
        if k > 0 and (number % every == 0 or last) and number <= max_steps:
            y = W.y
            for i in range(nq):
                y[i] = q[i]
            for i in range(nv):
                y[nq + i] = v[i]
            y[ny - 1] = work
            derivative(F, D, T, W, t, y, W.k1)
            row_into(F, D, T, W, t, q, v, work, h_last, rows[nrec])
            rows[nrec, rows.shape[1] - 1] = number
            nrec += 1
            W.k1_valid[0] = fixed  # the next step's first stage
        if status != S_OK or number > max_steps:
            break
    W.k1_valid[0] = 0
    out[0], out[1], out[2], out[3], out[4] = t, work, taken, nrec, h_last
    return status
