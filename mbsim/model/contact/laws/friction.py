"""Friction laws of compliant contacts: f_T = -mu(|v_T|) f_N v_T / |v_T| (eq. 37 of
papers/sdf-octree-contact-dynamics.txt), mu(v) by the law that ``friction`` names by its keys:

- ``stribeck`` ({static, dynamic, v_static, v_dynamic}): the paper's eq. (38), a smooth step
  from 0 at rest to mu_s at v_s, then to mu_d at v_d;
- ``coulomb`` (a number, or {coulomb, smoothing}): mu constant, regularised below the
  ``smoothing`` speed, mu(v) = mu min(v / smoothing, 1) (viscous there, as the joints' friction,
  mbsim.model.joint_forces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mbsim.model.contact.compliant_kernels import FRICTION_COULOMB, FRICTION_STRIBECK
from mbsim.model.contact.laws.base import FrictionLaw
from mbsim.scene.fields import Context, Field, Number
from mbsim.scene.load import KeyPath

# default smoothing speed of the Coulomb law: that of the joints' friction
COULOMB_SMOOTHING = 1e-3

STRIBECK_FIELDS = {
    "static": Field(Number(minimum=0), "mu_s", 0.0),
    "dynamic": Field(Number(minimum=0), "mu_d", 0.0),
    "v_static": Field(Number(positive=True), "v_s, m/s: below it the friction builds up from zero", 5e-3),
    "v_dynamic": Field(Number(positive=True), "v_d, m/s: above it the friction is mu_d", 1e-2),
}
COULOMB_FIELDS = {
    "coulomb": Field(Number(minimum=0), "mu", 0.0),
    "smoothing": Field(
        Number(positive=True), "m/s: below it mu grows linearly from zero (the law's regularisation)", COULOMB_SMOOTHING
    ),
}


def _stribeck(ctx: Context, path: KeyPath, values: Mapping[str, Any]) -> dict[str, float]:
    if values["v_dynamic"] <= values["v_static"]:
        raise ctx.error(path, "expected v_dynamic > v_static")
    return {"mu_s": values["static"], "mu_d": values["dynamic"], "v_s": values["v_static"], "v_d": values["v_dynamic"]}


def _coulomb(ctx: Context, path: KeyPath, values: Mapping[str, Any]) -> dict[str, float]:
    mu = values["coulomb"]
    return {"mu_s": mu, "mu_d": mu, "v_s": 0.0, "v_d": values["smoothing"]}


FRICTION_LAWS: dict[str, FrictionLaw] = {
    law.name: law
    for law in (
        FrictionLaw(
            "stribeck",
            "mu(v) of eq. (38) of papers/sdf-octree-contact-dynamics.txt: from 0 at rest up to `static` at "
            "`v_static`, then to `dynamic` at `v_dynamic` and beyond (smooth cubic steps)",
            FRICTION_STRIBECK,
            STRIBECK_FIELDS,
            _stribeck,
        ),
        FrictionLaw(
            "coulomb",
            "mu(v) = `coulomb` min(v / `smoothing`, 1): Coulomb friction, viscous below the smoothing speed; "
            "a plain number is its `coulomb`",
            FRICTION_COULOMB,
            COULOMB_FIELDS,
            _coulomb,
            number_key="coulomb",
        ),
    )
}
