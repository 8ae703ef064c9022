"""What the sections of the benchmark suite share: the repository's paths and the cell formats of its tables."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FOUR_BOX_SCENE = ROOT / "scenes" / "four_box_chain.yaml"


def _fmt_list(values: list[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def _short(message: str, width: int = 90) -> str:
    """A run's message without its 'step N, t = T s: ' prefix, cut to ``width`` characters."""
    text = re.sub(r"^step \d+, t = [^:]*: ", "", message).replace("|", "/")
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 and np.isfinite(a) and np.isfinite(b) else "-"


def _passes(it: np.ndarray) -> str:
    return f"{it.mean():.3f}, {it.max():g}" if it.size else "-"
