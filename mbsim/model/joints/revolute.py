"""Revolute (hinge) joint: one rotation about the axis; its angle can be driven or sprung."""

from mbsim.model.joints.base import JointFrame, JointType, register_joint


@register_joint
class Revolute(JointType):
    name = "revolute"
    keys = frozenset({"point", "point1", "point2", "axis", "drive", "spring"})
    required = frozenset({"axis"})  # 3D only; a planar revolute turns about the normal
    coordinate = "angle"
    doc = "points coincide and axes stay parallel (5 equations; 2 in 2D); coordinate: angle, rad, zero at t = 0"

    @classmethod
    def allowed_keys(cls, dimension: int):
        return cls.keys if dimension == 3 else cls.keys - {"axis"}

    @classmethod
    def required_keys(cls, dimension: int):
        return cls.required if dimension == 3 else frozenset()

    @classmethod
    def primitives(cls, frame: JointFrame):
        if frame.dimension == 2:
            return [frame.point_rows()]
        return [frame.point_rows(), *frame.axis_parallel_rows()]

    @classmethod
    def coordinate_primitive(cls, frame: JointFrame):
        return frame.relative_angle()
