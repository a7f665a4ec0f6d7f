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


def test_tied_embeddings_and_parameter_count():
    m = _model()  # gpt-tiny: 2 layers, 64 wide, context 128, 256 bytes, no biases
    v, t, d = 256, 128, 64
    per_layer = d + 3 * d * d + d * d + d + 4 * d * d + 4 * d * d  # ln, qkv, proj, ln, mlp
    assert m.num_params() == v * d + t * d + 2 * per_layer + d  # output head tied: not counted
    # The output head is the input embedding: inputs and targets use bytes 0-9 only, yet the
    # loss's gradient reaches the embedding rows of every other byte, through the head.
    x = torch.randint(0, 10, (2, 8))
    m(x, x)[1].backward()
    assert m.wte.weight.grad[200].abs().sum() > 0
    assert not hasattr(m, "lm_head")


@pytest.mark.parametrize("mode", ["fp32", "bf16"])
def test_attention_is_causal(mode):
    # Logits at positions <= t do not depend on tokens after t, in fp32 and under emulated
    # bf16 (which computes attention itself).
    from spikebench.precision import make_precision

    torch.manual_seed(0)
    m = _model().eval()
    p = make_precision(c.load(None, [f"precision.mode={mode}"]).precision, "cpu")
    x = torch.randint(0, 256, (2, 24))
    y = x.clone()
    y[:, 12:] = torch.randint(0, 256, (2, 12))
    with torch.no_grad(), p.autocast():
        a, b = m(x)[0], m(y)[0]
    assert torch.equal(a[:, :12], b[:, :12])
    assert not torch.allclose(a[:, 12:], b[:, 12:])


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


def test_qk_norm_is_applied_in_forward():
    torch.manual_seed(0)
    m = _model("model.qk_norm=true")
    x = torch.randint(0, 256, (2, 16))
    before = m(x)[0]
    with torch.no_grad():
        m.blocks[0].attn.q_norm.weight.mul_(3.0)  # sharper attention if q is normed in forward
    assert not torch.allclose(m(x)[0], before)


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
