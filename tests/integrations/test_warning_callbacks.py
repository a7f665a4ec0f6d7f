"""The early warning through the callbacks: a plain loop (SpikebenchLoop), the Hugging Face
Trainer (tiny GPT-2) and Lightning (a bigram module), each with a planted jump; the
option is checked when the callback is built, and the hook sees each read-back's warning."""

from __future__ import annotations

import json
import os

import pytest
import torch
from integration_kit import bigram_module, folder

from spikebench import metrics as M
from spikebench.api.decision import Decision
from spikebench.errors import UserError
from spikebench.integrations.loop import SpikebenchLoop
from spikebench.precursors.rule import WarningRule

RULE = {"signal": "grad_norm", "window": 16, "threshold": 6.0}


def _warned_steps(rows):
    """The steps whose row raised the run's warning count."""
    out, n = [], 0
    for r in rows:
        if r[M.WARNINGS] > n:
            out.append(r[M.STEP])
        n = r[M.WARNINGS]
    return out


def _linear_steps(sb, model, opt, start, stop, jump_at=120):
    w = torch.randn(8, 1, generator=torch.Generator().manual_seed(1))
    for step in range(start, stop + 1):
        x = torch.randn(128, 8, generator=torch.Generator().manual_seed(step))
        loss = torch.nn.functional.mse_loss(model(x), x @ w)
        opt.zero_grad()
        (loss * (1000.0 if step == jump_at else 1.0)).backward()  # pre-clip norm jumps
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sb.log(step, loss=loss.detach(), grad_norm=norm)
        if step == jump_at:
            assert sb.last_decision is Decision.WARNING


def test_a_plain_loop_hands_each_warning_to_its_hook_and_keeps_it_over_a_resume(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    first: list[dict] = []
    sb = SpikebenchLoop(run_dir=tmp_path / "run", sync_every=4,
                        warning=WarningRule(**RULE), on_warning=first.append)
    _linear_steps(sb, model, opt, 1, 100)
    state = json.loads(json.dumps(sb.state_dict()))
    sb.abandon()  # killed after the checkpoint at step 100
    got: list[dict] = []
    with SpikebenchLoop(run_dir=tmp_path / "run", sync_every=4, warning=RULE,
                        on_warning=got.append) as again:
        again.load_state_dict(state)
        _linear_steps(again, model, opt, 101, 140)
    assert first == [] and [g["step"] for g in got] == [120]
    assert again.warnings == 1 and got[0] == again.run.last_warning
    rows, summary = folder(tmp_path / "run")
    assert _warned_steps(rows) == [120] and summary["warnings"]["steps"] == [120]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"warning": "grad_norm"}, "warning='grad_norm': must be a spikebench.precursors"),
    ({"warning": {"signal": "grad_norm", "window": 1}}, "window = 1: must be an integer"),
    ({"warning": RULE, "on_warning": "print"}, r"on_warning='print'\): must be a function"),
])
def test_a_bad_warning_option_is_refused_when_the_callback_is_built(kwargs, match):
    with pytest.raises(UserError, match=match):
        SpikebenchLoop(**kwargs)
    if not os.environ.get("CI"):  # CI installs lightning: never skip there
        pytest.importorskip("lightning")
    from spikebench.integrations.lightning import SpikebenchCallback

    with pytest.raises(UserError, match=match):
        SpikebenchCallback(**kwargs)


def test_the_hf_trainer_warns_at_the_shocked_steps_grad_norm(tmp_path):
    if not os.environ.get("CI"):
        pytest.importorskip("transformers")
    from test_hf_callback import _trainer

    from spikebench.integrations.hf import SpikebenchCallback

    got: list[dict] = []
    cb = SpikebenchCallback(run_dir=tmp_path / "run", warning=WarningRule(**RULE),
                            on_warning=got.append)
    assert cb.state()["args"] == {"unrestorable": "it was given an on_warning function"}
    plain = SpikebenchCallback(run_dir=tmp_path / "other", warning=WarningRule(**RULE))
    assert plain.state()["args"]["warning"] == WarningRule(**RULE).to_mapping()  # JSON
    _trainer(tmp_path, [cb], steps=60, at=40).train()  # LR x100 at steps 40 and 41
    rows, summary = folder(tmp_path / "run")
    # The grad norm after the shocked update (logged at step 41) warns first; the loss
    # spike told at that row wins the decision, and the hook still hears the warning.
    warned = _warned_steps(rows)
    assert warned[0] == 41 and [g["step"] for g in got] == warned  # every log reads back
    assert cb.loop.warnings == summary["warnings"]["n"] == len(warned)


def test_lightning_warns_at_the_shocked_steps_grad_norm(tmp_path):
    if not os.environ.get("CI"):
        pytest.importorskip("lightning")
    from test_lightning_callback import _fit

    from spikebench.integrations.lightning import SpikebenchCallback

    got: list[dict] = []
    cb = SpikebenchCallback(run_dir=tmp_path / "run", warning=RULE, on_warning=got.append)
    _fit([cb], steps=60, module=bigram_module(1e-2, 40))
    rows, summary = folder(tmp_path / "run")
    warned = _warned_steps(rows)
    # Lightning's step 39 (0-based) is the 40th optimizer step, shocked: the norm after it.
    assert warned[0] == 40
    # Read back every 10 steps: the hook hears the newest warning of each read-back.
    assert [g["step"] for g in got] == [max(s for s in warned if s // 10 == k)
                                        for k in sorted({s // 10 for s in warned})]
    assert cb.loop.warnings == summary["warnings"]["n"] == len(warned)
