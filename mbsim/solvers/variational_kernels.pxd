# The variational method's typed structures (mbsim.solvers.variational_kernels): its constants
# (VarModel) and the buffers of one run (VarData), read by its compiled step next to a FlatModel
# and a FlatData (mbsim.model.layout). Arrays are typed memoryviews for the kernels; Python reads
# the numpy arrays they view (variational_kernels.pyx: __getattr__).

from mbsim.model.layout cimport FlatData, FlatModel

# advance's status codes (as ode_kernels')
cdef enum:
    VAR_OK = 0
    VAR_FAILED = 1
    VAR_VIOLATION = 3
    VAR_RECORD_FAILED = 4

cdef class VarModel:
    cdef readonly Py_ssize_t n
    cdef readonly Py_ssize_t nquat
    cdef readonly Py_ssize_t m
    cdef const double[:, :, ::1] GT
    cdef const double[::1] mass
    cdef const double[:, :, ::1] inertia
    cdef const double[::1] mass_scale
    cdef readonly Py_ssize_t forces_vary
    cdef readonly double tol
    cdef readonly Py_ssize_t max_iter
    cdef readonly double rank_tol
    cdef dict _arrays

cdef class VarData:
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
    cdef dict _arrays
