"""Small helpers on plain values shared by scoring, run files and reports."""

from __future__ import annotations

import math
from typing import Any


def finite(x: Any) -> bool:
    """A real number (not bool, not None, not a string) that is neither NaN nor infinite."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def json_safe(x: Any) -> Any:
    """``x`` with every NaN/inf float replaced by None (JSON has neither) and tuples as
    lists; objects with ``.item()`` (numpy and torch scalars) become Python numbers."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, str | bytes | int):
        return json_safe(x.item())
    return x


def enc_float(x: float | None):
    """Encode a float for JSON state (non-finite as strings, so no Infinity literals)."""
    if x is None or (isinstance(x, float) and math.isfinite(x)) or isinstance(x, int):
        return x
    return repr(float(x))  # 'inf', '-inf', 'nan'


def dec_float(x):
    """Inverse of :func:`enc_float`; other values (metric names) pass through."""
    return float(x) if x in ("inf", "-inf", "nan") else x
