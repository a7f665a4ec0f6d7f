"""spikebench.integrations.hf.SpikebenchCallback under the real Hugging Face Trainer: a
tiny GPT-2 from its config (no hub download) on a token stream the test builds, with a
planted LR shock; pruning through the sweep's prune file; divergence; a checkpoint and a
resume that keep the detector's state and continue the run folder's log."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

if os.environ.get("CI"):  # CI installs the dev extra, which has transformers: never skip
    import transformers  # noqa: F401
else:
    pytest.importorskip("transformers")

from integration_kit import Tokens, folder, gpt2, loss_onsets, offline_loss_onsets, shock
from transformers import Trainer, TrainerCallback, TrainingArguments

import spikebench
from spikebench import metrics as M
from spikebench.api import context
from spikebench.cli import main
from spikebench.errors import UserError
from spikebench.integrations.hf import STATE, SpikebenchCallback

LR = 3e-3


def _trainer(tmp_path, callbacks, *, steps, factor=100.0, at=None, eval_steps=20, save_steps=0,
             **overrides):
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, shock(at, factor) if at else (lambda i: 1.0))
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=steps, per_device_train_batch_size=8,
        logging_steps=1, eval_strategy="steps", eval_steps=eval_steps,
        per_device_eval_batch_size=16, save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500, report_to=[], use_cpu=True, seed=0, disable_tqdm=True,
        dataloader_num_workers=0, max_grad_norm=1e9, **overrides)  # no clipping
    return Trainer(model=model, args=args, train_dataset=Tokens(steps * 8, 1),
                   eval_dataset=Tokens(32, 2), optimizers=(opt, sched), callbacks=callbacks)


class At(TrainerCallback):
    """Calls ``act(state)`` at the end of optimizer step ``step``."""

    def __init__(self, step, act):
        self.step, self.act = step, act

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            self.act(state)


def test_a_planted_lr_shock_is_logged_and_found_as_offline(tmp_path, capsys):
    cb = SpikebenchCallback(run_dir=tmp_path / "run")
    trainer = _trainer(tmp_path, [cb], steps=100, at=60)
    trainer.train()
    rows, summary = folder(tmp_path / "run")
    # Every step once, with the Trainer's loss, grad norm and LR; evaluations join their step.
    assert [r[M.STEP] for r in rows] == list(range(1, 101))
    assert all(M.TRAIN_LOSS in r and M.GRAD_NORM in r for r in rows)
    assert [r[M.LR] for r in rows[58:62]] == pytest.approx([LR, LR * 100, LR * 100, LR])
    evals = [r for r in rows if M.VAL_LOSS in r]
    assert [r[M.STEP] for r in evals] == [20, 40, 60, 80, 100]
    assert all(M.TRAIN_LOSS in r for r in evals)
    assert summary["status"] == "completed" and summary["steps"] == 100
    assert [e["step"] for e in summary["evals"]] == [20, 40, 60, 80, 100]
    # The shock's step 60 update shows in the loss logged at step 61: one loss event there,
    # told to the callback during training, and logged only: training ran to the end.
    assert loss_onsets(summary) == [61]
    assert cb.loop.spikes == 1 and trainer.state.global_step == 100
    # Told online at the spike's own row (provisional), confirmed when the verdict came.
    report = cb.loop.run.last_report
    assert (report.onset, report.reported, report.state) == (61, 61, "confirmed")
    # `spikebench spikes` on the same log finds the same onset.
    capsys.readouterr()
    assert main(["spikes", str(tmp_path / "run" / "metrics.jsonl"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["onset"] for e in out["events"] if e["metric"] == "loss"] == [61]
    assert offline_loss_onsets(tmp_path / "run") == [61]


def test_the_sweeps_prune_stops_the_trainer(tmp_path, monkeypatch):
    prune = tmp_path / "prune"
    monkeypatch.setenv(context.PRUNE_FILE, str(prune))
    cb = SpikebenchCallback(run_dir=tmp_path / "run")
    trainer = _trainer(tmp_path, [At(10, lambda state: prune.touch()), cb], steps=60)
    trainer.train()
    assert trainer.state.global_step == 10  # control.should_training_stop at step 10
    rows, summary = folder(tmp_path / "run")
    assert summary["status"] == "pruned" and summary["steps"] == 10
    assert [r[M.STEP] for r in rows] == list(range(1, 11))


@pytest.mark.parametrize("stop", [True, False])
def test_a_non_finite_loss_stops_the_run_unless_asked_not_to(tmp_path, stop):
    # An LR of 1e30 for a step makes every weight huge: the next losses are not finite.
    # logging_nan_inf_filter=False: the Trainer logs the NaN instead of the previous mean.
    cb = SpikebenchCallback(run_dir=tmp_path / "run", stop_on_divergence=stop)
    trainer = _trainer(tmp_path, [cb], steps=30, at=10, factor=1e33,
                       logging_nan_inf_filter=False)
    trainer.train()
    rows, summary = folder(tmp_path / "run")
    first = next(r[M.STEP] for r in rows if not math.isfinite(r[M.TRAIN_LOSS]))
    assert 10 < first <= 12
    assert summary["status"] == "diverged" and summary["diverged_step"] == first
    assert trainer.state.global_step == (first if stop else 30)


@pytest.mark.parametrize("remade", [False, True], ids=["own-restore", "trainer-remakes"])
def test_a_resumed_run_keeps_the_detector_state_and_continues_its_log(tmp_path, remade):
    """Train with a checkpoint every 10 steps; die at the end of step 25, before its log
    (past the checkpoint at 20); resume from checkpoint-20 into the same run folder. With
    restore_callback_states_from_checkpoint the Trainer remakes the callback itself."""

    class Killed(Exception):
        pass

    def die(state):
        raise Killed

    flag = {"restore_callback_states_from_checkpoint": remade}
    cb = SpikebenchCallback(run_dir=tmp_path / "run")
    with pytest.raises(Killed):
        _trainer(tmp_path, [cb, At(25, die)], steps=40, at=12, save_steps=10, **flag).train()
    cb.loop.abandon()  # the killed process's end: its run no longer holds the folder
    partial = tmp_path / "run" / "metrics.jsonl.partial"
    assert not (tmp_path / "run" / "summary.json").exists()
    killed = partial.read_bytes()
    assert [json.loads(x)[M.STEP] for x in killed.splitlines()] == list(range(1, 25))
    ckpt = tmp_path / "hf" / "checkpoint-20"
    saved = json.loads((ckpt / "trainer_state.json").read_text())[
        "stateful_callbacks"]["SpikebenchCallback"]["attributes"][STATE]
    assert saved["run"]["last_step"] == 20 and saved["run"]["log"].count("\n") == 20

    restored = {}

    class Look(TrainerCallback):  # before the first step after the resume
        def on_step_begin(self, args, state, control, **kwargs):
            if not restored:
                restored.update(ours().loop.state_dict())

    def ours():
        return next(c for c in trainer.callback_handler.callbacks
                    if isinstance(c, SpikebenchCallback))

    cb2 = SpikebenchCallback(run_dir=tmp_path / "run")
    trainer = _trainer(tmp_path, [cb2, Look()], steps=40, at=12, save_steps=10, **flag)
    trainer.train(resume_from_checkpoint=str(ckpt))
    assert (ours() is cb2) is not remade
    # The restored run's state is the checkpoint's (the clock aside).
    for d in (restored["run"], saved["run"]):
        d.pop("elapsed_s")
    assert restored == saved
    # The log continues from the checkpoint's 20 rows, byte for byte, without a duplicate.
    log = (tmp_path / "run" / "metrics.jsonl").read_bytes()
    assert log.startswith(killed[:saved["run"]["log_bytes"]])
    rows, summary = folder(tmp_path / "run")
    assert [r[M.STEP] for r in rows] == list(range(1, 41))
    assert summary["status"] == "completed" and summary["steps"] == 40
    if remade:
        return
    # The shock (the step-12 update, in the loss of step 13) before the checkpoint is one
    # event, as in a run never interrupted.
    straight = SpikebenchCallback(run_dir=tmp_path / "straight")
    _trainer(tmp_path / "s", [straight], steps=40, at=12).train()
    _, expected = folder(tmp_path / "straight")
    onsets = loss_onsets(summary)
    assert onsets == loss_onsets(expected) and len(onsets) == 1 and 13 <= onsets[0] <= 16


def test_the_trainers_own_restore_remakes_the_callback_or_says_why_not(tmp_path):
    # restore_callback_states_from_checkpoint=True remakes a callback from state()["args"]
    # and sets state()["attributes"]: the callback's own arguments survive.
    cb = SpikebenchCallback(run_dir=tmp_path / "run", stop_on_divergence=False, gap=3)
    twin = SpikebenchCallback(**cb.state()["args"])
    assert twin.loop.init_kwargs == {"run_dir": str(tmp_path / "run"), "gap": 3,
                                     "sync_every": 1}
    assert twin.loop.stop_on_divergence is False
    given = SpikebenchCallback(spikebench.init(run_dir=tmp_path / "given"))
    with pytest.raises(UserError, match="leave it False"):
        SpikebenchCallback(**given.state()["args"])
    given.run.finish()
