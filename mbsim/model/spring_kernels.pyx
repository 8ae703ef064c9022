"""The joint springs' Python entry points: their kernels (spring_kernels.pxd, the one
implementation, which the compiled step runs too) for SpringGroups (mbsim.model.dynamics), over
the deflections and body-block Jacobian its primitive groups give."""


def unwrap(const long long[::1] row, const long long[::1] nrow, const long long[::1] wrap,
           const double[::1] ref, double[::1] value) -> None:
    """Take each wrapped item's deflections in ``value`` (in place) within pi of ``ref``."""
    with nogil:
        unwrap_at(row, nrow, wrap, ref, value)


def joint_springs(Py_ssize_t nbody, Py_ssize_t w, const long long[::1] bi, const long long[::1] bj,
                  const long long[::1] row, const long long[::1] nrow, const double[::1] k, const double[::1] c,
                  const double[::1] value, const double[:, ::1] jac, const double[::1] v, double[::1] Qc,
                  double[::1] Qn) -> float:
    """Add the joint springs' generalized forces at deflections ``value`` (Jacobian ``jac`` in body
    blocks) and velocities ``v``: -J^T (k value) to Qc, -J^T (c J v) to Qn. Returns the potential
    sum 1/2 k value^2."""
    cdef double potential
    with nogil:
        potential = joint_springs_at(nbody, w, bi, bj, row, nrow, k, c, value, jac, v, Qc, Qn)
    return potential
