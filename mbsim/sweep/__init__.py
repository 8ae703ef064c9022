"""``mbsim sweep``: a parameter study of one scene, run on Dask, resumable.

The cases are the scene with ``--set`` overrides from the ``--param`` values (cartesian
product, or element by element with ``--zip``); each runs as ``mbsim run`` would, on a Dask
worker of an embedded ``LocalCluster`` or of a running scheduler, and writes its own result
file into OUTDIR, named from its parameter values. ``sweep.json``, ``sweep.csv`` and
``sweep.md`` hold one row per case. A rerun of the same sweep keeps every result file that is
``completed`` for the same scene and parameters (a hash in the file) and runs the rest.

- :mod:`mbsim.sweep.params`: ``--param`` parsing, the cases (counted and indexed, never all
  built), file names;
- :mod:`mbsim.sweep.cases`: the checks on the client before anything runs, each case derived
  when it is about to run, the case hash, what to ship;
- :mod:`mbsim.sweep.worker`: one case on a worker (no Dask import);
- :mod:`mbsim.sweep.execute`: the options, OUTDIR and its files (CONTRACT §4), the cluster,
  throttled submission, retries, signals, resume;
- :mod:`mbsim.sweep.preload`: the local workers leave SIGINT and SIGHUP to the client;
- :mod:`mbsim.sweep.table`: the rows and their json/csv/markdown/text forms.

Dask is imported only when a sweep runs, so ``mbsim run`` starts as fast as before. The
semantics are documented in docs/user-guide.md, "Parameter sweeps".
"""

from mbsim.sweep.cases import Case, SweepPlan, plan_sweep
from mbsim.sweep.execute import default_workers, run_sweep
from mbsim.sweep.params import SweepParam, case_stems, expand, parse_param, parse_params
from mbsim.sweep.table import FORMATS, SweepResult, SweepRow, render

__all__ = [
    "FORMATS",
    "Case",
    "SweepParam",
    "SweepPlan",
    "SweepResult",
    "SweepRow",
    "case_stems",
    "default_workers",
    "expand",
    "parse_param",
    "parse_params",
    "plan_sweep",
    "render",
    "run_sweep",
]
