"""Data-parallel against one process: how far two ranks' losses are from the same run.

Trains the config once in this process and once as ``--nproc`` gloo (or nccl) ranks through
``spikebench train``, with the same global batch, then prints the largest relative
difference of the training loss, grad norm and validation loss over the first ``--first``
steps and over the whole run, and each run's wall time (start-up included).

    python benchmarks/ddp_match.py --first 10            # gpt-tiny cut down, 20 steps
    python benchmarks/ddp_match.py --first 10 --set train.steps=120 \\
        --set train.eval_every=40 --set optim.grad_accum=1 --set response.kind=rollback \\
        --set response.skip_batches=15 --set faults.burst=random_bytes \\
        --set faults.at=0.5 --set faults.length=10      # the burst scenario, a rollback
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spikebench import config as cfgmod
from spikebench import metrics as M
from spikebench.train.loop import train

SMALL = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
         "data.batch_size=8", "data.max_bytes=200000", "train.eval_batches=2",
         "train.log_every=5", "train.progress=false", "train.threads=2", "optim.lr=1e-2",
         "train.steps=20", "train.eval_every=10", "optim.grad_accum=2"]


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").open()]


def worst(a: list[dict], b: list[dict], key: str, upto: int) -> float:
    return max((abs(x[key] - y[key]) / abs(x[key]) for x, y in zip(a, b, strict=True)
                if key in x and x[M.STEP] <= upto), default=float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--first", type=int, default=20)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    over = [*SMALL, *args.overrides]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        train(cfgmod.load(None, [*over, f"run.out_dir={tmp}", "run.name=one"]))
        t_one = time.perf_counter() - start
        sets = [a for o in [*over, f"run.out_dir={tmp}", "run.name=many",
                            f"train.nproc={args.nproc}"] for a in ("--set", o)]
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "spikebench", "train", *sets], check=True,
                       stderr=subprocess.DEVNULL)
        t_many = time.perf_counter() - start
        one, many = rows(Path(tmp) / "one"), rows(Path(tmp) / "many")
    last = one[-1][M.STEP]
    print(f"{args.nproc} ranks against 1 process, {last} steps, same global batch")
    print("| metric | worst relative difference, steps <= "
          f"{args.first} | worst, all {last} steps |\n|---|---|---|")
    for key in (M.TRAIN_LOSS, M.GRAD_NORM, M.VAL_LOSS):
        print(f"| {key} | {worst(one, many, key, args.first):.2e} | "
              f"{worst(one, many, key, last):.2e} |")
    print(f"wall time: 1 process {t_one:.1f} s, {args.nproc} ranks {t_many:.1f} s "
          "(start-up included)")


if __name__ == "__main__":
    main()
