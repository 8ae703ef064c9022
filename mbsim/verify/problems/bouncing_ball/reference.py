"""Closed form of the bouncing ball: dropped from 1 m (the lowest point of the sphere), Newton's
restitution e = 0.8 at each impact, no air: free flight z(t) between impacts, the speed after the
k-th impact e^k sqrt(2 g h0), so the k-th apex is at e^(2k) h0. Writes reference.csv: the height
of the centre (radius 0.1 m added) every 2 ms (the scene's recorded times) over 2.5 s (four impacts)."""

from pathlib import Path

import numpy as np

g, h0, e, r = 9.81, 1.0, 0.8, 0.1


def height(t: np.ndarray) -> np.ndarray:
    t_impact = np.sqrt(2 * h0 / g)
    v = np.sqrt(2 * g * h0)  # speed at the first impact
    z = h0 - 0.5 * g * t * t
    start = t_impact
    while start < t.max():
        v *= e
        flight = 2 * v / g
        s = t - start
        inside = (s >= 0) & (s < flight)
        z = np.where(inside, v * s - 0.5 * g * s * s, z)
        start += flight
    return z + r


t = np.round(np.arange(0, 1251) * 0.002, 10)
head = "# bouncing ball, e = 0.8 from 1 m: z of the centre, closed form (reference.py)\nt,z"
np.savetxt(Path(__file__).with_name("reference.csv"), np.column_stack([t, height(t)]), delimiter=",", header=head,
           comments="", fmt="%.17g")  # fmt: skip
