"""Dask worker preload of the embedded local cluster (``LocalCluster(preload=[this module])``).

Each worker process, when it starts (and when its nanny restarts it):

- ignores SIGINT and SIGHUP. Ctrl-C in a terminal, and a hang-up, reach the whole foreground
  process group, workers included; the sweep's client decides what happens (it cancels the
  cases and closes the cluster in order), instead of each worker dying mid-case and printing
  its traceback. SIGTERM keeps its default action: the nanny ends a worker with it.
- unblocks SIGINT, SIGTERM and SIGHUP: the client starts the cluster with them blocked
  (mbsim.sweep.execute), so that a worker still importing Python when a Ctrl-C comes does not
  see it either; the mask is inherited, and is lifted here once SIGINT and SIGHUP are ignored
  (a SIGTERM that came meanwhile then takes effect).
- quiets the ``distributed`` loggers (the client's level, :data:`LOG_LEVEL_KEY` of the Dask
  config the nanny hands over): a connection cut when the client ends the cluster would
  otherwise print a traceback on the terminal the worker shares with the client;
- imports the simulator, so that the first case does not pay for the imports.

Workers of an external cluster are left as their owner started them.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from typing import Any

LOG_LEVEL_KEY = "mbsim-sweep-worker-log-level"  # a Dask config key the client sets
_IGNORED = (signal.SIGINT, signal.SIGHUP)
_BLOCKED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def dask_setup(worker: Any) -> None:
    import dask

    level = dask.config.get(LOG_LEVEL_KEY, None)
    if level is not None:
        for top in ("distributed", "tornado"):
            logging.getLogger(top).setLevel(int(level))
        for name in list(logging.root.manager.loggerDict):  # levels set by distributed's own config
            if name.startswith(("distributed.", "tornado.")):
                logging.getLogger(name).setLevel(logging.NOTSET)
    with contextlib.suppress(ValueError):  # not the main thread of the process: leave it
        for sig in _IGNORED:
            signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _BLOCKED)
    import mbsim.simulate  # noqa: F401  (warm the imports: numpy, scipy, the compiled kernels)
