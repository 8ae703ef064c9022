"""The time integrators, written once: fixed steps and scipy's adaptive embedded pairs, compiled.

Fixed step (mbsim.solvers.ode.integrators names them): ``euler`` (explicit), ``semi_implicit_euler``
(symplectic Euler: v first, then q with the new v), ``rk4`` (classical Runge-Kutta). Adaptive:
``RK45`` (Dormand-Prince 5(4)) and ``DOP853`` with exactly scipy's algorithm
(scipy/integrate/_ivp/rk.py: select_initial_step, the RMS error norm, SAFETY 0.9, MIN_FACTOR 0.2,
MAX_FACTOR 10, no growth right after a rejection, the smallest step 10 ulp of t, the first-same-as-
last stage, the interpolants of dense_output) and scipy's coefficients to the last bit, so that
for the same right-hand side it takes the same steps as scipy.integrate's solvers to round-off.
Linearly implicit: the Rosenbrock-W step ROS34PW2 with the System's stiff Jacobian, and the implicit
contact step of ``solver.contact_integration: implicit`` that takes it in as many sub-steps as its
error estimate and the contacts' stiffness ask for (rosenbrock_step, implicit_step).

The right-hand side is a :class:`System` (its ``derivative`` a C method called without the GIL);
the ODE methods (ode_kernels.OdeSystem) and ``recursive`` (recursive_kernels) subclass it. A
:class:`Work` holds a run's stage buffers and the adaptive integrator's state (t, y, f, h).
Python reaches them through ``PySystem`` (a Python callable as the right-hand side: the Python
path of every method, mbsim.solvers.ode.integrators, and the tests) and the def functions at the end.
"""

import numpy as np

from libc.math cimport INFINITY, fabs, isfinite, nextafter, pow, sqrt

INTEGRATORS = {"euler": I_EULER, "semi_implicit_euler": I_SEMI_IMPLICIT_EULER, "rk4": I_RK4,
               "RK45": I_RK45, "DOP853": I_DOP853}
STEP_OK, EVAL_FAILED, TOO_SMALL = A_OK, A_EVAL_FAILED, A_TOO_SMALL
TOO_SMALL_MESSAGE = "Required step size is less than spacing between numbers."

# scipy's step control (rk.py)
cdef double SAFETY = 0.9
cdef double MIN_FACTOR = 0.2
cdef double MAX_FACTOR = 10.0

# generated from scipy 1.17.1 (scipy/integrate/_ivp/rk.py, dop853_coefficients.py): the same doubles
# RK45 (Dormand-Prince 5(4)): C (6), A (6 x 6, row-major), B (6), E (7), P (7 x 4)
cdef double RK45_C[6]
RK45_C[:] = [0.0, 0.2, 0.3, 0.8, 0.8888888888888888, 1.0]
cdef double RK45_A[36]
RK45_A[:] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.075, 0.225, 0.0, 0.0, 0.0, 0.0, 0.9777777777777777, -3.7333333333333334, 3.5555555555555554, 0.0, 0.0, 0.0, 2.9525986892242035, -11.595793324188385, 9.822892851699436, -0.2908093278463649, 0.0, 0.0, 2.8462752525252526, -10.757575757575758, 8.906422717743473, 0.2784090909090909, -0.2735313036020583, 0.0]
cdef double RK45_B[6]
RK45_B[:] = [0.09114583333333333, 0.0, 0.44923629829290207, 0.6510416666666666, -0.322376179245283, 0.13095238095238096]
cdef double RK45_E[7]
RK45_E[:] = [-0.0012326388888888888, 0.0, 0.0042527702905061394, -0.03697916666666667, 0.05086379716981132, -0.0419047619047619, 0.025]
cdef double RK45_P[28]
RK45_P[:] = [1.0, -2.8535800653862835, 3.0717434641059005, -1.1270175653862835, 0.0, 0.0, 0.0, 0.0, 0.0, 4.023133379230305, -6.249321565289, 2.675424484351598, 0.0, -3.7324019615885042, 10.068970589843675, -5.685526961588504, 0.0, 2.5548038301849423, -6.399112377351017, 3.5219323679207912, 0.0, -1.3744241142186024, 3.272657752246729, -1.7672812570757455, 0.0, 1.3824689317781436, -3.764937863556287, 2.382468931778144]
# DOP853: C (16), A (16 x 16, row-major; rows 13-15 the dense output's extra stages), B (12), E3 (13), E5 (13), D (4 x 16)
cdef double DOP_C[16]
DOP_C[:] = [0.0, 0.05260015195876773, 0.0789002279381516, 0.1183503419072274, 0.2816496580927726, 0.3333333333333333, 0.25, 0.3076923076923077, 0.6512820512820513, 0.6, 0.8571428571428571, 1.0, 1.0, 0.1, 0.2, 0.7777777777777778]
cdef double DOP_A[256]
DOP_A[:] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.05260015195876773, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0197250569845379, 0.0591751709536137, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.02958758547680685, 0.0, 0.08876275643042054, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2413651341592667, 0.0, -0.8845494793282861, 0.924834003261792, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.037037037037037035, 0.0, 0.0, 0.17082860872947386, 0.12546768756682242, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.037109375, 0.0, 0.0, 0.17025221101954405, 0.06021653898045596, -0.017578125, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.03709200011850479, 0.0, 0.0, 0.17038392571223998, 0.10726203044637328, -0.015319437748624402, 0.008273789163814023, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6241109587160757, 0.0, 0.0, -3.3608926294469414, -0.868219346841726, 27.59209969944671, 20.154067550477894, -43.48988418106996, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.47766253643826434, 0.0, 0.0, -2.4881146199716677, -0.590290826836843, 21.230051448181193, 15.279233632882423, -33.28821096898486, -0.020331201708508627, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.9371424300859873, 0.0, 0.0, 5.186372428844064, 1.0914373489967295, -8.149787010746927, -18.52006565999696, 22.739487099350505, 2.4936055526796523, -3.0467644718982196, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.273310147516538, 0.0, 0.0, -10.53449546673725, -2.0008720582248625, -17.9589318631188, 27.94888452941996, -2.8589982771350235, -8.87285693353063, 12.360567175794303, 0.6433927460157636, 0.0, 0.0, 0.0, 0.0, 0.0, 0.054293734116568765, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585, 0.3111643669578199, -0.1521609496625161, 0.20136540080403034, 0.04471061572777259, 0.0, 0.0, 0.0, 0.0, 0.056167502283047954, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25350021021662483, -0.2462390374708025, -0.12419142326381637, 0.15329179827876568, 0.00820105229563469, 0.007567897660545699, -0.008298, 0.0, 0.0, 0.0, 0.03183464816350214, 0.0, 0.0, 0.0, 0.0, 0.028300909672366776, 0.053541988307438566, -0.05492374857139099, 0.0, 0.0, -0.00010834732869724932, 0.0003825710908356584, -0.00034046500868740456, 0.1413124436746325, 0.0, 0.0, -0.42889630158379194, 0.0, 0.0, 0.0, 0.0, -4.697621415361164, 7.683421196062599, 4.06898981839711, 0.3567271874552811, 0.0, 0.0, 0.0, -0.0013990241651590145, 2.9475147891527724, -9.15095847217987, 0.0]
cdef double DOP_B[12]
DOP_B[:] = [0.054293734116568765, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585, 0.3111643669578199, -0.1521609496625161, 0.20136540080403034, 0.04471061572777259]
cdef double DOP_E3[13]
DOP_E3[:] = [-0.18980075407240762, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585, -0.4226823213237919, -0.1521609496625161, 0.20136540080403034, 0.02265179219836082, 0.0]
cdef double DOP_E5[13]
DOP_E5[:] = [0.01312004499419488, 0.0, 0.0, 0.0, 0.0, -1.2251564463762044, -0.4957589496572502, 1.6643771824549864, -0.35032884874997366, 0.3341791187130175, 0.08192320648511571, -0.022355307863886294, 0.0]
cdef double DOP_D[64]
DOP_D[:] = [-8.428938276109013, 0.0, 0.0, 0.0, 0.0, 0.5667149535193777, -3.0689499459498917, 2.38466765651207, 2.117034582445028, -0.871391583777973, 2.2404374302607883, 0.6315787787694688, -0.08899033645133331, 18.148505520854727, -9.194632392478356, -4.436036387594894, 10.427508642579134, 0.0, 0.0, 0.0, 0.0, 242.28349177525817, 165.20045171727028, -374.5467547226902, -22.113666853125306, 7.733432668472264, -30.674084731089398, -9.332130526430229, 15.697238121770845, -31.139403219565178, -9.35292435884448, 35.81684148639408, 19.985053242002433, 0.0, 0.0, 0.0, 0.0, -387.0373087493518, -189.17813819516758, 527.8081592054236, -11.57390253995963, 6.8812326946963, -1.0006050966910838, 0.7777137798053443, -2.778205752353508, -60.19669523126412, 84.32040550667716, 11.99229113618279, -25.69393346270375, 0.0, 0.0, 0.0, 0.0, -154.18974869023643, -231.5293791760455, 357.6391179106141, 93.40532418362432, -37.45832313645163, 104.0996495089623, 29.8402934266605, -43.53345659001114, 96.32455395918828, -39.17726167561544, -149.72683625798564]


# Python's min(a, b) and max(a, b) (scipy's step control is Python: a NaN error keeps MIN_FACTOR)
cdef inline double _pmin(double a, double b) noexcept nogil:
    return b if b < a else a


cdef inline double _pmax(double a, double b) noexcept nogil:
    return b if b > a else a


cdef class System:
    """The right-hand side f(t, y) of y' = f with y = (q (nq), v (nv), rest): subclasses override
    ``derivative`` (and ``q_rate`` for semi-implicit Euler, ``first_derivative`` to reuse a
    derivative they hold)."""

    def __init__(self, Py_ssize_t nq, Py_ssize_t nv, Py_ssize_t n):
        self.nq, self.nv, self.n = nq, nv, n

    cdef bint derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        return False

    cdef bint first_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        return self.derivative(t, y, out)

    cdef void q_rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
        cdef Py_ssize_t k
        for k in range(self.nq):
            out[k] = v[k]

    cdef bint stiff_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        return self.derivative(t, y, out)

    cdef void stiff_times(self, const double[::1] x, double[::1] out) noexcept nogil:
        cdef Py_ssize_t k
        for k in range(out.shape[0]):
            out[k] = 0.0

    cdef bint stiff_solve(self, double tau, double[::1] x) noexcept nogil:
        return True

    cdef double stiff_measure(self, double h) noexcept nogil:
        return 0.0

    cdef void stiff_probe(self, bint on) noexcept nogil:
        pass


cdef class PySystem(System):
    """A Python right-hand side as a System: fun(t, y) -> dy/dt, and for semi-implicit Euler
    q_rate(q, v) -> dq/dt (None: dq/dt = v, nq = nv). The Python path's steps
    (mbsim.solvers.ode.integrators) and the tests. An exception raised by fun or q_rate (a
    SimulationError, an interrupt) fails the stage and is kept in ``error``: the def functions
    below raise it once the step has stopped."""

    cdef object fun
    cdef object rate
    # jacobian(t, y) -> (n, n) for the Rosenbrock-W step (None: J = 0), and the one it returned
    cdef object jacobian
    cdef object J
    # f(t, y) of the next fixed step's first stage when the caller holds it (None: evaluated)
    cdef public object first
    cdef public object error

    def __init__(self, fun, Py_ssize_t n, Py_ssize_t nq=0, Py_ssize_t nv=0, q_rate=None, jacobian=None):
        self.fun, self.rate, self.jacobian, self.J = fun, q_rate, jacobian, None
        self.nq, self.nv, self.n = nq, nv, n
        self.first = self.error = None

    cdef bint derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        with gil:
            if self.error is not None:  # a stage after a failed one (a q_rate error) is not evaluated
                return False
            try:
                np.asarray(out)[:] = np.asarray(self.fun(t, np.asarray(y).copy()), dtype=float)
            except BaseException as exc:  # noqa: B036 -- kept and raised by the caller, interrupts too
                self.error = exc
                return False
        return True

    cdef bint first_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        with gil:
            if self.first is None:
                return self.derivative(t, y, out)
            np.asarray(out)[:] = self.first
            self.first = None
        return True

    cdef bint stiff_derivative(self, double t, const double[::1] y, double[::1] out) noexcept nogil:
        if not self.derivative(t, y, out):
            return False
        with gil:
            if self.jacobian is not None:
                self.J = np.asarray(self.jacobian(t, np.asarray(y).copy()), dtype=float)
        return True

    cdef void stiff_times(self, const double[::1] x, double[::1] out) noexcept nogil:
        with gil:
            np.asarray(out)[:] = 0.0 if self.J is None else self.J @ np.asarray(x)

    cdef bint stiff_solve(self, double tau, double[::1] x) noexcept nogil:
        with gil:
            if self.J is not None:
                np.asarray(x)[:] = np.linalg.solve(np.eye(self.n) - tau * self.J, np.asarray(x))
        return True

    cdef void q_rate(self, const double[::1] q, const double[::1] v, double[::1] out) noexcept nogil:
        cdef Py_ssize_t k
        if self.rate is None:
            for k in range(self.nq):
                out[k] = v[k]
            return
        with gil:
            try:
                np.asarray(out)[:] = np.asarray(self.rate(np.asarray(q).copy(), np.asarray(v).copy()), dtype=float)
            except BaseException as exc:  # noqa: B036
                self.error = exc


cdef void _raise_kept(System S) except *:
    """Raise the exception a PySystem kept (and forget it)."""
    cdef PySystem P
    if isinstance(S, PySystem):
        P = <PySystem>S
        P.first = None
        if P.error is not None:
            exc, P.error = P.error, None
            raise exc


cdef class Work:
    """A run's integrator buffers and the adaptive integrator's state (scipy's solver object):
    ``method`` (INTEGRATORS), the size n of y, and for the adaptive pairs rtol, atol (scalars;
    rtol raised to 100 eps as scipy does), max_step and the end time t_bound."""

    def __init__(self, Py_ssize_t n, int method, double rtol=1e-3, double atol=1e-6,
                 double max_step=INFINITY, double t_bound=INFINITY):
        cdef Py_ssize_t stages = 16 if method == I_DOP853 else 7 if method == I_RK45 else 4
        self.method, self.n = method, n
        self.K = np.zeros((stages, n))
        self.ytmp, self.ynew = np.zeros(n), np.zeros(n)
        self.R = np.zeros((5, n))
        self.y, self.f, self.y_old = np.zeros(n), np.zeros(n), np.zeros(n)
        self.dense = np.zeros((7 if method == I_DOP853 else 4, n))
        self.rtol = max(rtol, 100 * np.finfo(float).eps)
        self.atol, self.max_step, self.t_bound = atol, max_step, t_bound
        self.t = self.t_old = self.h_previous = 0.0
        self.h_abs = 0.0
        self.started = False
        self.nfev = self.rejected = 0

    @property
    def stages(self):
        """The stage rows K (a copy)."""
        return np.asarray(self.K).copy()

    @property
    def state(self):
        """(t, y, f, h_abs) of the adaptive integrator (copies)."""
        return self.t, np.asarray(self.y).copy(), np.asarray(self.f).copy(), self.h_abs


# ---------------------------------------------------------------------------------- fixed steps

cdef bint fixed_step(System S, Work W, int method, double t, double h, const double[::1] y,
                     double[::1] out) noexcept nogil:
    """One step of ``method`` from (t, y) into out (mbsim.solvers.ode.integrators): euler, semi-implicit
    Euler (v with the first stage's acceleration, then q with the new v, the rest as Euler) or rk4.
    The first stage goes through S.first_derivative. False when a stage fails."""
    cdef Py_ssize_t nq = S.nq, nv = S.nv
    cdef Py_ssize_t ny = y.shape[0]
    cdef double[::1] k1 = W.K[0]
    cdef double[::1] k2 = W.K[1]
    cdef double[::1] k3
    cdef double[::1] k4
    cdef double[::1] yt = W.ytmp
    cdef Py_ssize_t k
    cdef double half, sixth
    if not S.first_derivative(t, y, k1):
        return False
    # semi-implicit Euler: v first, then q with the new v (the first stage's q rate is not used)
    if method == I_SEMI_IMPLICIT_EULER:
        for k in range(nv):
            out[nq + k] = y[nq + k] + h * k1[nq + k]
        S.q_rate(y[:nq], out[nq : nq + nv], k2[:nq])
        for k in range(nq):
            out[k] = y[k] + h * k2[k]
        for k in range(nq + nv, ny):
            out[k] = y[k] + h * k1[k]
        return True
    if method == I_EULER:
        for k in range(ny):
            out[k] = y[k] + h * k1[k]
        return True
    k3, k4 = W.K[2], W.K[3]
    half = 0.5 * h
    for k in range(ny):
        yt[k] = y[k] + half * k1[k]
    if not S.derivative(t + 0.5 * h, yt, k2):
        return False
    for k in range(ny):
        yt[k] = y[k] + half * k2[k]
    if not S.derivative(t + 0.5 * h, yt, k3):
        return False
    for k in range(ny):
        yt[k] = y[k] + h * k3[k]
    if not S.derivative(t + h, yt, k4):
        return False
    sixth = h / 6.0
    for k in range(ny):
        out[k] = y[k] + sixth * (k1[k] + 2.0 * k2[k] + 2.0 * k3[k] + k4[k])
    return True


# ---------------------------------------------------------------------------------- Rosenbrock-W

# ROS34PW2 (Rang & Angermann, "New Rosenbrock W-methods of order 3 for partial differential
# algebraic equations of index 1", BIT 45, 2005): 4 stages, order 3 for any Jacobian, L-stable,
# stiffly accurate (b is Gamma's last row with gamma); alpha and Gamma strictly lower, row-major 4 x 4
cdef double ROS_GAMMA = 0.435866521508459
cdef double[16] ROS_ALPHA = [
    0.0, 0.0, 0.0, 0.0,
    0.87173304301691801, 0.0, 0.0, 0.0,
    0.84457060015369423, -0.11299064236484185, 0.0, 0.0,
    0.0, 0.0, 1.0, 0.0,
]
cdef double[16] ROS_GAMMAS = [
    0.0, 0.0, 0.0, 0.0,
    -0.87173304301691801, 0.0, 0.0, 0.0,
    -0.90338057013044082, 0.054180672388095326, 0.0, 0.0,
    0.24212380706095346, -1.2232505839045147, 0.54526025533510214, 0.0,
]
cdef double[4] ROS_B = [0.24212380706095346, -1.2232505839045147, 1.5452602553351020, 0.435866521508459]
# the embedded second-order solution's weights (the local error estimate y_new - y_hat)
cdef double[4] ROS_BHAT = [0.37810903145819369, -0.096042292212423178, 0.5, 0.2179332607542295]
ROSENBROCK = {
    "gamma": ROS_GAMMA,
    "alpha": [[ROS_ALPHA[4 * i + j] for j in range(4)] for i in range(4)],
    "Gamma": [[ROS_GAMMAS[4 * i + j] for j in range(4)] for i in range(4)],
    "b": [ROS_B[i] for i in range(4)],
    "b_hat": [ROS_BHAT[i] for i in range(4)],
}


cdef bint rosenbrock_step(System S, Work W, double t, double h, const double[::1] y,
                          double[::1] out, bint prepared, double* used, double* stiffest) noexcept nogil:
    """One step of the linearly implicit W-method (Hairer & Wanner, Solving ODEs II, IV.7, eq. 7.4'
    with J in place of f'(y)): (I - h gamma J) k_i = h f(t + alpha_i h, y + sum_j alpha_ij k_j)
    + h J sum_j gamma_ij k_j, y_new = y + sum_i b_i k_i. J is the System's stiff part, prepared at
    (t, y) by the first stage (stiff_derivative); the time enters the stages only through f (a
    W-method keeps its order with the time derivative of f left out of J). ``prepared``: J is the
    one the System holds already, the first stage is f alone. The stiff part's measure at the
    start into used, the largest a stage met into stiffest (stiff_measure); the embedded
    second-order solution's difference y_new - y_hat into W.R[2] (the local error estimate)."""
    cdef Py_ssize_t ny = y.shape[0], i, j, k
    cdef double[::1] f = W.R[0]
    cdef double[::1] g = W.R[1]
    cdef double[::1] yt = W.ytmp
    cdef double[::1] ki
    cdef double ci = 0.0, a, tau = h * ROS_GAMMA
    cdef bint ok
    stiffest[0] = 0.0
    for i in range(4):
        ki = W.K[i]
        if i == 0:
            ok = S.derivative(t, y, f) if prepared else S.stiff_derivative(t, y, f)
        else:
            ci = 0.0
            for j in range(i):
                ci += ROS_ALPHA[4 * i + j]
            for k in range(ny):
                a = y[k]
                for j in range(i):
                    a += ROS_ALPHA[4 * i + j] * W.K[j, k]
                yt[k] = a
            ok = S.derivative(t + ci * h, yt, f)
        if not ok:
            return False
        a = S.stiff_measure(h)
        if i == 0 and not prepared:
            used[0] = a
        stiffest[0] = max(stiffest[0], a)
        if i == 0:
            for k in range(ny):
                ki[k] = h * f[k]
        else:
            # h f + h J (sum_j gamma_ij k_j)
            for k in range(ny):
                a = 0.0
                for j in range(i):
                    a += ROS_GAMMAS[4 * i + j] * W.K[j, k]
                g[k] = a
            S.stiff_times(g, ki)
            for k in range(ny):
                ki[k] = h * (f[k] + ki[k])
        if not S.stiff_solve(tau, ki):
            return False
    for k in range(ny):
        a = y[k]
        for i in range(4):
            a += ROS_B[i] * W.K[i, k]
        out[k] = a
        a = 0.0
        for i in range(4):
            a += (ROS_B[i] - ROS_BHAT[i]) * W.K[i, k]
        W.R[2, k] = a
    return True


# The implicit step's local error control: the coordinates (q, v; not the work) of the embedded
# solution within ATOL + RTOL |y| in the RMS norm (m, rad, m/s, rad/s): above the error of a step
# that resolves its contact, resting or sliding (at 1e-6 the Panda's resting hand split its steps
# 2.8 times over for micrometre-per-second ringing), far below that of a step run over an impact it
# cannot resolve (a velocity off by m/s)
cdef double _IMPLICIT_ATOL = 1e-4
cdef double _IMPLICIT_RTOL = 1e-2
# a sub-step is refused when a stage met a contact stiffer than this many times the J it took (plus
# one: a measure below 1 is not stiff on the sub-step); the smallest sub-step, as a fraction of h
cdef double _RETAKE_RATIO = 2.0
cdef double _SMALLEST = 1e-7
IMPLICIT_ATOL, IMPLICIT_RTOL = _IMPLICIT_ATOL, _IMPLICIT_RTOL


cdef bint implicit_step(System S, Work W, double t, double h, const double[::1] y,
                        double[::1] out) noexcept nogil:
    """The step from t to t + h in Rosenbrock-W sub-steps (rosenbrock_step, J at each sub-step's
    start): one when it is good, else as many as the contact needs. A sub-step is refused and
    halved-or-less when (1) a stage met a contact far stiffer than its J (one that began within it,
    which J at its start cannot hold), or (2) its embedded error estimate passes the tolerance
    (an impact shorter than the sub-step, whose force the linearisation misjudges); after an
    accepted sub-step the next may grow again. False when a sub-step fails or falls below
    _SMALLEST h (the caller reports the step)."""
    cdef Py_ssize_t ny = y.shape[0], nc = S.nq + S.nv, k
    cdef double[::1] ycur = W.R[3]
    cdef double[::1] ynext = W.R[4]
    cdef double tt = t, remaining = h, step = h, used = 0.0, stiffest = 0.0, err, sc, e, factor
    cdef bint ok
    cdef double scale = max(1.0, fabs(t) + h)
    for k in range(ny):
        ycur[k] = y[k]
    S.stiff_probe(True)
    while remaining > 1e-15 * scale:
        step = min(step, remaining)
        if remaining - step < 1e-9 * step:  # land on t + h
            step = remaining
        ok = rosenbrock_step(S, W, tt, step, ycur, ynext, False, &used, &stiffest)
        err = INFINITY
        if ok and not (stiffest > _RETAKE_RATIO * used + 1.0):
            err = 0.0
            for k in range(nc):
                sc = _IMPLICIT_ATOL + _IMPLICIT_RTOL * max(fabs(ycur[k]), fabs(ynext[k]))
                e = W.R[2, k] / sc
                err += e * e
            err = sqrt(err / max(nc, 1))
            if not isfinite(err):
                err = INFINITY
        if err <= 1.0:
            for k in range(ny):
                ycur[k] = ynext[k]
            tt += step
            remaining -= step
            # the next sub-step: larger again where this one was easy (third-order error: err^(-1/3))
            factor = 2.0 if err < 0.1 else 0.9 * pow(err, -1.0 / 3.0) if err > 0.0 else 2.0
            step = step * min(2.0, max(1.0, factor))
            continue
        factor = 0.9 * pow(err, -1.0 / 3.0) if isfinite(err) else 0.25
        step = step * min(0.5, max(0.1, factor))
        if step < _SMALLEST * h:
            S.stiff_probe(False)
            return False
    S.stiff_probe(False)
    for k in range(ny):
        out[k] = ycur[k]
    return True


def rosenbrock_step_of(System S, Work W, double t, double h, const double[::1] y, bint implicit=False):
    """One Rosenbrock-W step (rosenbrock_step; implicit: implicit_step) for Python and the tests:
    y_new, a new array."""
    out = np.empty(y.shape[0])
    cdef double used = 0.0, stiffest = 0.0
    cdef bint ok = (implicit_step(S, W, t, h, y, out) if implicit
                    else rosenbrock_step(S, W, t, h, y, out, False, &used, &stiffest))
    _raise_kept(S)
    if not ok:
        raise FloatingPointError("rosenbrock_step: a stage or a linear solve failed")
    return out


# ---------------------------------------------------------------------------------- adaptive pairs

cdef double _rms(const double* x, const double* scale, Py_ssize_t n) noexcept nogil:
    """scipy's norm(x / scale): the RMS value."""
    cdef double s = 0.0, a
    cdef Py_ssize_t i
    for i in range(n):
        a = x[i] / scale[i]
        s += a * a
    return sqrt(s) / sqrt(<double>n)


cdef double _select_initial_step(System S, Work W, double t0, double order, bint* ok) noexcept nogil:
    """scipy's select_initial_step (common.py) from (t0, W.y, W.f); one evaluation into W.K[1]."""
    cdef Py_ssize_t n = W.n, i
    cdef double interval = fabs(W.t_bound - t0)
    cdef double* y0 = &W.y[0]
    cdef double* f0 = &W.f[0]
    cdef double* scale = &W.ynew[0]
    cdef double* y1 = &W.ytmp[0]
    cdef double* f1
    cdef double d0, d1, d2, h0, h1
    ok[0] = True
    if n == 0:
        return INFINITY
    if interval == 0.0:
        return 0.0
    for i in range(n):
        scale[i] = W.atol + fabs(y0[i]) * W.rtol
    d0 = _rms(y0, scale, n)
    d1 = _rms(f0, scale, n)
    if d0 < 1e-5 or d1 < 1e-5:
        h0 = 1e-6
    else:
        h0 = 0.01 * d0 / d1
    h0 = _pmin(h0, interval)
    for i in range(n):
        y1[i] = y0[i] + h0 * f0[i]
    W.nfev += 1
    if not S.derivative(t0 + h0, W.ytmp, W.K[1]):
        ok[0] = False
        return 0.0
    f1 = &W.K[1, 0]
    # (f1 - f0) / scale, into y1
    for i in range(n):
        y1[i] = f1[i] - f0[i]
    d2 = _rms(y1, scale, n) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = _pmax(1e-6, h0 * 1e-3)
    else:
        h1 = pow(0.01 / _pmax(d1, d2), 1.0 / (order + 1.0))
    return _pmin(_pmin(_pmin(100 * h0, h1), interval), W.max_step)


cdef int adaptive_start(System S, Work W, double t, const double[::1] y, double first_step) noexcept nogil:
    """A fresh solver at (t, y) (scipy's RungeKutta.__init__): f = f(t, y), h_abs = first_step, or
    select_initial_step when first_step <= 0."""
    cdef Py_ssize_t i
    cdef bint ok
    for i in range(W.n):
        W.y[i] = y[i]
    W.t, W.t_old, W.h_previous, W.started = t, t, 0.0, False
    W.nfev += 1
    if not S.derivative(t, W.y, W.f):
        return A_EVAL_FAILED
    if first_step > 0.0:
        W.h_abs = first_step
    else:
        W.h_abs = _select_initial_step(S, W, t, 7.0 if W.method == I_DOP853 else 4.0, &ok)
        if not ok:
            return A_EVAL_FAILED
    W.started = True
    return A_OK


cdef int adaptive_continue(System S, Work W, const double[::1] y) noexcept nogil:
    """Continue from a corrected state y at the current time (a projection, the quaternions'
    rescaling): y replaced, f recomputed there, the step size kept."""
    cdef Py_ssize_t i
    for i in range(W.n):
        W.y[i] = y[i]
    W.nfev += 1
    if not S.derivative(W.t, W.y, W.f):
        return A_EVAL_FAILED
    return A_OK


cdef bint _rk_stages(System S, Work W, const double* A, const double* B, const double* C, Py_ssize_t stages,
                     double t, double h) noexcept nogil:
    """scipy's rk_step: K[0] = f, the stages K[1:stages], y_new = y + h K^T B into W.ynew and
    K[stages] = f(t + h, y_new). False when an evaluation fails."""
    cdef Py_ssize_t n = W.n, i, j, s
    cdef double* K = &W.K[0, 0]
    cdef double* y = &W.y[0]
    cdef double* f = &W.f[0]
    cdef double* yt = &W.ytmp[0]
    cdef double* yn = &W.ynew[0]
    cdef double acc
    for i in range(n):
        K[i] = f[i]
    for s in range(1, stages):
        # dy = (K[:s]^T a[:s]) h
        for i in range(n):
            acc = 0.0
            for j in range(s):
                acc += K[j * n + i] * A[s * stages + j]
            yt[i] = y[i] + acc * h
        W.nfev += 1
        if not S.derivative(t + C[s] * h, W.ytmp, W.K[s]):
            return False
    for i in range(n):
        acc = 0.0
        for j in range(stages):
            acc += K[j * n + i] * B[j]
        yn[i] = y[i] + h * acc
    W.nfev += 1
    return S.derivative(t + h, W.ynew, W.K[stages])


cdef double _error_norm(Work W, double h) noexcept nogil:
    """scipy's _estimate_error_norm of the step just computed (scale = atol + max(|y|, |y_new|) rtol
    into W.ytmp)."""
    cdef Py_ssize_t n = W.n, i, j
    cdef double* K = &W.K[0, 0]
    cdef double* y = &W.y[0]
    cdef double* yn = &W.ynew[0]
    cdef double* scale = &W.ytmp[0]
    cdef double a, b, e5, e3, s5, s3, denom
    for i in range(n):
        a, b = fabs(y[i]), fabs(yn[i])
        # np.maximum: a NaN wins
        scale[i] = W.atol + (a if (a > b or a != a) else b) * W.rtol
    if W.method == I_RK45:
        s5 = 0.0
        for i in range(n):
            e5 = 0.0
            for j in range(7):
                e5 += K[j * n + i] * RK45_E[j]
            e5 = e5 * h / scale[i]
            s5 += e5 * e5
        return sqrt(s5) / sqrt(<double>n)
    s5, s3 = 0.0, 0.0
    for i in range(n):
        e5, e3 = 0.0, 0.0
        for j in range(13):
            e5 += K[j * n + i] * DOP_E5[j]
            e3 += K[j * n + i] * DOP_E3[j]
        e5, e3 = e5 / scale[i], e3 / scale[i]
        s5 += e5 * e5
        s3 += e3 * e3
    # np.linalg.norm(err)**2
    s5, s3 = sqrt(s5), sqrt(s3)
    s5, s3 = s5 * s5, s3 * s3
    if s5 == 0.0 and s3 == 0.0:
        return 0.0
    denom = s5 + 0.01 * s3
    return fabs(h) * s5 / sqrt(denom * n)


cdef int adaptive_step(System S, Work W) noexcept nogil:
    """One accepted step (scipy's RungeKutta._step_impl, forward in time): from (W.t, W.y, W.f)
    with the proposal W.h_abs, rejected tries shrinking it, the last step cut to land on t_bound.
    On A_OK: W.t_old, W.y_old the step's start, W.t, W.y, W.f its end, W.h_previous its size,
    W.h_abs the next proposal. A_EVAL_FAILED: a stage could not be evaluated (state unchanged);
    A_TOO_SMALL: the step fell below 10 ulp of t."""
    cdef Py_ssize_t n = W.n, i
    cdef double t = W.t
    cdef double min_step = 10.0 * fabs(nextafter(t, INFINITY) - t)
    cdef double h_abs, h, t_new, error_norm, factor, exponent
    cdef bint rejected = False
    cdef const double* A
    cdef const double* B
    cdef const double* C
    cdef Py_ssize_t stages
    if W.method == I_DOP853:
        A, B, C, stages, exponent = DOP_A12, DOP_B, DOP_C, 12, -1.0 / 8.0
    else:
        A, B, C, stages, exponent = RK45_A, RK45_B, RK45_C, 6, -1.0 / 5.0
    if W.h_abs > W.max_step:
        h_abs = W.max_step
    elif W.h_abs < min_step:
        h_abs = min_step
    else:
        h_abs = W.h_abs
    while True:
        if h_abs < min_step:
            return A_TOO_SMALL
        h = h_abs
        t_new = t + h
        if t_new - W.t_bound > 0:
            t_new = W.t_bound
        h = t_new - t
        h_abs = fabs(h)
        if not _rk_stages(S, W, A, B, C, stages, t, h):
            return A_EVAL_FAILED
        error_norm = _error_norm(W, h)
        if error_norm < 1:
            if error_norm == 0:
                factor = MAX_FACTOR
            else:
                factor = _pmin(MAX_FACTOR, SAFETY * pow(error_norm, exponent))
            if rejected:
                factor = _pmin(1.0, factor)
            h_abs *= factor
            break
        h_abs *= _pmax(MIN_FACTOR, SAFETY * pow(error_norm, exponent))
        rejected = True
        W.rejected += 1
    W.h_previous = h
    W.t_old, W.t = t, t_new
    for i in range(n):
        W.y_old[i] = W.y[i]
        W.y[i] = W.ynew[i]
        W.f[i] = W.K[stages, i]
    W.h_abs = h_abs
    return A_OK


cdef bint dense_prepare(System S, Work W) noexcept nogil:
    """The last step's interpolant (scipy's _dense_output_impl) into W.dense: RK45 Q = K^T P (rows:
    the powers of x); DOP853 the three extra stages, then F (7 rows)."""
    cdef Py_ssize_t n = W.n, i, j, s, r
    cdef double* K = &W.K[0, 0]
    cdef double* yt = &W.ytmp[0]
    cdef double h = W.h_previous
    cdef double acc, dy
    if W.method == I_RK45:
        for r in range(4):
            for i in range(n):
                acc = 0.0
                for j in range(7):
                    acc += K[j * n + i] * RK45_P[j * 4 + r]
                W.dense[r, i] = acc
        return True
    for s in range(13, 16):
        for i in range(n):
            acc = 0.0
            for j in range(s):
                acc += K[j * n + i] * DOP_A[s * 16 + j]
            yt[i] = W.y_old[i] + acc * h
        W.nfev += 1
        if not S.derivative(W.t_old + DOP_C[s] * h, W.ytmp, W.K[s]):
            return False
    for i in range(n):
        dy = W.y[i] - W.y_old[i]
        W.dense[0, i] = dy
        W.dense[1, i] = h * K[i] - dy
        W.dense[2, i] = 2 * dy - h * (W.f[i] + K[i])
        for r in range(4):
            acc = 0.0
            for j in range(16):
                acc += DOP_D[r * 16 + j] * K[j * n + i]
            W.dense[3 + r, i] = h * acc
    return True


cdef void _interpolate(int method, double t_old, double t_new, const double[::1] y_old,
                       const double[:, ::1] dense, double t, double[::1] out) noexcept nogil:
    """y(t) of a step's interpolant (scipy's RkDenseOutput / Dop853DenseOutput): the step from
    (t_old, y_old) to t_new with the coefficients ``dense`` (dense_prepare)."""
    cdef Py_ssize_t n = y_old.shape[0], i, r
    cdef double h = t_new - t_old
    cdef double x = (t - t_old) / h
    cdef double p, acc
    if method == I_RK45:
        for i in range(n):
            acc, p = 0.0, 1.0
            for r in range(4):
                p *= x
                acc += dense[r, i] * p
            out[i] = h * acc + y_old[i]
        return
    for i in range(n):
        acc = 0.0
        for r in range(7):
            acc += dense[6 - r, i]
            if r % 2 == 0:
                acc *= x
            else:
                acc *= 1 - x
        out[i] = acc + y_old[i]


cdef void dense_eval(Work W, double t, double[::1] out) noexcept nogil:
    """y(t) of the interpolant dense_prepare left (scipy's RkDenseOutput / Dop853DenseOutput)."""
    _interpolate(W.method, W.t_old, W.t, W.y_old, W.dense, t, out)


# the main stages' A of DOP853 (12 x 12, row-major): rows and columns 0-11 of DOP_A
cdef double DOP_A12[144]
cdef Py_ssize_t _r, _c
for _r in range(12):
    for _c in range(12):
        DOP_A12[_r * 12 + _c] = DOP_A[_r * 16 + _c]


# ---------------------------------------------------------------------------------- Python

def fixed(System S, int method, double t0, const double[::1] y0, double h, Py_ssize_t steps):
    """``steps`` fixed steps of size h from (t0, y0): the states (steps + 1, n)."""
    cdef Py_ssize_t n = y0.shape[0], k
    cdef Work W = Work(n, method)
    ys = np.zeros((steps + 1, n))
    cdef double[:, ::1] Y = ys
    Y[0, :] = y0
    for k in range(steps):
        if not fixed_step(S, W, method, t0 + k * h, h, Y[k], Y[k + 1]):
            _raise_kept(S)
            raise FloatingPointError(f"the right-hand side failed at step {k + 1}")
    return ys


def solve(System S, int method, double t0, const double[::1] y0, double t_bound, double rtol=1e-3,
          double atol=1e-6, double max_step=INFINITY, double first_step=0.0, dense_at=None):
    """The accepted steps of RK45 or DOP853 from (t0, y0) to t_bound, as scipy's solve_ivp takes
    them: (times, states (steps + 1, n), Work); with ``dense_at`` (times) also the interpolated
    states there, each from the step that contains it."""
    cdef Work W = Work(y0.shape[0], method, rtol, atol, max_step, t_bound)
    cdef int status
    ts, ys, dense = [t0], [np.array(y0)], {}
    query = [] if dense_at is None else sorted(float(x) for x in dense_at)
    cdef double[::1] out = np.zeros(y0.shape[0])
    if adaptive_start(S, W, t0, y0, first_step) != A_OK:
        _raise_kept(S)
        raise FloatingPointError("the right-hand side failed at the start")
    while W.t < t_bound:
        status = adaptive_step(S, W)
        _raise_kept(S)
        if status == A_TOO_SMALL:
            raise FloatingPointError(TOO_SMALL_MESSAGE)
        if status != A_OK:
            raise FloatingPointError(f"the right-hand side failed after t = {W.t}")
        ts.append(W.t)
        ys.append(np.asarray(W.y).copy())
        inside = [x for x in query if x <= W.t and x not in dense]
        if inside:
            if not dense_prepare(S, W):
                raise FloatingPointError("the right-hand side failed in the dense output")
            for x in inside:
                dense_eval(W, x, out)
                dense[x] = np.asarray(out).copy()
    if dense_at is not None:
        return np.array(ts), np.array(ys), W, np.array([dense[float(x)] for x in dense_at])
    return np.array(ts), np.array(ys), W


def start(System S, Work W, double t, const double[::1] y, double first_step=0.0):
    """adaptive_start from Python: the pair W at (t, y); returns its status (a PySystem's error raised)."""
    cdef int status = adaptive_start(S, W, t, y, first_step)
    _raise_kept(S)
    return status


def resume(System S, Work W, const double[::1] y):
    """adaptive_continue from Python: the pair continues from y at its time; returns its status."""
    cdef int status = adaptive_continue(S, W, y)
    _raise_kept(S)
    return status


def step(System S, Work W):
    """adaptive_step from Python: one accepted step; returns its status (W.state the new point)."""
    cdef int status = adaptive_step(S, W)
    _raise_kept(S)
    return status


def fixed_step_of(System S, Work W, double t, double h, const double[::1] y):
    """One fixed step of W.method from (t, y): the new state (a new array). A PySystem's error is
    raised; another failed stage raises FloatingPointError."""
    out = np.empty(y.shape[0])
    cdef bint ok = fixed_step(S, W, W.method, t, h, y, out)
    _raise_kept(S)
    if not ok:
        raise FloatingPointError("the right-hand side failed")
    return out


cdef class Dense:
    """The interpolant of one accepted step of an embedded pair (scipy's dense_output): y(t) for t
    in [t_old, t]; a copy, valid after the pair moves on."""

    cdef int method
    cdef readonly double t_old, t
    cdef double[::1] y_old
    cdef double[:, ::1] coefficients

    def __call__(self, t):
        """y(t) (n,); for an array of times, (n, len(t)) as scipy's."""
        cdef double[::1] out
        if np.ndim(t) == 0:
            out = np.empty(self.y_old.shape[0])
            _interpolate(self.method, self.t_old, self.t, self.y_old, self.coefficients, float(t), out)
            return np.asarray(out)
        return np.stack([self(x) for x in np.asarray(t, dtype=float)], axis=1)


def dense(System S, Work W):
    """The last accepted step's interpolant (dense_prepare: DOP853 evaluates three more stages) as
    a :class:`Dense`."""
    cdef bint ok = dense_prepare(S, W)
    _raise_kept(S)
    if not ok:
        raise FloatingPointError("the right-hand side failed in the dense output")
    cdef Dense D = Dense.__new__(Dense)
    D.method, D.t_old, D.t = W.method, W.t_old, W.t
    D.y_old = np.asarray(W.y_old).copy()
    D.coefficients = np.asarray(W.dense).copy()
    return D


def last_error_estimate(Work W):
    """The last Rosenbrock-W step's local error estimate y_new - y_hat (a copy; for the tests)."""
    return np.asarray(W.R[2]).copy()
