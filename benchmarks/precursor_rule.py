"""Tune an early-warning rule on some seeds of the labelled set, score it on the others.

Reads the labelled set (`make precursors`: results/precursors), splits its runs by seed
(--tune, the rest held out), and on the tuning seeds picks the signal and window whose
rule, at its threshold of <= 1 false alarm per 10k steps there, warns of the most events
10 or more steps ahead (ties: the longer median lead), once among the precursors and once
for the loss itself. Each rule and its threshold, fixed, are then scored on the held-out
seeds: precision of its warnings, recall at each lead, median lead and false alarms on
spike-free runs. --write stores the better of the two on the tuning seeds as
spikebench/precursors/default_rule.toml (the rule `spikebench.init(warning=True)` uses),
with its held-out figures in the header.

    python benchmarks/precursor_rule.py results/precursors
    python benchmarks/precursor_rule.py results/precursors --tune 0 1 2 --write
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

from tabulate import tabulate

from spikebench.precursors.command import read_runs
from spikebench.precursors.rule import WarningRule
from spikebench.precursors.scorecard import LEADS, rule_figures
from spikebench.precursors.signals import LOSS, present, rule_for

WINDOWS = (16, 32, 64)
OUT = Path(__file__).resolve().parents[1] / "spikebench" / "precursors" / "default_rule.toml"


def _key(f: dict) -> tuple[float, float]:
    r, lead = f.get("recall_10", math.nan), f.get("median_lead", math.nan)
    return (-1.0 if math.isnan(r) else r, -1.0 if math.isnan(lead) else lead)


def _row(name: str, f: dict) -> list[str]:
    def pct(x):
        return "-" if x is None or math.isnan(x) else f"{100 * x:.0f}%"

    def num(x, d=1):
        return "-" if x is None or math.isnan(x) else f"{x:.{d}f}"

    return [name, f["signal"], f["window"], num(f.get("threshold"), 2),
            f.get("events", 0), f.get("warnings", 0), pct(f.get("precision")),
            *[pct(f.get(f"recall_{k}")) for k in LEADS], num(f.get("median_lead"), 0),
            num(f.get("fa_per_10k")), num(f.get("control_median_lead"), 0)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--tune", type=int, nargs="+", default=[0, 1, 2],
                    help="the seeds the rule is tuned on (default 0 1 2); the rest held out")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    args = ap.parse_args()
    runs = read_runs(args.runs, burn_in=50, gap=5)
    tune = [r for r in runs if r.seed in args.tune]
    held = [r for r in runs if r.seed not in args.tune]
    if not tune or not held:
        print("need runs of tuning and of held-out seeds", file=sys.stderr)
        return 2
    signals = present({c for r in runs for c in r.table}, per_layer=False)
    tuned = []
    for s in signals:
        for w in WINDOWS:
            tuned.append(rule_figures(tune, s, w))
    best = max((f for f in tuned if f["runs"]), key=_key)
    other = max((f for f in tuned if f["runs"] and f["signal"] != LOSS), key=_key)
    loss = max((f for f in tuned if f["runs"] and f["signal"] == LOSS), key=_key)
    rows = []
    for name, f in (("tuned: best precursor", other), ("tuned: the loss", loss)):
        rows.append(_row(name, f))
        held_f = rule_figures(held, f["signal"], f["window"], tau=f["threshold"])
        rows.append(_row("held out", held_f))
        f["held"] = held_f
    head = ["split", "signal", "window", "threshold", "events", "warnings", "precision",
            *[f"recall >= {k}" for k in LEADS], "median lead", "FA / 10k spike-free",
            "control lead"]
    print(f"{len(tune)} tuning runs (seeds {sorted({r.seed for r in tune})}), {len(held)} "
          f"held out (seeds {sorted({r.seed for r in held})}); rules tried: "
          f"{len(tuned)} ({len(signals)} signals x windows {WINDOWS})")
    print(tabulate(rows, head, tablefmt="github"))
    if args.write:
        rule = rule_for(best["signal"], best["window"])
        rule = WarningRule(**{**rule.to_mapping(), "threshold": round(best["threshold"], 4)})
        h = best["held"]
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        lines = ["# The default early-warning rule (spikebench.init(warning=True)), written by",
                 f"# benchmarks/precursor_rule.py --write at {commit}: tuned on seeds "
                 f"{sorted({r.seed for r in tune})} of the labelled set,",
                 f"# held out: precision {h.get('precision', math.nan):.2f}, recall at >= 10 "
                 f"steps {h.get('recall_10', math.nan):.2f}, median lead "
                 f"{h.get('median_lead', math.nan)} steps,",
                 f"# {h.get('fa_per_10k', math.nan):.1f} false alarms per 10k steps on "
                 "spike-free runs. docs/precursors.md has the table.", "", "[rule]"]
        for k, v in rule.to_mapping().items():
            lines.append(f"{k} = {v!r}".replace("'", '"').replace("True", "true")
                         .replace("False", "false"))
        OUT.write_text("\n".join(lines) + "\n")
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
