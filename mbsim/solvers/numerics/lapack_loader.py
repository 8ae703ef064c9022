"""Load scipy's LAPACK for the compiled kernels without importing scipy.linalg.

The kernels call LAPACK through ``scipy.linalg.cython_lapack`` (function pointers that module
exports). Importing it the usual way first runs ``scipy.linalg/__init__`` (about 0.15 s of CPU:
the whole of scipy.linalg and its array-API layer) that no run needs, in every ``mbsim``
process. The module itself needs nothing from its package, so :func:`load` loads its extension
file under its full name before any kernel module cimports it; the kernels' own import then finds
it in ``sys.modules``. Where the file cannot be found (another scipy layout) the usual import runs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

NAME = "scipy.linalg.cython_lapack"


def load() -> None:
    """Put scipy.linalg.cython_lapack in sys.modules (idempotent)."""
    if NAME in sys.modules:
        return
    import scipy  # the top-level package only (cheap)

    folder = Path(scipy.__file__).parent / "linalg"
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"cython_lapack{suffix}"
        if path.is_file():
            spec = importlib.util.spec_from_file_location(NAME, path)
            if spec is None or spec.loader is None:
                break
            module = importlib.util.module_from_spec(spec)
            sys.modules[NAME] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[NAME]
                raise
            return
