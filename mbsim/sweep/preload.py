"""Dask worker preload of the embedded local cluster (``LocalCluster(preload=[this module])``).

Each worker process, when it starts (and when its nanny restarts it): ignores SIGINT, so that
Ctrl-C in the terminal reaches the sweep's client, which cancels the cases and closes the
cluster in order, instead of tearing the workers down mid-write; and imports the simulator,
so that the first case does not pay for the imports. Workers of an external cluster are
left as their owner started them.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any


def dask_setup(worker: Any) -> None:
    with contextlib.suppress(ValueError):  # not the main thread of the process: leave it
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    import mbsim.simulate  # noqa: F401  (warm the imports: numpy, scipy, numba kernels)
