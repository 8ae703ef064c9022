"""Solver methods: one module each, picked by ``solver.method`` from ``SOLVERS``."""

from __future__ import annotations

import dataclasses
from types import ModuleType

from mbsim.solvers.numerics import lapack_loader

lapack_loader.load()  # before the kernel modules cimport it (see lapack_loader)

from mbsim.errors import did_you_mean  # noqa: E402
from mbsim.model.model import Model  # noqa: E402
from mbsim.scene.spec import SceneSpec  # noqa: E402
from mbsim.solvers import (  # noqa: E402
    augmented_lagrangian,
    event_driven,
    gauss,
    lagrange,
    null_space,
    recursive,
    timestepping,
    variational,
)
from mbsim.solvers.ode.integrators import INTEGRATORS  # noqa: E402

SOLVERS: dict[str, ModuleType] = {
    m.NAME: m
    for m in (lagrange, augmented_lagrangian, null_space, gauss, variational, recursive, timestepping, event_driven)
}

# methods of CONTRACT §1 that later work adds; named so that the message can say so
PLANNED: tuple[str, ...] = ()


def get_solver(spec: SceneSpec, model: Model, strict: bool = False):
    """Check the method, integrator, options and contacts of a scene; return a ready solver.

    A method that steps with its own scheme (CAPABILITIES["integrators"] False: variational,
    timestepping) ignores ``solver.integrator``: a scene that names one is refused with
    ``strict``, otherwise the solver's ``notes`` say it is not used (the result file names the
    method's own scheme as its integrator)."""
    ctx = spec.ctx
    method = spec.solver.method
    if method not in SOLVERS:
        known = sorted(SOLVERS)
        if method in PLANNED:
            raise ctx.error(
                ("solver", "method"),
                f"method '{method}' is not available in this version; available: {', '.join(known)}",
            )
        raise ctx.error(
            ("solver", "method"),
            f"unknown method '{method}'; expected one of {', '.join(known)}",
            did_you_mean(method, [*known, *PLANNED]),
        )
    module = SOLVERS[method]
    if spec.solver.integrator not in INTEGRATORS:
        raise ctx.error(
            ("solver", "integrator"),
            f"unknown integrator '{spec.solver.integrator}'; expected one of {', '.join(INTEGRATORS)}",
            did_you_mean(spec.solver.integrator, INTEGRATORS),
        )
    section = spec.raw.data.get("solver")
    ignored = ""
    if not module.CAPABILITIES.get("integrators") and isinstance(section, dict) and "integrator" in section:
        ignored = (
            f"method '{method}' steps with its own scheme and does not use solver.integrator '{spec.solver.integrator}'"
        )
        if strict:
            raise ctx.error(("solver", "integrator"), f"{ignored}; remove the key (--strict refuses what is ignored)")
    for item in spec.contacts:
        if not item.values.get("enabled", True):
            continue
        kind = item.values["type"]
        if kind == "rigid" and not module.CAPABILITIES.get("rigid_contacts"):
            raise ctx.error(
                (*item.path, "type"), f"'rigid' needs solver.method 'timestepping' or 'event_driven', got '{method}'"
            )
        if kind == "compliant" and not module.CAPABILITIES.get("compliant_contacts", True):
            raise ctx.error(
                (*item.path, "type"),
                "compliant (SDF mesh) contacts are not available in this "
                "version; remove the contact or set enabled: false",
            )
    if not module.CAPABILITIES.get("armature"):
        for item in spec.joints:
            if item.values.get("armature"):
                raise ctx.error(
                    (*item.path, "armature"),
                    f"an armature (inertia on the joint coordinate) needs method 'recursive', got '{method}' (in body "
                    "coordinates it would couple the bodies' mass matrix); remove it or use recursive",
                )
    solver_spec = spec.solver
    default = module.CAPABILITIES.get("default_integrator")
    if default and not (isinstance(section, dict) and "integrator" in section):
        solver_spec = dataclasses.replace(solver_spec, integrator=default)  # the method's own default
    solver = module.create(model, ctx, solver_spec)
    if solver_spec.contact_integration == "implicit":
        why = solver.implicit_contact
        if why:
            raise ctx.error(
                ("solver", "contact_integration"),
                f"implicit contact integration is not available to method '{method}' here: {why}",
                "use method lagrange, null_space, gauss, augmented_lagrangian or recursive with integrator "
                "rk4, or contact_integration: explicit with time.contact_step",
            )
    if ignored:
        solver.notes = (*solver.notes, ignored)
    return solver
