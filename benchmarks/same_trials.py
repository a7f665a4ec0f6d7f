"""Are two sweeps' trials the same? Compares every trial's params and every seed's metrics
and summary exactly, timing keys aside (wall time differs run to run).

    python benchmarks/same_trials.py results-a/default results-b/default

Use it to show that a refactor left training bit-identical: run the same sweep file before
and after on the same machine (same CPU model, threads and torch build) and compare.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TIMING = {"perf/tokens_per_s", "time/elapsed_s", "seconds"}


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def read_rows(path: Path) -> list:
    return [strip(json.loads(line)) for line in path.read_text().splitlines()]


def compare(a: Path, b: Path) -> tuple[int, int, list]:
    runs = rows = 0
    diffs: list = []
    for ta in sorted((a / "trials").iterdir()):
        tb = b / "trials" / ta.name
        ja = json.loads((ta / "trial.json").read_text())
        jb = json.loads((tb / "trial.json").read_text())
        diffs += [(ta.name, k) for k in ("arm", "params", "overrides", "seeds", "config")
                  if ja[k] != jb[k]]
        for sa in sorted(ta.glob("seed-*")):
            sb = tb / sa.name
            runs += 1
            ra, rb = read_rows(sa / "metrics.jsonl"), read_rows(sb / "metrics.jsonl")
            rows += len(ra)
            if json.dumps(ra) != json.dumps(rb):
                diffs.append((ta.name, sa.name, "metrics.jsonl"))
            sum_a = strip(json.loads((sa / "summary.json").read_text()))
            sum_b = strip(json.loads((sb / "summary.json").read_text()))
            if json.dumps(sum_a) != json.dumps(sum_b):
                diffs.append((ta.name, sa.name, "summary.json"))
    return runs, rows, diffs


def main(argv: list[str]) -> int:
    runs, rows, diffs = compare(Path(argv[0]), Path(argv[1]))
    print(f"{runs} runs, {rows} metric rows compared; differences: {diffs or 'none'}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
