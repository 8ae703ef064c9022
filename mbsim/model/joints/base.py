"""What a joint type declares and implements; the registry decorator.

A joint type is one module in this package with one class that declares:
- ``name``: the scene's ``type`` value; ``dimensions``: 2, 3 or both;
- ``keys``: the type-specific scene keys it accepts and ``required`` those it needs;
- ``coordinate``: the name of the joint coordinate a drive or spring acts on (or None);
and implements ``primitives(frame)`` (its constraint equations, mbsim.model.constraints)
and ``coordinate_primitive(frame)`` (the equation that measures its coordinate).

For the recursive method (mbsim.solvers.recursive) a joint type also says how it moves its
child relative to its parent in joint coordinates: ``tree_motion(frame, reversed)`` names one
of the motions the compiled recursions know (mbsim.solvers.recursive.soa_kernels: ``fixed``,
``revolute`` -- a turn about a parent-fixed axis --, ``prismatic``, ``cylindrical``,
``universal``, ``spherical``), its axes and the names of its coordinates; and
``tree_coordinates(pose)`` reads those coordinates back from a relative pose. A joint type
whose motion is none of these needs a new motion in the kernels as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from mbsim.model.constraints import Primitive
from mbsim.model.spatial import orthonormal_basis, perp, skew


@dataclass
class JointFrame:
    """Geometry of one joint at t = 0, in the frames every primitive needs.

    Attributes:
        body_i, body_j: extended body indices (ground = nbody).
        s_i, s_j: joint point in body i's and body j's frames.
        point: joint point, world (from body j's side).
        axis_i, axis_j: joint axis in body i's and body j's frames (unit; None if not given).
        rot_i, rot_j: initial rotations body -> world ((3,3) or (2,2)).
        axes: universal joint: first axis in body i, second in body j (body frames).
        dimension: 2 or 3.
    """

    body_i: int
    body_j: int
    s_i: np.ndarray
    s_j: np.ndarray
    point: np.ndarray
    axis_i: np.ndarray | None
    axis_j: np.ndarray | None
    rot_i: np.ndarray
    rot_j: np.ndarray
    axes: tuple[np.ndarray, np.ndarray] | None
    dimension: int

    # building blocks shared by several joint types ------------------------------

    def point_rows(self) -> Primitive:
        labels = ["x", "y", "z"][: self.dimension]
        return Primitive(
            "point", self.body_i, self.body_j, {"s_i": self.s_i, "s_j": self.s_j}, [f"point {c}" for c in labels]
        )

    def axis_parallel_rows(self) -> list[Primitive]:
        """Two dot1 rows keeping body j's axis parallel to body i's (3D)."""
        b1, b2 = orthonormal_basis(self.axis_i)
        return [
            Primitive("dot1", self.body_i, self.body_j, {"a_i": b, "b_j": self.axis_j}, [f"axis _|_ {name}"])
            for b, name in ((b1, "b1"), (b2, "b2"))
        ]

    def axis_offset_rows(self) -> list[Primitive]:
        """Body j's point stays on body i's axis line: two dot2 rows (3D) or one (2D)."""
        if self.dimension == 2:
            normals = [("n", perp(self.axis_i))]
        else:
            b1, b2 = orthonormal_basis(self.axis_i)
            normals = [("b1", b1), ("b2", b2)]
        return [
            Primitive(
                "dot2", self.body_i, self.body_j, {"a_i": n, "s_i": self.s_i, "s_j": self.s_j}, [f"offset along {name}"]
            )
            for name, n in normals
        ]

    def twist_rows(self) -> list[Primitive]:
        """Rotation about the axis locked: 3D one dot1 row; 2D the angle row."""
        if self.dimension == 2:
            return [self.relative_angle()]
        b1, b2 = orthonormal_basis(self.axis_i)
        c_j = self.rot_j.T @ self.rot_i @ b2  # body-j vector equal to b2 at t = 0
        return [Primitive("dot1", self.body_i, self.body_j, {"a_i": b1, "b_j": c_j}, ["twist"])]

    def relative_angle(self) -> Primitive:
        """Rotation of body j relative to body i about the axis, zero at t = 0."""
        if self.dimension == 2:
            offset = float(
                np.arctan2(self.rot_j[1, 0], self.rot_j[0, 0]) - np.arctan2(self.rot_i[1, 0], self.rot_i[0, 0])
            )
            return Primitive("angle", self.body_i, self.body_j, {}, ["angle"], offset=offset)
        b1, b2 = orthonormal_basis(self.axis_i)
        c_j = self.rot_j.T @ self.rot_i @ b1
        return Primitive("angle", self.body_i, self.body_j, {"b_i": b1, "e_i": b2, "c_j": c_j}, ["angle"])

    def axial_position(self) -> Primitive:
        """Distance of body j's point from body i's point along the axis."""
        return Primitive(
            "dot2", self.body_i, self.body_j, {"a_i": self.axis_i, "s_i": self.s_i, "s_j": self.s_j}, ["position"]
        )


@dataclass
class TreeMotion:
    """How the recursive method moves a joint's child relative to its parent.

    Attributes:
        motion: the kernels' motion (mbsim.solvers.recursive.soa_kernels.MOTIONS).
        ax1: (3,) unit axis in the parent's frame (revolute, prismatic, cylindrical, universal's first).
        ax2: (3,) unit axis in the child's frame (universal's second).
        q_names, v_names: the joint coordinates and their velocities, in kernel order.
    """

    motion: str
    ax1: np.ndarray = field(default_factory=lambda: np.zeros(3))
    ax2: np.ndarray = field(default_factory=lambda: np.zeros(3))
    q_names: tuple[str, ...] = ()
    v_names: tuple[str, ...] = ()


@dataclass
class TreePose:
    """A child's pose relative to its parent, as the joint coordinates are read from it.

    Attributes:
        motion: the joint's TreeMotion.
        turn: (3, 3) relative rotation parent -> child times the inverse of the one at the
            joint's zero, on the parent's side (R_p^T R_k R0^T: Rot(ax1, angle) for a revolute).
        child_turn: (3, 3) the same on the child's side (R0^T R_p^T R_k: a spherical joint's).
        slide: (3,) the child's joint point relative to the parent's, parent's axes.
        planar_angle: 2D scenes: the relative angle minus the one at the joint's zero, continuous.
        zero: (3, 3) R0, the relative rotation parent -> child at the joint's zero.
    """

    motion: TreeMotion
    zero: np.ndarray
    turn: np.ndarray
    child_turn: np.ndarray
    slide: np.ndarray
    planar_angle: float | None


def embed(x: np.ndarray | None) -> np.ndarray:
    """A planar vector as a 3D one (z = 0); 3D vectors copied; None as zeros."""
    if x is None:
        return np.zeros(3)
    x = np.asarray(x, dtype=float)
    return np.array([x[0], x[1], 0.0]) if x.shape[0] == 2 else x.copy()


def angle_about(axis: np.ndarray, M: np.ndarray) -> float:
    """theta with M = Rot(axis, theta), from a vector normal to the axis."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    b = np.cross(axis, helper)
    b /= np.linalg.norm(b)
    mb = M @ b
    return float(np.arctan2(axis @ np.cross(b, mb), b @ mb))


def unit_quaternion(R: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix, w >= 0."""
    from scipy.spatial.transform import Rotation  # here: scipy.spatial costs every command's start-up ~0.1 s

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    q = np.array([w, x, y, z])
    return -q if q[0] < 0 else q


def axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rot(axis, angle) (Rodrigues), axis of unit length."""
    k = skew(axis)
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


class JointType:
    """Base of joint types (see the module docstring)."""

    name: ClassVar[str]
    dimensions: ClassVar[tuple[int, ...]] = (2, 3)
    keys: ClassVar[frozenset[str]] = frozenset()
    required: ClassVar[frozenset[str]] = frozenset()
    coordinate: ClassVar[str | None] = None
    doc: ClassVar[str] = ""

    @classmethod
    def allowed_keys(cls, dimension: int) -> frozenset[str]:
        return cls.keys

    @classmethod
    def required_keys(cls, dimension: int) -> frozenset[str]:
        return cls.required

    @classmethod
    def coordinate_primitive(cls, frame: JointFrame) -> Primitive | None:
        """The equation whose value is the joint coordinate (for drives and springs); None for a
        type without a coordinate."""
        return None

    # Every joint type implements, in its own module (register_joint refuses a class without them):
    #   primitives(frame) -> list[Primitive]: its constraint equations (without its drive);
    #   tree_motion(frame, reversed) -> TreeMotion: the recursive method's motion of the joint,
    #       walked from body1 to body2 (``reversed``: from body2 to body1, so the child moves by
    #       the opposite of the joint's motion);
    #   tree_coordinates(pose: TreePose) -> np.ndarray: its joint coordinates (nq,) of a relative
    #       pose that satisfies the joint.
    REQUIRED: ClassVar[tuple[str, ...]] = ("primitives", "tree_motion", "tree_coordinates")


JOINT_TYPES: dict[str, type[JointType]] = {}


def register_joint(cls: type[JointType]) -> type[JointType]:
    """Add a joint type to the registry; it must implement every method of JointType.REQUIRED."""
    missing = [name for name in JointType.REQUIRED if name not in vars(cls)]
    if missing:
        raise TypeError(f"joint type '{cls.name}' ({cls.__module__}) does not implement {', '.join(missing)}")
    JOINT_TYPES[cls.name] = cls
    return cls
