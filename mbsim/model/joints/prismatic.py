"""Prismatic (slider) joint: one translation along the axis; its position can be driven or sprung."""

import numpy as np

from mbsim.model.joints.base import JointFrame, JointType, TreeMotion, TreePose, embed, register_joint


@register_joint
class Prismatic(JointType):
    name = "prismatic"
    keys = frozenset(
        {"point", "point1", "point2", "axis", "drive", "spring", "initial", "armature", "limits", "friction", "effort"}
    )
    required = frozenset({"axis"})
    coordinate = "position"
    doc = (
        "no rotation, body2's point stays on body1's axis (5 equations; 2 in 2D); coordinate: "
        "position along the axis, m, measured between the joint points (plus `initial`)"
    )

    @classmethod
    def primitives(cls, frame: JointFrame):
        if frame.dimension == 2:
            return [*frame.twist_rows(), *frame.axis_offset_rows()]
        return [*frame.axis_parallel_rows(), *frame.axis_offset_rows(), *frame.twist_rows()]

    @classmethod
    def coordinate_primitive(cls, frame: JointFrame):
        return frame.axial_position()

    @classmethod
    def tree_motion(cls, frame: JointFrame, reversed: bool) -> TreeMotion:
        axis = embed(frame.axis_j if reversed else frame.axis_i)
        sign = -1.0 if reversed else 1.0  # walked back, the child slides by -s
        return TreeMotion(
            "prismatic", ax1=sign * axis / np.linalg.norm(axis), q_names=("position",), v_names=("velocity",)
        )

    @classmethod
    def tree_coordinates(cls, pose: TreePose) -> np.ndarray:
        return np.array([pose.motion.ax1 @ pose.slide])
