"""Contact laws as a registry (issue 31): ``NORMAL_LAWS`` and ``FRICTION_LAWS`` of compliant
contacts, name -> law (its scene keys with defaults and documentation, how it packs them into
the contact's row of the law arrays, ``CONTACT_LAW``, and the code of the compiled function
that applies it, in ``compliant_kernels``), and Newton's restitution law of rigid contacts
(``newton_target``), which timestepping and event_driven share.

Adding a law: its force (or mu(v)) as one small ``cdef`` function in
``compliant_kernels.pyx`` with its code in ``compliant_kernels.pxd`` and the kernel's dispatch;
its entry in ``normal.py`` or ``friction.py`` (keys, pack); a new contact key in
``mbsim/scene/spec.py: CONTACT_FIELDS``; docs/developer-guide.md, *Adding a contact law*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mbsim.errors import did_you_mean
from mbsim.model.contact.laws.base import CONTACT_LAW, FrictionLaw, NormalLaw
from mbsim.model.contact.laws.friction import FRICTION_LAWS
from mbsim.model.contact.laws.newton import inelastic, newton_target
from mbsim.model.contact.laws.normal import DEFAULT_NORMAL_LAW, NORMAL_LAWS
from mbsim.scene.fields import REQUIRED, Context, Field, kind_of, read_mapping
from mbsim.scene.load import KeyPath

__all__ = [
    "CONTACT_LAW",
    "FRICTION_LAWS",
    "NORMAL_LAWS",
    "FrictionLaw",
    "NormalLaw",
    "inelastic",
    "law_fields",
    "law_row",
    "newton_target",
    "read_contact_law",
]


def law_fields(law: NormalLaw, table: Mapping[str, Field]) -> dict[str, Field]:
    """The contact keys a normal law reads, from the contact table (``table``, CONTACT_FIELDS),
    its required ones marked so (for the docs)."""
    out = {}
    for key in law.keys:
        spec = table[key]
        out[key] = Field(spec.reader, spec.doc, REQUIRED) if key in law.required else spec
    return out


def law_row(**columns: float) -> np.ndarray:
    """One contact's law arrays (a CONTACT_LAW array of length 1), the columns given set, the rest 0."""
    row = np.zeros(1, dtype=CONTACT_LAW)
    for key, value in columns.items():
        row[key] = value
    return row


def _normal_law(ctx: Context, path: KeyPath, values: Mapping[str, Any], raw: Mapping[str, Any]) -> dict[str, float]:
    name = values.get("law") or DEFAULT_NORMAL_LAW
    law = NORMAL_LAWS.get(name)
    if law is None:
        raise ctx.error(
            (*path, "law"),
            f"unknown normal law '{name}'; expected one of {', '.join(NORMAL_LAWS)}",
            did_you_mean(str(name), NORMAL_LAWS),
        )
    # a key of another law would be silently ignored: refused, naming the laws that take it
    for key in raw:
        owners = [other.name for other in NORMAL_LAWS.values() if key in other.keys]
        if owners and key not in law.keys:
            raise ctx.error(
                (*path, key),
                f"law {name} does not take '{key}' (a key of {', '.join(owners)}); its keys: {', '.join(law.keys)}",
            )
    for key in law.required:
        if raw.get(key) is None:
            raise ctx.error(path, f"missing required key '{key}' for a compliant contact with law {name}")
    return {"normal": law.kernel, **law.pack(ctx, path, values)}


def _friction_law(ctx: Context, path: KeyPath, value: Any) -> dict[str, float]:
    if value is None:
        value = 0.0
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        law = next(law for law in FRICTION_LAWS.values() if law.number_key)
        value = {law.number_key: value}
    elif isinstance(value, dict):
        # the law that holds the first key (an empty mapping: the first law, no friction); its
        # table then refuses a key of another law, naming it
        first = next(iter(value), None)
        law = next((law for law in FRICTION_LAWS.values() if first is None or first in law.fields), None)
        if law is None:
            known = [k for law in FRICTION_LAWS.values() for k in law.fields]
            laws = "; ".join(f"{law.name} {{{', '.join(law.fields)}}}" for law in FRICTION_LAWS.values())
            raise ctx.error(
                (*path, first), f"unknown friction key '{first}'; expected {laws}", did_you_mean(str(first), known)
            )
    else:
        laws = " or ".join(f"{{{', '.join(law.fields)}}}" for law in FRICTION_LAWS.values())
        raise ctx.error(path, f"expected a number (Coulomb's mu) or a mapping {laws}, got {kind_of(value)}")
    checked = read_mapping(ctx, path, value, law.fields)
    return {"friction": law.kernel, **law.pack(ctx, path, checked)}


def read_contact_law(ctx: Context, path: KeyPath, values: Mapping[str, Any], raw: Mapping[str, Any]) -> np.ndarray:
    """A compliant contact's law arrays (one CONTACT_LAW row) from its checked ``values`` (the
    generic table's, defaults filled) and the item as written (``raw``: which keys were given)."""
    return law_row(
        **_normal_law(ctx, path, values, raw), **_friction_law(ctx, (*path, "friction"), values.get("friction"))
    )
