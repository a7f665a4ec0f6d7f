"""Precursors: per arm, which logged signal moved first before its loss spikes.

Shown for a study whose runs logged precursor signals (``probe/...`` columns in their
``metrics.jsonl``, as the built-in loop logs every ``train.probe_every`` steps) and had a
loss event after the burn-in. Each completed trial's seed folders are read once, as
``spikebench precursors`` reads them (:func:`spikebench.runs.discover.discover` with its
``KEEP`` columns), and labelled by :func:`spikebench.precursors.labels.label`: the validated
detector's loss events after the first ``BURN_IN`` steps, less the control (an injected
batch or an LR jump just before the onset, which nothing can foresee).

Each signal's warning rule gets **one threshold, set on all the study's runs** (the lowest
at which it gives at most ``BUDGET`` false alarm per 10,000 scored steps, as the scorecard
sets it), and every arm is read at that threshold: an arm's few runs would otherwise set a
threshold of their own from a thousand or so quiet steps (a budget of a fraction of one
false alarm), so arms would be read at different rules. At that threshold, per arm and
signal, the scorecard's own figures over the arm's runs (its ``rule_figures``, the
threshold fixed): recall at a lead of 10 steps or more and the median lead over the events
warned. The signal that **moved first** is the
one that warned of the most of the arm's events 10 or more steps ahead, ties going to the
longer median lead. Search trials, whose settings differ from trial to trial, are pooled
as one group, ``search trials``, after the arms. No intervals: ``spikebench precursors``
on the results folder gives them (a bootstrap over seeds) and each signal's verdict
against the loss.

A study without a probe column costs one short read per completed trial: the head of its
first seed's ``metrics.jsonl`` is searched for a probe column before any run is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spikebench.precursors import scorecard as S
from spikebench.precursors.command import KEEP
from spikebench.precursors.labels import Labelled, label
from spikebench.precursors.signals import LOSS, WINDOW, present
from spikebench.report.blocks import DASH, Block, Bullets, Cell, Span, Table, notes, para, pct
from spikebench.report.data import Study, TrialRecord, seed_dirs
from spikebench.report.sections.section import Info
from spikebench.study import layout as L

BURN_IN, GAP = 50, 5  # spikebench precursors' defaults
BUDGET = S.BUDGET  # false alarms per 10,000 scored steps
LEAD = 10  # "ahead": a warning at least this many steps before the onset
PROBE = "probe/"
# The bytes of a metrics.jsonl searched for a probe column before any run is read: a few
# hundred rows of the built-in loop's, which logs its probes every 25 steps by default.
HEAD_BYTES = 256 * 1024
SEARCH = "search trials"
NO_FOLDERS = ("no completed trial's run folders can be read here (a report from the "
              "storage alone keeps no probe columns)")
NO_PROBES = (f"no run logged a precursor signal (a {PROBE}... column in its "
             f"{L.METRICS})")
NO_EVENTS = (f"no arm had a loss event after the first {BURN_IN} steps (events an injected "
             "batch or an LR jump caused aside)")
NONE_AHEAD = f"no signal warned {LEAD} or more steps ahead"


@dataclass(frozen=True, kw_only=True)
class PrecursorsInfo(Info):
    signals: list[str] = field(default_factory=list)
    thresholds: dict[str, float | None] = field(default_factory=dict)  # None: never warns
    # Per group with an event: label, runs, events, control, first (None: none ahead),
    # rows (per signal: signal, runs, events, recall, median_lead).
    arms: list[dict[str, Any]] = field(default_factory=list)
    calm: list[str] = field(default_factory=list)  # groups without an event
    runs: int = 0
    notes: list[str] = field(default_factory=list)


def _metrics(d: Path) -> Path | None:
    p = d / L.METRICS
    return p if p.is_file() else None


def _get_group_info(study: Study) -> dict[str, list[TrialRecord]]:
    """The completed trials to read, by group: each comparison arm's trial (the latest, if a
    retry ran it twice), in the spec's order, then every other completed trial as
    ``search trials``."""
    groups: dict[str, list[TrialRecord]] = {}
    chosen = set()
    for arm in study.arms:
        t = study.arm_trial(arm)
        if t is not None and t.folder is not None:
            groups[arm] = [t]
            chosen.add(t.number)
    search = SEARCH if SEARCH not in study.arms else f"{SEARCH} (not an arm)"
    rest = [t for t in study.trials if t.complete and t.folder is not None
            and t.arm not in study.arms and t.number not in chosen]
    if rest:
        groups[search] = rest
    return groups


def has_probe(trials: list[TrialRecord], head: int = HEAD_BYTES) -> bool:
    """Whether the head of some trial's first seed log names a probe column: one short read
    per trial, stopping at the first that does."""
    needle = f'"{PROBE}'.encode()
    for t in trials:
        p = next((m for d in seed_dirs(t) if (m := _metrics(d)) is not None), None)
        if p is None:
            continue
        try:
            with p.open("rb") as f:
                if needle in f.read(head):
                    return True
        except OSError:
            continue
    return False


def _get_runs(t: TrialRecord, problems: list[str]) -> list[Labelled]:
    """Every seed run of trial ``t`` with a log, labelled; one that cannot be read is named
    in ``problems`` and left out."""
    from spikebench.runs.discover import discover

    out = []
    for d in seed_dirs(t):
        if _metrics(d) is None:
            continue
        try:
            found = discover(d, extra=KEEP)
            run = next((r for r in found.runs if r.path in (d, d / L.METRICS)),
                       found.runs[0])
            run.name, run.seed = f"trial {t.number}/{d.name}", L.seed_number(d)
            out.append(label(run, burn_in=BURN_IN, gap=GAP))
        except Exception as e:  # noqa: BLE001 - a damaged log: noted, the report goes on
            problems.append(f"trial {t.number}/{d.name}: not read ({type(e).__name__}: "
                            f"{(str(e).splitlines() or [''])[0]})")
    return out


def _clean(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def _get_signal_info(runs: list[Labelled], owner: list[str], signal: str,
                     budget: float) -> tuple[float | None, dict[str, dict[str, Any]]]:
    """One signal: its threshold over every run (None: none within the budget, it never
    warns), and per group at that threshold its runs, events, recall at lead >= LEAD and
    median lead (:func:`~spikebench.precursors.scorecard.rule_figures`, the threshold
    fixed)."""
    every = S.rule_figures(runs, signal, budget=budget)
    if not every["runs"]:
        return None, {}
    tau = every["threshold"]
    out: dict[str, dict[str, Any]] = {}
    for group in dict.fromkeys(owner):
        mine = [r for r, o in zip(runs, owner, strict=True) if o == group]
        figs = S.rule_figures(mine, signal, tau=tau)
        if not figs["runs"]:
            continue
        out[group] = {"signal": signal, "runs": figs["runs"], "events": figs["events"],
                      "recall": _clean(figs[f"recall_{LEAD}"]),
                      "median_lead": _clean(figs["median_lead"])}
    return (None if math.isinf(tau) else tau), out


def first_to_move(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The signal that warned of the most events ``LEAD`` or more steps ahead, ties going to
    the longer median lead, then to the scorecard's order; None if none did."""
    ahead = [r for r in rows if r["events"] and (r["recall"] or 0) > 0]
    if not ahead:
        return None
    return max(ahead, key=lambda r: (r["recall"], r["median_lead"] or 0.0,
                                     -rows.index(r)))


def info(study: Study, *, budget: float = BUDGET) -> PrecursorsInfo:
    groups = _get_group_info(study)
    trials = [t for ts in groups.values() for t in ts]
    if not trials:
        return PrecursorsInfo.unavailable(NO_FOLDERS)
    if not has_probe(trials):
        return PrecursorsInfo.unavailable(NO_PROBES)
    problems: list[str] = []
    runs: list[Labelled] = []
    owner: list[str] = []
    for group, ts in groups.items():
        for t in ts:
            got = _get_runs(t, problems)
            runs += got
            owner += [group] * len(got)
    columns = {c for r in runs for c in r.table}
    if not any(c.startswith(PROBE) for c in columns):
        return PrecursorsInfo.unavailable(NO_PROBES)
    events = {g: sum(len(r.onsets) for r, o in zip(runs, owner, strict=True) if o == g)
              for g in dict.fromkeys(owner)}
    if not any(events.values()):
        return PrecursorsInfo.unavailable(NO_EVENTS)
    signals = present(columns, per_layer=False)
    order = [LOSS] + [s for s in signals if s != LOSS] if LOSS in signals else signals
    thresholds: dict[str, float | None] = {}
    rows: dict[str, list[dict[str, Any]]] = {g: [] for g in events}
    for signal in order:
        tau, per_group = _get_signal_info(runs, owner, signal, budget)
        if not per_group:
            continue
        thresholds[signal] = tau
        for g, row in per_group.items():
            rows[g].append(row)
    arms = []
    for g, n in events.items():
        if not n:
            continue
        mine = [r for r, o in zip(runs, owner, strict=True) if o == g]
        arms.append({"label": g, "runs": len(mine), "events": n,
                     "control": sum(len(r.control) for r in mine), "rows": rows[g],
                     "first": first_to_move(rows[g])})
    return PrecursorsInfo(signals=list(thresholds), thresholds=thresholds, arms=arms,
                          calm=[g for g, n in events.items() if not n], runs=len(runs),
                          notes=problems)


def _lead(x: float | None) -> str:
    return DASH if x is None else f"{x:.0f}"


def line(arm: dict[str, Any]) -> str:
    """An arm's verdict: the first signal to move, or that none warned far enough ahead."""
    f = arm["first"]
    if f is None:
        return NONE_AHEAD
    return (f"first to move: {f['signal']} (median lead {_lead(f['median_lead'])} steps, "
            f"recall at ≥ {LEAD} steps {pct(f['recall'])})")


TEXT = ("Per arm, which logged signal warned of its loss spikes first. Each run is labelled "
        "as spikebench precursors labels it (docs/precursors.md): the validated detector's "
        f"loss events after the first {BURN_IN} steps, less those an injected batch or an LR "
        "jump just before caused. Each signal's warning rule (a robust z-score over its last "
        f"{WINDOW} values) is read at one threshold, set over all the study's runs: the lowest "
        f"at which it gives at most {BUDGET:g} false alarm per 10,000 steps. First to move: "
        f"the signal that warned of the most of the arm's events {LEAD} or more steps ahead "
        f"(recall at lead ≥ {LEAD}), ties going to the longer median lead (the onset minus "
        "the first warning in the 100 steps up to it, over the events warned).")


def blocks(info: PrecursorsInfo, images: frozenset[str]) -> list[Block]:
    lines = [[Span(f"{a['label']}: ", bold=True), Span(line(a)),
              Span(f" ({a['events']} loss event(s) in {a['runs']} run(s))")]
             for a in info.arms]
    rows = [[Cell(a["label"]), Cell(r["signal"]), Cell(str(r["runs"]), r["runs"]),
             Cell(str(r["events"]), r["events"]),
             Cell(pct(r["recall"]) if r["events"] else DASH, r["recall"]),
             Cell(_lead(r["median_lead"]), r["median_lead"])]
            for a in info.arms for r in a["rows"]]
    never = [s for s, t in info.thresholds.items() if t is None]
    shown = "; ".join(f"{s} {t:.2f}" for s, t in info.thresholds.items() if t is not None)
    caveats = [f"thresholds (robust z-score, over all {info.runs} runs): {shown or DASH}"]
    if never:
        caveats.append(f"never warns within the budget: {', '.join(never)}")
    if info.calm:
        caveats.append(f"no loss event after the first {BURN_IN} steps: "
                       + ", ".join(info.calm))
    if any(a["label"].startswith(SEARCH) for a in info.arms):
        caveats.append("search trials: every search trial's runs together (their settings "
                       "differ)")
    caveats.append("no intervals: spikebench precursors on the results folder gives them "
                   "(a bootstrap over seeds) and each signal's verdict against the loss")
    return [para(TEXT),
            Bullets(lines),
            Table(["Arm", "Signal", "Runs", "Events", f"Recall, lead ≥ {LEAD}",
                   "Median lead (steps)"], rows),
            *notes(caveats + info.notes)]
