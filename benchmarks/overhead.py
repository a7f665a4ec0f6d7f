"""Harness overhead: spikebench's train() against a bare PyTorch loop, in one process.

Both loops train the same model (same init) with the same fused AdamW, LR schedule, clipping
and corpus for N steps. After a discarded warm-up pair they run back to back ``--repeats``
times, so drift in machine load hits both members of a pair. Prints each run's step time,
the ratio of mean step times (goal <= 1.02) with the exact 95% sign-flip interval over the
pairs (the report's test for paired seeds), and model FLOP utilisation against the peak of a
large fp32 matmul measured in the same run.

    python benchmarks/overhead.py --steps 100 --repeats 12
    python benchmarks/overhead.py --steps 100 --repeats 12 --set train.probe_every=100000
"""

from __future__ import annotations

import argparse
import statistics

import torch

from spikebench import config as cfgmod
from spikebench.bench.perf import matmul_peak, model_flops_per_step, paired_runs
from spikebench.model import build_model
from spikebench.report.exact import relative_interval
from spikebench.train.setup import resolve_device


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    cfg = cfgmod.load(None, [f"train.steps={args.steps}", "train.progress=false",
                             f"train.eval_every={args.steps}", *args.overrides])
    device = resolve_device(cfg.train.device)
    bare, ours = paired_runs(cfg, args.repeats)
    peak = matmul_peak(device)
    n_params = sum(p.numel() for p in build_model(cfg.model).parameters())
    flops = model_flops_per_step(cfg, n_params)
    b, o = statistics.fmean(bare), statistics.fmean(ours)
    ci = relative_interval(ours, bare)
    print(f"device {device}, torch threads {torch.get_num_threads()}, model {cfg.model.preset} "
          f"({n_params / 1e6:.2f}M params), batch {cfg.data.batch_size}x{cfg.data.seq_len}, "
          f"{args.steps} steps x {args.repeats} pairs, probes every {cfg.train.probe_every}")
    print(f"bare PyTorch loop : {b * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in bare) + ")")
    print(f"spikebench train(): {o * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in ours) + ")")
    if ci.lo is None:
        interval = f"no interval: {ci.why}"
    else:
        interval = f"95% interval {1 + ci.lo:.3f} to {1 + ci.hi:.3f}, {ci.method}"
    print(f"step-time ratio spikebench/bare: {o / b:.3f}  ({interval}; goal <= 1.02)")
    print(f"matmul peak (fp32 1024^3): {peak / 1e9:.1f} GFLOP/s")
    print(f"MFU bare {flops / b / peak:.1%}, spikebench {flops / o / peak:.1%}")


if __name__ == "__main__":
    main()
