"""The machine a benchmark ran on: CPU, cores, RAM, OS, the versions that matter and the load."""

from __future__ import annotations

import os
import platform

import numpy as np
import scipy


def _read_proc(path: str, key: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.split(":", 1)[0].strip() == key:
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _blas() -> str:
    """numpy's BLAS library and version, as numpy reports its build."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        return "unknown"


def machine_info() -> dict[str, str]:
    """CPU model, cores, RAM, OS, the versions that matter for the timings, and the load at the start."""
    cpu = _read_proc("/proc/cpuinfo", "model name") or platform.processor() or platform.machine()
    mem = _read_proc("/proc/meminfo", "MemTotal")
    ram = f"{int(mem.split()[0]) / 1024**2:.1f} GiB" if mem else "unknown"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    threads = {
        k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ
    }
    import mbsim

    return {
        "CPU": cpu,
        "cores (usable / logical)": f"{cores} / {os.cpu_count()}",
        "RAM": ram,
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "numpy": f"{np.__version__} (BLAS: {_blas()})",
        "scipy": scipy.__version__,
        "mbsim": getattr(mbsim, "__version__", "unknown"),
        "BLAS thread settings": ", ".join(f"{k}={v}" for k, v in threads.items()) or "library defaults",
        "load average at start (1, 5, 15 min)": load,
    }
