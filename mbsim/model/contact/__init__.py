"""Rigid contact detection: which bodies may touch (pairs), broad phase, narrow phase, detector.

``ContactDetector(model).detect(frames, margin) -> ContactBatch`` is the one entry point of
the solvers; ``PAIR_FUNCTIONS`` is the collision table keyed by shape-type pairs, where a new
pair (or the coming mesh type) is one registered function.
"""

from mbsim.model.contact.detect import ContactBatch, ContactDetector
from mbsim.model.contact.narrowphase import PAIR_FUNCTIONS, pair_function, register
from mbsim.model.contact.pairs import ContactPairs, resolve_contact_pairs

__all__ = [
    "PAIR_FUNCTIONS",
    "ContactBatch",
    "ContactDetector",
    "ContactPairs",
    "pair_function",
    "register",
    "resolve_contact_pairs",
]
