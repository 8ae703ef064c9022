"""/geometry in the result file (CONTRACT §7): what the bodies look like, stored with the run."""

from __future__ import annotations

import h5py
import numpy as np
from export_scenes import run_scene

from mbsim.model.shapes import SHAPE_TYPES
from mbsim.output.geometry import SHAPE_MESHES


def test_every_shape_type_can_be_drawn() -> None:
    assert set(SHAPE_TYPES) <= SHAPE_MESHES  # a new shape type needs its triangles in mbsim.output.geometry


def test_geometry_holds_the_scene_values_and_mesh_triangles(result_3d) -> None:
    with h5py.File(result_3d, "r") as f:
        g = f["geometry"]
        assert int(g.attrs["dimension"]) == 3
        np.testing.assert_allclose(g.attrs["up"], [0, 0, 1])
        assert [b.decode() if isinstance(b, bytes) else b for b in g.attrs["bodies"]] == [
            "brick",
            "roller",
            "part",
            "knot",
            "bare",
        ]
        assert [g["ground"][k].attrs["type"] for k in ("0", "1")] == ["plane", "box"]
        box = g["brick"]["0"]
        np.testing.assert_allclose(box.attrs["size"], [0.5, 0.3, 0.2])
        np.testing.assert_allclose(box.attrs["position"], [0.1, 0.05, 0])
        assert box.attrs["rotation"].shape == (3, 3)
        part = g["part"]["0"]
        assert part.attrs["file"] == "part.stl" and float(part.attrs["scale"]) == 0.5
        vertices = part["vertices"][:]
        np.testing.assert_allclose(vertices.max(axis=0) - vertices.min(axis=0), [0.15, 0.1, 0.05])  # scaled
        assert part["faces"].shape == (12, 3)
        assert len(g["bare"]) == 0


def test_a_mesh_used_twice_is_stored_once(tmp_path) -> None:
    twice = """
mbsim: 1
name: twins
time: {end: 0.01, step: 0.001}
bodies:
  - {name: a, density: 1000, position: [0, 0, 0], shapes: [{type: mesh, file: part.stl}]}
  - {name: b, density: 1000, position: [1, 0, 0], shapes: [{type: mesh, file: part.stl}]}
"""
    out = run_scene(tmp_path, twice)
    with h5py.File(out, "r") as f:
        a, b = f["geometry/a/0/vertices"], f["geometry/b/0/vertices"]
        assert a.id == b.id  # one dataset, two names (an HDF5 hard link)
