"""Everything a run changes, kept out of the Model (MuJoCo's mjData beside its mjModel).

``compile`` produces a Model that nothing writes afterwards (mbsim.model.model.Model.freeze);
the state a run carries from step to step lives in one ``RunData`` per run, created by the
solver of that run: the joint springs' unwrapping references, and the compliant contacts'
counts, deepest penetrations and detection buffers of the last evaluation. So one Model
serves any number of runs, at the same time too (the tests run two interleaved).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbsim.model.model import Model


@dataclass
class RunData:
    """The per-run state of a Model.

    Attributes:
        spring_reference: per joint-spring group (Model.springs; compile makes at most one), the
            unwrapped deflection of the last accepted step (mbsim.model.dynamics.SpringGroups;
            -rest at t = 0): the run's one copy of the springs' unwrapping state, written in place;
            the run's compiled step views the same array (FlatData.spr_ref: mbsim.model.flat.make_data
            with ``spring_reference``).
        contact_count, contact_penetration: compliant contacts of the last evaluation: points in
            contact and the deepest penetration, m.
        contact_pairs: per compliant pair, of the last evaluation: (count, deepest penetration,
            class counts or None).
        contact_buffers: per compliant pair, the compiled detection's output buffers (index,
            distance, gradient; one row per sample point).
    """

    spring_reference: list[np.ndarray] = field(default_factory=list)
    contact_count: int = 0
    contact_penetration: float = 0.0
    contact_pairs: list[tuple[int, float, np.ndarray | None]] = field(default_factory=list)
    contact_buffers: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)


def new_run_data(model: Model) -> RunData:
    """Fresh per-run state of ``model``, as at t = 0."""
    data = RunData(spring_reference=[np.array(-springs.rest, dtype=float) for springs in model.springs])
    compliant = model.compliant
    if compliant is not None:
        data.contact_pairs = [(0, 0.0, None) for _ in compliant.pairs]
        data.contact_buffers = [
            (np.empty(len(p.points), dtype=np.int64), np.empty(len(p.points)), np.empty((len(p.points), 3)))
            for p in compliant.pairs
        ]
    return data
