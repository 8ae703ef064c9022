"""Circle: a disc of ``radius`` (planar), centred on its frame."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_BALL, POSE, MassProps, ShapeType, type_field
from mbsim.scene.fields import Field, Number


class Circle(ShapeType):
    name = "circle"
    dimensions = (2,)
    fields = {"type": type_field("circle"), "radius": Field(Number(positive=True), "m"), "pose": POSE}
    doc = "disc (planar)"
    aabb_kernel = AABB_BALL
    isotropic = True
    rounded = True
    display_sized = True

    def mass(self, values: dict[str, Any]) -> MassProps:
        r = values["radius"]
        area = np.pi * r * r
        return area, np.zeros(2), np.array([[0.5 * area * r * r]])

    def param(self, values: dict[str, Any]) -> np.ndarray:
        return np.array([values["radius"], 0.0, 0.0])

    def rbound(self, values: dict[str, Any]) -> float:
        return float(values["radius"])

    def display_mesh(self, values: dict[str, Any], marker: float, depth: float):
        # a disc extruded along z by the drawing's depth
        import trimesh

        return trimesh.creation.cylinder(radius=values["radius"], height=depth, sections=40)


CIRCLE = Circle()
