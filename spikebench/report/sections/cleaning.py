"""Data cleaning: what each arm's cleaners removed, why, and how much of it was planted.

Read from each seed's ``meta.json`` (``corpus.cleaning``): bytes in and out, per reason the
units and bytes removed with examples, and byte-level precision and recall against the
contamination the run planted (precision: planted bytes among those removed; recall: planted
bytes removed among those planted). Seeds plant different bytes, so each figure is a mean
over the arm's seeds with its range. Arms that cap domains also get each domain's share of
the split before and after cleaning.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from spikebench.report.arms import table_arms
from spikebench.report.blocks import Block, Cell, Table, notes, num, para, pct
from spikebench.report.data import Study, seed_metas
from spikebench.report.sections.section import Info, own_params
from spikebench.values import finite


@dataclass(frozen=True, kw_only=True)
class CleaningInfo(Info):
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per arm and reason
    domains: list[dict[str, Any]] = field(default_factory=list)  # one per arm and domain


def _spread(values: list[float]) -> dict[str, Any] | None:
    vals = [float(v) for v in values if finite(v)]
    if not vals:
        return None
    return {"mean": statistics.fmean(vals), "lo": min(vals), "hi": max(vals), "n": len(vals)}


def _domain_rows(arm: str, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per domain its share of the split before and after cleaning, over the seeds."""
    reps = [r for r in reports if isinstance(r.get("domains"), dict)]
    names = {d for r in reps for d in r["domains"]}
    rows = []
    for d in names:
        share_in, share_out = [], []
        for r in reps:
            total_in = sum(v.get("in", 0) for v in r["domains"].values())
            total_out = sum(v.get("out", 0) for v in r["domains"].values())
            v = r["domains"].get(d, {})
            if total_in > 0 and total_out > 0:
                share_in.append(v.get("in", 0) / total_in)
                share_out.append(v.get("out", 0) / total_out)
        rows.append({"arm": arm, "domain": d, "seeds": len(share_in),
                     "share_in": _spread(share_in), "share_out": _spread(share_out)})
    return sorted(rows, key=lambda r: (-(r["share_in"] or {"mean": 0})["mean"], r["domain"]))


def info(study: Study) -> CleaningInfo:
    if study.own_trainer:
        return CleaningInfo.unavailable(own_params(study, "cleans the data, if any"))
    rows, domains = [], []
    for arm in table_arms(study):
        t = study.arm_trial(arm)
        if t is None:
            continue
        reports = [m["corpus"]["cleaning"] for m in seed_metas(t)
                   if isinstance(m.get("corpus", {}).get("cleaning"), dict)]
        if not reports:
            continue
        domains += _domain_rows(arm, reports)
        reasons = sorted({r for rep in reports for r in (rep.get("by_reason") or {})})
        for reason in ["all", *reasons]:
            parts = [rep if reason == "all" else (rep.get("by_reason") or {}).get(reason, {})
                     for rep in reports]
            example = next((e for p in parts for e in p.get("examples") or []), "")
            rows.append({
                "arm": arm, "reason": reason, "seeds": len(reports),
                "removed_bytes": _spread([p.get("removed_bytes", 0) for p in parts]),
                "share": _spread([(p.get("removed_bytes") or 0) / rep["bytes_in"]
                                  for p, rep in zip(parts, reports, strict=True)
                                  if finite(rep.get("bytes_in")) and rep["bytes_in"] > 0]),
                "precision": _spread([p.get("precision") for p in parts]),
                "recall": _spread([p.get("recall") for p in parts]),
                "units": _spread([p.get("units") for p in parts]) if reason != "all" else None,
                "example": str(example)[:60]})
    if not rows:
        return CleaningInfo.unavailable("no arm cleaned its corpus (clean.dedup, "
                                        "clean.quality and clean.max_domain_share are off)")
    return CleaningInfo(rows=rows, domains=domains)


def _cell(s: dict[str, Any] | None, fmt=num) -> str:
    if s is None:
        return "—"
    return fmt(s["mean"]) + ("" if s["lo"] == s["hi"] else f" ({fmt(s['lo'])}–{fmt(s['hi'])})")


def blocks(info: CleaningInfo, images: frozenset[str]) -> list[Block]:
    rows = [[Cell(r["arm"]), Cell(r["reason"]), Cell(str(r["seeds"])),
             Cell(_cell(r["units"])), Cell(_cell(r["removed_bytes"])),
             Cell(_cell(r["share"], pct)), Cell(_cell(r["precision"], pct)),
             Cell(_cell(r["recall"], pct)), Cell(r["example"])] for r in info.rows]
    return [para("What each arm's cleaners removed from its training split before training "
                 "(mean over seeds, range in parentheses), and how much of it was the "
                 "contamination the run planted, byte by byte."),
            Table(["Arm", "Removed by", "Seeds", "Units", "Bytes", "Share of the split",
                   "Precision", "Recall", "Example"], rows),
            *notes(["precision: planted bytes among the bytes removed; recall: planted "
                    "bytes removed among those planted; — where nothing was removed or "
                    "nothing planted"]), *_domain_blocks(info)]


def _domain_blocks(info: CleaningInfo) -> list[Block]:
    if not info.domains:
        return []
    rows = [[Cell(r["arm"]), Cell(r["domain"]), Cell(str(r["seeds"])),
             Cell(_cell(r["share_in"], pct)), Cell(_cell(r["share_out"], pct))]
            for r in info.domains]
    return [para("Each domain's share of the training split before and after cleaning, for "
                 "the arms that cap domains (clean.max_domain_share; domains are the "
                 "corpus's top-level folders or a .jsonl field, planted domain text is its "
                 "own domain)."),
            Table(["Arm", "Domain", "Seeds", "Share before", "Share after"], rows)]
