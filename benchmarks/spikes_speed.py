"""How long ``spikebench spikes`` takes on long logs (issue 37: 200k rows took 14.5 s and 2M
rows did not finish in 120 s), and that the fast path's output is the per-row path's.

    .venv/bin/python benchmarks/spikes_speed.py [--rows 2000000] [--small 200000] [--repeat 3]
        [--format csv|jsonl]

Writes synthetic CSV logs (``spikebench.spikes.synthetic.generate``: step, loss, grad_norm)
of ``--rows`` and ``--small`` rows to a temporary folder (not timed), then times
``python -m spikebench spikes LOG --json`` end to end in a fresh process (interpreter start,
imports, reading, scoring, printing): the best of ``--repeat`` runs on each log. On the small
log it also times the old per-row path (the careful cell-by-cell reader and the online
monitor fed row by row, as ``spikebench spikes`` ran before the fast path) once, checks
that both print the same JSON, and prints the ratio. No assertion on time: a measurement.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What `spikebench spikes LOG --json` printed before the fast path: the careful reader,
# then the monitor over every row (spikebench.scoring.run.score_log).
OLD = """
import json, sys
import spikebench.runs.text as logs
from spikebench.runs.spikes_command import JSON_EVENT_KEYS
from spikebench.scoring.run import score_log
logs._read_plain_csv = lambda *a: None
res = score_log(logs.read_log(sys.argv[1]))
print(json.dumps({"steps": res["steps"],
                  "events": [{k: e[k] for k in JSON_EVENT_KEYS} for e in res["events"]],
                  "spike_score": res["spike_score"]}, allow_nan=False))
"""


def write_log(path: Path, rows: int) -> None:
    from spikebench.spikes.synthetic import generate

    frame = generate(0, rows, early_jump=True).to_frame()
    if path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_csv(path, index=False)


def timed(argv: list[str], repeat: int) -> tuple[float, str]:
    """Best wall time of ``repeat`` runs of ``argv``, and its stdout."""
    best, out = float("inf"), ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, check=True)
        best, out = min(best, time.perf_counter() - t0), p.stdout
    return best, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the long log")
    p.add_argument("--small", type=int, default=200_000,
                   help="rows of the log the old per-row path is timed on")
    p.add_argument("--repeat", type=int, default=3, help="fast-path runs per log (best kept)")
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv",
                   help="the logs' format (default: csv)")
    args = p.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="spikes-speed-") as tmp:
        logs = {n: Path(tmp) / f"log-{n}.{args.format}" for n in (args.small, args.rows)}
        for n, path in logs.items():
            t0 = time.perf_counter()
            write_log(path, n)
            print(f"wrote {n:,} rows ({path.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t0:.1f} s (not timed)", file=sys.stderr)
        fast = {}
        for n, path in logs.items():
            fast[n] = timed([py, "-m", "spikebench", "spikes", str(path), "--json"],
                            args.repeat)
            print(f"spikebench spikes, {n:>9,} rows: {fast[n][0]:6.2f} s "
                  f"(best of {args.repeat})")
        old, out = timed([py, "-c", OLD, str(logs[args.small])], 1)
        same = "same output" if out == fast[args.small][1] else "OUTPUT DIFFERS"
        print(f"old per-row path, {args.small:>9,} rows: {old:6.2f} s ({same}); "
              f"{old / fast[args.small][0]:.1f}x the fast path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
