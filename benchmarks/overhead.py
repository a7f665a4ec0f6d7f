"""Harness overhead: spikebench's train() against a bare PyTorch loop, in one process.

Both loops train the same model (same init) with the same fused AdamW, LR schedule, clipping
and corpus for N steps; runs alternate so drift in machine load hits both. Prints the median
step time of each, their ratio (goal <= 1.02), and model FLOP utilisation against the peak of
a large fp32 matmul measured in the same run.

    python benchmarks/overhead.py --steps 200 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics

import torch

from spikebench import config as cfgmod
from spikebench.bench.perf import (
    bare_loop,
    matmul_peak,
    model_flops_per_step,
    spikebench_loop,
)
from spikebench.data.corpus import load_corpus
from spikebench.model import build_model
from spikebench.train.setup import resolve_device


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    cfg = cfgmod.load(None, [f"train.steps={args.steps}", "train.progress=false",
                             f"train.eval_every={args.steps}", *args.overrides])
    device = resolve_device(cfg.train.device)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)  # before the first loop, for both loops
    corpus = load_corpus(cfg)
    bare, ours = [], []
    for _ in range(args.repeats):
        bare.append(bare_loop(cfg, corpus, device))
        ours.append(spikebench_loop(cfgmod.from_dict(cfg.to_dict())))
    peak = matmul_peak(device)
    n_params = sum(p.numel() for p in build_model(cfg.model).parameters())
    flops = model_flops_per_step(cfg, n_params)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"device {device}, torch threads {torch.get_num_threads()}, model {cfg.model.preset} "
          f"({n_params / 1e6:.2f}M params), batch {cfg.data.batch_size}x{cfg.data.seq_len}, "
          f"{args.steps} steps x {args.repeats} repeats")
    print(f"bare PyTorch loop : {b * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in bare) + ")")
    print(f"spikebench train(): {o * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in ours) + ")")
    print(f"step-time ratio spikebench/bare: {o / b:.3f}  (goal <= 1.02)")
    print(f"matmul peak (fp32 1024^3): {peak / 1e9:.1f} GFLOP/s")
    print(f"MFU bare {flops / b / peak:.1%}, spikebench {flops / o / peak:.1%}")


if __name__ == "__main__":
    main()
