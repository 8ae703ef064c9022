"""Joint types: one module each; ``JOINT_TYPES`` maps the scene's ``type`` to its class."""

from mbsim.model.joints import cylindrical, fixed, prismatic, revolute, spherical, universal  # noqa: F401
from mbsim.model.joints.base import JOINT_TYPES, JointFrame, JointType, register_joint

__all__ = ["JOINT_TYPES", "JointFrame", "JointType", "register_joint"]
