"""Cylindrical joint: translation along and rotation about the axis (3D only)."""

import numpy as np

from mbsim.model.joints.base import (
    JointFrame,
    JointType,
    TreeMotion,
    TreePose,
    angle_about,
    embed,
    register_joint,
)


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

    @classmethod
    def tree_motion(cls, frame: JointFrame, reversed: bool) -> TreeMotion:
        axis = embed(frame.axis_j if reversed else frame.axis_i)
        sign = -1.0 if reversed else 1.0
        return TreeMotion(
            "cylindrical",
            ax1=sign * axis / np.linalg.norm(axis),
            q_names=("position", "angle"),
            v_names=("velocity", "angle_rate"),
        )

    @classmethod
    def tree_coordinates(cls, pose: TreePose) -> np.ndarray:
        axis = pose.motion.ax1
        return np.array([axis @ pose.slide, angle_about(axis, pose.turn)])
