# Compiled kernels of the signed distance fields (mbsim.model.contact.sdf_kernels). The trilinear
# lookup is inline here because the contact detection (compliant_kernels) calls it for every point.

from libc.math cimport sqrt


# Grid coordinate of x on one axis clamped to [0, n_last]: the cell index i, the fraction inside
# the cell and the offset e from the box (0 inside).
cdef inline void _axis(double x, double origin, double inv, double cell, Py_ssize_t n_last,
                       Py_ssize_t* i, double* frac, double* e) noexcept nogil:
    cdef double s = (x - origin) * inv
    cdef Py_ssize_t idx
    e[0] = 0.0
    # not (s >= 0): a NaN point reads NaN from the first cell instead of an index out of the grid
    if not (s >= 0.0):
        e[0] = s * cell
        s = 0.0
    elif s > n_last:
        e[0] = (s - n_last) * cell
        s = <double>n_last
    # s is in [0, n_last] here, so truncation is floor (and inline, where floor() is a libm call)
    idx = <Py_ssize_t>s
    if idx > n_last - 1:
        idx = n_last - 1
    i[0] = idx
    frac[0] = s - idx


# Trilinear distance (eq. 5) at one point, returned, with its exact gradient (gx, gy, gz) and the
# point's distance outside the grid box (ext, 0 inside). Outside the box the value at the clamped
# point plus the way out, whose gradient takes the place of a clamped axis's.
cdef inline double interpolate(const double[:, :, ::1] values, const double[::1] origin, double inv,
                               double cell, double px, double py, double pz,
                               double* gx, double* gy, double* gz, double* ext) noexcept nogil:
    return interpolate_grid(&values[0, 0, 0], values.shape[0], values.shape[1], values.shape[2], &origin[0], inv,
                            cell, px, py, pz, gx, gy, gz, ext)


# The same on a grid given by its first value and shape (C order): the compiled contact step's
# fields are one concatenated array (mbsim.model.flat: cc_sdf_values), a pointer into it each.
cdef inline double interpolate_grid(const double* values, Py_ssize_t n0, Py_ssize_t n1, Py_ssize_t n2,
                                    const double* origin, double inv, double cell, double px, double py,
                                    double pz, double* gx, double* gy, double* gz, double* ext) noexcept nogil:
    cdef Py_ssize_t i, j, k, s0 = n1 * n2, at
    cdef double x, y, z, ex, ey, ez
    cdef double c000, c100, c010, c110, c001, c101, c011, c111, c00, c10, c01, c11, c0, c1, e, d, dx, dy, dz
    # cell indices and fractions of the point clamped onto the box; e* = offset from the box
    _axis(px, origin[0], inv, cell, n0 - 1, &i, &x, &ex)
    _axis(py, origin[1], inv, cell, n1 - 1, &j, &y, &ey)
    _axis(pz, origin[2], inv, cell, n2 - 1, &k, &z, &ez)
    at = i * s0 + j * n2 + k
    c000 = values[at]
    c100 = values[at + s0]
    c010 = values[at + n2]
    c110 = values[at + s0 + n2]
    c001 = values[at + 1]
    c101 = values[at + s0 + 1]
    c011 = values[at + n2 + 1]
    c111 = values[at + s0 + n2 + 1]
    # interpolate along x, then y, then z
    c00 = c000 + x * (c100 - c000)
    c10 = c010 + x * (c110 - c010)
    c01 = c001 + x * (c101 - c001)
    c11 = c011 + x * (c111 - c011)
    c0 = c00 + y * (c10 - c00)
    c1 = c01 + y * (c11 - c01)
    e = sqrt(ex * ex + ey * ey + ez * ez)
    d = c0 + z * (c1 - c0) + e
    # d/dx, d/dy, d/dz of the trilinear form; a clamped axis takes the box-distance term instead
    dx = (1 - y) * (1 - z) * (c100 - c000) + y * (1 - z) * (c110 - c010)
    dx += (1 - y) * z * (c101 - c001) + y * z * (c111 - c011)
    dy = (1 - z) * (c10 - c00) + z * (c11 - c01)
    dz = c1 - c0
    gx[0] = ex / e if ex != 0.0 else dx * inv
    gy[0] = ey / e if ey != 0.0 else dy * inv
    gz[0] = ez / e if ez != 0.0 else dz * inv
    ext[0] = e
    return d


# The distance alone of interpolate_grid (the same operations: the same value to the last bit) and
# the point's distance outside the grid box: the detection's test of points and octree cells,
# most of which are not in contact and need no gradient.
cdef inline double distance_grid(const double* values, Py_ssize_t n0, Py_ssize_t n1, Py_ssize_t n2,
                                 const double* origin, double inv, double cell, double px, double py, double pz,
                                 double* ext) noexcept nogil:
    cdef Py_ssize_t i, j, k, s0 = n1 * n2, at
    cdef double x, y, z, ex, ey, ez
    cdef double c000, c100, c010, c110, c001, c101, c011, c111, c00, c10, c01, c11, c0, c1, e
    _axis(px, origin[0], inv, cell, n0 - 1, &i, &x, &ex)
    _axis(py, origin[1], inv, cell, n1 - 1, &j, &y, &ey)
    _axis(pz, origin[2], inv, cell, n2 - 1, &k, &z, &ez)
    at = i * s0 + j * n2 + k
    c000 = values[at]
    c100 = values[at + s0]
    c010 = values[at + n2]
    c110 = values[at + s0 + n2]
    c001 = values[at + 1]
    c101 = values[at + s0 + 1]
    c011 = values[at + n2 + 1]
    c111 = values[at + s0 + n2 + 1]
    c00 = c000 + x * (c100 - c000)
    c10 = c010 + x * (c110 - c010)
    c01 = c001 + x * (c101 - c001)
    c11 = c011 + x * (c111 - c011)
    c0 = c00 + y * (c10 - c00)
    c1 = c01 + y * (c11 - c01)
    e = sqrt(ex * ex + ey * ey + ez * ez)
    ext[0] = e
    return c0 + z * (c1 - c0) + e
