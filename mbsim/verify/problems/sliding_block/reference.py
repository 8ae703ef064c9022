"""Closed form of the sliding block: 1 kg at v0 = 2 m/s on a level floor, Coulomb friction
mu = 0.3: x(t) = v0 t - mu g t^2 / 2 until it stops at t_s = v0 / (mu g) = 0.680 s after
v0^2 / (2 mu g) = 0.680 m; at rest afterwards. Writes reference.csv every 0.01 s over 1 s."""

from pathlib import Path

import numpy as np

g, mu, v0 = 9.81, 0.3, 2.0
t = np.round(np.arange(0, 101) * 0.01, 10)
ts = v0 / (mu * g)
s = np.minimum(t, ts)
x = v0 * s - 0.5 * mu * g * s * s
head = "# sliding block, mu = 0.3 from 2 m/s: x of the centre, closed form (reference.py)\nt,x"
np.savetxt(Path(__file__).with_name("reference.csv"), np.column_stack([t, x]), delimiter=",", header=head,
           comments="", fmt="%.17g")  # fmt: skip
