"""The scene and the reference of the undamped Hertz impact of a mesh sphere on a block.

A convex mesh sphere (trimesh's icosphere, 3 subdivisions, r = 0.05 m, m = 1 kg), turned so that
one vertex points straight down, falls at v0 = 0.1 m/s (no gravity) onto the top face of a block
of 1e9 kg through a compliant contact with the Hertz law F = k delta^1.5, k = 1e9 N/m^1.5, no
damping. Only that vertex touches (single point), so the one-coordinate Hertz problem holds:
m delta'' = -k delta^1.5, contact time 2.9432 delta_max / v0 with delta_max = (5 m v0^2 / (4 k))^(2/5)
= 4.4e-5 m, 1.29 ms; the ball leaves at +v0. The reference integrates the ball's height
z(t) (DOP853 at 1e-13, through the contact's start and end located exactly) and writes it every
1e-5 s (the scene's step) over 3 ms into reference.csv; ``python reference.py`` also writes
scene.yaml (the mesh's 642 vertices inline).
"""

from pathlib import Path

import numpy as np
import trimesh
import yaml
from scipy.integrate import solve_ivp

HERE = Path(__file__).parent
m, v0, k, r, gap = 1.0, 0.1, 1.0e9, 0.05, 2e-5
T_END, STEP = 3.0e-3, 1.0e-5


def scene() -> dict:
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=r)
    vertex = sphere.vertices[0] / np.linalg.norm(sphere.vertices[0])
    axis = np.cross(vertex, [0, 0, -1.0])  # the rotation taking that vertex to -z
    angle = float(np.arccos(np.clip(-vertex[2], -1, 1)))
    points = [[float(round(c, 17)) for c in p] for p in sphere.vertices]
    return {
        "mbsim": 1, "name": "Hertz impact of a mesh sphere", "time": {"end": T_END, "step": STEP},
        "solver": {"method": "lagrange", "integrator": "rk4"}, "output": {"every": 1},
        "bodies": [
            {"name": "ball", "mass": m, "inertia": [0.4 * m * r * r] * 3, "position": [0, 0, r + gap],
             "orientation": {"axis_angle": {"axis": [float(a) for a in axis], "angle": angle}},
             "velocity": [0, 0, -v0],
             "shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": points}}]},
            {"name": "block", "mass": 1.0e9, "inertia": [1e9] * 3, "position": [0, 0, -0.05],
             "shapes": [{"type": "box", "size": [0.2, 0.2, 0.1]}]},
        ],
        "contacts": [{"name": "hit", "type": "compliant", "body1": "block", "body2": "ball", "stiffness": k,
                      "exponent": 1.5, "sdf": {"cell": 0.004, "padding": 0.01}}],
    }  # fmt: skip


def height(t: np.ndarray) -> np.ndarray:
    """z of the ball's centre: free flight, then the Hertz contact (started and ended exactly)."""
    t_in = gap / v0
    contact = solve_ivp(lambda _, y: [y[1], k * max(-y[0], 0.0) ** 1.5 / m], (0, 1.0), [0.0, -v0],
                        events=lambda _, y: y[0] if y[1] > 0 else -1.0, rtol=1e-13, atol=1e-16,
                        method="DOP853", dense_output=True)  # fmt: skip
    t_out = t_in + contact.t_events[0][0]
    z = np.where(t <= t_in, r + gap - v0 * t, r + v0 * (t - t_out))
    inside = (t > t_in) & (t < t_out)
    z[inside] = r + contact.sol(t[inside] - t_in)[0]
    return z


if __name__ == "__main__":
    head = "# Hertz impact: written by reference.py; do not edit\n"
    text = yaml.safe_dump(scene(), sort_keys=False, default_flow_style=None, width=120)
    (HERE / "scene.yaml").write_text(head + text)
    t = np.round(np.arange(0, 301) * STEP, 12)
    head = "# undamped Hertz impact: z of the ball's centre, one-coordinate Hertz model (reference.py)\nt,z"
    np.savetxt(HERE / "reference.csv", np.column_stack([t, height(t)]), delimiter=",", header=head, comments="",
               fmt="%.17g")  # fmt: skip
