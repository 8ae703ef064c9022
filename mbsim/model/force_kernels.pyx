"""The force elements' Python entry points: their kernels (force_kernels.pxd, the one
implementation, which the compiled step runs too) on the body frames of a ``Frames``
(mbsim.model.model), for the force groups' ``evaluate`` (mbsim.model.forces), and the register
order of load expressions (VARIABLES)."""

import numpy as np

# the variables of load expressions in register order, as loads_at writes them (drives use t only)
VARIABLES = {
    3: ("t", "x", "y", "z", "vx", "vy", "vz", "wx", "wy", "wz"),
    2: ("t", "x", "y", "angle", "vx", "vy", "w"),
}


cdef _rows(x):
    return np.ascontiguousarray(x, dtype=np.float64)


def _frames(frames, Py_ssize_t dim):
    """pos, rot, vel, omega (3D), omega2 and angle (2D) of a Frames as the kernels take them (the
    other dimension's fields empty)."""
    if dim == 3:
        return _rows(frames.pos), _rows(frames.rot), _rows(frames.vel), _rows(frames.omega), np.zeros(0), np.zeros(0)
    return (_rows(frames.pos), _rows(frames.rot), _rows(frames.vel), np.zeros((0, 3)), _rows(frames.omega),
            _rows(frames.angle))


def spring_damper_forces(frames, Py_ssize_t dim, Py_ssize_t nbody, const long long[::1] b1,
                         const long long[::1] b2, const double[:, ::1] s1, const double[:, ::1] s2,
                         const double[::1] k, const double[::1] c, const double[::1] rest):
    """Spring-dampers at the state of ``frames``: f = k (L - L0) + c dL/dt along the line from
    body1's point (s1 in its axes) to body2's, on body2. Returns (Qc, Qn, potential): the elastic
    and the damping generalized forces, (nbody+1, w) each (ground row zero), and sum 1/2 k (L - L0)^2."""
    cdef Py_ssize_t w = 6 if dim == 3 else 3
    pos_, rot_, vel_, omega_, omega2_, _ = _frames(frames, dim)
    cdef const double[:, ::1] pos = pos_, vel = vel_, omega = omega_
    cdef const double[:, :, ::1] rot = rot_
    cdef const double[::1] omega2 = omega2_
    Qc, Qn = np.zeros((nbody + 1, w)), np.zeros((nbody + 1, w))
    cdef double[::1] qc = Qc.reshape(-1), qn = Qn.reshape(-1)
    cdef double potential
    with nogil:
        potential = spring_dampers_at(dim, nbody, pos, rot, vel, omega, omega2, b1, b2, s1, s2, k, c, rest, qc, qn)
    return Qc, Qn, potential


def load_forces(frames, double t, Py_ssize_t dim, Py_ssize_t nbody, const long long[::1] body,
                const double[:, ::1] point, const long long[::1] body_frame, const long long[::1] torque,
                const long long[:, ::1] expr, programs):
    """Applied forces and torques at the state of ``frames`` and time t: components (expression
    ``expr[e, a]`` of ``programs``, mbsim.scene.expr.compile_programs over VARIABLES[dim]; -1: zero)
    in world or body axes, a force at its body point (``point``, body axes). Returns their
    generalized force (nbody+1, w), ground row zero."""
    cdef Py_ssize_t w = 6 if dim == 3 else 3
    pos_, rot_, vel_, omega_, omega2_, angle_ = _frames(frames, dim)
    cdef const double[:, ::1] pos = pos_, vel = vel_, omega = omega_
    cdef const double[:, :, ::1] rot = rot_
    cdef const double[::1] omega2 = omega2_, angle = angle_
    cdef const long long[::1] op = programs.op, dst = programs.dst, start = programs.start
    cdef const long long[::1] stop = programs.stop, result = programs.result
    cdef const long long[:, ::1] args = programs.args
    cdef const double[::1] imm = programs.imm
    cdef double[::1] regs = np.zeros(max(programs.nreg, len(VARIABLES[dim])))
    Qn = np.zeros((nbody + 1, w))
    cdef double[::1] qn = Qn.reshape(-1)
    with nogil:
        loads_at(dim, nbody, pos, rot, vel, omega, omega2, angle, t, body, point, body_frame, torque, expr, op, dst,
                 args, imm, start, stop, result, regs, qn)
    return Qn
