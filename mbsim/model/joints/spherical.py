"""Spherical (ball) joint: the joint points coincide; three rotations free (3D only)."""

import numpy as np

from mbsim.model.joints.base import JointFrame, JointType, TreeMotion, TreePose, register_joint, unit_quaternion


@register_joint
class Spherical(JointType):
    name = "spherical"
    dimensions = (3,)
    keys = frozenset({"point", "point1", "point2"})
    doc = "joint points coincide (3 equations); all rotations free"

    @classmethod
    def primitives(cls, frame: JointFrame):
        return [frame.point_rows()]

    @classmethod
    def tree_motion(cls, frame: JointFrame, reversed: bool) -> TreeMotion:
        return TreeMotion("spherical", q_names=("qw", "qx", "qy", "qz"), v_names=("wx", "wy", "wz"))

    @classmethod
    def tree_coordinates(cls, pose: TreePose) -> np.ndarray:
        return unit_quaternion(pose.child_turn)
