"""spikebench.integrations.lightning.SpikebenchCallback under a real Lightning Trainer: a
bigram LightningModule on a token stream the test builds, with a planted LR shock; pruning
through the sweep's prune file; divergence; a checkpoint and a resume."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

if os.environ.get("CI"):  # CI installs the dev extra, which has lightning: never skip
    import lightning  # noqa: F401
else:
    pytest.importorskip("lightning")

import lightning.pytorch as pl
from integration_kit import bigram_module, folder, loader, loss_onsets, offline_loss_onsets
from lightning.pytorch.callbacks import ModelCheckpoint

from spikebench import metrics as M
from spikebench.api import context
from spikebench.integrations.lightning import SpikebenchCallback

LR = 1e-2


def _fit(callbacks, *, steps, module=None, ckpt_path=None, val_every=20, **trainer_kwargs):
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=any(isinstance(c, ModelCheckpoint)
                                                  for c in callbacks),
                         enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, val_check_interval=val_every,
                         callbacks=callbacks, **trainer_kwargs)
    trainer.fit(module if module is not None else bigram_module(LR, None),
                loader(steps * 8, 1), loader(32, 2), ckpt_path=ckpt_path)
    return trainer


class At(pl.Callback):
    """Calls ``act()`` at the end of the batch that makes optimizer step ``step``."""

    def __init__(self, step, act):
        self.step, self.act = step, act

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            self.act()


def test_a_planted_lr_shock_is_logged_and_found_as_offline(tmp_path):
    cb = SpikebenchCallback(run_dir=tmp_path / "run")
    trainer = _fit([cb], steps=100, module=bigram_module(LR, 60))
    rows, summary = folder(tmp_path / "run")
    assert [r[M.STEP] for r in rows] == list(range(100))  # numbered as Lightning's loggers
    # Loss and the pre-clip grad norm (tensors, read back in batches) and the step's LR.
    assert all(math.isfinite(r[M.TRAIN_LOSS]) and r[M.GRAD_NORM] > 0 for r in rows)
    assert [r[M.LR] for r in rows[58:62]] == pytest.approx([LR, LR * 100, LR * 100, LR])
    evals = [r for r in rows if M.VAL_LOSS in r]
    assert [r[M.STEP] for r in evals] == [19, 39, 59, 79, 99]
    assert all(M.TRAIN_LOSS in r for r in evals)  # a validation joins its step's row
    assert summary["status"] == "completed" and summary["steps"] == 100
    assert loss_onsets(summary) == offline_loss_onsets(tmp_path / "run") == [60]
    assert cb.loop.spikes == 1 and trainer.global_step == 100  # logged only
    # Told online at the spike's own row (provisional), confirmed when the verdict came.
    report = cb.loop.run.last_report
    assert (report.onset, report.reported, report.state) == (60, 60, "confirmed")


def test_grad_norm_every_k_steps_logs_the_same_norms_on_those_steps_only(tmp_path):
    _fit([SpikebenchCallback(run_dir=tmp_path / "all")], steps=30)
    _fit([SpikebenchCallback(run_dir=tmp_path / "k", grad_norm_every=4)], steps=30)
    every, sampled = folder(tmp_path / "all")[0], folder(tmp_path / "k")[0]
    assert [r[M.STEP] for r in sampled] == list(range(30))  # every step keeps its row
    assert [r[M.STEP] for r in sampled if M.GRAD_NORM in r] == list(range(0, 30, 4))
    for a, b in zip(every, sampled, strict=True):  # the same training, bit for bit
        assert a[M.TRAIN_LOSS] == b[M.TRAIN_LOSS]
        if M.GRAD_NORM in b:
            assert a[M.GRAD_NORM] == b[M.GRAD_NORM]


def test_the_sweeps_prune_stops_the_trainer(tmp_path, monkeypatch):
    prune = tmp_path / "prune"
    monkeypatch.setenv(context.PRUNE_FILE, str(prune))
    cb = SpikebenchCallback(run_dir=tmp_path / "run")
    trainer = _fit([At(10, prune.touch), cb], steps=60)
    assert trainer.global_step == 10  # trainer.should_stop at step 10
    rows, summary = folder(tmp_path / "run")
    assert summary["status"] == "pruned" and summary["steps"] == 10
    assert [r[M.STEP] for r in rows] == list(range(10))


@pytest.mark.parametrize("stop", [True, False])
def test_a_non_finite_loss_stops_the_run_unless_asked_not_to(tmp_path, stop):
    module = bigram_module(LR, None)
    step = module.training_step

    def nan_from_15(batch, batch_idx):  # a loss that turns NaN at step 15 and stays NaN
        loss = step(batch, batch_idx)
        return loss * math.nan if module.trainer.global_step >= 14 else loss

    module.training_step = nan_from_15
    cb = SpikebenchCallback(run_dir=tmp_path / "run", stop_on_divergence=stop)
    trainer = _fit([cb], steps=60, module=module)
    rows, summary = folder(tmp_path / "run")
    assert summary["status"] == "diverged" and summary["diverged_step"] == 14
    # The tensors are read back every sync_every (10) steps: the stop comes by then.
    assert 15 <= trainer.global_step <= 15 + 10 if stop else trainer.global_step == 60
    assert [r[M.STEP] for r in rows] == list(range(trainer.global_step))


def test_a_resumed_fit_keeps_the_detector_state_and_continues_its_log(tmp_path):
    class Killed(Exception):
        pass

    def die():
        raise Killed

    every = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=10, save_top_k=-1,
                            filename="{step}")
    cb = SpikebenchCallback(run_dir=tmp_path / "run")
    with pytest.raises(Killed):
        _fit([cb, At(25, die), every], steps=40, module=bigram_module(LR, 12))
    killed = (tmp_path / "run" / "metrics.jsonl.partial").read_bytes()
    ckpt = tmp_path / "ckpt" / "step=20.ckpt"
    saved = torch.load(ckpt, weights_only=True)["callbacks"]["SpikebenchCallback"]
    assert saved["run"]["last_step"] == 18 and saved["held"][0] == 19  # row 19 held
    cb2 = SpikebenchCallback(run_dir=tmp_path / "run")
    restored = {}

    class Look(pl.Callback):
        def on_train_start(self, trainer, pl_module):  # after the callback's own
            restored.update(cb2.loop.state_dict())

    every2 = ModelCheckpoint(dirpath=tmp_path / "ckpt2", every_n_train_steps=10)
    _fit([cb2, Look(), every2], steps=40, module=bigram_module(LR, 12), ckpt_path=ckpt)
    for d in (restored["run"], saved["run"]):
        d.pop("elapsed_s")
    assert restored == saved
    log = (tmp_path / "run" / "metrics.jsonl").read_bytes()
    assert log.startswith(killed[:saved["run"]["log_bytes"]])
    rows, summary = folder(tmp_path / "run")
    assert [r[M.STEP] for r in rows] == list(range(40))
    assert summary["status"] == "completed" and summary["steps"] == 40
    straight = SpikebenchCallback(run_dir=tmp_path / "straight")
    _fit([straight], steps=40, module=bigram_module(LR, 12))
    _, expected = folder(tmp_path / "straight")
    onsets = loss_onsets(summary)  # the 12th update's shock, in the loss of step 12 on (0-based)
    assert onsets == loss_onsets(expected) and len(onsets) == 1 and 12 <= onsets[0] <= 15
    assert json.loads(json.dumps(saved))  # plain JSON: torch.load(weights_only=True) took it
