"""The quick loop (``pytest -m "not slow"``, run after each change) keeps one typical case of an
exhaustive parametrisation; the other cases are marked slow, and CI (the whole suite) runs them all.

    @pytest.mark.parametrize("case", quick(sorted(CASES), keep="typical-case"))
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import pytest
from _pytest.mark import ParameterSet

SLOW = pytest.mark.slow


def quick(cases: Iterable, keep: object | Collection[object], ids: Sequence[str] | None = None) -> list[ParameterSet]:
    """``cases`` as pytest.params, every one marked slow except those whose id is in ``keep``.

    A case's id is ``ids[i]``, the id of a ``pytest.param``, or the case itself when it is a
    plain str/int/float/bool (pytest's own id for it); ``keep`` may also hold indices. Ids not
    given stay pytest's own, so the test names do not change."""
    kept = set(keep) if isinstance(keep, (set, frozenset, list, tuple)) else {keep}
    out = []
    found = set()
    for i, case in enumerate(cases):
        if isinstance(case, ParameterSet):
            values, marks, case_id = case.values, list(case.marks), case.id
        else:
            values = case if isinstance(case, tuple) else (case,)
            marks, case_id = [], None
        if ids is not None:
            case_id = ids[i]
        name = case_id if case_id is not None else (case if isinstance(case, (str, int, float, bool)) else None)
        hit = {k for k in kept if k == i and not isinstance(k, bool) or (name is not None and k == name)}
        found |= hit
        if not hit:
            marks.append(SLOW)
        out.append(pytest.param(*values, marks=marks, id=case_id))
    # a kept id that names no case would silently empty the quick loop of this test
    assert found == kept, f"quick(): no case {sorted(map(str, kept - found))}"
    return out
