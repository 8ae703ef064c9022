"""The joint coordinates' Python entry point (joint_force_kernels.pxd holds the kernels, which the
compiled step and its def entry step_kernels.element_forces run)."""


def unwrap(const long long[::1] row, const long long[::1] nrow, const long long[::1] wrap,
           const double[::1] ref, double[::1] value) -> None:
    """Take each wrapped item's deflections in ``value`` (in place) within pi of ``ref``."""
    with nogil:
        unwrap_at(row, nrow, wrap, ref, value)
