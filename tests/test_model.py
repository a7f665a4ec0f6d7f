import math

import pytest
import torch

from spikebench import config as c
from spikebench.errors import UserError
from spikebench.model import GPT, build_model, probe

torch.set_num_threads(1)


def _model(*over):
    return build_model(c.load(None, list(over)).model)


def test_forward_shapes_and_initial_loss():
    torch.manual_seed(0)
    m = _model()
    x, y = torch.randint(0, 256, (2, 2, 16))
    logits, loss = m(x, y)
    assert logits.shape == (2, 16, 256)
    # A fresh model predicts near-uniformly over 256 bytes.
    assert abs(loss.item() - math.log(256)) < 0.1
    assert m(x)[1] is None


def test_tied_embeddings():
    m = _model()
    n_untied = sum(p.numel() for p in m.parameters()) + m.wte.weight.numel()
    assert m.num_params() < n_untied
    assert not hasattr(m, "lm_head")


def test_z_loss_adds_penalty():
    torch.manual_seed(0)
    plain = _model()
    torch.manual_seed(0)
    z = _model("model.z_loss=1e-2")
    x = torch.randint(0, 256, (2, 16))
    _, l0 = plain(x, x)
    logits, l1 = z(x, x)
    expect = l0 + 1e-2 * torch.logsumexp(logits.float(), -1).pow(2).mean()
    assert torch.allclose(l1, expect)


def test_qk_norm_and_depth_scaled_init():
    m = _model("model.qk_norm=true", "model.init=depth_scaled", "model.n_layer=8")
    assert m.blocks[0].attn.q_norm is not None
    std = m.blocks[0].mlp.proj.weight.std().item()
    assert std == pytest.approx(0.02 / math.sqrt(16), rel=0.1)
    assert m.blocks[0].mlp.fc.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_probe_reports_attention_logits_and_log_z():
    m = _model()
    x = torch.randint(0, 256, (2, 16))
    out = probe(m, x)
    assert set(out) == {"probe/attn_logit_max/0", "probe/attn_logit_max/1", "probe/log_z"}
    # Scaling the query projection scales the logits: the probe sees it.
    with torch.no_grad():
        m.blocks[0].attn.qkv.weight[:64] *= 50
    assert probe(m, x)["probe/attn_logit_max/0"] > 10 * out["probe/attn_logit_max/0"]
    assert not m.blocks[0].attn.probing and m.training


def test_user_model_class_by_import_path():
    m = build_model(c.load(None, ["model.cls=spikebench.model:GPT"]).model)
    assert isinstance(m, GPT)
    with pytest.raises(UserError, match="model.cls = 'nowhere.mod:X': cannot import"):
        build_model(c.load(None, ["model.cls=nowhere.mod:X"]).model)
    with pytest.raises(UserError, match="must look like"):
        build_model(c.load(None, ["model.cls=justaname"]).model)
