"""Guard on numba's on-disk cache of compiled kernels: a bad cache file is a cache miss, never a failure.

What it is: the kernels of mbsim (mbsim.model.kernels, mbsim.model.contact.sdf and
compliant_kernels, mbsim.solvers.soa_kernels and lcp) are ``@njit(cache=True)``. Numba keeps,
per function, an index file ``<module>.<function>-<line>.py<ver>.nbi`` and one data file
``….<n>.nbc`` per compiled signature, in ``$NUMBA_CACHE_DIR/<dir>_<hash>/`` or else in the
``__pycache__`` next to the module (else in the user-wide cache directory). It writes them
atomically (``IndexDataCacheFile._open_for_write``: a ``.tmp.<uuid>`` file, then
``os.replace``), but reads them with bare ``pickle.load``: a zero-byte file (a crash or a full
disk before the bytes reached it), a truncated or foreign one raises ``EOFError: Ran out of
input``, ``UnpicklingError`` and the like out of the kernel's first call, and every later run
fails the same way until someone deletes the file. CONTRACT §4 "Caches are safe" wants a miss.

How: :func:`install` (run once, when this module is first imported) wraps five numba internals,
each only if it exists (else that part is skipped: another numba version keeps its own
behaviour, no error):

- ``numba.core.caching.IndexDataCacheFile._load_index``: an index that cannot be read or is not
  a mapping reads as empty (``{}``, numba's own answer for a missing or stale index). The kernel
  is compiled and ``save`` writes a fresh index over the bad one.
- ``IndexDataCacheFile._load_data``: a data file that cannot be read or unpickled raises
  ``OSError``, which numba's ``IndexDataCacheFile.load`` already treats as a miss (its answer to
  a data file removed under the index); the compiled kernel is then saved over that file.
- ``numba.core.caching.Cache.load_overload``: anything else a load raises (``rebuild`` of a
  payload that unpickled but is not a compile result) returns ``None``, a miss.
- ``Cache.save_overload``: a cache that cannot be written (read-only, full, removed) leaves the
  kernel compiled in memory for this run.
- ``numba.core.dispatcher.Dispatcher.enable_caching``: no writable cache location at all
  (numba raises ``RuntimeError: cannot cache function …: no locator available``, at import of
  the kernel module) leaves that function uncached (numba's ``NullCache``).

Each event is logged once per file (or per directory for writes) on the ``mbsim.cache`` logger
at WARNING level, which with no logging configured prints the bare message on stderr. What it is
not: no check that a readable data file holds the signature its index names (numba stores no key
in the data file), and no change to what or where numba caches.

Import order: ``@njit(cache=True)`` looks for a cache location when the decorator runs, so this
module is imported before the kernel modules' definitions: mbsim.model.kernels and
compliant_kernels import it, and mesh_rigid does before it imports sdf. The kernel modules that
import nothing from mbsim (lcp, soa_kernels, sdf; tests/test_architecture.py) are reached only
through packages that import one of those first (mbsim.solvers imports mbsim.model.model, which
imports kernels; mbsim.model.contact imports mesh_rigid); tests/model/test_cache_safety.py checks
that order. The loads and saves, which are guarded by patching classes, happen at a kernel's
first call, long after.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger("mbsim.cache")

_MARK = "__mbsim_cache_guard__"  # set on each wrapper, so that a second install wraps nothing twice
_reported: set[tuple[str, str]] = set()  # (event, file or directory) already logged in this process


def _report(event: str, where: str, message: str) -> None:
    """Log ``message`` once per (event, where) in this process."""
    if (event, where) not in _reported:
        _reported.add((event, where))
        LOG.warning("mbsim: warning: %s", message)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _special_file(path: str) -> str | None:
    """``path`` is there but no regular file (a FIFO would block ``open`` for ever): what it is."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "not a regular file"


def _wrap(owner: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``owner.name`` by ``make(original)`` unless it is absent or already wrapped."""
    original = owner.__dict__.get(name)
    if not callable(original):
        return False
    if getattr(original, _MARK, False):
        return True
    wrapper = functools.wraps(original)(make(original))
    setattr(wrapper, _MARK, True)
    setattr(owner, name, wrapper)
    return True


def _guard_load_index(original: Callable[..., Any]) -> Callable[..., Any]:
    def _load_index(self: Any, *args: Any, **kwargs: Any) -> Any:
        path = str(getattr(self, "_index_path", "?"))
        odd = _special_file(path)
        if odd is not None:  # never opened: numba's save replaces it (os.replace) or is bypassed
            _report("index", path, f"compiled-kernel cache file {path} is {odd}; the kernel is compiled again")
            return {}
        try:
            overloads = original(self, *args, **kwargs)
        except Exception as exc:  # FileNotFoundError is numba's own {} already
            _report(
                "index",
                path,
                f"compiled-kernel cache file {path} is unreadable ({_describe(exc)}); "
                "the kernel is compiled again and the file rewritten",
            )
            return {}
        if not isinstance(overloads, dict):
            _report(
                "index",
                path,
                f"compiled-kernel cache file {path} holds no index "
                f"(a {type(overloads).__name__}); the kernel is compiled again and the file rewritten",
            )
            return {}
        return overloads

    return _load_index


def _guard_load_data(original: Callable[..., Any]) -> Callable[..., Any]:
    def _load_data(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = str(args[0] if args else kwargs.get("name", "?"))
        path = os.path.join(str(getattr(self, "_cache_path", "")), name)
        odd = _special_file(path)
        if odd is not None:  # never opened (a FIFO would block): a miss, as for an unreadable file
            _report("data", path, f"compiled-kernel cache file {path} is {odd}; the kernel is compiled again")
            raise OSError(f"cache file {path} is {odd}")
        try:
            return original(self, *args, **kwargs)
        except FileNotFoundError:
            raise  # removed under its index: numba's load() answers a miss, nothing to report
        except Exception as exc:
            _report(
                "data",
                path,
                f"compiled-kernel cache file {path} is unreadable ({_describe(exc)}); "
                "the kernel is compiled again and the file rewritten",
            )
            raise OSError(f"unreadable cache file {path}") from exc  # load() treats OSError as a miss

    return _load_data


def _guard_load_overload(original: Callable[..., Any]) -> Callable[..., Any]:
    def load_overload(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except Exception as exc:
            where = str(getattr(self, "_cache_path", "?"))
            _report(
                "load",
                f"{where}:{getattr(self, '_name', '?')}",
                f"compiled-kernel cache entry of {getattr(self, '_name', 'a kernel')} in {where} could not be "
                f"loaded ({_describe(exc)}); the kernel is compiled again",
            )
            return None

    return load_overload


def _guard_save_overload(original: Callable[..., Any]) -> Callable[..., Any]:
    def save_overload(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            original(self, *args, **kwargs)
        except Exception as exc:
            where = str(getattr(self, "_cache_path", "?"))
            _report(
                "save",
                where,
                f"cannot write the compiled-kernel cache in {where} ({_describe(exc)}); "
                "kernels are compiled in memory for this run only",
            )

    return save_overload


def _guard_enable_caching(original: Callable[..., Any], null_cache: type | None) -> Callable[..., Any]:
    def enable_caching(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            original(self, *args, **kwargs)
        except Exception as exc:
            if null_cache is not None:
                self._cache = null_cache()
            _report(
                "locate",
                "",
                f"compiled kernels cannot be cached ({_describe(exc)}); they are compiled "
                "in memory for this run only (set NUMBA_CACHE_DIR to a writable directory to cache them)",
            )

    return enable_caching


def install() -> tuple[str, ...]:
    """Wrap numba's cache internals (module docstring) once; return the names of those guarded.

    Idempotent. An internal that this numba version lacks is skipped (and not in the result).
    """
    try:
        from numba.core import caching, dispatcher
    except ImportError:  # a numba without numba.core: leave its cache alone
        return ()
    guarded = []
    index_file = getattr(caching, "IndexDataCacheFile", None)
    cache = getattr(caching, "Cache", None)
    jit_dispatcher = getattr(dispatcher, "Dispatcher", None)
    null_cache = getattr(caching, "NullCache", None)
    targets: list[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
        (index_file, "_load_index", _guard_load_index),
        (index_file, "_load_data", _guard_load_data),
        (cache, "load_overload", _guard_load_overload),
        (cache, "save_overload", _guard_save_overload),
        (jit_dispatcher, "enable_caching", lambda f: _guard_enable_caching(f, null_cache)),
    ]
    for owner, name, make in targets:
        if isinstance(owner, type) and _wrap(owner, name, make):
            guarded.append(f"{owner.__module__}.{owner.__qualname__}.{name}")
    return tuple(guarded)


GUARDED = install()
