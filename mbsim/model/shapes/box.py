"""Box: a cuboid centred on its frame, edge lengths ``size`` along its x, y, z."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_BOX, POSE, MassProps, ShapeType, type_field
from mbsim.scene.fields import Field, Vector


class Box(ShapeType):
    name = "box"
    dimensions = (3,)
    fields = {"type": type_field("box"), "size": Field(Vector(3), "edge lengths along x, y, z, m"), "pose": POSE}
    doc = "cuboid centred on its frame"
    aabb_kernel = AABB_BOX
    solid = True

    def mass(self, values: dict[str, Any]) -> MassProps:
        a, b, c = values["size"]
        vol = a * b * c
        return vol, np.zeros(3), vol / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])

    def param(self, values: dict[str, Any]) -> np.ndarray:
        # half extents
        return 0.5 * np.asarray(values["size"], dtype=float)

    def rbound(self, values: dict[str, Any]) -> float:
        return 0.5 * float(np.linalg.norm(values["size"]))

    def surface(self, values: dict[str, Any], fine: bool = True):
        import trimesh

        return trimesh.creation.box(extents=np.asarray(values["size"], dtype=float))


BOX = Box()
