# The time integrators, once (integrate.pyx): fixed steps (euler, semi_implicit_euler, rk4), the
# Rosenbrock-W step of the implicit contact step, and
# scipy's embedded Runge-Kutta pairs (RK45, DOP853) with its error control and dense output, over
# a System (the right-hand side of y' = f(t, y), y = (q, v, rest)) into a Work (the run's stage
# buffers and the adaptive integrator's state). The ODE methods (ode_kernels) and recursive
# (recursive_kernels) subclass System.

# the integrators (Python: INTEGRATORS)
cdef enum:
    I_EULER = 0
    I_SEMI_IMPLICIT_EULER = 1
    I_RK4 = 2
    I_RK45 = 3
    I_DOP853 = 4

# status of an adaptive step (Python: STEP_OK ...)
cdef enum:
    A_OK = 0
    A_EVAL_FAILED = 1  # the right-hand side refused a state (rank loss)
    A_TOO_SMALL = 2  # scipy's "Required step size is less than spacing between numbers."


cdef class System:
    # y = (q (nq), v (nv), rest): semi-implicit Euler updates v, then q with the new v, the rest as Euler
    cdef readonly Py_ssize_t nq, nv, n
    # out = f(t, y); False when the state cannot be evaluated (the step is abandoned)
    cdef bint derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil
    # the first stage of a fixed step (a subclass may hand back a derivative it holds already)
    cdef bint first_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil
    # dq/dt at (q, v) into out (nq,)
    cdef void q_rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil
    # the Rosenbrock-W step's Jacobian J (rosenbrock_step): f(t, y) into out with J prepared at
    # (t, y); out = J x; x <- (I - tau J)^-1 x (False: singular). The base class: J = 0
    cdef bint stiff_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil
    cdef void stiff_times(self, const double[::1] x, double[::1] out) noexcept nogil
    cdef bint stiff_solve(self, double tau, double[::1] x) noexcept nogil
    # the size on a step h of the stiff part met by the last evaluation (h^2 |stiffness / mass| + h
    # |damping / mass|; 0: none); stiff_probe(on): whether evaluations take that part (between them)
    cdef double stiff_measure(self, double h) noexcept nogil
    cdef void stiff_probe(self, bint on) noexcept nogil


cdef class Work:
    cdef readonly int method
    cdef readonly Py_ssize_t n
    # stages (rows): k1..k4 of the fixed steps; the adaptive pairs' K (RK45 7, DOP853 16 with the
    # dense output's 3 extra stages)
    cdef double[:, ::1] K
    cdef double[::1] ytmp
    cdef double[::1] ynew
    # the Rosenbrock-W step's stage derivative, its sum of earlier stages, its error estimate, the
    # implicit step's current and next sub-step states (5 rows)
    cdef double[:, ::1] R
    # the adaptive integrator's state: (t, y) its current point, f = f(t, y), y_old the step's start
    cdef double[::1] y
    cdef double[::1] f
    cdef double[::1] y_old
    # the dense output's coefficients of the last step (RK45: Q, 4 rows; DOP853: F, 7 rows)
    cdef double[:, ::1] dense
    cdef public double rtol, atol, max_step, t_bound
    cdef public double t, t_old, h_abs, h_previous
    cdef public bint started
    cdef public Py_ssize_t nfev, rejected


# one fixed step of ``method`` (I_EULER, I_SEMI_IMPLICIT_EULER, I_RK4) from (t, y) into out
cdef bint fixed_step(System S, Work W, int method, double t, double h, const double[::1] y,
                     double[::1] out) noexcept nogil
# one linearly implicit step (Rosenbrock-W, ROS34PW2) from (t, y) into out with the System's
# Jacobian (stiff_derivative, stiff_times, stiff_solve); False when a stage or a solve fails
cdef bint rosenbrock_step(System S, Work W, double t, double h, const double[::1] y,
                          double[::1] out, bint prepared, double* used, double* stiffest) noexcept nogil
# the implicit contact step: the step in rosenbrock_step sub-steps, as many as its error estimate and
# the stiffness its stages meet ask for
cdef bint implicit_step(System S, Work W, double t, double h, const double[::1] y,
                        double[::1] out) noexcept nogil
# the adaptive integrator starts at (t, y): f evaluated, h_abs = first_step (<= 0: scipy's
# select_initial_step); A_OK or A_EVAL_FAILED
cdef int adaptive_start(System S, Work W, double t, const double[::1] y, double first_step) noexcept nogil
# continue from a corrected state y at the current time (f recomputed, h kept)
cdef int adaptive_continue(System S, Work W, const double[::1] y) noexcept nogil
# one accepted step of the pair (scipy's RungeKutta._step_impl): W.t, W.y, W.f, W.h_abs advanced
cdef int adaptive_step(System S, Work W) noexcept nogil
# the last step's interpolant (scipy's dense_output): coefficients into W.dense; False on a failed stage
cdef bint dense_prepare(System S, Work W) noexcept nogil
# y(t) of the prepared interpolant into out
cdef void dense_eval(Work W, double t, double[::1] out) noexcept nogil
