"""Spherical (ball) joint: the joint points coincide; three rotations free (3D only)."""

from mbsim.model.joints.base import JointFrame, JointType, register_joint


@register_joint
class Spherical(JointType):
    name = "spherical"
    dimensions = (3,)
    keys = frozenset({"point", "point1", "point2"})
    doc = "joint points coincide (3 equations); all rotations free"

    @classmethod
    def primitives(cls, frame: JointFrame):
        return [frame.point_rows()]
