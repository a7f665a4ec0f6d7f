"""The run API's cost: a hand-written PyTorch loop with and without ``spikebench.init`` /
``run.log`` every step, in one process.

Both loops train the same model (same init, data and schedule) for N steps; the API loop
logs loss, grad norm and LR (device tensors, read back every ``--sync-every`` steps) and
finishes the run (summary and scores). After a discarded warm-up pair they run back to back
``--repeats`` times; prints each run's step time and the ratio of mean step times (goal
<= 1.02) with the exact 95% sign-flip interval over the pairs, and the time spent inside
the API's calls per step with the ratio it implies (its worst run over the fastest bare run
as the bound).

    python benchmarks/api_overhead.py --steps 200 --repeats 10
    python benchmarks/api_overhead.py --warning grad_norm   # with an early-warning rule
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

import spikebench
from spikebench import config as cfgmod
from spikebench.bench.perf import bare_loop
from spikebench.data.corpus import load_corpus
from spikebench.report.exact import relative_interval
from spikebench.train.setup import resolve_device


def api_loop(cfg, corpus, device, sync_every: int, warning: str | None = None
             ) -> tuple[float, float]:
    """The bare loop logging to a run: seconds per step, the run's finish included, and of
    those the seconds spent inside ``run.log`` and ``run.finish`` (the API's own host
    work, timed around each call: far less noisy than a difference of two loops)."""
    inside = 0.0

    def log(s, loss, gn, lr):
        nonlocal inside
        t = time.perf_counter()
        run.log(s, loss=loss, grad_norm=gn, lr=lr)
        inside += time.perf_counter() - t

    with tempfile.TemporaryDirectory() as d:
        run = spikebench.init(run_dir=f"{d}/run", sync_every=sync_every, device=device,
                              warning={"signal": warning} if warning else None)
        per_step = bare_loop(cfg, corpus, device, on_step=log)
        t0 = time.perf_counter()
        run.finish()  # the last read-back, the summary and its scores count too
        fin = time.perf_counter() - t0
        return per_step + fin / cfg.train.steps, (inside + fin) / cfg.train.steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--sync-every", type=int, default=10)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--warning", metavar="SIGNAL", help="run.log with an early-warning rule "
                    "on this logged metric (the rule's default fields), e.g. grad_norm")
    args = ap.parse_args()
    cfg = cfgmod.load(None, [f"train.steps={args.steps}", *args.overrides])
    device = resolve_device(cfg.train.device)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    corpus = load_corpus(cfg)
    short = cfgmod.from_dict(cfg.to_dict())
    short.train.steps = min(20, cfg.train.steps)
    bare_loop(short, corpus, device)  # warm-up pair: lazy imports, first allocations
    api_loop(short, corpus, device, args.sync_every, args.warning)
    bare, api, inside = [], [], []
    for _ in range(args.repeats):
        bare.append(bare_loop(cfg, corpus, device))
        total, own = api_loop(cfg, corpus, device, args.sync_every, args.warning)
        api.append(total)
        inside.append(own)
    b, a = statistics.fmean(bare), statistics.fmean(api)
    ci = relative_interval(api, bare)
    print(f"device {device}, torch threads {torch.get_num_threads()}, model "
          f"{cfg.model.preset}, batch {cfg.data.batch_size}x{cfg.data.seq_len}, "
          f"{args.steps} steps x {args.repeats} pairs, sync every {args.sync_every}, "
          f"warning rule {'on ' + args.warning if args.warning else 'off'}")
    print(f"bare loop      : {b * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in bare) + ")")
    print(f"with run.log() : {a * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in api) + ")")
    interval = (f"no interval: {ci.why}" if ci.lo is None else
                f"95% interval {1 + ci.lo:.3f} to {1 + ci.hi:.3f}, {ci.method}")
    print(f"step-time ratio api/bare: {a / b:.3f}  ({interval}; goal <= 1.02)")
    # The API's own host time over the bare step: the ratio it implies, and its worst run.
    own = statistics.fmean(inside)
    print(f"inside run.log()+finish(): {own * 1e6:.1f} us/step (worst run "
          f"{max(inside) * 1e6:.1f}), {own / b:.2%} of a bare step: implied ratio "
          f"{1 + own / b:.4f} (worst {1 + max(inside) / min(bare):.4f}; goal <= 1.02)")


if __name__ == "__main__":
    main()
