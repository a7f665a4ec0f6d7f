"""How long ``spikebench spikes`` takes on long logs (issue 37: 200k rows took 14.5 s and 2M
rows did not finish in 120 s), against pandas' ``read_csv`` of the same file (issue 45: the
goal is at most 2x), and that the fast path's output is the per-row path's.

    .venv/bin/python benchmarks/spikes_speed.py [--rows 2000000] [--small 200000] [--repeat 3]
        [--format csv|jsonl] [--pairs 0]

``--pairs N`` (6 or more for an interval) instead times ``spikebench spikes LOG --json``
against ``python -c "import pandas; pandas.read_csv(LOG)"`` as whole processes, N pairs in
alternating order after a warm-up pair, on each log, and prints the ratio of their mean
times with its exact 95% sign-flip interval over the pairs, in wall seconds and in the
children's CPU seconds (user + system: what a shared machine's other work does not
lengthen). The old per-row path is not timed then.

``--stages`` instead runs each stage of ``spikebench spikes`` on the long log in a fresh
process and prints its CPU seconds: the imports, reading the log, the default rule's
verdicts and the events of each series, and the OLMo spike score: where the time goes.

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
import os
import resource
import statistics
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


PANDAS = "import sys, pandas; pandas.read_csv(sys.argv[1])"

# The stages of spikebench.spikes.offline.score_log, each timed in CPU seconds.
STAGES = """
import sys, time
t = time.process_time()
from pathlib import Path
from spikebench.runs.text import read_log
from spikebench.spikes import offline as O
def lap(name):
    global t
    now = time.process_time()
    print(f"  {name:<32s} {now - t:6.3f} s")
    t = now
lap("imports")
log = read_log(Path(sys.argv[1]))
lap("reading the log")
for s in O.log_series(log):
    flags = O.rule_flags("default", s)
    lap(f"{s.key}: the rule's verdicts")
    O.series_events(s.key, s.steps, s.values, s.injected, flags, 5)
    lap(f"{s.key}: events")
    O.spike_share(s.values)
    lap(f"{s.key}: OLMo spike score")
"""


def one_process(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paired(log: Path, pairs: int) -> None:
    """``spikebench spikes`` against pandas' ``read_csv`` of ``log``, whole processes."""
    from spikebench.report.exact import relative_interval

    py = sys.executable
    ours = [py, "-m", "spikebench", "spikes", str(log), "--json"]
    theirs = [py, "-c", PANDAS, str(log)]
    one_process(ours), one_process(theirs)  # warm-up pair: the page cache, .pyc files
    got: dict[str, list[tuple[float, float]]] = {"ours": [], "pandas": []}
    for r in range(pairs):
        order = ("ours", "pandas") if r % 2 == 0 else ("pandas", "ours")
        for who in order:
            got[who].append(one_process(ours if who == "ours" else theirs))
    for i, clock in enumerate(("wall", "cpu")):
        a = [x[i] for x in got["ours"]]
        b = [x[i] for x in got["pandas"]]
        ci = relative_interval(a, b)
        interval = (f"no interval: {ci.why}" if ci.lo is None else
                    f"95% interval {1 + ci.lo:.2f} to {1 + ci.hi:.2f}, {ci.method}")
        print(f"  {clock:4s}: spikebench spikes {statistics.fmean(a):.2f} s, pandas read_csv "
              f"{statistics.fmean(b):.2f} s (means of {pairs}): ratio "
              f"{statistics.fmean(a) / statistics.fmean(b):.2f} ({interval}; goal <= 2)")
        print("        runs: " + ", ".join(f"{x:.2f}/{y:.2f}" for x, y in zip(a, b, strict=True)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the long log")
    p.add_argument("--small", type=int, default=200_000,
                   help="rows of the log the old per-row path is timed on")
    p.add_argument("--repeat", type=int, default=3, help="fast-path runs per log (best kept)")
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv",
                   help="the logs' format (default: csv)")
    p.add_argument("--pairs", type=int, default=0,
                   help="time against pandas' read_csv, this many pairs of processes per log")
    p.add_argument("--stages", action="store_true",
                   help="print the CPU seconds of each stage on the long log")
    args = p.parse_args(argv)
    py = sys.executable
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="spikes-speed-") as tmp:
        logs = {n: Path(tmp) / f"log-{n}.{args.format}" for n in (args.small, args.rows)}
        for n, path in logs.items():
            t0 = time.perf_counter()
            write_log(path, n)
            print(f"wrote {n:,} rows ({path.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t0:.1f} s (not timed)", file=sys.stderr)
        if args.stages:
            print(f"{args.rows:,} rows, the stages of spikebench spikes (CPU seconds):")
            sys.stdout.flush()
            subprocess.run([py, "-c", STAGES, str(logs[args.rows])], check=True)
            cpu = [one_process([py, "-c", PANDAS, str(logs[args.rows])])[1] for _ in range(3)]
            print(f"  pandas read_csv, whole process (best of 3): {min(cpu):.3f} s")
            return 0
        if args.pairs:
            for n, path in logs.items():
                print(f"{n:,} rows, {args.pairs} pairs of processes:")
                paired(path, args.pairs)
            print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
                  file=sys.stderr)
            return 0
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
