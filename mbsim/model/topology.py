"""The kinematic tree of a scene: which joint carries which body, from the ground outwards.

The scene names joints by ``body1``/``body2`` in any orientation; here the joints become a
spanning forest rooted at the ground (breadth first, joints in scene order), so that every
body gets exactly one inboard joint and a parent on the ground side. A body that no chain of
joints connects to the ground becomes the root of its own tree: the first body of that
group in scene order gets a free (6-DOF; 3 in 2D) joint to the ground. A joint that connects
two bodies already connected by earlier joints (scene order) closes a loop; trees cannot
have one, and :class:`LoopClosure` names it.

This is the topology of the joint-coordinate method ``recursive``
(papers/creeping-robot-spatial-operator-algebra.txt §3); it is not used by the methods in
body coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class LoopClosure(ValueError):
    """A joint closes a kinematic loop. Attributes: ``joint`` (index in the scene) and the
    bodies it joins (extended indices, ground = nbody)."""

    def __init__(self, joint: int, body1: int, body2: int) -> None:
        super().__init__(f"joint {joint} closes a loop")
        self.joint, self.body1, self.body2 = joint, body1, body2


@dataclass(frozen=True)
class Tree:
    """A spanning forest of the bodies, rooted at the ground.

    Attributes:
        order: (nbody,) body indices, every parent before its children (breadth first).
        parent: (nbody,) parent body of each body; ``nbody`` is the ground.
        joint: (nbody,) scene index of each body's inboard joint; -1 for a free root.
        reversed: (nbody,) True where the inboard joint's ``body2`` is the parent (the joint
            is walked from body2 to body1).
        depth: (nbody,) number of joints between the body and the ground (free roots: 1).
    """

    order: np.ndarray
    parent: np.ndarray
    joint: np.ndarray
    reversed: np.ndarray
    depth: np.ndarray

    @property
    def free_roots(self) -> np.ndarray:
        """Bodies that float freely (no joint path to the ground), in scene order."""
        return np.nonzero(self.joint < 0)[0]


def spanning_tree(nbody: int, joints: list[tuple[int, int]]) -> Tree:
    """The kinematic tree of bodies ``0..nbody-1`` joined by ``joints``.

    Args:
        nbody: number of bodies; index ``nbody`` is the ground.
        joints: (body1, body2) of every joint, extended indices, in scene order.
    Returns:
        the tree (see :class:`Tree`).
    Raises:
        LoopClosure: for the first joint (scene order) that joins two bodies already joined.
    """
    # union-find in scene order: the first joint inside one group closes a loop
    group = list(range(nbody + 1))

    def find(a: int) -> int:
        while group[a] != a:
            group[a] = group[group[a]]
            a = group[a]
        return a

    for j, (a, b) in enumerate(joints):
        ra, rb = find(a), find(b)
        if ra == rb:
            raise LoopClosure(j, a, b)
        group[ra] = rb
    incident: list[list[int]] = [[] for _ in range(nbody + 1)]
    for j, (a, b) in enumerate(joints):
        incident[a].append(j)
        incident[b].append(j)
    parent = np.full(nbody, -1, dtype=np.int64)
    joint = np.full(nbody, -1, dtype=np.int64)
    rev = np.zeros(nbody, dtype=bool)
    depth = np.zeros(nbody, dtype=np.int64)
    seen = np.zeros(nbody + 1, dtype=bool)
    order: list[int] = []

    def grow(root: int, root_depth: int) -> None:
        """Breadth-first from ``root``: every joint met leads to a new body (no loops, checked above)."""
        queue = [root]
        seen[root] = True
        head = 0
        while head < len(queue):
            u = queue[head]
            head += 1
            for j in incident[u]:
                a, b = joints[j]
                child = b if a == u else a
                if seen[child]:
                    continue
                seen[child] = True
                parent[child], joint[child], rev[child] = u, j, child == a
                depth[child] = (depth[u] if u < nbody else root_depth) + 1
                order.append(child)
                queue.append(child)

    grow(nbody, 0)
    for b in range(nbody):
        if not seen[b]:  # a floating group: its first body is the root, on a free joint
            parent[b], depth[b] = nbody, 1
            order.append(b)
            grow(b, 1)
    return Tree(np.array(order, dtype=np.int64), parent, joint, rev, depth)
