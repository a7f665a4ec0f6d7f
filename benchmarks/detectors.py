"""Every spike rule over the same labelled synthetic logs: precision, recall, false alarms.

    .venv/bin/python benchmarks/detectors.py --seeds 30 --steps 10000

Prints a markdown table (for the README): event-level precision and recall (matching as
in :func:`spikebench.synthetic.evaluate`), false alarms (events of any metric the rule runs
on that match no label) per 10k spike-free training steps (log rows outside every labelled
spike, each counted once), recall per spike shape, and the first step (0-based index) from
which each rule can fire on the loss and on the grad norm. Same seeds -> same table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from tabulate import tabulate

from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.rules import RULES
from spikebench.spikes.synthetic import Match, evaluate, generate, matches

SHAPES = ("early", "single", "burst", "slow", "co", "grad_only")


def run_rule(rule: str, logs) -> tuple[Match, Counter, Counter, float]:
    total, found, seen = Match(), Counter(), Counter()
    t0 = time.perf_counter()
    for lg in logs:
        mon = SpikeMonitor(rule, ("loss", "grad_norm"))
        for r in lg.records("loss", "grad_norm"):
            mon.update(r["step"], r)
        mon.finish()
        evs = mon.events
        total += evaluate(evs, lg)
        for sp in lg.spikes:
            seen[sp.shape] += 1
            found[sp.shape] += any(matches(e, e.metric, sp) for e in evs)
    return total, found, seen, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--rules", default=",".join(RULES))
    args = ap.parse_args(argv)
    logs = [generate(seed, args.steps) for seed in range(args.seeds)]
    rows = []
    for rule in args.rules.split(","):
        m, found, seen, dt = run_rule(rule, logs)
        mon = SpikeMonitor(rule, ("loss", "grad_norm"))
        fs = [mon.first_step(k) for k in ("loss", "grad_norm")]
        first = "/".join("never" if f > 10**9 else str(f) for f in fs)
        rows.append(
            [rule, f"{m.precision:.3f}", f"{m.recall:.3f}", f"{m.fa_per_10k:.2f}", first]
            + [f"{found[s] / seen[s]:.2f}" if seen[s] else "-" for s in SHAPES]
            + [m.n_detected, f"{1e6 * dt / (2 * args.steps * args.seeds):.0f}"]
        )
    n_true = sum(len(lg.spikes) for lg in logs)
    print(
        f"{args.seeds} seeds x {args.steps} steps = {args.seeds * args.steps} steps, "
        f"{n_true} labelled spikes ({dict(sorted(Counter(sp.shape for lg in logs for sp in lg.spikes).items()))})\n"
    )
    headers = (
        ["rule", "precision", "recall", "false alarms / 10k", "first step (loss/grad)"]
        + [f"R {s}" for s in SHAPES]
        + ["events", "µs/update"]
    )
    print(tabulate(rows, headers=headers, tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
