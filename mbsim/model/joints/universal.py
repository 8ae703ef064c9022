"""Universal (Cardan) joint: points coincide and the two cross axes stay perpendicular (3D only)."""

import numpy as np

from mbsim.model.constraints import Primitive
from mbsim.model.joints.base import JointFrame, JointType, TreeMotion, TreePose, axis_rotation, register_joint


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

    @classmethod
    def tree_motion(cls, frame: JointFrame, reversed: bool) -> TreeMotion:
        a1, a2 = frame.axes  # a1 in body1's frame, a2 in body2's
        if reversed:  # the parent is body2: its axis turns first, the other way
            return TreeMotion(
                "universal", ax1=-a2, ax2=-a1, q_names=("angle2", "angle1"), v_names=("angle2_rate", "angle1_rate")
            )
        return TreeMotion(
            "universal", ax1=a1, ax2=a2, q_names=("angle1", "angle2"), v_names=("angle1_rate", "angle2_rate")
        )

    @classmethod
    def tree_coordinates(cls, pose: TreePose) -> np.ndarray:
        # turn = Rot(u, a) R0 Rot(w, b) R0^T = Rot(u, a) Rot(R0 w, b)
        u, w = pose.motion.ax1, pose.zero @ pose.motion.ax2
        N = pose.turn
        a = float(np.arctan2(u @ np.cross(w, N @ w), w @ (N @ w)))
        K = axis_rotation(u, -a) @ N
        b = float(np.arctan2(w @ np.cross(u, K @ u), u @ (K @ u)))
        return np.array([a, b])
