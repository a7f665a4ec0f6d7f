"""Mixture balance: which domain each byte came from, and a cap on each domain's share.

A domain is where a document came from: the top-level folder of a text corpus (files at its
root form the domain ``"."``), or a ``.jsonl`` field (``clean.domain_field``). Capping a
domain removes an evenly spread subset of its units, so what is kept still covers the whole
domain rather than its first files.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass

from spikebench.data.clean.units import Unit
from spikebench.errors import UserError

# The label of planted "domain" contamination: text from another source arrives with its own
# folder or field in a real corpus, so balance sees it as a domain of its own.
PLANTED = "(planted)"


@dataclass(frozen=True)
class DomainMap:
    """Byte offsets where a domain begins, sorted, the first at 0, and their labels."""

    starts: tuple[int, ...]
    labels: tuple[str, ...]

    def at(self, pos: int) -> str:
        return self.labels[max(0, bisect.bisect_right(self.starts, pos) - 1)]

    def of(self, unit: Unit) -> str:
        """A unit's domain: that of its middle byte (units cut at document ends, so a unit
        lies within one document but for a separator byte)."""
        return self.at((unit.start + unit.end - 1) // 2)

    def overlay(self, segments: list[dict], label: str) -> DomainMap:
        """This map with the ``{"start", "end"}`` byte ranges relabelled ``label``."""
        cuts: dict[int, str] = dict(zip(self.starts, self.labels, strict=True))
        for s in sorted(segments, key=lambda seg: seg["start"]):
            after = self.at(s["end"])
            for k in [k for k in cuts if s["start"] <= k < s["end"]]:
                del cuts[k]
            cuts[s["start"]] = label
            cuts.setdefault(s["end"], after)
        items = sorted(cuts.items())
        return DomainMap(tuple(k for k, _ in items), tuple(v for _, v in items))

    def digest(self) -> str:
        return hashlib.sha256(repr((self.starts, self.labels)).encode()).hexdigest()


def targets(sizes: dict[str, int], cap: float) -> dict[str, float]:
    """Bytes each domain may keep so none holds more than ``cap`` of the total kept, removing
    as little as possible (water-filling: the domains over the cap are cut to the same size,
    the others kept whole). Refused when no split of ``len(sizes)`` domains can obey it."""
    live = {d: b for d, b in sizes.items() if b > 0}
    if cap * len(live) < 1 - 1e-9:
        names = ", ".join(sorted(live)[:5]) + (", ..." if len(live) > 5 else "")
        raise UserError(
            f"clean.max_domain_share = {cap:g}: the training split has {len(live)} "
            f"domain{'s' * (len(live) != 1)} ({names}), so one holds at least 1/{len(live)} "
            f"of it; set a cap >= {1 / max(1, len(live)):.3g} or give the corpus more "
            "domains (top-level folders, or clean.domain_field in .jsonl)")
    capped: set[str] = set()
    while True:
        if len(capped) == len(live):  # cap * n == 1: every domain at the smallest size
            return {d: float(min(live.values())) for d in live}
        total = sum(b for d, b in live.items() if d not in capped) / (1 - cap * len(capped))
        over = {d for d, b in live.items() if b > cap * total}
        if over <= capped:
            return {d: (cap * total if d in capped else float(b)) for d, b in live.items()}
        capped |= over


def thin(units: list[Unit], keep_bytes: float) -> list[Unit]:
    """The units to drop so at most ``keep_bytes`` stay, evenly spread over ``units``: a
    unit is kept while the bytes kept stay within the target share of the bytes seen. A
    domain never vanishes: with a target under one unit, its middle unit stays."""
    total = sum(u.end - u.start for u in units)
    if keep_bytes >= total:
        return []
    ratio, seen, kept, drop = keep_bytes / total, 0, 0, []
    for u in units:
        size = u.end - u.start
        seen += size
        if kept + size <= ratio * seen:
            kept += size
        else:
            drop.append(u)
    if not kept and units and keep_bytes > 0:
        drop.remove(units[len(units) // 2])
    return drop


def balance(units: list[Unit], domains: DomainMap, cap: float) -> list[Unit]:
    """Units to remove so that no domain holds more than ``cap`` of the bytes of ``units``
    left; repeated a few rounds, since whole units keep a cut domain a little under its
    target and so lift the others' shares."""
    left, removed = list(units), []
    for _ in range(8):  # (every domain keeps a unit, so a later round cannot lose one)
        by: dict[str, list[Unit]] = {}
        for u in left:
            by.setdefault(domains.of(u), []).append(u)
        goal = targets({d: sum(u.end - u.start for u in us) for d, us in by.items()}, cap)
        drop = [u for d, us in by.items() for u in thin(us, goal[d])]
        if not drop:
            break
        gone = set(drop)
        left = [u for u in left if u not in gone]
        removed += drop
    return sorted(removed, key=lambda u: u.start)
