"""Fixed (weld) joint: no relative motion."""

import numpy as np

from mbsim.model.constraints import Primitive
from mbsim.model.joints.base import JointFrame, JointType, TreeMotion, TreePose, register_joint


@register_joint
class Fixed(JointType):
    name = "fixed"
    keys = frozenset({"point", "point1", "point2"})
    doc = "no relative motion (6 equations; 3 in 2D); the point is where reactions are reported"

    @classmethod
    def primitives(cls, frame: JointFrame):
        if frame.dimension == 2:
            return [frame.point_rows(), frame.relative_angle()]
        # body-j copies of body i's axes at t = 0; three dot1 rows lock the three relative rotations
        rel = frame.rot_j.T @ frame.rot_i
        ex, ey, ez = np.eye(3)
        pairs = ((ex, ey, "x.y"), (ey, ez, "y.z"), (ez, ex, "z.x"))
        return [frame.point_rows()] + [
            Primitive("dot1", frame.body_i, frame.body_j, {"a_i": a, "b_j": rel @ b}, [f"orientation {name}"])
            for a, b, name in pairs
        ]

    @classmethod
    def tree_motion(cls, frame: JointFrame, reversed: bool) -> TreeMotion:
        return TreeMotion("fixed")

    @classmethod
    def tree_coordinates(cls, pose: TreePose) -> np.ndarray:
        return np.zeros(0)
