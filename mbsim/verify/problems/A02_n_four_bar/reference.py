"""The scene and the references of A02, the N four-bar mechanism with N = 40.

Run ``python reference.py``: it writes scene.yaml (81 bars, 121 revolute joints), reference.csv
(the one-coordinate solution every 0.1 s) and published.csv (the benchmark's published ADAMS
values). Compared quantity: the centre of crank0, which is B0 / 2 because crank0 turns about
the origin; both tables hold B0 / 2.

One-coordinate model (independent of mbsim's body coordinates): on the branch that the start
selects, all N + 1 cranks turn together by the angle phi from +x and the couplers translate
with the cranks' tips. Kinetic energy 1/2 I phi'^2 with I = (N + 1) m L^2 / 3 + N m L^2; potential
g sin(phi) ((N + 1) m L / 2 + N m L); so I phi'' = -k cos(phi), phi(0) = pi/2, phi'(0) = -1 rad/s
(B0 at 1 m/s along +x). For N = 40 it meets the published values to 2e-6 m.
"""

from pathlib import Path

import numpy as np
import yaml
from scipy.integrate import solve_ivp

N, m, L, g = 40, 1.0, 1.0, 9.81
HERE = Path(__file__).parent


def scene() -> dict:
    bar = {"mass": m, "inertia": m * L**2 / 12}
    cranks = [
        {"name": f"crank{i}", **bar, "position": [float(i), 0.5], "orientation": float(np.pi / 2),
         "velocity": [0.5, 0.0], "angular_velocity": -1.0}
        for i in range(N + 1)
    ]  # fmt: skip
    couplers = [{"name": f"coupler{i}", **bar, "position": [i + 0.5, 1.0], "velocity": [1.0, 0.0]} for i in range(N)]
    joints = [
        {"name": f"A{i}", "type": "revolute", "body1": "ground", "body2": f"crank{i}", "point": [float(i), 0.0]}
        for i in range(N + 1)
    ]
    for i in range(N):
        joints.append({"name": f"B{i}", "type": "revolute", "body1": f"crank{i}", "body2": f"coupler{i}",
                       "point": [float(i), 1.0]})  # fmt: skip
        joints.append({"name": f"C{i}", "type": "revolute", "body1": f"coupler{i}", "body2": f"crank{i + 1}",
                       "point": [float(i + 1), 1.0]})  # fmt: skip
    return {
        "mbsim": 1, "name": f"IFToMM A02 N four-bar, N = {N}", "dimension": 2, "gravity": [0, -g],
        "time": {"end": 20.0, "step": 0.001}, "solver": {"method": "null_space", "integrator": "rk4"},
        "output": {"every": 10}, "bodies": cranks + couplers, "joints": joints,
    }  # fmt: skip


def b0(t: np.ndarray) -> np.ndarray:
    inertia, k = (N + 1) * m * L**2 / 3 + N * m * L**2, g * ((N + 1) * m * L / 2 + N * m * L)
    sol = solve_ivp(lambda _, y: [y[1], -k * np.cos(y[0]) / inertia], (0, t[-1]), [np.pi / 2, -1.0],
                    method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)  # fmt: skip
    phi = sol.sol(t)[0]
    return np.column_stack([L * np.cos(phi), L * np.sin(phi)])


if __name__ == "__main__":
    text = "# IFToMM A02 with N = 40: written by reference.py; do not edit\n"
    (HERE / "scene.yaml").write_text(
        text + yaml.safe_dump(scene(), sort_keys=False, default_flow_style=None, width=120)
    )
    t = np.round(np.arange(0, 201) * 0.1, 10)
    rows = np.column_stack([t, b0(t) / 2])
    head = "# IFToMM A02, N = 40: B0 / 2 (crank0's centre) of the one-coordinate model (reference.py)\nt,x,y"
    np.savetxt(HERE / "reference.csv", rows, delimiter=",", header=head, comments="", fmt="%.17g")
    published = np.array([[5, -0.540191, -0.841543], [10, 0.180513, 0.983573], [15, -0.999878, -0.015606],
                          [20, 0.410902, 0.911679]])  # fmt: skip
    published[:, 1:] /= 2
    head = "# IFToMM A02, N = 40: B0 / 2 from the published ADAMS solution of the benchmark (B0 halved)\nt,x,y"
    np.savetxt(HERE / "published.csv", published, delimiter=",", header=head, comments="", fmt="%.17g")
