# The implicit contact step's Jacobian (stiff_kernels.pyx): the compliant contacts' stiffness and
# damping over the bodies they touch, and the linear solves of the Rosenbrock-W step
# (mbsim.solvers.ode.integrate.rosenbrock_step) in a method's coordinates.

from mbsim.model.layout cimport FlatData, FlatModel
from mbsim.solvers.ode.integrate cimport System


# q' = N(q) v of a method's coordinates (rate) and its left inverse N(q)^+ along the unit
# quaternions (increment: the velocities of a q increment); the base class: q = v
cdef class CoordinateMap:
    cdef void rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil
    cdef void increment(self, const double[::1] q, const double[::1] dq, double[::1] out) noexcept nogil


cdef class ContactJacobian:
    cdef FlatModel F
    cdef CoordinateMap coords
    cdef Py_ssize_t nq
    cdef double[::1] q0  # nq: the state the Jacobian was prepared at
    cdef double[::1] dq  # nv: N(q0)^+ of a q increment
    cdef double[::1] qrate  # nq: N(q0) x_v
    cdef bint probing  # evaluations take the contacts' slopes (System.stiff_probe)
    cdef readonly Py_ssize_t nslots  # bodies that some compliant pair may touch
    cdef long long[::1] body  # slot -> body
    cdef Py_ssize_t nd  # 6 per slot
    cdef Py_ssize_t nv  # the method's velocities
    cdef bint tree  # E is B (joint coordinates), not the slots' own velocities (body coordinates)
    cdef readonly bint active  # some pair touches at the prepared state
    cdef double[:, ::1] stiffness  # (nd, nd) d(contact forces)/d(displacements), slot order
    cdef double[:, ::1] damping  # (nd, nd) d(contact forces)/d(velocities)
    cdef double[:, ::1] U  # (nv, nd) A E^T: the accelerations of unit forces on the slots' coordinates
    cdef double[:, ::1] B  # (nd, nv) tree: the slots' velocities of unit joint velocities (E)
    cdef double[:, ::1] Z  # (nd, nd) damping + tau stiffness
    cdef double[::1] lu  # (nd * nd) the factor of I + tau E U Z (column-major)
    cdef int[::1] pivots
    cdef double tau  # the factored tau (NaN: none)
    cdef double[::1] a  # nd work vectors
    cdef double[::1] b
    cdef double[::1] x
    cdef double[::1] w  # nv work vector

    # the pairs' slopes of the evaluation D holds (compliant_forces_into ran with D.cc_linear set)
    # gathered by slot; body coordinates: U = M^-1 E^T (a method with constraints then corrects U
    # to its constrained inverse mass: ode_kernels); joint coordinates: the method fills U and B
    cdef void prepare(self, FlatData D) noexcept nogil
    # whether the next evaluations take the pairs' slopes (D.cc_linear): always (``on``) or while probing
    cdef void slopes(self, FlatData D, bint on) noexcept nogil
    # J x and x <- (I - tau J)^-1 x over y = (q, v, work) (the System's stiff_times, stiff_solve)
    cdef void times(self, const double[::1] x, double[::1] out) noexcept nogil
    cdef bint solve(self, double tau, double[::1] x) noexcept nogil
    # the size on a step h of the slopes the last evaluation took (D.cc_stiffness, D.cc_damping):
    # sum over the pairs' bodies of (M^-1)_ii (h^2 |stiffness_ii| + h |damping_ii|)
    cdef double measure(self, FlatData D, double h) noexcept nogil
    # the velocity rows of J x: out_v = -U (stiffness E dq + damping E x_v), dq the velocities
    # equivalent to x's q rows (N(q0)^+ x_q: the method's map)
    cdef void velocity_times(self, const double[::1] dq, const double[::1] x_v, double[::1] out_v) noexcept nogil
    # the velocity rows of (I - tau J)^-1 r, dq as above for r's q rows: r_v <- x_v (the q rows
    # follow as x_q = r_q + tau N(q0) x_v); False when the small system is singular
    cdef bint velocity_solve(self, double tau, const double[::1] dq, double[::1] r_v) noexcept nogil
    cdef Py_ssize_t _slot(self, Py_ssize_t b) noexcept nogil
    cdef void _rows(self, const double[::1] x_v, double* out) noexcept nogil
    cdef bint _factor(self, double tau) noexcept nogil
    cdef void _subtract(self, const double[:, ::1] Mat, double tau, double[::1] r_v) noexcept nogil


# A method's right-hand side with the contacts' Jacobian (ode_kernels.OdeSystem,
# recursive_kernels.TreeSystem): stiff_times, stiff_solve, stiff_measure, stiff_probe through jac
# (None, has_jac False: no compliant pair, J = 0); subclasses take it in stiff_derivative
cdef class ContactSystem(System):
    cdef FlatData D
    cdef bint has_jac
    cdef ContactJacobian jac
