"""Cylindrical joint: translation along and rotation about the axis (3D only)."""

from mbsim.model.joints.base import JointFrame, JointType, register_joint


@register_joint
class Cylindrical(JointType):
    name = "cylindrical"
    dimensions = (3,)
    keys = frozenset({"point", "point1", "point2", "axis", "drive", "spring"})
    required = frozenset({"axis"})
    coordinate = "position"
    doc = (
        "axes parallel, body2's point on body1's axis (4 equations); drive and spring act on the "
        "translation along the axis, m"
    )

    @classmethod
    def primitives(cls, frame: JointFrame):
        return [*frame.axis_parallel_rows(), *frame.axis_offset_rows()]

    @classmethod
    def coordinate_primitive(cls, frame: JointFrame):
        return frame.axial_position()
