"""``spikebench precursors RUN...``: each signal's scorecard over runs read from disk.

Reads run folders, study folders or any logs ``spikebench spikes`` reads (every column
matching a known signal is kept), labels each run's loss events with the validated
detector (:mod:`.labels`) and scores every signal the runs logged (:mod:`.scorecard`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from tabulate import tabulate

from spikebench.errors import UserError
from spikebench.precursors.labels import Labelled, label
from spikebench.precursors.scorecard import (
    AFTER,
    HORIZON,
    LEADS,
    SignalScore,
    score_signals,
    seed_units,
)
from spikebench.precursors.signals import LOSS, present

KEEP = {"probe/*": "probe/*", "data/injected*": "data/injected"}


def read_runs(paths: list[str], *, burn_in: int, gap: int) -> list[Labelled]:
    """Every run under ``paths``, labelled; runs whose log has no loss are refused."""
    from spikebench.runs.discover import discover

    runs: list[Labelled] = []
    seen: set[str] = set()
    for p in paths:
        found = discover(p, extra=KEEP)
        for line in found.skipped:
            print(f"spikebench precursors: note: skipped {line}", file=sys.stderr)
        for r in found.runs:
            key = str(r.path.resolve())
            if key in seen:  # the same run named twice (a folder and a run inside it)
                continue
            seen.add(key)
            runs.append(label(r, burn_in=burn_in, gap=gap))
    if not runs:
        raise UserError(f"{' '.join(paths)}: no training runs found")
    return runs


def as_json(rows: list[SignalScore], runs: list[Labelled], args: argparse.Namespace
            ) -> dict[str, Any]:
    def clean(x: Any) -> Any:
        if isinstance(x, float):
            return None if math.isnan(x) or math.isinf(x) else x
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return clean({
        "runs": len(runs), "seeds": len(set(seed_units(runs))),
        "events": sum(len(r.onsets) for r in runs),
        "control_events": sum(len(r.control) for r in runs),
        "spike_free_runs": sum(1 for r in runs if not r.onsets and not r.control),
        "steps": sum(r.scored_steps for r in runs),
        "definitions": {"horizon": HORIZON, "after": AFTER, "leads": list(LEADS),
                        "budget_per_10k": args.budget, "burn_in": args.burn_in,
                        "interval": "95% percentile bootstrap over seeds",
                        "boot": args.boot},
        # The labels, per run: what every figure above is scored against.
        "labels": [{"run": r.name, "seed": r.seed, "onsets": r.onsets, "control": r.control}
                   for r in runs],
        "signals": [{"signal": r.signal, "runs": r.runs, "events": r.events,
                     "control": r.control, "threshold": r.threshold, **r.figures,
                     "intervals": r.intervals, "vs_loss": r.vs_loss} for r in rows],
    })


def _fmt(v: float | None, iv: list[float] | None, pct: bool = False, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    f = (lambda x: f"{100 * x:.0f}%") if pct else (lambda x: f"{x:.{digits}f}")
    return f(v) + (f" [{f(iv[0])}, {f(iv[1])}]" if iv else "")


def table(out: dict[str, Any]) -> str:
    """The scorecard as a markdown table, one row per signal, each figure with its interval."""
    rows = []
    for s in out["signals"]:
        iv = s["intervals"]
        vs = s["vs_loss"].get("verdict", "(the baseline)" if s["signal"] == LOSS else "-")
        if s["vs_loss"].get("interval"):
            lo, hi = s["vs_loss"]["interval"]
            vs += f" (PR-AUC diff {s['vs_loss']['pr_auc_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}])"
        rows.append([s["signal"], _fmt(s["pr_auc"], iv.get("pr_auc"), digits=3),
                     _fmt(s["base_rate"], None, digits=3),
                     *[_fmt(s[f"recall_{k}"], iv.get(f"recall_{k}"), pct=True) for k in LEADS],
                     _fmt(s["median_lead"], iv.get("median_lead"), digits=0),
                     _fmt(s["fa_per_10k"], iv.get("fa_per_10k"), digits=1),
                     _fmt(s["control_median_lead"], iv.get("control_median_lead"), digits=0),
                     vs])
    head = ["signal", "PR-AUC [95%]", "chance", *[f"recall, lead >= {k}" for k in LEADS],
            "median lead (steps)", "false alarms / 10k (spike-free)",
            "control: median lead", "against the loss"]
    return tabulate(rows, head, tablefmt="github")


def run_precursors(args: argparse.Namespace) -> int:
    runs = read_runs(args.runs, burn_in=args.burn_in, gap=args.gap)
    columns = {c for r in runs for c in r.table}
    signals = present(columns)
    if LOSS not in signals:
        raise UserError(f"{' '.join(args.runs)}: no run logged a training loss")
    rows = score_signals(runs, signals, boot=args.boot, budget=args.budget)
    out = as_json(rows, runs, args)
    if args.json:
        print(json.dumps(out, allow_nan=False))
        return 0
    print(f"{out['runs']} runs ({out['seeds']} seeds, {out['spike_free_runs']} without an "
          f"event), {out['steps']} steps after the first {args.burn_in}; {out['events']} loss "
          f"events, {out['control_events']} in the control (an injected batch or LR jump "
          "just before)")
    print(f"Threshold per signal: at most {args.budget:g} false alarm per 10k steps; "
          f"lead counted up to {HORIZON} steps; intervals: 95% bootstrap over seeds"
          + (" (none: one seed)." if out["seeds"] < 2 else "."))
    print(table(out))
    return 0
