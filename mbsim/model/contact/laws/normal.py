"""Normal force laws of compliant contacts (the contact's ``law`` key), g the penetration and
dg/dt its rate (positive while approaching):

- ``hertz`` (default): f_N = k g^n + chi g^m dg/dt, the paper's eq. (36)
  (papers/sdf-octree-contact-dynamics.txt): the elastic Hertz term and a hysteresis damping
  given directly (``damping``, ``damping_exponent``);
- ``hunt_crossley``: f_N = k g^n (1 + alpha dg/dt) with alpha = 3 (1 - e) / (2 v0) (Hunt &
  Crossley 1975, J. Appl. Mech. 42: their damping lambda = alpha k);
- ``lankarani_nikravesh``: the same form with alpha = 3 (1 - e^2) / (4 v0) (Lankarani &
  Nikravesh 1990, J. Mech. Des. 112).

For the last two the coefficient of restitution e (``restitution``) holds at impacts of speed
v0 (``impact_speed``, required): alpha is a constant of the contact, fixed when the scene is
compiled, so that the force stays a function of the state (no history per contact point, which
the smooth methods' stages and rejected steps would have to keep consistent). An impact at
another speed v restitutes what the law's damping gives there (to first order in alpha v,
1 - 2/3 alpha v for Hunt-Crossley: it falls with the speed, as measured on real impacts). Both
derivations assume e near 1: a single point dropped at v0 rebounds at 0.909 v0 (HC) and 0.913
v0 (LN) for e = 0.9, at 0.663 and 0.725 v0 for e = 0.5 (tests/model/contact/test_laws.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mbsim.model.contact.compliant_kernels import NORMAL_DISSIPATIVE, NORMAL_HERTZ
from mbsim.model.contact.laws.base import NormalLaw
from mbsim.scene.fields import Context
from mbsim.scene.load import KeyPath


def _hertz(ctx: Context, path: KeyPath, values: Mapping[str, Any]) -> dict[str, float]:
    return {
        "k": values["stiffness"],
        "n": values["exponent"],
        "chi": values["damping"],
        "m": values["damping_exponent"],
    }


def _hunt_crossley(ctx: Context, path: KeyPath, values: Mapping[str, Any]) -> dict[str, float]:
    e, v0 = values["restitution"], values["impact_speed"]
    return {"k": values["stiffness"], "n": values["exponent"], "alpha": 3.0 * (1.0 - e) / (2.0 * v0)}


def _lankarani_nikravesh(ctx: Context, path: KeyPath, values: Mapping[str, Any]) -> dict[str, float]:
    e, v0 = values["restitution"], values["impact_speed"]
    return {"k": values["stiffness"], "n": values["exponent"], "alpha": 3.0 * (1.0 - e * e) / (4.0 * v0)}


NORMAL_LAWS: dict[str, NormalLaw] = {
    law.name: law
    for law in (
        NormalLaw(
            "hertz",
            "f_N = k g^n + chi g^m dg/dt (eq. 36 of papers/sdf-octree-contact-dynamics.txt); the default",
            NORMAL_HERTZ,
            ("stiffness", "exponent", "damping", "damping_exponent"),
            _hertz,
        ),
        NormalLaw(
            "hunt_crossley",
            "f_N = k g^n (1 + alpha dg/dt), alpha = 3 (1 - e) / (2 v0) with e = `restitution` at the approach "
            "speed v0 = `impact_speed` (Hunt & Crossley 1975; accurate for e near 1)",
            NORMAL_DISSIPATIVE,
            ("stiffness", "exponent", "restitution", "impact_speed"),
            _hunt_crossley,
            ("stiffness", "restitution", "impact_speed"),
        ),
        NormalLaw(
            "lankarani_nikravesh",
            "f_N = k g^n (1 + alpha dg/dt), alpha = 3 (1 - e^2) / (4 v0) with e = `restitution` at the approach "
            "speed v0 = `impact_speed` (Lankarani & Nikravesh 1990; accurate for e near 1)",
            NORMAL_DISSIPATIVE,
            ("stiffness", "exponent", "restitution", "impact_speed"),
            _lankarani_nikravesh,
            ("stiffness", "restitution", "impact_speed"),
        ),
    )
}
DEFAULT_NORMAL_LAW = "hertz"
