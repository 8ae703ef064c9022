"""Prismatic (slider) joint: one translation along the axis; its position can be driven or sprung."""

from mbsim.model.joints.base import JointFrame, JointType, register_joint


@register_joint
class Prismatic(JointType):
    name = "prismatic"
    keys = frozenset({"point", "point1", "point2", "axis", "drive", "spring"})
    required = frozenset({"axis"})
    coordinate = "position"
    doc = (
        "no rotation, body2's point stays on body1's axis (5 equations; 2 in 2D); coordinate: "
        "position along the axis, m, measured between the joint points"
    )

    @classmethod
    def primitives(cls, frame: JointFrame):
        if frame.dimension == 2:
            return [*frame.twist_rows(), *frame.axis_offset_rows()]
        return [*frame.axis_parallel_rows(), *frame.axis_offset_rows(), *frame.twist_rows()]

    @classmethod
    def coordinate_primitive(cls, frame: JointFrame):
        return frame.axial_position()
