"""The text tables of ``compare`` and ``sweep``: strict JSON values, cells, and the aligned and
markdown layouts (one place, so that both commands print and write alike)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mbsim.errors import path_text


def json_ready(obj: Any) -> Any:
    """``obj`` with values every strict JSON reader takes: NaN and infinity -> None, and every
    string (file names above all) as UTF-8 text, the bytes an ASCII locale could not decode read
    again (mbsim.errors.path_text), never lone surrogates."""
    # dispatch on the exact type first: a sweep's table passes 100,000 rows of ~20 values here
    kind = type(obj)
    if kind is str:
        return obj if obj.isascii() else path_text(obj)
    if kind is float:
        return obj if math.isfinite(obj) else None
    if obj is None or kind is int or kind is bool:
        return obj
    if isinstance(obj, dict):
        return {json_ready(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.generic):
        return json_ready(obj.item())
    if isinstance(obj, float):  # a float subclass
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, str):
        return path_text(str(obj))
    return obj


def cell(value: Any, fmt: str) -> str:
    """One table cell: ``n/a`` for a missing or non-finite number."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return format(value, fmt) if fmt else str(value)


def markdown_rows(headers: list[str], numeric: list[bool], body: list[list[str]]) -> list[str]:
    """A markdown table: numeric columns right-aligned, ``|`` in cells escaped."""
    lines = [
        "| " + " | ".join(h.replace("|", "\\|") for h in headers) + " |",
        "| " + " | ".join("---:" if n else "---" for n in numeric) + " |",
    ]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in body]


def aligned_rows(headers: list[str], numeric: list[bool], body: list[list[str]]) -> list[str]:
    """A plain-text table for the terminal: numeric columns right-aligned, a dashed rule."""
    widths = [max([len(h), *(len(r[k]) for r in body)]) for k, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        cells = (v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True))
        return "  ".join(cells).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in body]
