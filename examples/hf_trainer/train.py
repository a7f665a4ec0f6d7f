"""A Hugging Face Trainer run logged to spikebench: a tiny GPT-2 built from its config (no
hub download), trained on bytes of Python's own standard library.

Inside a spikebench sweep the parameters (lr, warmup, clip), the seed and the run folder
come from the sweep (``spikebench.init``); run alone it uses the defaults below. The
packaged callback (``spikebench.integrations.hf``) logs each step and evaluation to the run
and stops the Trainer when the sweep prunes the trial.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import spikebench
from spikebench.integrations.hf import SpikebenchCallback

BLOCK = 32


class Bytes(torch.utils.data.Dataset):
    def __init__(self, data: torch.Tensor, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.starts = torch.randint(0, len(data) - BLOCK - 1, (n,), generator=g)
        self.data = data

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        x = self.data[self.starts[i]: self.starts[i] + BLOCK].long()
        return {"input_ids": x, "labels": x}


def corpus() -> torch.Tensor:
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]
    return torch.frombuffer(bytearray(b"".join(f.read_bytes() for f in files)), dtype=torch.uint8)


def main() -> None:
    run = spikebench.init(params={"lr": 3e-3, "warmup": 0, "clip": 0.0, "steps": 20},
                          sync_every=1)
    p = run.params
    torch.manual_seed(run.seed)
    data = corpus()
    split = int(len(data) * 0.9)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=BLOCK, n_embd=32,
                                       n_layer=1, n_head=2))
    args = TrainingArguments(
        output_dir=str(run.dir / "hf"), max_steps=int(p["steps"]), learning_rate=p["lr"],
        warmup_steps=int(p["warmup"]), max_grad_norm=p["clip"] or 1e9,
        per_device_train_batch_size=8, logging_steps=1, eval_strategy="steps",
        eval_steps=max(1, int(p["steps"]) // 2), per_device_eval_batch_size=8,
        save_strategy="no", report_to=[], use_cpu=True, seed=run.seed,
        disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args,
                      train_dataset=Bytes(data[:split], 10_000, run.seed),
                      eval_dataset=Bytes(data[split:], 32, 0),
                      callbacks=[SpikebenchCallback(run)])
    with run:
        trainer.train()


if __name__ == "__main__":
    main()
