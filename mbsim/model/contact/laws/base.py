"""What a contact law is: its scene keys, how it packs them into the per-contact law arrays, and
the compiled function (a code of ``compliant_kernels``) that applies them.

The law arrays are one structured numpy array per force group, ``CONTACT_LAW`` rows, one per
contact: named columns (``laws["k"]``, ``laws["mu_d"]``...) that the compiled kernel reads as
the matching C struct (``compliant_kernels.pxd: ContactLaw``, same fields in the same order).
A law writes only the columns it uses; the others stay 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mbsim.scene.fields import Context, Field
from mbsim.scene.load import KeyPath

# the columns of the law arrays (their order is the C struct's: keep both in step)
CONTACT_LAW = np.dtype(
    [
        ("normal", np.int64),  # normal law kernel code (compliant_kernels.NORMAL_*)
        ("k", np.float64),  # stiffness, N/m^n
        ("n", np.float64),  # stiffness exponent
        ("chi", np.float64),  # hertz: damping, N s/m^(m+1)
        ("m", np.float64),  # hertz: damping exponent
        ("alpha", np.float64),  # hunt_crossley, lankarani_nikravesh: hysteresis factor, s/m
        ("friction", np.int64),  # friction law kernel code (compliant_kernels.FRICTION_*)
        ("mu_s", np.float64),  # static (peak) coefficient
        ("mu_d", np.float64),  # sliding coefficient
        ("v_s", np.float64),  # speed of the static peak, m/s
        ("v_d", np.float64),  # speed from which the coefficient is mu_d, m/s
        ("stick_step", np.float64),  # h of the stick limiter (compliant_kernels.pair_forces); 0: none
        ("inv_mass_slave", np.float64),  # 1/m of the slave body (0: ground), for the stick limiter
        ("inv_mass_master", np.float64),
        ("inv_inertia_slave", np.float64),  # 1/I_min (smallest principal inertia)
        ("inv_inertia_master", np.float64),
    ]
)

Pack = Callable[[Context, KeyPath, Mapping[str, Any]], dict[str, float]]


@dataclass(frozen=True)
class NormalLaw:
    """A compliant contact's normal force law, chosen by the contact's ``law`` key.

    ``keys``: the contact keys it reads (declared in mbsim.scene.spec.CONTACT_FIELDS, which
    checks their types); ``required``: those of them that must be given; ``pack``: the checked
    values -> its columns of CONTACT_LAW (k, n, chi, m, alpha); ``kernel``: the code of the
    compiled function that applies it (compliant_kernels.NORMAL_*)."""

    name: str
    doc: str
    kernel: int
    keys: tuple[str, ...]
    pack: Pack
    required: tuple[str, ...] = ("stiffness",)


@dataclass(frozen=True)
class FrictionLaw:
    """A compliant contact's friction law, chosen by what ``friction`` holds: its own mapping
    keys (``fields``), or a plain number for the law whose ``number_key`` it fills.

    ``pack``: the checked mapping -> its columns of CONTACT_LAW (mu_s, mu_d, v_s, v_d);
    ``kernel``: the code of the compiled mu(v) (compliant_kernels.FRICTION_*)."""

    name: str
    doc: str
    kernel: int
    fields: dict[str, Field]
    pack: Pack
    number_key: str | None = None
