"""Universal (Cardan) joint: points coincide and the two cross axes stay perpendicular (3D only)."""

from mbsim.model.constraints import Primitive
from mbsim.model.joints.base import JointFrame, JointType, register_joint


@register_joint
class Universal(JointType):
    name = "universal"
    dimensions = (3,)
    keys = frozenset({"point", "point1", "point2", "axes"})
    required = frozenset({"axes"})
    doc = "points coincide, body1's axis stays perpendicular to body2's axis (4 equations)"

    @classmethod
    def primitives(cls, frame: JointFrame):
        a1, a2 = frame.axes
        return [
            frame.point_rows(),
            Primitive("dot1", frame.body_i, frame.body_j, {"a_i": a1, "b_j": a2}, ["cross axes _|_"]),
        ]
