"""The callbacks refuse bad arguments when they are built (one UserError line, nothing
written), and the Lightning callback numbers its steps as Lightning's CSVLogger does."""

from __future__ import annotations

import csv
import os

import pytest

import spikebench
from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.integrations.loop import SpikebenchLoop, grad_norm

BAD = [  # (keyword arguments, what the line says)
    ({"detector": "magic"}, "detector='magic': not a spike rule"),
    ({"sync_every": 0}, "sync_every=0: must be an integer >= 1"),
    ({"sync_every": "10"}, "sync_every='10'"),
    ({"sync_evry": 5}, "unknown argument 'sync_evry'"),
    ({"run": "runs/a"}, "(run='runs/a'): must be a spikebench.init() run"),
    ({"stop_on_divergence": "no"}, "(stop_on_divergence='no'): must be True or False"),
    ({"gap": "x"}, "gap='x'"),
    ({"target_loss": float("nan")}, "target_loss=nan: must be a finite number"),
    ({"params": "lr=1"}, "params='lr=1': must be a dict"),
    ({"sinks": [1]}, "sinks=[1]"),
]


def _classes():
    out = [SpikebenchLoop]
    for name in ("hf", "lightning"):
        try:
            mod = __import__(f"spikebench.integrations.{name}", fromlist=["SpikebenchCallback"])
        except ImportError:
            if os.environ.get("CI"):
                raise
            continue
        out.append(mod.SpikebenchCallback)
    return out


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__module__.rsplit(".", 1)[-1])
@pytest.mark.parametrize(("kwargs", "says"), BAD, ids=[str(k) for k, _ in BAD])
def test_a_callback_refuses_bad_arguments_when_built(tmp_path, cls, kwargs, says):
    with pytest.raises(UserError, match=None) as e:
        cls(**kwargs, **({} if "run" in kwargs else {"run_dir": tmp_path / "r"}))
    line = str(e.value)
    assert says in line and "\n" not in line, line
    assert not (tmp_path / "r").exists()  # nothing made


@pytest.mark.parametrize("every", [0, -1, True, 1.5, "2", None])
def test_the_lightning_callback_refuses_a_bad_grad_norm_every(tmp_path, every):
    if not os.environ.get("CI"):
        pytest.importorskip("lightning")
    from spikebench.integrations.lightning import SpikebenchCallback

    with pytest.raises(UserError) as e:
        SpikebenchCallback(run_dir=tmp_path / "r", grad_norm_every=every)
    assert str(e.value) == (f"SpikebenchCallback(grad_norm_every={every!r}): must be an "
                            "integer >= 1 (1: every optimizer step)")
    assert not (tmp_path / "r").exists()


def test_grad_norm_refuses_what_is_not_parameters():
    for bad in (None, 3, "w"):
        with pytest.raises(UserError, match=r"grad_norm\(.*\): give the model's parameters"):
            grad_norm(bad)


def test_a_loop_left_by_an_exception_frees_its_folder_for_the_resume(tmp_path):
    with pytest.raises(ZeroDivisionError), SpikebenchLoop(run_dir=tmp_path / "r",
                                                          sync_every=1) as sb:
        sb.log(1, loss=3.0)
        1 / 0  # noqa: B018
    assert (tmp_path / "r" / "metrics.jsonl.partial").exists()  # unfinished, as a kill
    run = spikebench.init(run_dir=tmp_path / "r")  # the folder is free again (sb lives)
    assert (tmp_path / "r" / "metrics.jsonl.partial.killed").exists()
    run.finish()
    assert sb.run.status == "abandoned"


def test_lightning_steps_are_the_csv_loggers(tmp_path):
    pytest.importorskip("lightning") if not os.environ.get("CI") else None
    import lightning.pytorch as pl
    from integration_kit import bigram_module, folder, loader
    from lightning.pytorch.loggers import CSVLogger

    from spikebench.integrations.lightning import SpikebenchCallback

    module = bigram_module(1e-2, None)
    step = module.training_step

    def logged(batch, batch_idx):
        loss = step(batch, batch_idx)
        module.log("train_loss", loss)
        return loss

    module.training_step = logged
    cb = SpikebenchCallback(run_dir=tmp_path / "run", sync_every=4)
    trainer = pl.Trainer(max_steps=12, accelerator="cpu", devices=1, log_every_n_steps=1,
                         logger=CSVLogger(tmp_path / "logs", name="m"),
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         val_check_interval=5, callbacks=[cb])
    trainer.fit(module, loader(12 * 8, 1), loader(16, 2))
    with open(trainer.logger.log_dir + "/metrics.csv") as f:
        table = list(csv.DictReader(f))
    rows, summary = folder(tmp_path / "run")
    train = {int(r["step"]): float(r["train_loss"]) for r in table if r.get("train_loss")}
    val = {int(r["step"]): float(r["val_loss"]) for r in table if r.get("val_loss")}
    assert [r[M.STEP] for r in rows] == sorted(train) == list(range(12))
    assert [r[M.TRAIN_LOSS] for r in rows] == pytest.approx([train[s] for s in sorted(train)])
    assert {r[M.STEP]: r[M.VAL_LOSS] for r in rows if M.VAL_LOSS in r} == pytest.approx(val)
    assert sorted(val) == [4, 9] and summary["steps"] == 12
