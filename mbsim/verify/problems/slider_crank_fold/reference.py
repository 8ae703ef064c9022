"""The reference of the slider-crank through its folded position: the one-coordinate model.

Bars m = 6 kg, L = 1 m (I = m L^2 / 12 about their centres), slider 2 kg, gravity 9.81 down,
released at rest with the crank at theta = pi/4 (papers/singular-positions-gauss-pso.txt, Fig. 1).
With theta the crank angle, the rod at -theta and the slider at x = 2 L cos(theta), the kinetic
energy is 1/2 I(theta) theta'^2 with I(theta) = m L^2/3 + m L^2 (9/4 sin^2 + 1/4 cos^2) + m L^2/12
+ 4 m_s L^2 sin^2 and the potential m g L sin(theta). Lagrange's equation gives
I theta'' = -m g L cos(theta) - 1/2 I'(theta) theta'^2. The fold (both bars vertical, x = 0) is
passed at t = 1.01, 3.04 and 5.06 s. Run ``python reference.py`` to write reference.csv: x of the
slider every 0.001 s over 6 s, fine enough for a cubic spline (interpolation error ~1e-13 m) (DOP853 at 1e-13).
"""

from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

m, ms, L, g = 6.0, 2.0, 1.0, 9.81
ic = m * L**2 / 12


def inertia(th: float) -> float:
    s, c = np.sin(th), np.cos(th)
    return ic + m * L**2 / 4 + m * L**2 * (2.25 * s * s + 0.25 * c * c) + ic + 4 * ms * L**2 * s * s


def d_inertia(th: float) -> float:
    s, c = np.sin(th), np.cos(th)
    return m * L**2 * 4.0 * s * c + 8 * ms * L**2 * s * c


def rhs(_: float, y: np.ndarray) -> list[float]:
    th, w = y
    return [w, (-m * g * L * np.cos(th) - 0.5 * d_inertia(th) * w * w) / inertia(th)]


t = np.round(np.arange(0, 6001) * 0.001, 10)
sol = solve_ivp(rhs, (0, 6.0), [np.pi / 4, 0.0], method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)
x = 2 * L * np.cos(sol.sol(t)[0])
head = "# slider-crank from pi/4 at rest: x of the slider, one-coordinate model (reference.py)\nt,x"
np.savetxt(Path(__file__).with_name("reference.csv"), np.column_stack([t, x]), delimiter=",", header=head,
           comments="", fmt="%.17g")  # fmt: skip
