"""A nanoGPT-style training script that knows nothing of spikebench.

It reads its parameters from a JSON file (``--params``), trains a tiny character-level
GPT on a small embedded corpus, and writes a CSV log (``step,loss,grad_norm,lr,val_loss``,
the validation loss every ``eval_every`` steps). A ``[trainer]`` table in a sweep file runs
it per seed; spikebench reads the CSV, scores it and prunes from it. See README.md.

    python train.py --params params.json --seed 0 --out log.csv

Under torchrun it trains data-parallel (DDP, gloo): the same initial weights on every rank,
a different stream of batches per rank (seed + rank), and only rank 0 writes the log.

    torchrun --standalone --nproc_per_node=2 train.py --params params.json --out log.csv
"""

import argparse
import csv
import json
import math
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

CORPUS = """\
It is a truth universally acknowledged, that a single man in possession of a good fortune,
must be in want of a wife. However little known the feelings or views of such a man may be
on his first entering a neighbourhood, this truth is so well fixed in the minds of the
surrounding families, that he is considered the rightful property of some one or other of
their daughters. My dear Mr. Bennet, said his lady to him one day, have you heard that
Netherfield Park is let at last? Mr. Bennet replied that he had not. But it is, returned
she; for Mrs. Long has just been here, and she told me all about it. Mr. Bennet made no
answer. Do you not want to know who has taken it? cried his wife impatiently. You want to
tell me, and I have no objection to hearing it. This was invitation enough.
"""

DEFAULTS = {"lr": 3e-3, "warmup": 0, "steps": 40, "batch_size": 8, "seq_len": 32,
            "n_embd": 32, "n_head": 2, "n_layer": 1, "clip": 1.0, "eval_every": 10,
            "init_scale": 0.02}


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, p):
        super().__init__()
        d = p["n_embd"]
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(p["seq_len"], d)
        self.blocks = nn.ModuleList(Block(d, p["n_head"]) for _ in range(p["n_layer"]))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        for w in self.parameters():
            if w.dim() == 2:
                nn.init.normal_(w, std=p["init_scale"])

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", help="a JSON file of parameters")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="log.csv")
    args = ap.parse_args()
    p = dict(DEFAULTS)
    if args.params:
        with open(args.params) as f:
            p.update(json.load(f))
    ddp = int(os.environ.get("WORLD_SIZE", 1)) > 1  # launched by torchrun
    rank = 0
    if ddp:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        print(f"rank {rank} of {dist.get_world_size()}", flush=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    chars = sorted(set(CORPUS))
    data = torch.tensor([chars.index(c) for c in CORPUS])
    cut = int(0.9 * len(data))
    train, val = data[:cut], data[cut - p["seq_len"] - 1:]
    model = GPT(len(chars), p)  # the same initial weights on every rank
    if ddp:
        model = DDP(model)
        torch.manual_seed(args.seed + rank)  # but each rank its own batches
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"])
    loss_fn = nn.CrossEntropyLoss()

    def batch(src, g=None):
        i = torch.randint(len(src) - p["seq_len"] - 1, (p["batch_size"],), generator=g)
        x = torch.stack([src[j:j + p["seq_len"]] for j in i])
        y = torch.stack([src[j + 1:j + 1 + p["seq_len"]] for j in i])
        return x, y

    with open(args.out if rank == 0 else os.devnull, "w", newline="") as f:  # rank 0 logs
        log = csv.writer(f)
        log.writerow(["step", "loss", "grad_norm", "lr", "val_loss"])
        for step in range(1, p["steps"] + 1):
            lr = p["lr"] * min(1.0, step / p["warmup"]) if p["warmup"] else p["lr"]
            for group in opt.param_groups:
                group["lr"] = lr
            x, y = batch(train)
            loss = loss_fn(model(x).flatten(0, 1), y.flatten())
            opt.zero_grad()
            loss.backward()
            clip = p["clip"] if p["clip"] else math.inf
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            val_loss = ""
            if step % p["eval_every"] == 0 or step == p["steps"]:
                with torch.no_grad():
                    vx, vy = batch(val, torch.Generator().manual_seed(0))
                    val_loss = f"{loss_fn(model(vx).flatten(0, 1), vy.flatten()).item():.6f}"
            log.writerow([step, f"{loss.item():.6f}", f"{norm.item():.6f}", f"{lr:.6g}",
                          val_loss])
            f.flush()  # a sweep follows the log while the script runs
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
