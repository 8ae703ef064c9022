# Compiled acceleration solves of the rank-robust methods and their pseudo-inverse correction
# (robust_kernels.pyx), over a FlatModel into a FlatData made with ``robust=True``. None needs the GIL.

from mbsim.model.layout cimport FlatModel, FlatData


# Python's max and min of two numbers: the first unless the second is
# larger (smaller), so a NaN in the second place is passed over and one in the first kept
cdef inline double py_max(double a, double b) noexcept nogil:
    return b if b > a else a


cdef inline double py_min(double a, double b) noexcept nogil:
    return b if b < a else a


# Views of D.robust_work, laid out as mbsim.model.flat.robust_size counts, as C-order matrices
# at fixed offsets (one work array: every compiled call passes all of D's arrays)
cdef struct RobustBuffers:
    double* jhat    # (nc, nv) J M^-1/2
    double* jh_t    # (nv, nc) its transpose (LAPACK's input, destroyed)
    double* svd_ut  # (nc, nc) from here on: J_hat's bidiagonal factor (d, e, tauq, taup: 4 nsv)
    double* svd_s   # (nsv,) its singular values, nsv = min(nc, nv) (min_norm_factor)
    double* svd_v   # (nv, nv) the augmented Lagrangian's J^T J
    double* vec_a   # (nv,) scratch
    double* vec_b   # (nv,)
    double* vec_c   # (nv,)
    double* vec_m   # (nc,)
    double* kkt     # (n, n) the KKT matrix, n = nv + nc
    double* kkt_b   # (n,)
    double* kkt_s   # (n,)
    double* al_a    # (nv, nv) the augmented Lagrangian's matrix
    double* al_order  # (nv,) its body order: 1 + the position of body b in [b] (0: the model's order)
    Py_ssize_t nsv


cdef inline RobustBuffers buffers(FlatModel F, FlatData D) noexcept nogil:
    cdef RobustBuffers B
    cdef Py_ssize_t nv = F.nv, nc = F.nc
    cdef Py_ssize_t n = nv + nc
    cdef double* w = &D.robust_work[0]  # not read when the array is empty (robust=False)
    B.nsv = nc if nc < nv else nv
    B.jhat = w
    B.jh_t = B.jhat + nc * nv
    B.svd_ut = B.jh_t + nc * nv
    B.svd_s = B.svd_ut + nc * nc
    B.svd_v = B.svd_s + B.nsv
    B.vec_a = B.svd_v + nv * nv
    B.vec_b = B.vec_a + nv
    B.vec_c = B.vec_b + nv
    B.vec_m = B.vec_c + nv
    B.kkt = B.vec_m + nc
    B.kkt_b = B.kkt + n * n
    B.kkt_s = B.kkt_b + n
    B.al_a = B.kkt_s + n
    B.al_order = B.al_a + nv * nv
    return B


# J_hat = J M^-1/2 and its singular values into the buffers; the numerical rank, -1 if LAPACK failed
cdef Py_ssize_t min_norm_factor(FlatModel F, FlatData D, double rank_tol) noexcept nogil
# dx = M^-1/2 J_hat^+ r (nv,), the M-smallest dx with J dx = r (least squares), and (lam not NULL) the
# minimum-norm lambda (nc) with M dx = J^T lambda; False if the SVD failed
cdef bint min_norm_correction(FlatModel F, FlatData D, double rank_tol, const double[::1] r,
                              double[::1] dx, double* lam) noexcept nogil
# the accelerations of null_space, gauss (kkt) and augmented_lagrangian into vdot, multipliers
# into D.lam; their iterations (0: direct), -1 when the solve cannot finish
cdef Py_ssize_t null_space_accelerations(FlatModel F, FlatData D, double rank_tol, double[::1] vdot,
                                         double[::1] stats) noexcept nogil
cdef Py_ssize_t gauss_kkt_accelerations(FlatModel F, FlatData D, double rank_tol, double[::1] vdot,
                                        double[::1] stats) noexcept nogil
cdef Py_ssize_t augmented_lagrangian_accelerations(FlatModel F, FlatData D, const double[::1] v, double alpha,
                                                   double omega, double mu, double tol, Py_ssize_t max_iter,
                                                   double[::1] vdot) noexcept nogil
