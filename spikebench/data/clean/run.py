"""Cleaning a training split once per content and setting: which units go, why, and what
that removed of the planted contamination. The decision is cached by content hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from spikebench.config import CleanConfig
from spikebench.data.clean.dedup import near_duplicates
from spikebench.data.clean.quality import QUALITY_RULES, quality_flags
from spikebench.data.clean.score import removal_scores
from spikebench.data.clean.units import Unit, split_units
from spikebench.errors import UserError
from spikebench.runio import atomic_write_json

N_EXAMPLES = 3


def enabled(cfg: CleanConfig) -> bool:
    return cfg.dedup or cfg.quality


def _settings(cfg: CleanConfig) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k != "cache_dir"}


def decide(data: bytes, cfg: CleanConfig) -> list[tuple[int, int, str]]:
    """``(start, end, reason)`` of every unit to remove; the reason is a quality rule's
    name or ``dedup``."""
    units = split_units(data, cfg.unit_bytes)
    texts = [u.text(data) for u in units]
    reasons: dict[int, str] = {}
    if cfg.quality:
        thresholds = {r.key: getattr(cfg, r.key) for r in QUALITY_RULES}
        for i, t in enumerate(texts):
            failed = quality_flags(t, thresholds)
            if failed:
                reasons[i] = failed[0]
    if cfg.dedup:
        kept = [i for i in range(len(units)) if i not in reasons]
        dup = near_duplicates([texts[i] for i in kept], threshold=cfg.dedup_threshold,
                              num_perm=cfg.dedup_num_perm)
        for i, d in zip(kept, dup, strict=True):
            if d is not None:
                reasons[i] = "dedup"
    return [(units[i].start, units[i].end, why) for i, why in sorted(reasons.items())]


def cached_decide(data: bytes, cfg: CleanConfig) -> tuple[list[tuple[int, int, str]], bool]:
    """:func:`decide`, read from ``cfg.cache_dir`` when this content and these settings
    were cleaned before; returns the removals and whether they came from the cache."""
    if not cfg.cache_dir:  # "" turns the cache off
        return decide(data, cfg), False
    key = hashlib.sha256(data + json.dumps(_settings(cfg), sort_keys=True).encode()).hexdigest()
    path = Path(cfg.cache_dir) / f"{key}.json"
    try:
        return [tuple(r) for r in json.loads(path.read_text())["removed"]], True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    removed = decide(data, cfg)
    try:
        atomic_write_json(path, {"settings": _settings(cfg), "removed": removed})
    except OSError:
        pass  # a read-only cache folder costs a recomputation, nothing else
    return removed, False


def clean(data: bytes, cfg: CleanConfig, planted: list[dict[str, Any]]) -> tuple[bytes, dict]:
    """The kept bytes and the report for the run's meta: per reason the units and bytes
    removed, a few examples, and precision and recall against ``planted``."""
    removed, from_cache = cached_decide(data, cfg)
    gone = [Unit(s, e) for s, e, _ in removed]
    kept, at = [], 0
    for u in gone:
        kept.append(data[at:u.start])
        at = u.end
    kept.append(data[at:])
    out = b"".join(kept)
    if not out:
        raise UserError(f"clean: removed all {len(data)} bytes of the training split; loosen "
                        "the thresholds or turn a cleaner off")
    by_reason: dict[str, Any] = {}
    for s, e, why in removed:
        r = by_reason.setdefault(why, {"units": 0, "bytes": 0, "examples": [], "_units": []})
        r["units"] += 1
        r["bytes"] += e - s
        r["_units"].append(Unit(s, e))
        if len(r["examples"]) < N_EXAMPLES:
            r["examples"].append(data[s:min(e, s + 80)].decode("utf-8", "replace"))
    for r in by_reason.values():
        r.update(removal_scores(r.pop("_units"), planted))
    report = {"settings": _settings(cfg), "from_cache": from_cache,
              "bytes_in": len(data), "bytes_out": len(out), "by_reason": by_reason,
              **removal_scores(gone, planted)}
    return out, report
