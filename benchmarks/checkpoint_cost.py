"""What exact checkpoints cost: size on disk, save time, and their share of training time.

Trains a preset for ``--steps`` steps with ``train.checkpoint_every`` and reads the run's
summary (``checkpoints``: how many were saved, the last one's bytes, total save seconds;
save time is off the trial's clock, like evaluation), then loads the newest checkpoint back
and times that. Prints one line per preset.

    python benchmarks/checkpoint_cost.py
    python benchmarks/checkpoint_cost.py --presets gpt-tiny gpt-small --steps 40 --every 10
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from spikebench import config as cfgmod
from spikebench.train import checkpoint
from spikebench.train.loop import train


def measure(preset: str, steps: int, every: int, threads: int, out: Path) -> dict:
    cfg = cfgmod.load(None, [f"model.preset={preset}", f"train.steps={steps}",
                             f"train.checkpoint_every={every}", f"train.threads={threads}",
                             "train.progress=false", f"run.out_dir={out}", f"run.name={preset}",
                             "train.eval_every=1000000", "train.eval_batches=1"])
    summary = train(cfg)
    ck = summary["checkpoints"]
    start = time.perf_counter()
    checkpoint.load_latest(out / preset)
    load_s = time.perf_counter() - start
    return {"preset": preset, "params": sum(
        p.numel() for p in torch.load(checkpoint.saved(out / preset)[0],
                                      weights_only=True)["model"].values()),
            "saved": ck["saved"], "mb": ck["bytes"] / 1e6, "save_ms": 1e3 * ck["seconds"] /
            max(1, ck["saved"]), "load_ms": 1e3 * load_s, "train_s": summary["seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["gpt-tiny", "gpt-small"])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            r = measure(preset, args.steps, args.every, args.threads, Path(tmp))
            per_step = r["train_s"] / args.steps
            print(f"{r['preset']}: {r['params']:,} parameters, checkpoint {r['mb']:.2f} MB "
                  f"({r['mb'] * 1e6 / r['params']:.1f} bytes/parameter), save "
                  f"{r['save_ms']:.0f} ms, load {r['load_ms']:.0f} ms; a save costs "
                  f"{r['save_ms'] / 1e3 / per_step:.1f} training steps "
                  f"({1e3 * per_step:.0f} ms/step)")


if __name__ == "__main__":
    main()
