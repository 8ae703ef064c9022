# Compiled narrow phase of rigid contact (mbsim.model.contact.narrowphase_kernels), for modules
# that call the pair kernels from C (a compiled detection pass): one candidate pair per call.

from libc.stdint cimport int64_t


# Where a pair kernel writes its points: rows of d doubles (points, normal), one gap and feature each.
cdef struct Out:
    double* point_a
    double* point_b
    double* normal
    double* gap
    int64_t* feature


# One candidate pair of shapes a and b: pos (d,), rot (d, d) row-major shape axes -> world (NULL
# for round shapes), param (3,); writes the points with gap < margin to out, returns their count
# (at most kernel_cap). Conventions: narrowphase.py's docstring.
ctypedef Py_ssize_t (*PairKernel)(const double* pos_a, const double* rot_a, const double* param_a,
                                  const double* pos_b, const double* rot_b, const double* param_b,
                                  int d, double margin, Out* out) noexcept nogil

# Rows of the kernel table (also module constants for Python: narrowphase.py registers them by
# shape-type pair).
cpdef enum Kernel:
    HALFSPACE_SPHERE
    HALFSPACE_BOX
    HALFSPACE_CAPSULE
    HALFSPACE_CYLINDER
    SPHERE_SPHERE
    BOX_SPHERE
    CAPSULE_SPHERE
    CAPSULE_CAPSULE
    CYLINDER_SPHERE
    BOX_BOX
    RECTANGLE_RECTANGLE
    NKERNELS

# The kernel of table row ``kernel`` (the module's constants HALFSPACE_SPHERE ...) and the most
# points it writes for one pair.
cdef PairKernel kernel_function(int kernel) noexcept nogil
cdef Py_ssize_t kernel_cap(int kernel) noexcept nogil

# Every row r < m of the candidate arrays (pos (m, d), rot (m, d, d) or NULL, param (m, 3)) through
# one kernel; out holds m * kernel_cap rows; pair[k] is the row of point k; returns the count.
cdef Py_ssize_t run_pairs_c(int kernel, Py_ssize_t m, int d,
                            const double* pos_a, const double* rot_a, const double* param_a,
                            const double* pos_b, const double* rot_b, const double* param_b,
                            double margin, Out out, int64_t* pair) noexcept nogil

# The batch of one detection (contact_batch, its docstring) in two calls, for a compiled step that
# keeps its own buffers: the most rows the k candidates give (-1 - r: candidate r has no rule), then
# the rows (pos (nshape, d), rot (nshape, d, d), param (nshape, 3); outputs with room for those
# rows, points and normals d each); returns the count.
cdef Py_ssize_t batch_rows(const int64_t* a, const int64_t* b, Py_ssize_t k, const int64_t* shape_type,
                           const int64_t* pair_kernel, int ntype) noexcept nogil
cdef Py_ssize_t batch_into(const int64_t* a, const int64_t* b, const int64_t* entry, Py_ssize_t k,
                           const int64_t* shape_type, const int64_t* shape_body, const int64_t* pair_kernel,
                           const unsigned char* pair_swap, int ntype, Py_ssize_t nshape, int d, const double* pos,
                           const double* rot, const double* param, double margin, int64_t nbody,
                           int64_t max_feature, int64_t* body_i, int64_t* body_j, int64_t* entries,
                           double* point_i, double* point_j, double* normal, double* gap,
                           int64_t* feature) noexcept nogil
