"""The spike detector's own speed, without reading a log: the whole-series (offline) pass
``spikebench spikes`` runs, per rule, and the online monitor's cost per step.

    .venv/bin/python benchmarks/detector_speed.py [--rows 1000000] [--online-rows 20000]
        [--repeat 5] [--baseline COMMIT]

The series are a synthetic log's loss and grad norm (``spikebench.spikes.synthetic.generate``,
seed 0, an early jump), built once and not timed. Offline: ``spikes.offline.detect`` over
both series, best of ``--repeat`` runs per rule. Online: ``SpikeMonitor`` with the default
rule fed ``--online-rows`` rows, best of ``--repeat``, in microseconds per row. Times are
the process's CPU time (``time.process_time``; the detector runs on one thread), which
other work on a shared machine disturbs far less than wall time.

``--baseline COMMIT`` also times that commit's ``spikebench`` package (``git archive``d
to a temporary folder) in a second process, alternating runs of the two so that load on
a shared machine falls on both, and prints each time's ratio this tree / the baseline.
It checks that both give the same events. No assertion on time: a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULE_NAMES = ("default", "zscore", "olmo", "olmo_online", "loss_ratio", "persistent")


def measure(rows: int, online_rows: int, repeat: int) -> dict:
    """Best times of this interpreter's ``spikebench``, and a digest of the events."""
    import numpy as np

    from spikebench import metrics as M
    from spikebench.spikes import offline
    from spikebench.spikes.monitor import SpikeMonitor
    from spikebench.spikes.synthetic import generate

    lg = generate(0, rows, early_jump=True)
    none = np.zeros(rows, dtype=bool)
    series = [offline.Series("loss", lg.steps.astype(np.int64), lg.loss, none),
              offline.Series("grad_norm", lg.steps.astype(np.int64), lg.grad_norm, none)]
    out: dict = {"offline_s": {}, "events": {}}
    for rule in RULE_NAMES:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.process_time()
            evs = offline.detect(series, rule)
            best = min(best, time.process_time() - t0)
        out["offline_s"][rule] = best
        out["events"][rule] = [[e.metric, e.onset, e.end, e.area] for e in evs]
    recs = [{M.TRAIN_LOSS: float(a), M.GRAD_NORM: float(b)}
            for a, b in zip(lg.loss[:online_rows], lg.grad_norm[:online_rows], strict=True)]
    best = float("inf")
    for _ in range(repeat):
        mon = SpikeMonitor()
        t0 = time.process_time()
        for step, rec in enumerate(recs):
            mon.update(step, rec)
        mon.finish()
        best = min(best, time.process_time() - t0)
    out["online_us_per_row"] = best / len(recs) * 1e6
    return out


def _baseline_tree(commit: str, into: Path) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "spikebench"],
                             capture_output=True, check=True).stdout
    tar = into / "tree.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")


def _child(tree: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, __file__, "--json", "--rows", str(args.rows),
            "--online-rows", str(args.online_rows), "--repeat", "1"]
    return json.loads(subprocess.run(argv, env=env, capture_output=True, text=True,
                                     check=True, cwd=tree).stdout)


def compare(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="detector-speed-") as tmp:
        base = Path(tmp)
        _baseline_tree(args.baseline, base)
        runs: dict[str, list[dict]] = {"this": [], "base": []}
        for i in range(args.repeat):  # alternate, so shared-machine load hits both
            for name in (("this", "base") if i % 2 == 0 else ("base", "this")):
                runs[name].append(_child(ROOT if name == "this" else base, args))
    best = {name: {"offline_s": {r: min(x["offline_s"][r] for x in rs) for r in RULE_NAMES},
                   "online_us_per_row": min(x["online_us_per_row"] for x in rs),
                   "events": rs[0]["events"]} for name, rs in runs.items()}
    same = best["this"]["events"] == best["base"]["events"]
    print(f"{args.rows:,} rows offline, {args.online_rows:,} online, best of {args.repeat} "
          f"alternating runs; baseline {args.baseline}; events "
          + ("identical" if same else "DIFFER"))
    total = {n: sum(b["offline_s"].values()) for n, b in best.items()}
    for r in RULE_NAMES:
        t, b = best["this"]["offline_s"][r], best["base"]["offline_s"][r]
        print(f"offline {r:<12} {t:7.3f} s  baseline {b:7.3f} s  ratio {t / b:.3f}")
    print(f"offline all rules    {total['this']:7.3f} s  baseline {total['base']:7.3f} s  "
          f"ratio {total['this'] / total['base']:.3f}")
    t, b = best["this"]["online_us_per_row"], best["base"]["online_us_per_row"]
    print(f"online default       {t:7.1f} us/row baseline {b:7.1f} us/row ratio {t / b:.3f}")
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the offline series")
    p.add_argument("--online-rows", type=int, default=20_000, help="rows fed online")
    p.add_argument("--repeat", type=int, default=5, help="runs per measurement (best kept)")
    p.add_argument("--baseline", help="a commit to compare against")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.baseline:
        return compare(args)
    res = measure(args.rows, args.online_rows, args.repeat)
    if args.json:
        print(json.dumps(res))
        return 0
    for r in RULE_NAMES:
        print(f"offline {r:<12} {res['offline_s'][r]:7.3f} s ({args.rows:,} rows)")
    print(f"online default       {res['online_us_per_row']:7.1f} us/row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
