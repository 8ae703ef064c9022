# Compiled stages of a right-hand side over a FlatModel, writing into a FlatData
# (step_kernels.pyx). All allocate nothing and run without the GIL.

from mbsim.model.layout cimport FlatModel, FlatData

# a Python Frames' arrays (mbsim.model.model.Frames, the ground included) into D's frame buffers (holds the GIL)
cdef load_frames(FlatModel F, FlatData D, frames)
# body frames of (q, v) into D.pos, D.rot, D.vel, D.omega_body/D.omega (3D) or D.omega2/D.angle (2D)
cdef void frames_into(FlatModel F, FlatData D, const double[::1] q, const double[::1] v) noexcept nogil
# value of expression `index` of the model's programs (variables already in D.regs)
cdef double expression(FlatModel F, FlatData D, Py_ssize_t index) noexcept nogil
# Phi, Phi_t, gamma and J of every joint equation into D.phi, D.phi_t, D.gamma, D.J
cdef void constraints_into(FlatModel F, FlatData D, double t) noexcept nogil
# Phi, Phi_t, gamma into D and each row's body blocks of J into Jb (nc, 2 w; 4 w with couplings)
cdef void constraint_blocks_into(FlatModel F, FlatData D, double t, double[:, ::1] Jb) noexcept nogil
# the joint coordinates and their Jacobian into D.jc_value, D.jc_jac (frames in D already)
cdef void coordinate_values_into(FlatModel F, FlatData D, double t) noexcept nogil
# the same and their rates J v into D.jc_qd
cdef void coordinates_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil
# the signals into their registers (frames, coordinates and actuator forces in D)
cdef void signals_into(FlatModel F, FlatData D) noexcept nogil
# the actuators' and the joint coordinates' forces into Qc, Qn (coordinates and signals in D); the springs' potential;
# nonsmooth: without the compliant stops and the Coulomb/Stribeck friction (the LCP methods' rows hold them)
cdef double joint_forces_into(FlatModel F, FlatData D, double t, double[::1] Qc, double[::1] Qn,
                              bint nonsmooth) noexcept nogil
# the outputs' values into out[start:]; returns the column after them
cdef Py_ssize_t outputs_into(FlatModel F, FlatData D, double t, double[::1] out, Py_ssize_t start) noexcept nogil
# Q (all) and Qn (non-conservative) into D.Q, D.Qn, with the gyroscopic term; returns Qn . v
cdef double forces_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil
# the same without the joints' compliant stops and Coulomb/Stribeck friction (the LCP methods' rows hold them)
cdef double nonsmooth_forces_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil
# gravity, force elements and joint springs into D.Q, D.Qn (no gyroscopic term); returns Qn . v
cdef double applied_forces_into(FlatModel F, FlatData D, double t, const double[::1] v) noexcept nogil
# add the force elements' generalized forces to Qc (elastic) and Qn (damping, applied loads)
cdef void element_forces_into(FlatModel F, FlatData D, double t, double[::1] Qc, double[::1] Qn) noexcept nogil
# out = B x (nv,) for a block-diagonal B given by its (nbody, w, w) blocks
cdef void block_diagonal_times(FlatModel F, const double[:, :, ::1] blocks, const double[::1] x,
                               double[::1] out) noexcept nogil
# out = M^-1 x (nv,), block by block
cdef void inverse_mass_times(FlatModel F, const double[::1] x, double[::1] out) noexcept nogil


# The bodies of constraint row r, each once (F.nbody: none): two (row_bi, row_bj), four for a
# coupling's row (row_bk, row_bl too). Loop over a row's bodies as
#     for side in range(row_nbody(F, r)):
#         b = row_body(F, r, side)
#         if b < F.nbody:
#             ...
cdef inline Py_ssize_t row_nbody(FlatModel F, Py_ssize_t r) noexcept nogil:
    return 4 if F.row_bk[r] < F.nbody else 2


cdef inline Py_ssize_t row_body(FlatModel F, Py_ssize_t r, int side) noexcept nogil:
    cdef Py_ssize_t bi = <Py_ssize_t>F.row_bi[r]
    if side == 0:
        return bi
    cdef Py_ssize_t bj = <Py_ssize_t>F.row_bj[r]
    if side == 1:
        return bj if bj != bi else F.nbody
    return <Py_ssize_t>(F.row_bk[r] if side == 2 else F.row_bl[r])


# whether body b (< F.nbody) is one of row r's
cdef inline bint row_has_body(FlatModel F, Py_ssize_t r, Py_ssize_t b) noexcept nogil:
    return b == F.row_bi[r] or b == F.row_bj[r] or b == F.row_bk[r] or b == F.row_bl[r]


# J[r] . x over the column blocks of row r's bodies (the rest of the row is zero)
cdef inline double row_dot(FlatModel F, const double[:, ::1] J, Py_ssize_t r, const double[::1] x) noexcept nogil:
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef double s = 0.0
    cdef Py_ssize_t side, b, m
    for side in range(row_nbody(F, r)):
        b = row_body(F, r, side)
        if b < F.nbody:
            for m in range(w):
                s = s + J[r, w * b + m] * x[w * b + m]
    return s


# J[r] . x from the body blocks of row r (constraint_blocks_into's Jb, block `side` in columns
# [side w, (side + 1) w)): as row_dot on the dense J (a row whose two bodies coincide holds body
# j's block there, as the dense row does)
cdef inline double row_blocks_dot(FlatModel F, const double[:, ::1] Jb, Py_ssize_t r, const double[::1] x) noexcept nogil:
    cdef Py_ssize_t w = 6 if F.dim == 3 else 3
    cdef Py_ssize_t bi = <Py_ssize_t>F.row_bi[r]
    cdef Py_ssize_t bj = <Py_ssize_t>F.row_bj[r]
    cdef double s = 0.0
    cdef Py_ssize_t m, side, b
    if bi < F.nbody and bi != bj:
        for m in range(w):
            s = s + Jb[r, m] * x[w * bi + m]
    if bj < F.nbody:
        for m in range(w):
            s = s + Jb[r, w + m] * x[w * bj + m]
    for side in range(2, row_nbody(F, r)):  # a coupling's third and fourth body
        b = row_body(F, r, side)
        if b < F.nbody:
            for m in range(w):
                s = s + Jb[r, side * w + m] * x[w * b + m]
    return s
