# Compiled broad phase of rigid contact (broadphase_kernels.pyx), for a compiled step that keeps its
# own buffers: the sort and sweep in two calls (the axis and its pair count, then the pairs), and the
# candidates' filter.

from libc.stdint cimport int64_t


# lo, hi (n, d) boxes: each axis sorted into order, end (d, n) (tmp: n scratch); returns the sweep
# axis, the most pairs its runs can give in total[0]
cdef int sweep_axis(const double* lo, const double* hi, Py_ssize_t n, int d, int64_t* order, int64_t* end,
                    int64_t* tmp, Py_ssize_t* total) noexcept nogil
# the overlapping pairs of the sweep axis' runs into a, b (room for total + 1); box (n, 4) scratch;
# returns their count
cdef Py_ssize_t sweep_pairs(const double* lo, const double* hi, Py_ssize_t n, int d, int axis, const int64_t* order,
                            const int64_t* end, double* box, int64_t* a, int64_t* b) noexcept nogil
# the pairs of bodies that may touch and the half-spaces within the margin into a, b, e (room for
# npair + nhalf); returns their count
cdef Py_ssize_t keep_candidates(const int64_t* sa, const int64_t* sb, Py_ssize_t npair, const int64_t* shape_body,
                                const int64_t* keys, const int64_t* key_entry, Py_ssize_t nkeys,
                                const int64_t* set_index, const unsigned char* set_in1,
                                const unsigned char* set_in2, Py_ssize_t nsets, int64_t nbody,
                                const int64_t* half_plane, const int64_t* half_shape, const int64_t* half_entry,
                                Py_ssize_t nhalf, const double* pos, const double* rot, const double* half, int d,
                                double margin, int64_t* a, int64_t* b, int64_t* e) noexcept nogil

# kinds of world boxes (a bounded shape type's ``aabb_kernel``, mbsim.model.shapes)
cpdef enum AabbKernel:
    AABB_BALL
    AABB_BOX
    AABB_CAPSULE
    AABB_CYLINDER

# world box half extents (d) of one shape of kind ``code`` from its world rotation (d, d) and param (3)
cdef void aabb_half_into(int code, const double* R, const double* param, int d, double* out) noexcept nogil
