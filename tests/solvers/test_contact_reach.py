"""How far timestepping searches for contacts: far enough that a contact closing within the
step is in the step's LCP. The search reach is |v| + |omega| R per body, R its bounding radius
(mbsim.model.contact.jacobian.bounding_radii, from the shapes' compiled radii); a mesh's R was
a guessed 1 m, which a 6 m bar spinning into the floor outruns."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

LENGTH, WIDTH, SPIN, STEP, GAP = 6.0, 0.1, 10.0, 1e-3, 0.028


def test_a_spinning_mesh_bar_does_not_pass_into_the_floor_within_a_step(run_scene):
    """A 6 m mesh bar, horizontal at 28 mm above the floor, spinning at 10 rad/s about y: its tip
    comes down at 30 m/s and would be 2 mm below the floor at the end of the first 1 ms step.
    At the step's midpoint the tip is 13 mm up: within the search (1 mm margin + h (|omega| R) =
    31 mm with the exact R = 3.0 m; 11 mm with the old 1 m), so the LCP stops it at the floor
    (measured: 0.7 um above it; 2.0 mm below with R = 1 m)."""
    corners = [[sx * LENGTH / 2, sy * WIDTH / 2, sz * WIDTH / 2] for sx, sy, sz in itertools.product((-1, 1), repeat=3)]
    scene = {
        "mbsim": 1,
        "name": "spinning bar",
        "gravity": [0, 0, 0],
        "time": {"end": STEP, "step": STEP},
        "solver": {"method": "timestepping"},
        "ground": {"shapes": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}]},
        "bodies": [
            {
                "name": "bar",
                "density": 1000.0,
                "position": [0, 0, WIDTH / 2 + GAP],
                "angular_velocity": [0, SPIN, 0],
                "shapes": [{"type": "mesh", "generate": {"kind": "convex_hull", "points": corners}}],
            }
        ],
        "contacts": [{"name": "floor", "type": "rigid", "body1": "ground", "body2": "bar", "restitution": 0.0}],
    }
    _, res = run_scene(scene)
    p, q = res["bodies/bar/position"], res["bodies/bar/orientation"]
    rot = Rotation.from_quat(np.c_[q[:, 1:], q[:, :1]]).as_matrix()
    lowest = (p[:, None, 2] + np.einsum("tij,kj->tki", rot, np.array(corners))[:, :, 2]).min(axis=1)
    assert lowest[0] == pytest.approx(GAP, abs=1e-12)
    assert lowest[-1] > -1e-5  # without the tip's contact: 28 mm - 30 mm = -2 mm
