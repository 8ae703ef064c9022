"""Newton's restitution law over arrays (the formula: newton_kernels.pxd, newton_velocity)."""

import numpy as np


def newton_targets(const double[::1] speed, const double[::1] restitution, double threshold):
    """r_N (n,) of n approach speeds and restitution coefficients (newton_velocity)."""
    cdef Py_ssize_t n = speed.shape[0], i
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = newton_velocity(speed[i], restitution[i], threshold)
    return out
