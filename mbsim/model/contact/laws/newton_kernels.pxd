# Newton's restitution law (mbsim.model.contact.laws.newton), the one formula: inlined by the
# compiled timestepping step, called over arrays by laws.newton.newton_target.

# r_N = e max(u, 0) for an approach speed u (positive when closing), e = 0 at or below the threshold
# (papers/unilateral-constraints-lcp-projection-correction.txt, eqs. 8-9)
cdef inline double newton_velocity(double speed, double e, double threshold) noexcept nogil:
    return (e if speed > threshold else 0.0) * (speed if speed > 0.0 else 0.0)
