"""The text tables of ``compare`` and ``sweep``: strict JSON values, cells, and the aligned and
markdown layouts (one place, so that both commands print and write alike)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def finite(obj: Any) -> Any:
    """NaN and infinity -> None, so that the JSON is strict."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if isinstance(obj, np.generic):
        return finite(obj.item())
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
