import pytest
import torch

from spikebench import config as c
from spikebench.model import build_model
from spikebench.train.optim import make_optimizer, update_ratio


def groups(*over):
    cfg = c.load(None, list(over))
    model = build_model(cfg.model)
    opt = make_optimizer(model, cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == cfg.optim.weight_decay and no_decay["weight_decay"] == 0
    return ({names[id(p)] for p in decay["params"]}, {names[id(p)] for p in no_decay["params"]})


def test_by_default_only_matrices_decay():
    decay, no_decay = groups("model.bias=true")
    assert {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias",
            "blocks.0.ln_1.weight", "blocks.0.attn.qkv.bias"} <= no_decay
    assert {"blocks.0.attn.qkv.weight", "blocks.0.mlp.fc.weight"} <= decay
    assert all(n.endswith("weight") and "ln" not in n and "wte" not in n and "wpe" not in n
               for n in decay)


def test_embeddings_and_norms_opt_in():
    decay, _ = groups("model.bias=true", "optim.wd_embeddings=true")
    assert {"wte.weight", "wpe.weight"} <= decay and "ln_f.weight" not in decay
    decay, no_decay = groups("model.bias=true", "optim.wd_norms=true")
    assert {"ln_f.weight", "ln_f.bias", "blocks.0.attn.qkv.bias"} <= decay
    assert {"wte.weight", "wpe.weight"} <= no_decay


def test_update_ratio_is_rms_update_over_rms_weight():
    before = [torch.ones(4), torch.ones(2, 2)]
    after = [torch.full((4,), 1.5), torch.ones(2, 2)]
    # sum of squared updates 4 * 0.25 = 1 over sum of squared weights 8.
    assert update_ratio(after, before).item() == pytest.approx((1 / 8) ** 0.5)


TIED = '''
import torch.nn as nn
import torch.nn.functional as F

class Tied(nn.Module):
    """GPT-2's layout: a separate output head whose weight is the token embedding's."""
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, 16)
        self.mlp = nn.Linear(16, 16)
        self.lm_head = nn.Linear(16, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
    def forward(self, idx, targets=None):
        logits = self.lm_head(self.mlp(self.wte(idx)).relu())
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1),
                                                            targets.flatten())
        return logits, loss
'''


def test_a_parameter_shared_between_modules_is_optimised_once(tmp_path, monkeypatch):
    from spikebench.cli import main

    (tmp_path / "tied_model.py").write_text(TIED)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = c.load(None, ["model.cls=tied_model:Tied"])
    model = build_model(cfg.model)
    opt = make_optimizer(model, cfg)  # AdamW refused this before (one parameter, two groups)
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    # The embedding holds it first: its rule (no decay by default) applies.
    assert id(model.wte.weight) in {id(p) for p in opt.param_groups[1]["params"]}
    assert main(["train", "--set", "model.cls=tied_model:Tied", "--set", "train.steps=3",
                 "--set", "train.eval_every=3", "--set", f"run.out_dir={tmp_path}/runs",
                 "--set", "data.max_bytes=200000"]) == 0
