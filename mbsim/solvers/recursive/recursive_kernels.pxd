# The compiled steps of method ``recursive`` (recursive_kernels.pyx): the tree's arrays (Tree, what
# a step reads) and one run's buffers (TreeData, what it writes), typed as FlatModel/FlatData are
# (mbsim.model.layout): memoryviews for the kernels, numpy arrays for Python.

from mbsim.model.layout cimport Record
from mbsim.solvers.recursive.soa_kernels cimport AbaWork

# statuses of tree_steps/advance (OK, NOT_FINITE, STEP_FAILED); the integrators are
# mbsim.solvers.ode.integrate's (Tree.integrator: its codes)
cdef enum:
    S_OK = 0
    S_NOT_FINITE = 1
    S_STEP_FAILED = 2  # an adaptive step fell below its smallest (the Python path reports it)


cdef class Tree(Record):
    cdef const long long[::1] order
    cdef const long long[::1] parent
    cdef const long long[::1] jtype
    cdef const long long[::1] qadr
    cdef const long long[::1] vadr
    cdef const double[:, ::1] rp
    cdef const double[:, ::1] rc
    cdef const double[:, ::1] qrel0
    cdef const double[:, ::1] ax1
    cdef const double[:, ::1] ax2
    cdef const double[::1] ang0
    cdef const long long[::1] nvj
    cdef const double[::1] mass
    cdef const double[:, :, ::1] inertia
    cdef const double[::1] gravity
    cdef const signed char[::1] presc
    cdef const double[::1] qdd_presc
    cdef const double[::1] armature
    cdef const long long[:, ::1] quat_q
    cdef const long long[:, ::1] quat_v
    cdef const long long[::1] scalar_q
    cdef const long long[::1] scalar_v
    cdef const long long[::1] jc_v
    cdef const long long[::1] jc_q
    cdef const double[:, :, ::1] body_inertia
    cdef const long long[::1] owner
    cdef const long long[::1] body_joint
    cdef const long long[::1] carrier
    cdef const signed char[::1] back
    cdef const long long[::1] body2
    cdef const double[:, ::1] joint_point
    cdef const long long[::1] joint_body
    cdef readonly Py_ssize_t nq
    cdef readonly Py_ssize_t nv
    cdef readonly Py_ssize_t elements
    cdef readonly Py_ssize_t integrator


cdef class TreeData(Record):
    cdef double[:, ::1] quat
    cdef double[:, :, ::1] rot
    cdef double[:, ::1] o
    cdef double[:, ::1] com
    cdef double[:, ::1] V
    cdef double[:, ::1] vcom
    cdef double[::1] angle
    cdef double[:, ::1] Hs
    cdef double[:, ::1] acor
    cdef double[::1] rel
    cdef double[:, ::1] ext
    cdef double[::1] tau
    cdef double[::1] qdd
    cdef double[:, ::1] f
    cdef double[:, ::1] alpha
    cdef readonly AbaWork aba
    cdef double[::1] y
    cdef double[::1] ynew
    cdef double[::1] k1
    cdef double[::1] vbody
    cdef double[:, ::1] jrows
    cdef double[:, ::1] joint_force
    cdef double[::1] seg
    cdef long long[::1] k1_valid
