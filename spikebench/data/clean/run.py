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
from spikebench.data.clean.domains import DomainMap, balance
from spikebench.data.clean.quality import QUALITY_RULES, quality_flags
from spikebench.data.clean.score import removal_scores
from spikebench.data.clean.units import Unit, split_units
from spikebench.errors import UserError
from spikebench.runio import atomic_write_json

N_EXAMPLES = 3


def enabled(cfg: CleanConfig) -> bool:
    return cfg.dedup or cfg.quality or cfg.max_domain_share is not None


_ONE_DOMAIN = DomainMap((0,), (".",))


def _settings(cfg: CleanConfig) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k != "cache_dir"}


def decide(data: bytes, cfg: CleanConfig,
           domains: DomainMap | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, reason)`` of every unit to remove; the reason is a quality rule's
    name, ``dedup`` or ``balance``. Balance caps the domains (``domains``, default one for
    all) of what quality and dedup kept."""
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
    if cfg.max_domain_share is not None:
        kept_units = [u for i, u in enumerate(units) if i not in reasons]
        index = {u.start: i for i, u in enumerate(units)}
        for u in balance(kept_units, domains or _ONE_DOMAIN, cfg.max_domain_share):
            reasons[index[u.start]] = "balance"
    return [(units[i].start, units[i].end, why) for i, why in sorted(reasons.items())]


AUTO = "auto"  # clean.cache_dir: in the run's output folder
CACHE_FOLDER = ".clean-cache"


def cache_folder(cfg: CleanConfig, home: str | Path | None) -> Path | None:
    """Where cleaning decisions are cached: ``cfg.cache_dir``, or for "auto"
    ``home/.clean-cache`` (``home``: the output folder of the run; no cache without one);
    None: no cache ("")."""
    if not cfg.cache_dir:  # "" turns the cache off
        return None
    if cfg.cache_dir == AUTO:
        return None if home is None else Path(home) / CACHE_FOLDER
    return Path(cfg.cache_dir)


def cached_decide(data: bytes, cfg: CleanConfig, domains: DomainMap | None = None, *,
                  cache_home: str | Path | None = None
                  ) -> tuple[list[tuple[int, int, str]], bool]:
    """:func:`decide`, read from the cache (:func:`cache_folder`) when this content, its
    domains and these settings were cleaned before; returns the removals and whether they
    came from the cache."""
    folder = cache_folder(cfg, cache_home)
    if folder is None:
        return decide(data, cfg, domains), False
    dm = (domains or _ONE_DOMAIN).digest() if cfg.max_domain_share is not None else ""
    key = hashlib.sha256(data + json.dumps(_settings(cfg), sort_keys=True).encode()
                         + dm.encode()).hexdigest()
    path = folder / f"{key}.json"
    try:
        return [tuple(r) for r in json.loads(path.read_text())["removed"]], True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    removed = decide(data, cfg, domains)
    try:
        atomic_write_json(path, {"settings": _settings(cfg), "removed": removed})
    except OSError:
        pass  # a read-only cache folder costs a recomputation, nothing else
    return removed, False


def _domain_bytes(data: bytes, cfg: CleanConfig, domains: DomainMap, removed
                  ) -> dict[str, dict[str, int]]:
    """Per domain the bytes before and after cleaning, counted by unit as balance counts."""
    out: dict[str, dict[str, int]] = {}
    for u in split_units(data, cfg.unit_bytes):
        d = out.setdefault(domains.of(u), {"in": 0, "out": 0})
        d["in"] += u.end - u.start
        d["out"] += u.end - u.start
    for s, e, _ in removed:
        out[domains.of(Unit(s, e))]["out"] -= e - s
    return out


def clean(data: bytes, cfg: CleanConfig, planted: list[dict[str, Any]],
          domains: DomainMap | None = None, *, cache_home: str | Path | None = None
          ) -> tuple[bytes, dict]:
    """The kept bytes and the report for the run's meta: per reason the units and bytes
    removed, a few examples, and precision and recall against ``planted``; with balance on,
    per domain the bytes in and out."""
    removed, from_cache = cached_decide(data, cfg, domains, cache_home=cache_home)
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
    if cfg.max_domain_share is not None:
        report["domains"] = _domain_bytes(data, cfg, domains or _ONE_DOMAIN, removed)
    return out, report
