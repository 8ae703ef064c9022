"""Force types: one module each; ``FORCE_TYPES`` maps the scene's ``type`` to its class.

Gravity is a scene-level key (``gravity``) handled in mbsim.model.dynamics; joint springs are
a joint's ``spring`` key (mbsim.model.compile builds them).
"""

from mbsim.model.forces import applied, spring_damper  # noqa: F401
from mbsim.model.forces.base import FORCE_TYPES, BuildSetup, ForceType, register_force

__all__ = ["FORCE_TYPES", "BuildSetup", "ForceType", "register_force"]
