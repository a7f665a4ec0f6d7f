"""Example runs to compare: ``python -m spikebench.compare.example DIR`` writes twelve small
synthetic runs as Lightning's CSVLogger leaves them, for the worked example of
``docs/compare.md`` and the command line's tests.

``DIR/lightning_logs/version_<n>/metrics.csv`` (step, epoch, train_loss every step,
val_loss every 100 steps) with ``hparams.yaml`` (``lr``, ``gradient_clip_val``, ``seed``):
six seeds without clipping, whose losses carry planted spikes (three per run), and the same
six seeds with clipping at 1.0, with one planted spike per run, a slightly faster descent,
and 1,200 steps instead of 1,000 (so a comparison cuts them to the shorter runs' steps).
No training happens: the curves are drawn from a seeded generator.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

STEPS = {False: 1000, True: 1200}
SPIKES = {False: 3, True: 1}
TAU = {False: 150.0, True: 125.0}  # the loss's time constant, in steps
VAL_EVERY = 100


def _loss(step: int, tau: float, spikes: list[int]) -> float:
    loss = 2.2 + 3.0 * math.exp(-step / tau)
    for at in spikes:
        if at <= step < at + 5:
            loss += 1.2 * (1 - (step - at) / 5)
    return loss


def write_run(folder: Path, *, seed: int, clip: bool) -> None:
    rng = random.Random(seed * 2 + int(clip))
    tau = TAU[clip] * (1 + 0.04 * rng.gauss(0, 1))
    spikes = sorted(rng.sample(range(150, 950, 10), SPIKES[clip]))
    lines = ["step,epoch,train_loss,val_loss"]
    for step in range(STEPS[clip] + 1):
        lines.append(f"{step},0,{_loss(step, tau, spikes) + rng.gauss(0, 0.02):.5f},")
        if step and step % VAL_EVERY == 0:
            lines.append(f"{step},0,,{_loss(step, tau, []) + 0.05:.5f}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")
    (folder / "hparams.yaml").write_text(
        f"lr: 0.003\ngradient_clip_val: {'1.0' if clip else 'null'}\nseed: {seed}\n")


def write_runs(out: str | Path, seeds: int = 6) -> list[Path]:
    """Write the example runs under ``out/lightning_logs``; returns their folders."""
    folders = []
    for clip in (False, True):
        for seed in range(seeds):
            folder = Path(out) / "lightning_logs" / f"version_{len(folders)}"
            write_run(folder, seed=seed, clip=clip)
            folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spikebench.compare.example",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="folder to write the runs into (its lightning_logs/)")
    ap.add_argument("--seeds", type=int, default=6, help="seeds per setting (default 6)")
    args = ap.parse_args(argv)
    folders = write_runs(args.out, args.seeds)
    print(f"{len(folders)} runs in {Path(args.out) / 'lightning_logs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
