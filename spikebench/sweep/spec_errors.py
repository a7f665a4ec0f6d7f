"""The one line a refused sweep file gets: the file, the key, the value, what is allowed."""

from __future__ import annotations

import json
import math
from typing import Any

from spikebench.errors import UserError


def shown(value: Any) -> str:
    """A value as a message shows it: JSON, or a float's repr where JSON has none."""
    return repr(value) if isinstance(value, float) and not math.isfinite(value) else (
        json.dumps(value, default=str, ensure_ascii=False))


def err(path: str, key: str, value: Any, allowed: str) -> UserError:
    """``<file>: <key> = <value>: <what is allowed>``, the one line every refusal is."""
    return UserError(f"{path}: {key} = {shown(value)}: {allowed}")
