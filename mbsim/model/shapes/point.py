"""Point: a massless contact point at ``position`` in its body's frame (2D and 3D)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import AABB_BALL, ShapeType, type_field
from mbsim.scene.fields import Field, Vector


class Point(ShapeType):
    name = "point"
    dimensions = (2, 3)
    fields = {"type": type_field("point"), "position": Field(Vector("dim"), "in the body frame")}
    doc = "a contact point; no mass"
    aabb_kernel = AABB_BALL
    isotropic = True
    rounded = True
    display_sized = True

    def move(self, values: dict[str, Any], offset: np.ndarray) -> None:
        values["position"] = values["position"] + offset

    def local_pose(self, values: dict[str, Any], d: int) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(values["position"], dtype=float), np.eye(d)

    def rbound(self, values: dict[str, Any]) -> float:
        return 0.0

    def display_mesh(self, values: dict[str, Any], marker: float, depth: float):
        import trimesh

        return trimesh.creation.icosphere(subdivisions=3, radius=marker)


POINT = Point()
