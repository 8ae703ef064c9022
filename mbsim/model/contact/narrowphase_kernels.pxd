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


# One mesh shape (mbsim.model.contact.mesh_rigid.MeshData) in its shape frame: its vertices (nvert, 3)
# and its signed distance field, a grid (n0, n1, n2) of values in C order with node (0, 0, 0) at origin
# and spacing cell (mbsim.model.contact.sdf.SignedDistanceField).
cdef struct MeshShape:
    const double* vertices
    Py_ssize_t nvert
    const double* values
    Py_ssize_t n0, n1, n2
    double origin[3]
    double cell


# The MeshShape of each of n shapes (nvert 0 for shapes that are no meshes), kept with the arrays
# they point into; ``shapes`` is NULL when n is 0.
cdef class MeshTable:
    cdef MeshShape* shapes
    cdef readonly Py_ssize_t n
    cdef list _arrays


# One candidate pair of shapes a and b: pos (d,), rot (d, d) row-major shape axes -> world (NULL
# for round shapes), param (3,), mesh (the meshes' kernels; NULL or unused for the others); writes
# the points with gap < margin to out, returns their count (at most pair_cap). Conventions:
# narrowphase.py's docstring.
ctypedef Py_ssize_t (*PairKernel)(const double* pos_a, const double* rot_a, const double* param_a,
                                  const double* pos_b, const double* rot_b, const double* param_b,
                                  int d, double margin, Out* out, const MeshShape* mesh_a,
                                  const MeshShape* mesh_b) noexcept nogil

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
    PLANE_MESH
    MESH_SPHERE
    BOX_MESH
    MESH_MESH
    NKERNELS

# The kernel of table row ``kernel`` (the module's constants HALFSPACE_SPHERE ...) and the most
# points it writes for one pair (a mesh's kernel: its fixed part plus the vertices of its meshes).
cdef PairKernel kernel_function(int kernel) noexcept nogil
cdef Py_ssize_t pair_cap(int kernel, const MeshShape* mesh_a, const MeshShape* mesh_b) noexcept nogil

# Every row r < m of the candidate arrays (pos (m, d), rot (m, d, d) or NULL, param (m, 3), meshes
# (m,) or NULL) through one kernel; out holds the sum of the rows' pair_cap; pair[k] is the row of
# point k; returns the count.
cdef Py_ssize_t run_pairs_c(int kernel, Py_ssize_t m, int d,
                            const double* pos_a, const double* rot_a, const double* param_a,
                            const MeshShape* mesh_a, const double* pos_b, const double* rot_b,
                            const double* param_b, const MeshShape* mesh_b, double margin, Out out,
                            int64_t* pair) noexcept nogil

# The batch of one detection (contact_batch, its docstring) in two calls, for a compiled step that
# keeps its own buffers: the most rows the k candidates give (-1 - r: candidate r has no rule), then
# the rows (pos (nshape, d), rot (nshape, d, d), param (nshape, 3), meshes (nshape,) or NULL without
# meshes; outputs with room for those rows, points and normals d each); returns the count.
cdef Py_ssize_t batch_rows(const int64_t* a, const int64_t* b, Py_ssize_t k, const int64_t* shape_type,
                           const int64_t* pair_kernel, int ntype, const MeshShape* meshes) noexcept nogil
cdef Py_ssize_t batch_into(const int64_t* a, const int64_t* b, const int64_t* entry, Py_ssize_t k,
                           const int64_t* shape_type, const int64_t* shape_body, const int64_t* pair_kernel,
                           const unsigned char* pair_swap, int ntype, Py_ssize_t nshape, int d, const double* pos,
                           const double* rot, const double* param, const MeshShape* meshes, double margin,
                           int64_t nbody, int64_t max_feature, int64_t* body_i, int64_t* body_j, int64_t* entries,
                           double* point_i, double* point_j, double* normal, double* gap,
                           int64_t* feature) noexcept nogil
