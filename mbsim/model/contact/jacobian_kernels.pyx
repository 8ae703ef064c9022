"""Compiled contact Jacobians (mbsim.model.contact.jacobian.contact_rows): the rows of k contacts in
CSR form, each row holding the width-w blocks of its two bodies (the ground's left out), the lower
body's columns first.

Row of contact c along a world direction u (its normal n, or a tangent): the relative velocity of
the two contact points along u, u . (v_j + omega_j x r_j - v_i - omega_i x r_i), r the contact point
from each centre of mass; in 3D the rotational part in body axes (omega = R omega_body):
(r x u) . R omega_body = (R^T (r x u)) . omega_body. Tangents: in 3D t1 = n x a (a = x, or y when
n is within 0.9 of x) normalised and t2 = n x t1; in 2D the normal turned by +90 degrees. Rows come
normals first, then the tangent rows ordered by tangent, then contact.
"""

from libc.math cimport fabs, sqrt


# The block of one body on one row: +-(u, R^T (r x u)) (3D) or +-(u, r x u) (2D).
cdef inline void _block(double* out, const double* u, const double* r, const double* R, int d, double sign) noexcept nogil:
    cdef double c0, c1, c2
    if d == 3:
        c0 = r[1] * u[2] - r[2] * u[1]
        c1 = r[2] * u[0] - r[0] * u[2]
        c2 = r[0] * u[1] - r[1] * u[0]
        out[0] = sign * u[0]
        out[1] = sign * u[1]
        out[2] = sign * u[2]
        # R^T (r x u): column i of R dotted with r x u
        out[3] = sign * (R[0] * c0 + R[3] * c1 + R[6] * c2)
        out[4] = sign * (R[1] * c0 + R[4] * c1 + R[7] * c2)
        out[5] = sign * (R[2] * c0 + R[5] * c1 + R[8] * c2)
    else:
        out[0] = sign * u[0]
        out[1] = sign * u[1]
        out[2] = sign * (r[0] * u[1] - r[1] * u[0])


# The contact's directions: u[0] its normal n, u[1] (and u[2] in 3D) its tangents.
cdef inline void _directions(const double* normal, Py_ssize_t c, Py_ssize_t d, double u[3][3]) noexcept nogil:
    cdef double h0, h1, h2, norm
    cdef Py_ssize_t m
    for m in range(d):
        u[0][m] = normal[c * d + m]
    if d == 2:
        u[1][0] = -u[0][1]
        u[1][1] = u[0][0]
        return
    # t1 = n x helper, normalised (helper x, or y when n is near x); t2 = n x t1
    h0, h1, h2 = (1.0, 0.0, 0.0) if fabs(u[0][0]) < 0.9 else (0.0, 1.0, 0.0)
    u[1][0] = u[0][1] * h2 - u[0][2] * h1
    u[1][1] = u[0][2] * h0 - u[0][0] * h2
    u[1][2] = u[0][0] * h1 - u[0][1] * h0
    norm = sqrt(u[1][0] * u[1][0] + u[1][1] * u[1][1] + u[1][2] * u[1][2])
    u[1][0] /= norm
    u[1][1] /= norm
    u[1][2] /= norm
    u[2][0] = u[0][1] * u[1][2] - u[0][2] * u[1][1]
    u[2][1] = u[0][2] * u[1][0] - u[0][0] * u[1][2]
    u[2][2] = u[0][0] * u[1][1] - u[0][1] * u[1][0]


# The k d rows (module docstring) into indptr (k d + 1), indices and data (2 w k d at least): the
# contacts' bodies, points and normals (k, d); the frames' positions (row b at pos[b ps]) and, in 3D,
# rotations (row-major 3x3 each), the ground at index nbody. Returns the number of entries written.
cdef Py_ssize_t rows_into(const long long* body_i, const long long* body_j, const double* point_i,
                          const double* point_j, const double* normal, Py_ssize_t k, Py_ssize_t d, const double* pos,
                          Py_ssize_t ps, const double* rot, long long nbody, long long* indptr, long long* indices,
                          double* data) noexcept nogil:
    cdef Py_ssize_t c, a, side, e = 0, m
    cdef int w = 6 if d == 3 else 3
    cdef double u[3][3]
    cdef double r[2][3]
    cdef double block[6]
    cdef long long body[2]
    cdef double sign[2]
    indptr[0] = 0
    # rows in CSR order: the normals, then tangent 1 of every contact (then tangent 2)
    for a in range(d):
        for c in range(k):
            _directions(normal, c, d, u)
            # the lower body index first (sorted column indices); body i's rows are negative
            if body_i[c] <= body_j[c]:
                body[0], body[1], sign[0], sign[1] = body_i[c], body_j[c], -1.0, 1.0
            else:
                body[0], body[1], sign[0], sign[1] = body_j[c], body_i[c], 1.0, -1.0
            for side in range(2):
                if body[side] >= nbody:  # the ground has no columns
                    continue
                for m in range(d):
                    r[side][m] = (point_i[c * d + m] if sign[side] < 0 else point_j[c * d + m]) - pos[body[side] * ps + m]
                _block(&block[0], &u[a][0], &r[side][0], &rot[9 * body[side]] if d == 3 else rot, <int>d, sign[side])
                for m in range(w):
                    indices[e] = body[side] * w + m
                    data[e] = block[m]
                    e += 1
            indptr[a * k + c + 1] = e
    return e


def contact_rows_csr(const long long[::1] body_i, const long long[::1] body_j, const double[:, ::1] point_i,
                     const double[:, ::1] point_j, const double[:, ::1] normal, const double[:, ::1] pos,
                     const double[:, :, ::1] rot, long long nbody, long long[::1] indptr, long long[::1] indices,
                     double[::1] data):
    """Fill the CSR arrays of the k d rows (module docstring): indptr (k d + 1,), indices and data
    (2 w k d,) at least; pos, rot the frames with the ground at index nbody. Returns the number of
    entries written."""
    cdef Py_ssize_t k = body_i.shape[0], d = normal.shape[1], e = 0
    if k == 0:
        indptr[0] = 0
        return 0
    with nogil:
        e = rows_into(&body_i[0], &body_j[0], &point_i[0, 0], &point_j[0, 0], &normal[0, 0], k, d, &pos[0, 0],
                      pos.shape[1], &rot[0, 0, 0], nbody, &indptr[0], &indices[0], &data[0])
    return e
