"""Exactly once, under chaos, at scale: >= 32 `spikebench worker` processes on one PostgreSQL
study, SIGKILLs every few seconds and one server restart.

    timeout 1200 python benchmarks/cluster_chaos.py            # 32 workers, 64 arms
    python benchmarks/cluster_chaos.py --workers 8 --arms 16     # a smaller run

A private PostgreSQL server on loopback (tests/sweep/pgserver.py), a study of a light
command trainer (a CSV of ``--rows`` rows written over ``--sleep`` seconds: the load is the
coordination, not training), one seed per arm. Every ``--kill-every`` seconds a random
worker in the middle of a trial is killed with SIGKILL and a new one started in its place
(``--kills`` in all);
once ``--restart-at`` of the arms are done the server restarts (``pg_ctl restart -m
fast``). Printed: the time to drain, the kills, the peak number of connections to the
study's database (pg_stat_activity, sampled every 0.5 s), and the database transactions
(commits + rollbacks in pg_stat_database: every worker's traffic, idle polls and
heartbeats included; this benchmark's own polling, counted before the workers start, taken
off) per finished arm and per second. Exit 1 unless every arm is COMPLETE
exactly once, nothing is left running or waiting, the storage counts the target, the report
made from the storage alone (``spikebench report --storage``) counts the same trials, and
no worker died except those killed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sweep"))

from chaos import create, run_chaos, write_study  # noqa: E402
from pgserver import postgres_server  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--arms", type=int, default=64)
    ap.add_argument("--rows", type=int, default=300, help="CSV rows each trial logs")
    ap.add_argument("--sleep", type=float, default=2.0, help="seconds each trial sleeps")
    ap.add_argument("--kill-every", type=float, default=5.0, help="seconds between SIGKILLs")
    ap.add_argument("--kills", type=int, default=12, help="SIGKILLs in all (then it drains)")
    ap.add_argument("--restart-at", type=float, default=0.4,
                    help="share of the arms done when the server restarts")
    ap.add_argument("--heartbeat", type=int, default=2, help="[study] heartbeat_s")
    ap.add_argument("--grace", type=int, default=10, help="[study] heartbeat_grace_s")
    ap.add_argument("--limit", type=float, default=1000, help="seconds before giving up")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the workers' folders")
    args = ap.parse_args()

    # A worker is ~0.1 GB; its trial's process, which imports torch, ~0.3 GB more.
    need = 0.45 * args.workers
    avail = int(Path("/proc/meminfo").read_text().split("MemAvailable:")[1].split()[0]) / 2**20
    if avail < need + 2:
        print(f"--workers {args.workers}: needs ~{need:.0f} GB of memory, {avail:.0f} GB "
              "available; use fewer workers", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="cluster-chaos-"))
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip() or "no git"
    print(f"commit {commit}; {args.workers} workers, {args.arms} arms x 1 seed, trials of "
          f"{args.rows} rows over {args.sleep:g} s, {args.kills} SIGKILLs {args.kill_every:g} s "
          "apart, "
          f"heartbeat {args.heartbeat} s, grace {args.grace} s", flush=True)
    try:
        # Each worker holds a few pooled connections and its gate's: room for all of them.
        with postgres_server(extra_conf=f"max_connections = {8 * args.workers + 20}") as url:
            sweep = write_study(folder, name="chaos", arms=args.arms, rows=args.rows,
                                sleep_s=args.sleep, heartbeat_s=args.heartbeat,
                                grace_s=args.grace)
            create(sweep, url, folder)
            out = run_chaos(url, folder, "chaos", workers=args.workers,
                            kill_every_s=args.kill_every, max_kills=args.kills,
                            restart_at=args.restart_at,
                            limit_s=args.limit, seed=args.seed, report=True,
                            log=lambda s: print(s, flush=True))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    done = out.target
    print(f"drained in {out.drain_s:.0f} s; {out.kills} workers killed, server restarted: "
          f"{out.restarted}")
    print(f"trials in the study: {out.trials} for {done} arms (the rest failed as stale "
          "and retried)")
    print(f"peak connections to the study's database: {out.peak_connections} "
          f"({out.peak_connections / args.workers:.2f} per worker)")
    print(f"database transactions: {out.transactions} = {out.transactions / done:.0f} per "
          f"finished arm, {out.transactions / out.drain_s:.0f}/s")
    if out.problems:
        print("NOT exactly once:\n  " + "\n  ".join(out.problems))
        return 1
    print(f"exactly once: each of the {done} arms COMPLETE once; the storage counts "
          f"{out.storage_done}/{out.target}; no worker died but the {out.kills} killed; "
          f"`spikebench report --storage` counts the same trials: {out.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
