# Compiled steps of the ODE-based methods (ode_kernels.pyx): right-hand side, fixed-step
# integrators, projections and a block of steps between two records, over a FlatModel into a
# FlatData. P: the parameter vector (float64, NPARAMS) indexed by the enum below.

from mbsim.model.layout cimport FlatModel, FlatData
from mbsim.solvers.ode.integrate cimport System, Work
from mbsim.solvers.ode.stiff_kernels cimport ContactJacobian, ContactSystem, CoordinateMap

# the parameter vector P (Python reads the same values as METHOD ... NPARAMS)
cdef enum:
    P_METHOD = 0
    P_INTEGRATOR = 1
    P_ALPHA = 2
    P_BETA = 3
    P_RANK_TOL = 4
    P_PROJ_POSITION = 5
    P_PROJ_VELOCITY = 6
    P_PROJ_ITERATIONS = 7
    P_PROJ_TOL = 8
    P_ROBUST = 9
    P_PENALTY = 10
    P_OMEGA = 11
    P_MU = 12
    P_AL_TOL = 13
    P_AL_MAX_ITER = 14
    P_CUT = 15
    P_CONTACT_STEP = 16  # time.contact_step of the compliant contacts' step control (0: none)
    P_CONTACT_IMPLICIT = 17  # 1: steps near compliant contact are Rosenbrock-W (solver.contact_integration)
    P_NPARAMS = 18

# the methods (P[METHOD]; Python: LAGRANGE ... AUGMENTED_LAGRANGIAN)
cdef enum:
    M_LAGRANGE = 0
    M_NULL_SPACE = 1
    M_GAUSS_KKT = 2
    M_AUGMENTED_LAGRANGIAN = 3

# status of a step or block (Python: OK ... RECORD_FAILED)
cdef enum:
    S_OK = 0
    S_RANK_DEFICIENT = 1
    S_NOT_FINITE = 2
    S_VIOLATION = 3
    S_RECORD_FAILED = 4
    S_STEP_FAILED = 5  # an adaptive step fell below the smallest step (the Python path reports it)

# out = (q_dot, v_dot, power) at y = (q, v, work); False on rank loss (Python calls it too)
cpdef bint derivative(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] y,
                      double[::1] out) noexcept nogil
# whether the rank-robust solve at this state is the full-rank one (S's factor left in D.S)
cpdef bint certified_full_rank(FlatModel F, FlatData D, double rank_tol, bint kkt) noexcept nogil
# v_dot and lambda (D.lam) through S's factor in D.S (certified_full_rank or schur_factor left it there)
cdef void schur_accelerations(FlatModel F, FlatData D, double alpha, double beta, const double[::1] v,
                              double[::1] vdot) noexcept nogil
# mass-weighted projection of q (Newton steps, at most P[PROJ_ITERATIONS]), then of v, in place
# (mbsim.solvers.numerics.projection); False on rank loss (LAPACK's failure with P[ROBUST]); the Newton
# steps into used[0], max |Phi| at the returned q into violation[0] (-1: q not projected), the velocity
# projection's multipliers into lam_v (nc; NULL: not wanted): v changed by -M^-1 J^T lam_v
cdef bint project(FlatModel F, FlatData D, const double[::1] P, double t, double[::1] q, double[::1] v,
                  Py_ssize_t* used, double* violation, double* lam_v) noexcept nogil
# the rank cut of the coming adaptive step (null_space, gauss kkt)
cpdef double step_cut(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] y) noexcept nogil
# stats[start : start + 3] = (0, +inf, -inf): nothing solved yet
cpdef void reset_stats(double[::1] stats, Py_ssize_t start) noexcept nogil
# the unwrapped spring deflections at q become the next references (when a spring coordinate wraps)
cdef void update_coordinate_references(FlatModel F, FlatData D, double t, const double[::1] q) noexcept nogil
# v_dot at (t, q, v) into vdot; False on rank loss; the power of non-conservative forces and drives
# into power[0]
cdef bint accelerations(FlatModel F, FlatData D, const double[::1] P, double t, const double[::1] q,
                        const double[::1] v, double[::1] vdot, double* power) noexcept nogil
# the right-hand side as the integrators' System (mbsim.solvers.ode.integrate); P writable (the rank cut)
# (ContactSystem: D, has_jac, jac, the compliant contacts' Jacobian for the implicit contact step)
cdef class OdeSystem(ContactSystem):
    cdef FlatModel F
    cdef double[::1] P
    cdef double[::1] rows  # nc: a column of U through the constraint rows
    cdef double[::1] minv  # nv: its correction M^-1 J^T S^-1 J U
    cdef double[::1] column  # nv: that column
# the block of steps and recorded rows (Python: advance, which releases the GIL around it)
cdef int advance_c(FlatModel F, FlatData D, double[::1] P, OdeSystem S, Work W, double t, double[::1] q, double[::1] v,
                   double work, double h, double t_end, Py_ssize_t every, Py_ssize_t done, Py_ssize_t max_steps,
                   Py_ssize_t max_rows, Py_ssize_t max_block, double max_violation, double[:, ::1] rows,
                   double[::1] out) noexcept nogil
