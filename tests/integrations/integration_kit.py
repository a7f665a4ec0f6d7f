"""What the integration tests share: a learnable token stream (a fixed random Markov chain
over 64 tokens, built here: no download), a tiny GPT-2 from its config, an LR schedule
with a planted shock, and the checks of a run folder against the offline scoring."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from spikebench.runs.text import read_log
from spikebench.spikes.offline import score_log

VOCAB, BLOCK = 64, 32


def sequences(n: int, seed: int) -> torch.Tensor:
    """``n`` sequences of BLOCK tokens: each token one of 3 successors of the previous."""
    succ = torch.randint(0, VOCAB, (VOCAB, 3), generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    x = torch.empty(n, BLOCK, dtype=torch.long)
    x[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for t in range(1, BLOCK):
        x[:, t] = succ[x[:, t - 1], torch.randint(0, 3, (n,), generator=g)]
    return x


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int):
        self.x = sequences(n, seed)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.x[i], "labels": self.x[i]}


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=VOCAB,
                                      n_positions=BLOCK, bos_token_id=0, eos_token_id=0))


def shock(at: int, factor: float = 100.0, length: int = 2):
    """A LambdaLR factor: ``factor`` x the LR for ``length`` optimizer steps from the
    ``at``-th (1-based, as the trainers count steps)."""
    return lambda i: factor if at - 1 <= i < at - 1 + length else 1.0


def folder(run_dir: Path) -> tuple[list[dict], dict]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return rows, json.loads((run_dir / "summary.json").read_text())


def loss_onsets(summary: dict) -> list[int]:
    return [e["onset"] for e in summary["spikes"]["events"] if e["metric"] == "train/loss"]


def offline_loss_onsets(run_dir: Path) -> list[int]:
    """The loss events ``spikebench spikes <run>/metrics.jsonl`` finds."""
    res = score_log(read_log(run_dir / "metrics.jsonl"))
    return [e["onset"] for e in res["events"] if e["metric"] == "loss"]


def bigram_module(lr: float, shock_at: int | None, val: bool = True):
    """A LightningModule: a bigram model of the token stream (embedding, linear), AdamW with
    a LambdaLR stepped every optimizer step, the planted shock at ``shock_at``; it logs
    ``val_loss`` in validation."""
    import lightning.pytorch as pl
    import torch.nn.functional as F

    class Bigram(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.emb = torch.nn.Embedding(VOCAB, 32)
            self.out = torch.nn.Linear(32, VOCAB)

        def _loss(self, batch):
            x = batch["input_ids"]
            logits = self.out(torch.tanh(self.emb(x[:, :-1])))
            return F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))

        def training_step(self, batch, batch_idx):
            return self._loss(batch)

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", self._loss(batch))

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=lr)
            f = shock(shock_at) if shock_at else (lambda i: 1.0)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, f)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    m = Bigram()
    if not val:
        m.validation_step = None
    return m


def loader(n: int, seed: int, batch: int = 8):
    return torch.utils.data.DataLoader(Tokens(n, seed), batch_size=batch, shuffle=False)
