"""Line: the boundary of a half-plane (ground only, planar), a ``point`` of it and its outward
``normal``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import ShapeType, type_field
from mbsim.scene.fields import Field, Vector


class Line(ShapeType):
    name = "line"
    dimensions = (2,)
    fields = {
        "type": type_field("line"),
        "point": Field(Vector(2), "a point of the line"),
        "normal": Field(Vector(2, nonzero=True), "outward normal"),
    }
    doc = "half-plane boundary (ground only, planar)"
    ground_only = True
    unbounded = True
    display_sized = True

    def move(self, values: dict[str, Any], offset: np.ndarray) -> None:
        values["point"] = values["point"] + offset

    def local_pose(self, values: dict[str, Any], d: int) -> tuple[np.ndarray, np.ndarray]:
        # the outward normal is the last axis, the line's direction the first
        normal = np.asarray(values["normal"], dtype=float)
        normal = normal / np.linalg.norm(normal)
        return np.asarray(values["point"], dtype=float), np.column_stack(((normal[1], -normal[0]), normal))

    def rbound(self, values: dict[str, Any]) -> float:
        return float("inf")


LINE = Line()
