"""Chaos on a shared study: many `spikebench worker` processes on one PostgreSQL study of a
light command trainer, random workers killed with SIGKILL (each replaced, so the study can
drain), and the database server restarted once mid-study. Then the storage is checked:
every planned arm COMPLETE exactly once, nothing left running or waiting, the storage's
own count at the target, and no worker dead except those killed.

Used by ``tests/sweep/test_chaos.py`` (a few workers, seconds) and
``benchmarks/cluster_chaos.py`` (32 and more, with the load on the database measured).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import TrialState
from pgserver import psql, restart

from spikebench.sweep.storage import make_storage
from spikebench.sweep.studies import count_done, load_spec

# The trainer: a CSV of `rows` rows, written over `sleep_s` seconds; imports nothing heavy.
TRAINER = '''\
import csv, json, sys, time
p = json.load(open(sys.argv[1]))
rows, sleep_s = int(sys.argv[2]), float(sys.argv[3])
with open("log.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["step", "loss", "val_loss"])
    for step in range(1, rows + 1):
        loss = 3.0 / (1 + step * p["lr"]) + 0.5
        w.writerow([step, loss, loss + 0.1 if step % 50 == 0 else ""])
        if step % 50 == 0:
            f.flush()
            time.sleep(sleep_s * 50 / rows)
'''


def write_study(folder: Path, *, name: str, arms: int, rows: int = 200, sleep_s: float = 1.0,
                heartbeat_s: int = 1, grace_s: int = 4, retry_s: float = 60) -> Path:
    """A sweep file of ``arms`` arms (a grid over the trainer's ``lr``), one seed each."""
    script = folder / "trainer.py"
    script.write_text(TRAINER)
    lrs = [round(0.01 * (k + 1), 4) for k in range(arms)]
    sweep = folder / f"{name}.toml"
    sweep.write_text(f"""
[study]
name = "{name}"
target_loss = 0.9
seeds = [0]
objective = "single"
pruner = "none"
heartbeat_s = {heartbeat_s}
heartbeat_grace_s = {grace_s}
storage_retry_s = {retry_s}
[trainer]
command = [{json.dumps(sys.executable)}, "{script}", "{{params_file}}", "{rows}", "{sleep_s}"]
log = "log.csv"
steps = {rows}
eval_every = 50
[config]
lr = {lrs[0]}
[comparison]
baseline = {{}}
recipe = false
grid = {{ lr = {json.dumps(lrs)} }}
""")
    return sweep


def spikebench(*args: str) -> list[str]:
    return [sys.executable, "-m", "spikebench", *args]


def create(sweep: Path, url: str, folder: Path) -> None:
    """`spikebench sweep --jobs 0`: the study and its enqueued plan, for workers."""
    done = subprocess.run(spikebench("sweep", str(sweep), "--storage", url, "--jobs", "0",
                                     "--results", str(folder / "creator")),
                          cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@dataclass
class Outcome:
    drain_s: float
    kills: int
    restarted: bool
    peak_connections: int
    transactions: int  # the workers' (and the proxy's): this harness's own taken off
    trials: int  # trials in the study at the end: retries and failed ones included
    per_arm: Counter
    arms: int
    storage_done: int
    target: int
    left: dict  # state name -> trials neither finished nor failed
    timed_out: bool = False
    states: dict = field(default_factory=dict)  # state name (lower case) -> trials
    report: dict | None = None  # the same, as `spikebench report --storage` counts them
    crashed: list[str] = field(default_factory=list)  # workers that died on their own

    @property
    def problems(self) -> list[str]:
        out = [f"arm {a!r}: {n} COMPLETE trials" for a, n in sorted(self.per_arm.items())
               if n != 1]
        missing = self.arms - len(self.per_arm)
        out += [f"{missing} arm(s) with no COMPLETE trial"] if missing else []
        out += [f"the storage counts {self.storage_done} done, target {self.target}"] if (
            self.storage_done != self.target) else []
        out += [f"left {self.left}"] if self.left else []
        out += [f"worker died on its own: {c}" for c in self.crashed]
        out += ["the database was not restarted"] if not self.restarted else []
        out += [f"not drained after {self.drain_s:.0f} s"] if self.timed_out else []
        out += [f"the report counts {self.report}, the storage {self.states}"] if (
            self.report is not None and self.report != self.states) else []
        return out


def _stat(url: str) -> tuple[int, int]:
    """(connections to the study's database now, its commits + rollbacks so far)."""
    out = psql(url, "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = "
                    "current_database()), xact_commit + xact_rollback FROM pg_stat_database "
                    "WHERE datname = current_database();")
    conns, xacts = out.strip().split("|")
    return int(conns) - 1, int(xacts)  # less psql's own connection


def report_counts(url: str, name: str, folder: Path) -> dict:
    """Trials by state as `spikebench report --storage URL --study NAME` states them (its
    header: "N trials (n complete, m fail)"), made from the storage alone."""
    made = subprocess.run(spikebench("report", "--storage", url, "--study", name, "--out",
                                     str(folder / "report")),
                          cwd=folder, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    text = next((folder / "report").rglob("report.md")).read_text()  # OUT/<study>/
    n, states = re.search(r"(\d+) trials \(([^)]*)\)", text).groups()
    counts = {s: int(k) for k, s in (part.split(" ", 1) for part in states.split(", "))}
    assert sum(counts.values()) == int(n), text[:500]
    return counts


def run_chaos(url: str, folder: Path, name: str, *, workers: int,
              kill_every_s: float | None = None, max_kills: int = 10**6,
              kill_at: tuple[int, ...] = (),
              restart_at: float = 0.4, limit_s: float = 600, seed: int = 0,
              worker_url: str | None = None, report: bool = False, log=print) -> Outcome:
    """Run ``workers`` workers until the study drains. A random worker in the middle of a
    trial is killed (SIGKILL) and replaced every ``kill_every_s`` seconds (``max_kills`` in
    all), and once as the number of finished trials reaches each of ``kill_at`` (chaos
    paced by progress, whatever the machine's speed); once ``restart_at`` of the target is
    done the server restarts (``pg_ctl restart -m fast``). Kills stop once the target is
    reached. ``worker_url``: the storage the workers take (a gRPC proxy before ``url``).
    ``report``: check the counts of the report made from the storage alone."""
    rng = random.Random(seed)
    storage = make_storage(url)
    study = optuna.load_study(study_name=name, storage=storage)
    target = study.user_attrs["target_trials"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    procs: dict[int, subprocess.Popen] = {}
    killed: set[int] = set()
    serial = [0]

    def start() -> None:
        k = serial[0]
        serial[0] += 1
        out = folder / f"w{k:03d}"
        out.mkdir()
        with open(out / "stderr.log", "w") as err:
            procs[k] = subprocess.Popen(
                spikebench("worker", "--storage", worker_url or url, "--study", name,
                           "--results", str(out)),
                cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=err)

    # This loop's own reads (the study, the server's counters) are transactions too: counted
    # over a few rounds before any worker starts, and taken off the total below.
    _, xacts0 = _stat(url)
    for _ in range(8):
        count_done(study, study.get_trials(deepcopy=False))
        _, xacts = _stat(url)
    own, loops = (xacts - xacts0) / 8, 0
    xacts0 = xacts
    began = time.monotonic()
    for _ in range(workers):
        start()
    peak, restarted, kills, next_kill = 0, False, 0, began + (kill_every_s or 0)
    timed_out = False
    try:
        while True:
            now = time.monotonic()
            if now - began > limit_s:
                timed_out = True
                break
            try:
                conns, _ = _stat(url)
                peak = max(peak, conns)
            except RuntimeError:
                pass  # restarting
            trials = study.get_trials(deepcopy=False)
            done = count_done(study, trials)
            loops += 1
            if not restarted and done >= restart_at * target:
                log(f"restarting PostgreSQL at {done}/{target} done")
                restart(url, "fast")
                restarted = True
            alive = [k for k, p in procs.items() if p.poll() is None]
            due = kill_every_s is not None and now >= next_kill and kills < max_kills
            due |= bool(kill_at) and done >= kill_at[0]
            # Only a worker in the middle of a trial (its folder has no result yet): a kill
            # must cost a trial, else it tests nothing. None: the kill waits for one.
            busy = [k for k in alive if done < target and due and any(
                not (d / "result.json").exists()
                for d in (folder / f"w{k:03d}" / name / "trials").glob("*"))]
            if busy:
                if kill_at and done >= kill_at[0]:
                    kill_at = kill_at[1:]
                victim = rng.choice(busy)
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                killed.add(victim)
                kills += 1
                start()
                next_kill = now + (kill_every_s or 0)
            if not alive and done >= target:
                break
            time.sleep(0.5)
        drain = time.monotonic() - began
    finally:
        for k, p in procs.items():
            if p.poll() is None:  # still running at the end (timed out): not a crash
                p.kill()
                p.wait()
                killed.add(k)
    _, xacts1 = _stat(url)
    trials = study.get_trials(deepcopy=False)
    per_arm = Counter(t.user_attrs.get("arm") for t in trials if t.state == TrialState.COMPLETE)
    left = Counter(t.state.name for t in trials if not t.state.is_finished())
    crashed = [f"w{k:03d} exit {p.returncode}: "
               + (folder / f"w{k:03d}" / "stderr.log").read_text()[-400:]
               for k, p in procs.items() if k not in killed and p.returncode != 0]
    return Outcome(drain_s=drain, kills=kills, restarted=restarted, peak_connections=peak,
                   transactions=round(xacts1 - xacts0 - own * (loops + 1)), trials=len(trials),
                   per_arm=per_arm, arms=len(load_spec(study).arms),
                   storage_done=count_done(study, trials), target=target, left=dict(left),
                   crashed=crashed, timed_out=timed_out,
                   states=dict(Counter(t.state.name.lower() for t in trials)),
                   report=report_counts(url, name, folder) if report else None)
