"""Rectangle: width and height ``size`` (planar), centred on its frame."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_BOX, POSE, MassProps, ShapeType, type_field
from mbsim.scene.fields import Field, Vector


class Rectangle(ShapeType):
    name = "rectangle"
    dimensions = (2,)
    fields = {"type": type_field("rectangle"), "size": Field(Vector(2), "width and height, m"), "pose": POSE}
    doc = "rectangle centred on its frame (planar)"
    aabb_kernel = AABB_BOX
    display_sized = True

    def mass(self, values: dict[str, Any]) -> MassProps:
        w, h = values["size"]
        area = w * h
        return area, np.zeros(2), np.array([[area * (w * w + h * h) / 12.0]])

    def param(self, values: dict[str, Any]) -> np.ndarray:
        # half extents
        return np.array([0.5 * values["size"][0], 0.5 * values["size"][1], 0.0])

    def rbound(self, values: dict[str, Any]) -> float:
        return 0.5 * float(np.linalg.norm(values["size"]))

    def display_mesh(self, values: dict[str, Any], marker: float, depth: float):
        # the rectangle extruded along z by the drawing's depth
        import trimesh

        return trimesh.creation.box(extents=np.array([values["size"][0], values["size"][1], depth], dtype=float))


RECTANGLE = Rectangle()
