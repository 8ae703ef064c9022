"""Revolute (hinge) joint: one rotation about the axis; its angle can be driven or sprung."""

import numpy as np

from mbsim.model.joints.base import JointFrame, JointType, TreeMotion, TreePose, angle_about, embed, register_joint


@register_joint
class Revolute(JointType):
    name = "revolute"
    keys = frozenset(
        {"point", "point1", "point2", "axis", "drive", "spring", "initial", "armature", "limits", "friction", "effort"}
    )
    required = frozenset({"axis"})  # 3D only; a planar revolute turns about the normal
    coordinate = "angle"
    doc = (
        "points coincide and axes stay parallel (5 equations; 2 in 2D); coordinate: angle, rad, zero at t = 0 "
        "(or `initial`)"
    )

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

    @classmethod
    def tree_motion(cls, frame: JointFrame, reversed: bool) -> TreeMotion:
        # a planar revolute turns about z; walked back, the child turns the other way
        axis = np.array([0.0, 0.0, 1.0]) if frame.dimension == 2 else embed(frame.axis_j if reversed else frame.axis_i)
        sign = -1.0 if reversed else 1.0
        return TreeMotion(
            "revolute", ax1=sign * axis / np.linalg.norm(axis), q_names=("angle",), v_names=("angle_rate",)
        )

    @classmethod
    def tree_coordinates(cls, pose: TreePose) -> np.ndarray:
        if pose.planar_angle is not None:
            return np.array([pose.planar_angle])
        return np.array([angle_about(pose.motion.ax1, pose.turn)])
