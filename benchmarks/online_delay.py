"""How soon an online user hears of a spike: rows from a labelled spike's onset to its first
report (provisional, :mod:`spikebench.spikes.reports`) and to its confirmation, and how
many provisional reports are withdrawn, on the labelled real traces of
``benchmarks/detector_labelled.py`` (same traces, splits and planted logs).

A label is *reported* by the first report whose rows overlap its span (widened as
``detector_labelled`` widens it); the delay counts logged rows from the label's onset to the
row being fed when the report was made, then to the row at which it was confirmed. Rows,
not steps: half the logs keep every 10th step. A withdrawn report is one the multi-step
rule did not confirm; the table splits those on a label (a real spike the rule then
missed) from those on clean rows.

    python benchmarks/online_delay.py --split held-out
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from detector_labelled import SKIP, SPLITS, load_traces, logs_of
from tabulate import tabulate

from spikebench.spikes.monitor import SpikeMonitor


def _row_of(steps: np.ndarray, step: int) -> int:
    return int(np.searchsorted(steps, step))


def measure(logs) -> dict[str, list]:
    out: dict[str, list] = {"first": [], "confirmed": [], "never": [], "withdrawn_on_label": [],
                            "withdrawn_clean": [], "late": [], "reports": []}
    for lg in logs:
        mon = SpikeMonitor("default", ("loss",))
        for s, v in zip(lg.steps, lg.loss, strict=True):
            mon.update(int(s), {"loss": float(v)})
        mon.finish()
        reports = [r for r in mon.reports("loss") if r.onset > SKIP]
        out["reports"] += reports
        used = set()
        for sp in lg.spikes:
            lo, hi = sp.onset - 1, sp.end + 5  # detector_labelled's match window
            mine = [r for r in reports if lo <= r.onset <= hi]
            if not mine:
                out["never"].append(sp)
                continue
            first = min(mine, key=lambda r: r.reported)
            used.update(id(r) for r in mine)
            onset_row = _row_of(lg.steps, sp.onset)
            out["first"].append(_row_of(lg.steps, first.reported) - onset_row)
            if first.late:
                out["late"].append(first)
            conf = [r for r in mine if r.state == "confirmed"]
            if conf:
                out["confirmed"].append(_row_of(lg.steps, min(r.decided for r in conf))
                                        - onset_row)
            else:
                out["withdrawn_on_label"].append(first)
        out["withdrawn_clean"] += [r for r in reports
                                   if id(r) not in used and r.state == "withdrawn"]
    return out


def _q(xs: list[int]) -> str:
    if not xs:
        return "-"
    qs = np.quantile(xs, [0.5, 0.9])
    return f"{statistics.median(xs):g} / {qs[1]:g} / {max(xs)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="results/detector-traces")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--copies", type=int, default=24, help="planted logs per trace")
    ap.add_argument("--split", choices=[*SPLITS, "all"], default="all")
    args = ap.parse_args()
    splits = list(SPLITS) if args.split == "all" else [args.split]
    traces = load_traces(args.traces, args.steps, splits)
    rows = []
    for split in splits:
        logs = logs_of(traces, split, args.copies)
        m = measure(logs)
        n_labels = sum(len(lg.spikes) for lg in logs)
        n_withdrawn = sum(r.state == "withdrawn" for r in m["reports"])
        rows.append([split, len(logs), n_labels, len(m["first"]), _q(m["first"]),
                     len(m["late"]), _q(m["confirmed"]), len(m["reports"]), n_withdrawn,
                     len(m["withdrawn_on_label"]), len(m["withdrawn_clean"])])
    print(tabulate(rows, ["split", "logs", "labelled spikes", "reported",
                          "rows to first report (median / p90 / max)", "of them late",
                          "rows to confirmation (median / p90 / max)", "reports",
                          "withdrawn", "withdrawn on a label", "withdrawn on clean rows"],
                   tablefmt="github"))


if __name__ == "__main__":
    main()
