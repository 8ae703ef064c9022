"""The ``mbsim`` command line: thin click commands over library functions.

Only this package imports click, and only this package turns exceptions into exit codes.
"""

import os

# The dense matrices of a step are small: BLAS threads cost more in contention than they save
# (benchmarks/). Set before numpy is imported; a user's own setting wins.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
