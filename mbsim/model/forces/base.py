"""What a force type declares and implements; the registry decorator.

A force type is one module here with one class that declares ``name``, ``doc`` and a
``FIELDS`` table (mbsim.scene.fields), and implements ``build(items, setup)`` returning a
force group: an object whose ``evaluate(frames, t)`` gives, batched over all elements of the
type, the generalized forces split into a conservative and a non-conservative part, each
(nbody+1, w) with rotational parts in body axes (3D) -- the ground row is discarded -- and
the potential energy of the conservative part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from mbsim.model.model import Frames
from mbsim.scene.fields import Context, Field

if TYPE_CHECKING:
    from mbsim.model.data import Data


@dataclass
class BuildSetup:
    """What force builders need from the compiler.

    Attributes:
        ctx: scene context (errors, parameters, dimension).
        body_index: body name -> extended index ("ground" -> nbody).
        pos0: (nbody+1, d) initial centres of mass; rot0: (nbody+1, d, d) initial rotations.
        nbody: number of bodies.
    """

    ctx: Context
    body_index: dict[str, int]
    pos0: np.ndarray
    rot0: np.ndarray
    nbody: int

    @property
    def dimension(self) -> int:
        return self.ctx.dimension

    def body(self, path, name: str, allow_ground: bool = True) -> int:
        from mbsim.errors import did_you_mean

        choices = [n for n in self.body_index if allow_ground or n != "ground"]
        if name not in choices:
            raise self.ctx.error(
                path, f"unknown body '{name}'; expected one of {', '.join(choices)}", did_you_mean(name, choices)
            )
        return self.body_index[name]

    def local_point(self, body: int, world_point: np.ndarray) -> np.ndarray:
        return self.rot0[body].T @ (world_point - self.pos0[body])


class ForceGroup(Protocol):
    def evaluate(self, frames: Frames, t: float, data: Data) -> tuple[np.ndarray | None, np.ndarray | None, float]:
        """(Q conservative, Q non-conservative, potential energy) at a state of the run ``data``
        (a group that keeps per-run state -- counters, buffers -- keeps it there, never on itself)."""


class ForceType:
    name: ClassVar[str]
    doc: ClassVar[str] = ""
    FIELDS: ClassVar[dict[str, Field]] = {}

    @classmethod
    def build(cls, items: list[tuple[Any, dict[str, Any]]], setup: BuildSetup) -> ForceGroup:
        """``items``: (ItemSpec, checked values) of every element of this type."""
        raise TypeError(f"force type {cls.name} has no build method")


FORCE_TYPES: dict[str, type[ForceType]] = {}


def register_force(cls: type[ForceType]) -> type[ForceType]:
    FORCE_TYPES[cls.name] = cls
    return cls
