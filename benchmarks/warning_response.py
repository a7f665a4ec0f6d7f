"""Acting on an early warning against acting on the spike: paired over seeds.

The regime: a small GPT (2 layers, 64 wide, fp32) at a constant LR with a planted LR
excursion that develops over steps (x``--factor`` for ``--length`` steps from 40% of the
run), so the loss climbs for a few steps before the detector's onset. Arms, on the same
seeds, each with the same warning rule recorded (``[warning]``, ``--signal``):

- ``none``: the warning logged only, no response;
- ``rollback``: rollback on the loss spike (``response.kind = "rollback"``, the default
  trigger), the warning logged only;
- ``lower_lr``: the LR scaled by ``--lr-factor`` for ``--lr-steps`` steps after each
  warning (``warning.response = "lower_lr"``).

Per run: the steps the excursion cost, from its first step to the first evaluation (every
10 steps) whose validation loss is back at the best one before it (censored at the end of
the run: "not back" counts the steps left); the final validation loss after the same steps
worked (a rollback's redone steps count in both); the loss events, the rollbacks and the
warnings, with the first warning's lead on the first loss event's onset (the warnings in
the 50 steps up to it). Paired differences (lower_lr - rollback, lower_lr - none) get the
exact sign-flip test and the 95% interval that inverts it
(:func:`spikebench.report.exact.shift_interval`; none with fewer than 6 non-zero pairs).

    python benchmarks/warning_response.py --seeds 8
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch

from spikebench import config as cfgmod
from spikebench.api.engine_warning import sinks_for
from spikebench.report.exact import shift_interval, sign_flip_p
from spikebench.train.loop import train

ARMS = ("none", "rollback", "lower_lr")


def config(args: argparse.Namespace, arm: str, seed: int) -> cfgmod.Config:
    over = [
        "model.n_layer=2", "model.n_embd=64", "model.n_head=2", "data.seq_len=64",
        "data.batch_size=8", "data.max_bytes=400000", f"train.steps={args.steps}",
        "train.eval_every=10", "train.eval_batches=4", "train.log_every=5",
        "train.threads=1", "train.progress=false", f"train.probe_every={args.probe_every}",
        f"train.seed={seed}", f"optim.lr={args.lr}", "schedule.kind=constant",
        "schedule.warmup_ratio=0.05", "faults.lr_shock_at=0.4",
        f"faults.lr_shock_factor={args.factor}", f"faults.lr_shock_steps={args.length}",
        f"warning.signal={args.signal}",
        f"warning.window={args.window}", f"warning.threshold={args.threshold}"]
    if arm == "rollback":
        over += ["response.kind=rollback", "response.every=5", "response.ring=4"]
    if arm == "lower_lr":
        over += ["warning.response=lower_lr", f"warning.lr_factor={args.lr_factor}",
                 f"warning.lr_steps={args.lr_steps}"]
    return cfgmod.load(None, over)


def one(args: argparse.Namespace, arm: str, seed: int, out: Path) -> dict:
    cfg = config(args, arm, seed)
    t = time.perf_counter()
    s = train(cfg, out / f"{arm}-{seed}", sinks=sinks_for(cfg))
    onsets = [e["onset"] for e in s["spikes"]["events"] if e["metric"] == "train/loss"
              and e["onset"] > 1]
    warned = s["warnings"]["steps"]
    start = int(0.4 * args.steps) + 1  # the excursion's first step
    evals = [(e["step"], e["val/loss"]) for e in s["evals"]]
    best = min(v for st, v in evals if 0 < st < start)
    back = [st for st, v in evals if st >= start and v <= best]
    lost = (back[0] if back else args.steps + 1) - start
    lead = None
    if onsets and warned:  # the first warning in the 50 steps before the first onset
        before = [w for w in warned if onsets[0] - 50 <= w <= onsets[0]]
        lead = onsets[0] - before[0] if before else None
    return {"final": s["final_val_loss"] if s["final_val_loss"] is not None else math.inf,
            "lost": lost, "back": bool(back), "events": len(onsets),
            "rollbacks": len(s["response"]["rollbacks"]),
            "redone": s["response"]["redone_steps"], "warnings": s["warnings"]["n"],
            "lead": lead, "seconds": time.perf_counter() - t}


def paired(name: str, a: list[float], b: list[float]) -> str:
    diffs = [x - y for x, y in zip(a, b, strict=True) if math.isfinite(x - y)]
    if len(diffs) < len(a):
        return f"{name}: {len(a) - len(diffs)} of {len(a)} pairs missed; no test"
    ci = shift_interval(diffs)
    interval = (f"no interval: {ci.why}" if ci.lo is None else
                f"95% interval {ci.lo:+.4g} to {ci.hi:+.4g}")
    return (f"{name}: mean {statistics.fmean(diffs):+.4g} ({interval}; exact sign-flip "
            f"p = {sign_flip_p(diffs):.3g}, {len(diffs)} pairs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--factor", type=float, default=8.0)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--signal", default="optim/grad_norm")
    ap.add_argument("--probe-every", type=int, default=25)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--threshold", type=float, default=6.0)
    ap.add_argument("--lr-factor", type=float, default=0.25)
    ap.add_argument("--lr-steps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    res: dict[str, list[dict]] = {a: [] for a in ARMS}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        for seed in range(args.seeds):
            for arm in ARMS:
                r = one(args, arm, seed, Path(d))
                res[arm].append(r)
                print(f"seed {seed} {arm:9s} final {r['final']:.4f}  steps lost "
                      f"{r['lost']}{'' if r['back'] else ' (not back)'}  loss events {r['events']}  rollbacks {r['rollbacks']} "
                      f"(redone {r['redone']})  warnings {r['warnings']}  lead "
                      f"{r['lead']}  {r['seconds']:.1f} s", flush=True)
    print(f"\n{args.seeds} seeds x {len(ARMS)} arms, {args.steps} steps, LR {args.lr} with "
          f"x{args.factor} for {args.length} steps from 40%; warning on {args.signal} "
          f"(window {args.window}, threshold {args.threshold}); lower_lr x{args.lr_factor} "
          f"for {args.lr_steps} steps; {time.perf_counter() - t0:.0f} s wall")
    for arm in ARMS:
        rs = res[arm]
        lost = [r["lost"] for r in rs]
        leads = [r["lead"] for r in rs if r["lead"] is not None]
        print(f"{arm:9s} final val loss mean {statistics.fmean(r['final'] for r in rs):.4f}; "
              f"steps lost mean {statistics.fmean(lost):.1f} (back {sum(r['back'] for r in rs)}"
              f"/{len(rs)}); loss events "
              f"{sum(r['events'] for r in rs)}; rollbacks {sum(r['rollbacks'] for r in rs)} "
              f"(redone steps {sum(r['redone'] for r in rs)}); warnings "
              f"{sum(r['warnings'] for r in rs)}; first-warning lead on the first onset: "
              f"{leads if leads else '-'}")
    for other in ("rollback", "none"):
        for key, what in (("lost", "steps lost"), ("final", "final val loss")):
            print(paired(f"lower_lr - {other}, {what}", [r[key] for r in res["lower_lr"]],
                         [r[key] for r in res[other]]))


if __name__ == "__main__":
    main()
