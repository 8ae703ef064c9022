"""Newton's restitution law of rigid contacts (papers/unilateral-constraints-lcp-projection-
correction.txt, eqs. 8-9): after an impact of approach speed u > 0 the normal velocity is at
least r_N = e u; an approach at or below the method's threshold counts as inelastic (r_N = 0),
so that resting contact and the end of a sequence of impacts do not chatter. The one place of
the law (its formula: newton_kernels.pxd): timestepping's target velocities (compiled, inlined)
and event_driven's impact LCP call it, each with its own threshold option
(``restitution_threshold``, ``accumulation_speed``)."""

from __future__ import annotations

import numpy as np

from mbsim.model.contact.laws.newton_kernels import newton_targets


def inelastic(speed: np.ndarray, threshold: float) -> np.ndarray:
    """Whether an approach of ``speed`` (positive when closing) counts as inelastic: u <= threshold."""
    return ~(np.asarray(speed) > threshold)


def newton_target(speed: np.ndarray, restitution: np.ndarray, threshold: float) -> np.ndarray:
    """r_N = e max(u, 0) with e = 0 where the approach ``speed`` u is inelastic (eqs. 8-9; compiled:
    newton_kernels.newton_velocity, which the compiled timestepping step inlines)."""
    speed = np.ascontiguousarray(speed, dtype=float).reshape(-1)
    e = np.ascontiguousarray(np.broadcast_to(restitution, speed.shape), dtype=float)
    return newton_targets(speed, e, float(threshold))
