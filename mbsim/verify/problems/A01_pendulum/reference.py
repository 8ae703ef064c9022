"""The reference of A01: the closed form of the pendulum in Jacobi's elliptic functions.

The bob (m = 1 kg, centroidal inertia Ic = 1e-6 kg m^2, as in scene.yaml) on a massless link
L = 1 m is a compound pendulum with w0^2 = m g L / (m L^2 + Ic). Released at rest from the
horizontal (amplitude a = pi/2 from the lowest position), its angle from the lowest position is
phi(t) = 2 arcsin(k sn(K(k) - w0 t, k)), k = sin(a/2): at t = 0 sn(K) = 1 and phi = a. P1 is at
(L sin phi, -L cos phi). Run ``python reference.py`` to write reference.csv (t = 0, 0.5, ..., 2000 s:
the benchmark's 4000 output steps)."""

from pathlib import Path

import numpy as np
from scipy.special import ellipj, ellipk

m, Ic, L, g = 1.0, 1e-6, 1.0, 9.81
w0 = np.sqrt(m * g * L / (m * L**2 + Ic))
a = np.pi / 2
k = np.sin(a / 2)
t = np.linspace(0.0, 2000.0, 4001)
sn, _, _, _ = ellipj(ellipk(k * k) - w0 * t, k * k)
phi = 2 * np.arcsin(k * sn)
x, y = L * np.sin(phi), -L * np.cos(phi)
header = "# IFToMM A01: position of P1 (closed form, reference.py)\nt,x,y"
rows = np.column_stack([t, x, y])
np.savetxt(Path(__file__).with_name("reference.csv"), rows, delimiter=",", header=header, comments="", fmt="%.17g")
