"""Telling an online user of a spike at its first sure row, before the rule's verdict.

The default rule's multi-step evidence decides a row ``delay`` (73) rows after it; an online
user (the run API, the callbacks, the Prometheus counters) cannot wait that long. So a row
the rule flags at one scale (:attr:`Rule.now`: a residual over ``k`` sigma, the early jump
rule, a non-finite value) opens a *provisional* report at once; rows flagged within ``gap``
observations of it extend it. When the delayed verdicts reach its rows, a spike verdict
within ``gap`` of them *confirms* it; verdicts past its last row plus ``gap`` without one
*withdraw* it. An event the verdicts find with no report before it (a small rise that
came back) is reported when it is found (``late``). Events themselves, and so every
offline score, are unchanged: reports only say when an online user heard. By the end of
the data (:meth:`Reporter.finish`, after the rule's held verdicts) every report is
confirmed or withdrawn; :func:`settled` is what a run's ``summary.json`` records of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

PROVISIONAL, CONFIRMED, WITHDRAWN = "provisional", "confirmed", "withdrawn"


@dataclass
class Report:
    """One spike as an online user heard of it. Steps are step values; ``first``/``last``
    count observations (the monitor's index of the rows), which ``gap`` is measured in."""

    metric: str
    onset: int  # the first row flagged at one scale (or the event's onset, if late)
    reported: int  # the step being fed when it was reported
    first: int
    last: int
    state: str = PROVISIONAL
    decided: int | None = None  # the step being fed when it was confirmed or withdrawn
    late: bool = False  # reported only by the verdict (no one-scale row before it)


class Reporter:
    """A metric's reports: :meth:`flag` for a row flagged now, :meth:`verdict` for each
    delayed verdict. O(1) per row: at most a few reports are undecided at a time."""

    def __init__(self, metric: str, gap: int):
        self.metric, self.gap = metric, gap
        self.reports: list[Report] = []
        self.undecided: list[Report] = []
        self.withdrawn = 0

    def flag(self, index: int, step: int) -> bool:
        """Row ``index`` (step ``step``) flagged at one scale; True if a report opened."""
        last = self.undecided[-1] if self.undecided else None
        if last is not None and index - last.last <= self.gap + 1:
            last.last = index
            return False
        rep = Report(self.metric, step, step, index, index)
        self.reports.append(rep)
        self.undecided.append(rep)
        return True

    def verdict(self, index: int, step: int, spike: bool, opened: bool, now: int) -> bool:
        """The verdict for row ``index`` (step ``step``), given while step ``now`` is fed;
        ``opened``: it opened an event. True if a late report opened."""
        matched = False
        for rep in list(self.undecided):
            if spike and rep.first - self.gap - 1 <= index <= rep.last + self.gap + 1:
                rep.state, rep.decided = CONFIRMED, now
                self.undecided.remove(rep)
                matched = True
            elif index > rep.last + self.gap + 1:
                rep.state, rep.decided = WITHDRAWN, now
                self.withdrawn += 1
                self.undecided.remove(rep)
        if spike and opened and not matched and not self._covers(index):
            self.reports.append(Report(self.metric, step, now, index, index, CONFIRMED,
                                       now, late=True))
            return True
        return False

    def _covers(self, index: int) -> bool:
        """A report already confirmed takes this row (its event went on)."""
        return any(r.state == CONFIRMED and r.first - self.gap - 1 <= index <= r.last
                   + self.gap + 1 for r in self.reports[-4:])

    def finish(self, now: int) -> None:
        """End of data: reports the verdicts never confirmed are withdrawn."""
        for rep in self.undecided:
            rep.state, rep.decided = WITHDRAWN, now
            self.withdrawn += 1
        self.undecided = []

    def state_dict(self) -> dict[str, Any]:
        return {"reports": [asdict(r) for r in self.reports],
                "undecided": [self.reports.index(r) for r in self.undecided],
                "withdrawn": self.withdrawn}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.reports = [Report(**r) for r in d["reports"]]
        self.undecided = [self.reports[i] for i in d["undecided"]]
        self.withdrawn = d["withdrawn"]


def settled(reports: Sequence[Report]) -> dict[str, Any]:
    """A metric's reports as a finished run records them (``summary.json``'s
    ``spikes.reports``): how many were told, confirmed, withdrawn and told late, and each
    one's onset, the steps it was told and decided at, and how it ended."""
    return {
        "reported": len(reports),
        "confirmed": sum(r.state == CONFIRMED for r in reports),
        "withdrawn": sum(r.state == WITHDRAWN for r in reports),
        "late": sum(r.late for r in reports),
        "list": [{"onset": r.onset, "reported": r.reported, "decided": r.decided,
                  "state": r.state, "late": r.late} for r in reports],
    }
