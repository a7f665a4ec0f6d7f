import json

import pytest
import torch

from spikebench import config as c
from spikebench import metrics as M
from spikebench.model import build_model
from spikebench.train.loop import train
from spikebench.train.optim import EPS_FACTOR, adam_probes, make_optimizer, update_probes

torch.set_num_threads(1)


def test_update_norm_is_the_global_norm_of_the_step():
    before = [torch.ones(4), torch.ones(2, 2)]
    after = [torch.full((4,), 1.5), torch.ones(2, 2)]
    out = update_probes(after, before)
    assert out[M.UPDATE_NORM].item() == pytest.approx(1.0)  # sqrt(4 * 0.25)
    assert out[M.UPDATE_RATIO].item() == pytest.approx((1 / 8) ** 0.5)


def test_adam_probes_read_v_before_the_step():
    cfg = c.load(None, ["model.n_layer=1", "model.n_embd=32", "model.n_head=2",
                        "optim.eps=1e-8"])
    model = build_model(cfg.model)
    opt = make_optimizer(model, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.ones_like(p)
    assert adam_probes(opt) == {}  # no state before the first step
    opt.step()
    # v_hat is now exactly g^2 = 1 everywhere: g^2/v_hat = 1, nothing near eps.
    got = adam_probes(opt)
    assert got[M.ADAM_G2V].item() == pytest.approx(1.0, rel=1e-6)
    assert got[M.ADAM_EPS_SHARE].item() == 0.0
    # Gradients 3x larger than v remembers: the ratio is 9; a zero v is near eps.
    for p in params:
        p.grad = torch.full_like(p, 3.0)
    first = params[0]
    opt.state[first]["exp_avg_sq"].zero_()
    got = adam_probes(opt)
    n = sum(p.numel() for p in params)
    assert got[M.ADAM_EPS_SHARE].item() == pytest.approx(first.numel() / n)
    assert EPS_FACTOR > 1
    assert got[M.ADAM_G2V].item() > 9.0


def test_a_run_records_the_new_probes_on_probe_steps_only(tmp_path):
    cfg = c.load(None, ["model.n_layer=1", "model.n_embd=32", "model.n_head=2",
                        "data.seq_len=32", "data.batch_size=8", "data.max_bytes=200000",
                        "train.steps=12", "train.eval_every=12", "train.eval_batches=1",
                        "train.log_every=4", "train.probe_every=4", "train.progress=false",
                        f"run.out_dir={tmp_path}", "run.name=r"])
    train(cfg)
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").open()]
    probed = [r["step"] for r in rows if M.ADAM_G2V in r]
    assert probed == [4, 8, 12]
    assert [r["step"] for r in rows if M.UPDATE_NORM in r] == [4, 8, 12]
    r = next(r for r in rows if M.ADAM_G2V in r)
    assert r[M.UPDATE_NORM] > 0 and 0 <= r[M.ADAM_EPS_SHARE] <= 1 and r[M.ADAM_G2V] > 0
