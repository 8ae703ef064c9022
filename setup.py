"""Build of the compiled core: every ``mbsim/**/*.pyx`` becomes an extension module, compiled by
``pip install`` (Cython to C, then the C compiler), so nothing compiles while a user waits.

LAPACK is reached through scipy.linalg.cython_lapack (function pointers scipy exports at run
time), so there is nothing to link against. After editing a .pyx, rebuild in place with
``python setup.py build_ext --inplace -j 2`` (docs/developer-guide.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

# C semantics for the kernels' arithmetic (division by zero gives inf/nan as numpy does, no
# Python exception); no index checks: the kernels index only the structures mbsim.model.flat and
# the solvers build with matching sizes (tests/solvers/test_compiled_step.py runs every kind)
DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "initializedcheck": False,
    "cdivision": True,
    "nonecheck": False,
    "embedsignature": True,
    "cpow": True,
}


def extensions() -> list[Extension]:
    root = Path(__file__).parent
    # MBSIM_BUILD_ONLY=a.pyx,b.pyx: rebuild only those (a developer's loop while others are mid-edit)
    only = {p.strip() for p in os.environ.get("MBSIM_BUILD_ONLY", "").split(",") if p.strip()}
    modules = []
    for pyx in sorted(root.glob("mbsim/**/*.pyx")):
        if only and str(pyx.relative_to(root)) not in only:
            continue
        rel = pyx.relative_to(root)
        name = ".".join(rel.with_suffix("").parts)
        # -g0: no debug sections (a third of the compile time); -O2 without -ffast-math: IEEE results
        modules.append(Extension(name, [str(rel)], extra_compile_args=["-O2", "-g0"]))
    return cythonize(modules, compiler_directives=DIRECTIVES, nthreads=2, quiet=True)


setup(ext_modules=extensions(), options={"build_ext": {"parallel": 2}})
