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
