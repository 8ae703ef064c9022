# The variational method's typed structures (mbsim.solvers.variational.variational_kernels): its constants
# (VarModel), the buffers of one run (VarData), and the evaluators of the model's joints and forces
# its one compiled step calls (FlatEvaluator over a FlatModel and a FlatData, mbsim.model.layout;
# PyEvaluator over the model's Python functions, for models flatten does not take). Arrays are
# typed memoryviews for the kernels; Python reads the numpy arrays they view (__getattr__).

from mbsim.model.layout cimport FlatData, FlatModel, Record

# advance's status codes (as ode_kernels')
cdef enum:
    VAR_OK = 0
    VAR_FAILED = 1
    VAR_VIOLATION = 3
    VAR_RECORD_FAILED = 4

# how one step ended (step_once's first value)
cdef enum:
    STEP_TAKEN = 0
    STEP_NOT_CONVERGED = 1
    STEP_SINGULAR = 2
    STEP_LEGENDRE_FAILED = 3
    STEP_ERROR = 4

cdef class VarModel(Record):
    cdef readonly Py_ssize_t n
    cdef readonly Py_ssize_t nquat
    cdef readonly Py_ssize_t m
    cdef readonly Py_ssize_t nv
    cdef const double[:, :, ::1] GT
    cdef const double[::1] mass
    cdef const double[:, :, ::1] inertia
    cdef const double[::1] mass_scale
    cdef const double[::1] gravity_u
    cdef readonly Py_ssize_t forces_vary
    cdef readonly double tol
    cdef readonly Py_ssize_t max_iter
    cdef readonly double rank_tol

cdef class VarData(Record):
    cdef double[::1] p
    cdef double[::1] rate
    cdef double[::1] lam
    cdef double[::1] h
    cdef double[::1] lam_start
    cdef double[::1] um
    cdef double[::1] ud
    cdef double[::1] v_mid
    cdef double[::1] f_total
    cdef double[::1] f_nc
    cdef double[::1] a
    cdef double[::1] b
    cdef double[::1] D1
    cdef double[::1] D2
    cdef double[::1] F_total
    cdef double[::1] F_nc
    cdef double[::1] R1
    cdef double[::1] work_u
    cdef double[::1] force0
    cdef double[::1] bk
    cdef double[:, ::1] Ca
    cdef double[:, ::1] Cu
    cdef double[::1] C
    cdef double[::1] Ct
    cdef double[::1] Ca_t
    cdef double[:, ::1] Kt
    cdef double[::1] rhs
    cdef int[::1] pivots
    cdef double[:, ::1] K2
    cdef double[::1] rhs2
    cdef double[::1] s2
    cdef int[::1] rank
    cdef double[:, ::1] G1
    cdef double[:, ::1] G2
    cdef double[:, ::1] JG1
    cdef double[:, ::1] JG2
    cdef double[:, ::1] blk
    cdef double[::1] vdot
    cdef double[::1] v_new
    cdef double[::1] dg
    cdef double[:, ::1] Ab
    cdef double[:, ::1] Z
    cdef double[:, ::1] S
    cdef double[::1] y
    cdef int[:, :, ::1] touch

# The model's joints and applied forces for the step: ``joints`` puts phi, phi_t (nc,) and the
# Jacobian J (nc, nv) at (u, t) at rest into its views, ``forces`` the generalized forces at
# (u, v, t) -- all of them into Q, the non-conservative part into Qn (nv,). 0, or -1 when a Python
# evaluation raised (the exception kept in ``error``).
cdef class Evaluator:
    cdef double[::1] phi
    cdef double[::1] phi_t
    cdef double[:, ::1] J
    cdef double[::1] Q
    cdef double[::1] Qn
    cdef public object error
    cdef int joints(self, const double[::1] u, double t) noexcept nogil
    cdef int forces(self, const double[::1] u, const double[::1] v, double t) noexcept nogil

cdef class FlatEvaluator(Evaluator):
    cdef readonly FlatModel F
    cdef readonly FlatData D

cdef class PyEvaluator(Evaluator):
    cdef object joints_fn
    cdef object forces_fn
    cdef object arrays
