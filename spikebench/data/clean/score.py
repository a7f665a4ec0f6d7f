"""What a cleaner removed, against where contamination was planted: byte-level precision
and recall (planted bytes removed / bytes removed, / bytes planted)."""

from __future__ import annotations

import bisect
from typing import Any

from spikebench.data.clean.units import Unit


def _overlap(unit: Unit, starts: list[int], segments: list[dict[str, Any]]) -> int:
    i = max(0, bisect.bisect_right(starts, unit.start) - 1)
    total = 0
    while i < len(segments) and segments[i]["start"] < unit.end:
        s, e = segments[i]["start"], segments[i]["end"]
        total += max(0, min(e, unit.end) - max(s, unit.start))
        i += 1
    return total


def removal_scores(removed: list[Unit], planted: list[dict[str, Any]]) -> dict[str, Any]:
    """``planted``: ``{"start", "end"}`` byte ranges, sorted and non-overlapping. Precision
    is None when nothing was removed, recall when nothing was planted."""
    segments = sorted(planted, key=lambda s: s["start"])
    starts = [s["start"] for s in segments]
    removed_bytes = sum(u.end - u.start for u in removed)
    hit = sum(_overlap(u, starts, segments) for u in removed)
    planted_bytes = sum(s["end"] - s["start"] for s in segments)
    return {"removed_bytes": removed_bytes, "planted_bytes": planted_bytes,
            "planted_removed_bytes": hit,
            "precision": hit / removed_bytes if removed_bytes else None,
            "recall": hit / planted_bytes if planted_bytes else None}
