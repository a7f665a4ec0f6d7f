"""Harness overhead: spikebench's train() against a bare PyTorch loop, in one process.

Both loops train the same model (same init) with the same fused AdamW, LR schedule, clipping
and corpus for N steps; runs alternate so drift in machine load hits both. Prints the median
step time of each, their ratio (goal <= 1.02), and model FLOP utilisation against the peak of
a large fp32 matmul measured in the same run.

    python benchmarks/overhead.py --steps 200 --repeats 3
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time

import torch

from spikebench import config as cfgmod
from spikebench.data.corpus import load_corpus
from spikebench.data.seeds import derive_seed
from spikebench.model import build_model
from spikebench.train.loop import train
from spikebench.train.optim import make_optimizer
from spikebench.train.schedule import lr_factor
from spikebench.train.setup import resolve_device


def bare_loop(cfg, corpus, device) -> float:
    """The loop a person would write by hand; returns seconds per step."""
    torch.manual_seed(derive_seed(cfg.train.seed, "init"))
    model = build_model(cfg.model).to(device)
    opt = make_optimizer(model, cfg)
    data = corpus.train if isinstance(corpus.train, torch.Tensor) else torch.from_numpy(
        corpus.train[: 10_000_000].astype("int64"))
    B, T = cfg.data.batch_size, cfg.data.seq_len
    gen = torch.Generator().manual_seed(0)
    arange = torch.arange(T + 1)
    clip = cfg.optim.clip if cfg.optim.clip is not None else math.inf
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(cfg.train.steps):
        lr = cfg.optim.lr * lr_factor(i, cfg.train.steps, cfg.schedule)
        for g in opt.param_groups:
            g["lr"] = lr
        off = torch.randint(0, len(data) - T - 1, (B,), generator=gen)
        win = data[off[:, None] + arange].long().to(device, non_blocking=True)
        _, loss = model(win[:, :-1], win[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / cfg.train.steps


def spikebench_loop(cfg) -> float:
    with tempfile.TemporaryDirectory() as d:
        cfg.run.out_dir = d
        summary = train(cfg)
    return summary["seconds"] / summary["steps"]


def matmul_peak(device, n=1024, reps=10) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - t0)


def model_flops_per_step(cfg, n_params) -> float:
    # nanoGPT/PaLM estimate: 6N per token plus the attention score and value matmuls.
    m, T = cfg.model, cfg.data.seq_len
    per_token = 6 * n_params + 12 * m.n_layer * m.n_embd * T
    return per_token * T * cfg.data.batch_size


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
