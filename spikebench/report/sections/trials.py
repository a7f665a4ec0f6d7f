"""Section 8, every trial: number, state, arm, parameter values, scores and a note.

It is the one table nothing is left out of (failed and pruned trials included, with their
error or cause), so any figure above can be checked against the trials it came from; the
HTML page makes it sortable by any column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spikebench.report.blocks import DASH, Block, Cell, Table, notes, num, para
from spikebench.report.data import Study
from spikebench.report.sections.section import Info


@dataclass(frozen=True, kw_only=True)
class TrialsInfo(Info):
    param_keys: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    spike_metric: str = "severity"
    damaged: list[str] = field(default_factory=list)  # trial files and attributes dropped


def info(study: Study) -> TrialsInfo:
    """One row per trial; ``param_keys`` are the union of the trials' parameter names in
    first-seen order, and a trial without one (``optim.clip`` when clipping is off) has None."""
    keys: list[str] = []
    for t in study.trials:
        keys += [k for k in t.params if k not in keys]
    rows = []
    for t in study.trials:
        a = t.attrs
        rows.append({
            "number": t.number, "state": t.state.lower(), "arm": t.arm,
            "params": {k: t.params.get(k) for k in keys},
            "spikes": a.get("spikes"), "convergence": a.get("convergence"),
            "events_median": a.get("n_events_median"), "diverged_seeds": a.get("diverged_seeds"),
            "reached_seeds": a.get("reached_seeds"), "seeds": a.get("seeds"),
            "final_loss": t.final_loss_median, "duration_s": t.duration_s,
            "note": str(a.get("error") or a.get("cause") or ""),
        })
    # Read last: the sections before this one have read (and noted) every file they used.
    return TrialsInfo(param_keys=keys, rows=rows, spike_metric=study.spike_metric,
                      damaged=study.damaged)


def _param(v: Any) -> Cell:
    text = num(v) if isinstance(v, float) else DASH if v is None else str(v)
    sort = v if isinstance(v, int | float) and not isinstance(v, bool) else (
        None if v is None else str(v))
    return Cell(text, sort)


def _scores(r: dict[str, Any]) -> list[Cell]:
    reached = f"{r['reached_seeds']}/{r['seeds']}" if r["seeds"] is not None else DASH
    cells = [Cell(num(r[k]), r[k]) for k in ("spikes", "convergence", "events_median",
                                              "diverged_seeds")]
    return cells + [Cell(reached, r["reached_seeds"]), Cell(num(r["final_loss"]),
                                                            r["final_loss"]),
                    Cell(num(r["duration_s"]), r["duration_s"]), Cell(r["note"])]


def blocks(tr: TrialsInfo, images: frozenset[str]) -> list[Block]:
    keys = tr.param_keys
    cols = (["#", "State", "Arm"] + keys
            + ["Spikes", "Convergence", "Events (median)", "Diverged", "Reached",
               "Final loss (median)", "Duration (s)", "Note"])
    rows = [[Cell(str(r["number"]), r["number"]), Cell(r["state"]), Cell(r["arm"])]
            + [_param(r["params"].get(k)) for k in keys] + _scores(r) for r in tr.rows]
    numeric = [True, False, False] + [False] * len(keys) + [True] * 7 + [False]
    damaged = ([para(f"Damaged input, dropped from this report ({len(tr.damaged)}):"),
                *notes(tr.damaged)] if tr.damaged else [])
    return [para("In the HTML report, click a column header to sort."),
            Table(cols, rows, sortable=True, numeric=numeric), *damaged]
