# The typed structures of the compiled core (mbsim.model.layout): what a compiled step reads
# (FlatModel, MuJoCo's mjModel: sizes n<object>, arrays <object>_<attribute>) and writes
# (FlatData, mjData). Arrays are typed memoryviews for the kernels; Python reads the numpy
# arrays they view (layout.pyx: __getattr__).

cdef class Record:
    cdef dict _fields
    cdef object constant(self, dict fields, str name, str dtype)
    cdef object buffer(self, dict fields, str name, str dtype)
    cdef object value(self, dict fields, str name)

cdef class FlatModel(Record):
    cdef readonly Py_ssize_t dim
    cdef readonly Py_ssize_t nbody
    cdef readonly Py_ssize_t nq
    cdef readonly Py_ssize_t nv
    cdef readonly Py_ssize_t nc
    cdef const double[:, :, ::1] body_inv_mass
    cdef const double[:, :, ::1] body_inertia
    cdef const double[:, ::1] body_weight
    cdef const long long[::1] prim_kind
    cdef const long long[::1] prim_bi
    cdef const long long[::1] prim_bj
    cdef const double[:, :, ::1] prim_vec
    cdef const long long[::1] prim_row
    cdef const long long[::1] prim_nrow
    cdef const double[:, ::1] prim_offset
    cdef const long long[::1] prim_drive
    cdef const long long[::1] prim_wrap
    cdef readonly Py_ssize_t njc
    cdef readonly Py_ssize_t jc_forces
    cdef const long long[::1] jc_kind
    cdef const long long[::1] jc_bi
    cdef const long long[::1] jc_bj
    cdef const double[:, :, ::1] jc_vec
    cdef const long long[::1] jc_row
    cdef const long long[::1] jc_nrow
    cdef const double[:, ::1] jc_offset
    cdef const long long[::1] jc_drive
    cdef const long long[::1] jc_wrap
    cdef const double[::1] jc_stiffness
    cdef const double[::1] jc_damping
    cdef const double[::1] jc_rest
    cdef const double[::1] jc_initial
    cdef const double[::1] jc_lower
    cdef const double[::1] jc_upper
    cdef const double[::1] jc_stop_k
    cdef const double[::1] jc_stop_c
    cdef const double[::1] jc_coulomb
    cdef const double[::1] jc_static
    cdef const double[::1] jc_stribeck
    cdef const double[::1] jc_viscous
    cdef const double[::1] jc_smoothing
    cdef const double[::1] jc_effort
    cdef readonly Py_ssize_t nact
    cdef const long long[::1] act_row
    cdef const long long[::1] act_law
    cdef const long long[::1] act_expr
    cdef const long long[::1] act_rate
    cdef const double[::1] act_kp
    cdef const double[::1] act_kd
    cdef const double[::1] act_gear
    cdef const double[::1] act_lower
    cdef const double[::1] act_upper
    cdef readonly Py_ssize_t nsig
    cdef readonly Py_ssize_t sig_first
    cdef const long long[::1] sig_kind
    cdef const long long[::1] sig_index
    cdef const long long[::1] sig_comp
    cdef const long long[:, ::1] dist_body
    cdef const double[:, :, ::1] dist_point
    cdef readonly Py_ssize_t nout
    cdef const long long[::1] out_expr
    cdef const long long[::1] sd_b1
    cdef const long long[::1] sd_b2
    cdef const double[:, ::1] sd_s1
    cdef const double[:, ::1] sd_s2
    cdef const double[::1] sd_k
    cdef const double[::1] sd_c
    cdef const double[::1] sd_rest
    cdef const long long[::1] ld_body
    cdef const double[:, ::1] ld_point
    cdef const long long[::1] ld_body_frame
    cdef const long long[::1] ld_torque
    cdef const long long[:, ::1] ld_expr
    cdef const long long[::1] prog_op
    cdef const long long[::1] prog_dst
    cdef const long long[:, ::1] prog_args
    cdef const double[::1] prog_imm
    cdef const long long[::1] prog_start
    cdef const long long[::1] prog_stop
    cdef const long long[::1] prog_result
    cdef readonly Py_ssize_t nreg
    cdef const long long[::1] row_bi
    cdef const long long[::1] row_bj
    cdef const long long[::1] row_bk
    cdef const long long[::1] row_bl
    cdef const double[:, :, ::1] body_mass_block
    cdef const long long[::1] rx_joint
    cdef const long long[::1] rx_body
    cdef const long long[::1] joint_body
    cdef const double[:, ::1] joint_point
    cdef const long long[::1] driven_rows
    cdef const double[:, :, ::1] body_inv_sqrt_mass
    cdef const long long[::1] s_rows
    cdef const long long[::1] s_ptr
    cdef const long long[::1] s_col
    cdef const long long[::1] row_first
    cdef const long long[::1] row_last
    cdef readonly Py_ssize_t ncc
    cdef const long long[::1] cc_master
    cdef const long long[::1] cc_slave
    cdef const long long[::1] cc_tree
    cdef const long long[::1] cc_point_start
    cdef const double[:, ::1] cc_points
    cdef const long long[::1] cc_point_order
    cdef const long long[::1] cc_node_start
    cdef const double[:, ::1] cc_node_centre
    cdef const double[::1] cc_node_radius
    cdef const long long[::1] cc_node_child_start
    cdef const long long[::1] cc_node_child_count
    cdef const long long[::1] cc_node_point_start
    cdef const long long[::1] cc_node_point_count
    cdef const long long[::1] cc_sdf_start
    cdef const long long[:, ::1] cc_sdf_shape
    cdef const double[:, ::1] cc_sdf_origin
    cdef const double[::1] cc_sdf_cell
    cdef const double[::1] cc_sdf_values
    cdef const long long[::1] cc_sdf_bound_start
    cdef const double[::1] cc_sdf_bound
    cdef const double[:, ::1] cc_sdf_bound_meta
    cdef const double[:, ::1] cc_mesh_lo
    cdef const double[:, ::1] cc_mesh_hi
    cdef const double[:, :, ::1] cc_box_centre
    cdef const double[:, :, :, ::1] cc_box_axes
    cdef const double[:, :, ::1] cc_box_half
    cdef const double[:, ::1] cc_law
    cdef const long long[::1] cc_class_start
    cdef const double[::1] cc_classes

cdef class FlatData(Record):
    cdef double[:, ::1] pos
    cdef double[:, :, ::1] rot
    cdef double[:, ::1] vel
    cdef double[:, ::1] omega_body
    cdef double[:, ::1] omega
    cdef double[::1] omega2
    cdef double[::1] angle
    cdef double[::1] Q
    cdef double[::1] Qn
    cdef double[::1] phi
    cdef double[::1] phi_t
    cdef double[::1] gamma
    cdef double[:, ::1] J
    cdef double[:, ::1] minv_jt
    cdef double[:, ::1] S
    cdef double[::1] lam
    cdef double[::1] rhs
    cdef double[::1] s_work
    cdef double[::1] minv_q
    cdef double[::1] jc_value
    cdef double[:, ::1] jc_jac
    cdef double[::1] jc_ref
    cdef double[::1] jc_rate
    cdef double[::1] jc_bias
    cdef double[::1] jc_qd
    cdef double[::1] jc_tau
    cdef double[::1] jc_limit_force
    cdef double[::1] jc_friction_force
    cdef double[::1] act_force
    cdef double[:, ::1] row_val
    cdef double[:, :, ::1] row_jac_i
    cdef double[:, :, ::1] row_jac_j
    cdef double[:, ::1] row_bias
    cdef double[::1] regs
    cdef double[::1] vec3
    cdef double[::1] y
    cdef double[::1] ynew
    cdef double[::1] ytmp
    cdef double[::1] k1
    cdef double[::1] k2
    cdef double[::1] k3
    cdef double[::1] k4
    cdef double[::1] q_scratch
    cdef double[::1] dx
    cdef long long[::1] k1_valid
    cdef double[:, ::1] joint_gen
    cdef double[::1] seg
    cdef double[::1] solve_stats
    cdef double[::1] robust_work
    cdef int[::1] kkt_rank
    cdef long long[::1] cc_idx
    cdef double[::1] cc_d
    cdef double[:, ::1] cc_grad
    cdef double[:, ::1] cc_p
    cdef long long[::1] cc_stack
    cdef double[:, ::1] cc_R
    cdef double[::1] cc_t
    cdef double[:, ::1] cc_box_c
    cdef double[:, :, ::1] cc_box_R
    cdef double[:, ::1] cc_wrench
    cdef double[:, ::1] cc_pair
    cdef double[::1] cc_class_counts
    cdef double[::1] cc_total
    cdef double[::1] cc_linear
    cdef double[:, :, ::1] cc_stiffness
    cdef double[:, :, ::1] cc_damping
    cdef long long[::1] cc_cand_idx
    cdef double[::1] cc_cand_d
    cdef double[::1] cc_cand_d0
    cdef double[:, ::1] cc_cand_x
    cdef double[:, ::1] cc_cache
