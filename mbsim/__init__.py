"""mbsim: multibody dynamics from YAML scenes to HDF5 results.

The Python API (docs/user-guide.md, "Python API")::

    import mbsim
    sim = mbsim.load("scenes/pendulum_2d.yaml", set={"time.end": 2.0})
    result = sim.run()                      # in memory; run(file="out.h5") writes the file too
    result.time, result.q, result.body("bob").position

The names below are imported on first use (PEP 562): ``import mbsim`` loads neither numpy nor
h5py, so that the command line and scripts start quickly.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it (the stable API: rename nothing here)
_EXPORTS = {
    "load": "mbsim.api",
    "Simulation": "mbsim.api",
    "Result": "mbsim.api",
    "BodyMotion": "mbsim.api",
    "State": "mbsim.model.model",
    "MbsimError": "mbsim.errors",
    "SceneError": "mbsim.errors",
    "OutputError": "mbsim.errors",
    "SimulationError": "mbsim.errors",
    "StateError": "mbsim.errors",
}
__all__ = [
    "BodyMotion",
    "MbsimError",
    "OutputError",
    "Result",
    "SceneError",
    "Simulation",
    "SimulationError",
    "State",
    "StateError",
    "__version__",
    "load",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mbsim' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
