"""Everything a run changes, kept out of the Model (MuJoCo's mjData beside its mjModel).

``compile`` produces a Model that nothing writes afterwards (mbsim.model.model.Model.freeze);
what a run writes lives in one ``Data`` per run, created by the solver of that run, in sub-records:
the joint coordinates' unwrapping references, the compliant contacts' state of the last evaluation,
and the buffers of the run's compiled step -- ``flat`` (mbsim.model.layout.FlatData: the ODE
methods' steps, every method's recorded rows), ``tree`` (the recursive method's TreeData) or
``var`` (the variational method's VarData), whichever the method steps with. So one Model serves
any number of runs, at the same time too (the tests run two interleaved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mbsim.model.model import Model


@dataclass
class ContactState:
    """The compliant contacts of the last evaluation (mbsim.model.contact.compliant).

    Attributes:
        count, penetration: points in contact and the deepest penetration, m.
        pairs: per compliant pair: (count, deepest penetration, class counts or None).
        buffers: per compliant pair, the compiled detection's output buffers (index, distance,
            gradient; one row per sample point).
    """

    count: int = 0
    penetration: float = 0.0
    pairs: list[tuple[int, float, np.ndarray | None]] = field(default_factory=list)
    buffers: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)


@dataclass
class Data:
    """What one run of a Model writes.

    Attributes:
        coordinate_reference: per joint-coordinate table (Model.joint_coordinates; compile makes at most one),
            the unwrapped coordinates of the last accepted step (mbsim.model.dynamics.JointCoordinates;
            the joints' initial coordinates at t = 0): the run's one copy of the unwrapping state,
            written in place; the compiled step views the same array (FlatData.jc_ref:
            mbsim.model.flat.make_data with ``coordinate_reference``).
        contacts: the compliant contacts' state (ContactState).
        flat: the compiled step's buffers over the model's FlatModel (mbsim.model.layout.FlatData),
            or None when the run has none (the Python path).
        tree: the recursive method's buffers (mbsim.solvers.recursive.recursive_kernels.TreeData).
        var: the variational method's buffers (mbsim.solvers.variational.variational_kernels.VarData).
    """

    coordinate_reference: list[np.ndarray] = field(default_factory=list)
    contacts: ContactState = field(default_factory=ContactState)
    flat: Any = None
    tree: Any = None
    var: Any = None


def new_data(model: Model) -> Data:
    """Fresh per-run state of ``model``, as at t = 0 (the compiled buffers are the solver's to make)."""
    data = Data(coordinate_reference=[np.array(table.initial, dtype=float) for table in model.joint_coordinates])
    compliant = model.compliant
    if compliant is not None:
        data.contacts.pairs = [(0, 0.0, None) for _ in compliant.pairs]
        data.contacts.buffers = [
            (np.empty(len(p.points), dtype=np.int64), np.empty(len(p.points)), np.empty((len(p.points), 3)))
            for p in compliant.pairs
        ]
    return data
