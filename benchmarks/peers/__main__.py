"""``python benchmarks/peers [--quick] [--case KEY]``: the peers' markdown section on standard output."""

import os
import sys
from pathlib import Path

# as the mbsim command: single-threaded BLAS, set before numpy loads
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

# run as a folder, this folder is sys.path[0], where mujoco.py, pinocchio.py and exudyn.py would stand
# in for the peers themselves: the repository root takes its place
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parents[1]))

from benchmarks.peers import main  # noqa: E402

sys.exit(main())
