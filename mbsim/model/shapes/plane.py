"""Plane: the boundary of a half-space (ground only), a ``point`` of it and its outward ``normal``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbsim.model.shapes.base import ShapeType, type_field
from mbsim.model.spatial import orthonormal_basis
from mbsim.scene.fields import Field, Vector


class Plane(ShapeType):
    name = "plane"
    dimensions = (3,)
    fields = {
        "type": type_field("plane"),
        "point": Field(Vector(3), "a point of the plane"),
        "normal": Field(Vector(3, nonzero=True), "outward normal"),
    }
    doc = "half-space boundary (ground only)"
    ground_only = True
    unbounded = True
    display_sized = True

    def move(self, values: dict[str, Any], offset: np.ndarray) -> None:
        values["point"] = values["point"] + offset

    def local_pose(self, values: dict[str, Any], d: int) -> tuple[np.ndarray, np.ndarray]:
        # the outward normal is the last axis
        normal = np.asarray(values["normal"], dtype=float)
        normal = normal / np.linalg.norm(normal)
        b1, b2 = orthonormal_basis(normal)
        return np.asarray(values["point"], dtype=float), np.column_stack((b1, b2, normal))

    def rbound(self, values: dict[str, Any]) -> float:
        return float("inf")


PLANE = Plane()
