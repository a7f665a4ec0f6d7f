"""Step time of each precision mode on CPU: fp32, emulated bf16/fp16, real bf16 autocast.

Every mode trains the same model (same init) on the same batch with a fused AdamW: forward
and loss inside ``precision.autocast()``, backward, optimizer step; fp16 goes through the
GradScaler as the trainer does. Modes take turns over ``--rounds`` rounds so that drift in
machine load hits all of them; real autocast is slow on CPU, so it runs fewer steps a round.
Also timed: emulated bf16 with ``flash_rounding=False`` (attention rounded at its inputs and
output only). Prints the median ms/step of each mode and its ratio to fp32.

    python benchmarks/precision_speed.py --threads 1
    python benchmarks/precision_speed.py --preset gpt-small --batch 8 --steps 5 --real-steps 2
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from spikebench import config as cfgmod
from spikebench.config import PrecisionConfig
from spikebench.model import build_model
from spikebench.precision import EmulatedAutocast, Precision, make_precision


class IOOnlyAttention(Precision):
    """Emulated bf16 whose attention is rounded at its inputs and output only."""

    def autocast(self):
        return EmulatedAutocast(torch.bfloat16, flash_rounding=False)


def time_mode(model, batch, prec, steps: int) -> list[float]:
    """Seconds per train step for ``steps`` steps, after one warm-up step."""
    model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x, y = batch
    times = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        with prec.autocast():
            _, loss = model(x, y)
        if prec.scaler is not None:
            prec.scaler.scale(loss).backward()
            prec.scaler.unscale_(opt)
            prec.scaler.step(opt)
            prec.scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        if i:  # the first step pays for allocations and optimizer state
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="gpt-tiny")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per fast mode and round")
    ap.add_argument(
        "--real-steps", type=int, default=2, help="the same under real autocast; 0 skips it"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--real-fp16", action="store_true", help="also time real fp16 autocast")
    ap.add_argument("--threads", type=int, default=0, help="torch threads; 0 keeps the default")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = cfgmod.load(None, [f"model.preset={args.preset!r}"])
    torch.manual_seed(0)
    model = build_model(cfg.model)
    idx = torch.randint(0, cfg.model.vocab_size, (args.batch, args.seq + 1))
    batch = (idx[:, :-1], idx[:, 1:])
    device = torch.device("cpu")

    modes = [
        (make_precision(PrecisionConfig(mode="fp32"), device), args.steps),
        (make_precision(PrecisionConfig(mode="bf16", impl="emulated"), device), args.steps),
        (
            IOOnlyAttention("bf16", "emulated", "bf16 (emulated, io-only attention)", None),
            args.steps,
        ),
        (make_precision(PrecisionConfig(mode="fp16", impl="emulated"), device), args.steps),
        (make_precision(PrecisionConfig(mode="bf16", impl="real"), device), args.real_steps),
    ]
    if not args.real_steps:
        modes.pop()
    elif args.real_fp16:
        modes.append(
            (make_precision(PrecisionConfig(mode="fp16", impl="real"), device), args.real_steps)
        )
    print(
        f"{args.preset} ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params), "
        f"batch {args.batch} x seq {args.seq}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}"
    )
    times: list[list[float]] = [[] for _ in modes]
    for _ in range(args.rounds):
        for (prec, steps), out in zip(modes, times, strict=True):
            out.extend(time_mode(model, batch, prec, steps))
    print(f"{'mode':36s} {'steps':>5s} {'ms/step':>9s} {'x fp32':>7s}")
    base = statistics.median(times[0])
    for (prec, _), ts in zip(modes, times, strict=True):
        sec = statistics.median(ts)
        print(f"{prec.label:36s} {len(ts):5d} {sec * 1e3:9.1f} {sec / base:7.2f}")


if __name__ == "__main__":
    main()
