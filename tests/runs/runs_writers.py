"""Runs written by the real libraries, each with a planted loss spike at a known step, for the
tests of :mod:`spikebench.runs` and the worked examples of docs/logs.md
(``python tests/runs/runs_writers.py OUT`` writes them all to OUT).

- A tiny HF Trainer run (GPT-2 from a config, CPU): a forward pre-hook swaps the batch of
  one step for random tokens, so that step's logged loss is ~ln(64) where the model had
  learnt ~1. Its callback also writes what the Trainer's own TensorBoard, W&B and MLflow
  callbacks would: TensorBoard through ``SummaryWriter`` with the Trainer's
  ``rewrite_logs``; W&B's history rows (``_step`` counting the log calls, the
  ``train/global_step`` HF adds); MLflow's file store (``metrics/<key>`` lines
  ``<ms> <value> <step>``, ``params/``, ``meta.yaml``). W&B and MLflow are not installed,
  so their files are written in their layout here.
- A Lightning run with ``CSVLogger``: one batch's labels replaced by random tokens.
- A TensorBoard run of ``SummaryWriter.add_scalar`` over a made curve, with ``add_hparams``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

V, T = 64, 16  # vocabulary, sequence length
HF_SPIKES = {"run-a": 30, "run-b": 38}  # run name -> the step whose batch is garbage
HF_STEPS = 50
PL_SPIKE = 40
TB_SPIKE = 60
TB_STEPS = 120
WANDB_SUMMARY = ("train_runtime", "train_samples_per_second", "train_steps_per_second",
                 "train_loss", "total_flos")  # WandbCallback puts these in the run summary


# --------------------------------------------------------------------------- HF Trainer


def hf_run(out: Path, name: str, spike: int, seed: int) -> dict:
    """Train; write ``out/<name>/`` (checkpoints, trainer_state.json), its TensorBoard
    events in ``out/<name>/runs/``, ``out/wandb/<name>-history.{csv,jsonl}`` and an MLflow
    run in ``out/mlruns/1/``. Returns the W&B history rows."""
    import torch
    from torch.utils.tensorboard import SummaryWriter
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )
    from transformers.integrations.integration_utils import rewrite_logs

    class Data(torch.utils.data.Dataset):  # count-up sequences: learnt in a few dozen steps
        def __len__(self):
            return 4096

        def __getitem__(self, i):
            x = (torch.arange(T) + (i * 7) % V) % V
            return {"input_ids": x, "labels": x}

    class Mirror(TrainerCallback):
        """Plants the spike, and logs as the TensorBoard, W&B and MLflow callbacks do."""

        def __init__(self):
            self.garbage, self.t0, self.history = False, time.time(), []
            self.tb = SummaryWriter(str(out / name / "runs" / "tb"))
            self.ml = _MlflowRun(out / "mlruns", "1", "tiny-gpt", name)

        def on_step_begin(self, args, state, control, **kw):
            self.garbage = state.global_step + 1 == spike

        def on_train_begin(self, args, state, control, model=None, **kw):
            self.ml.params({**args.to_dict(), **model.config.to_dict()})

        def on_log(self, args, state, control, logs=None, **kw):
            for k, v in rewrite_logs(logs).items():  # TensorBoardCallback.on_log
                if isinstance(v, int | float):
                    self.tb.add_scalar(k, v, state.global_step)
            row = rewrite_logs({k: v for k, v in logs.items() if k not in WANDB_SUMMARY})
            self.history.append({**row, "train/global_step": state.global_step,  # WandbCallback
                                 "_step": len(self.history),
                                 "_runtime": time.time() - self.t0, "_timestamp": time.time()})
            self.ml.log({k: v for k, v in logs.items() if isinstance(v, int | float)},
                        state.global_step)  # MLflowCallback.on_log

        def on_train_end(self, args, state, control, **kw):
            self.tb.close()

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=V,
                                       n_positions=T, bos_token_id=0, eos_token_id=0))
    mirror = Mirror()
    g = torch.Generator().manual_seed(seed)

    def hook(module, args, kwargs):
        if mirror.garbage:
            x = torch.randint(0, V, kwargs["input_ids"].shape, generator=g)
            kwargs = {**kwargs, "input_ids": x, "labels": x}
        return args, kwargs

    model.register_forward_pre_hook(hook, with_kwargs=True)
    args = TrainingArguments(
        output_dir=str(out / name), max_steps=HF_STEPS, learning_rate=1e-2, seed=seed,
        per_device_train_batch_size=8, logging_steps=1, eval_strategy="steps", eval_steps=40,
        per_device_eval_batch_size=8, save_steps=20, report_to=[], use_cpu=True,
        disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=Data(),
                      eval_dataset=torch.utils.data.Subset(Data(), range(16)),
                      callbacks=[mirror])
    trainer.train()
    wandb_dir = out / "wandb"
    wandb_dir.mkdir(parents=True, exist_ok=True)
    write_wandb_history(mirror.history, wandb_dir / f"{name}-history")
    return {"history": mirror.history}


def write_wandb_history(rows: list[dict], stem: Path) -> None:
    """As ``run.history().to_csv(...)`` (pandas: the index first, NaN as empty) and as
    ``scan_history()`` rows dumped one JSON object a line."""
    import pandas as pd

    pd.DataFrame(rows).to_csv(stem.with_suffix(".csv"))
    stem.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_wandb_chart(histories: dict[str, list[dict]], path: Path, metric: str = "train/loss",
                      x: str = "train/global_step") -> None:
    """A W&B panel's CSV export of ``metric`` for several runs: the x axis, then per run
    ``<run> - <metric>`` and its ``__MIN``/``__MAX`` band; every field quoted."""
    steps = sorted({r[x] for rows in histories.values() for r in rows if metric in r})
    by_run = {run: {r[x]: r[metric] for r in rows if metric in r}
              for run, rows in histories.items()}
    header = [x] + [f"{run} - {metric}{s}" for run in histories for s in ("", "__MIN", "__MAX")]
    with path.open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        for s in steps:
            w.writerow([s] + [by_run[run].get(s, "") for run in histories for _ in range(3)])


class _MlflowRun:
    """A run in MLflow's file store layout (mlflow.store.tracking.file_store)."""

    def __init__(self, root: Path, exp_id: str, exp_name: str, run_name: str):
        self.run_id = hashlib.md5(run_name.encode()).hexdigest()  # 32 hex digits, as MLflow's
        exp = root / exp_id
        self.dir = exp / self.run_id
        for sub in ("metrics", "params", "tags", "artifacts"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        now = int(time.time() * 1000)
        if not (exp / "meta.yaml").exists():
            (exp / "meta.yaml").write_text(
                f"artifact_location: file://{exp}\ncreation_time: {now}\n"
                f"experiment_id: '{exp_id}'\nlast_update_time: {now}\n"
                f"lifecycle_stage: active\nname: {exp_name}\n")
        (self.dir / "meta.yaml").write_text(
            f"artifact_uri: file://{self.dir}/artifacts\nend_time: {now}\n"
            f"entry_point_name: ''\nexperiment_id: '{exp_id}'\nlifecycle_stage: active\n"
            f"run_id: {self.run_id}\nrun_name: {run_name}\nrun_uuid: {self.run_id}\n"
            f"source_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: {now}\n"
            "status: 3\ntags: []\nuser_id: root\n")
        (self.dir / "tags" / "mlflow.runName").write_text(run_name)

    def params(self, values: dict) -> None:
        for k, v in values.items():
            if isinstance(v, dict | list) or "/" in k:
                continue
            (self.dir / "params" / k).write_text(str(v))

    def log(self, metrics: dict, step: int) -> None:
        now = int(time.time() * 1000)
        for k, v in metrics.items():
            key = re.sub(r"[^0-9A-Za-z_\-\.\ :/]", "_", k)  # MLflowCallback's sanitising
            p = self.dir / "metrics" / key
            p.parent.mkdir(parents=True, exist_ok=True)
            with p.open("a") as f:
                f.write(f"{now} {float(v)} {step}\n")


def hf_all(out: Path) -> None:
    """Both HF runs, their W&B chart export, and a long-format CSV of run-a's TensorBoard
    events (step, tag, value: tbparse's layout)."""
    histories = {name: hf_run(out, name, spike, seed)["history"]
                 for seed, (name, spike) in enumerate(HF_SPIKES.items())}
    write_wandb_chart(histories, out / "wandb" / "chart-export.csv")
    write_long_csv(out / "run-a" / "runs" / "tb", out / "long" / "scalars.csv")


def write_long_csv(events: Path, path: Path) -> None:
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(events), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tag", "value"])
        for tag in acc.Tags()["scalars"]:
            for e in acc.Scalars(tag):
                w.writerow([e.step, tag, e.value])


# ---------------------------------------------------------------------------- Lightning


def lightning_run(out: Path) -> Path:
    """A Lightning run logged by CSVLogger to ``out/lightning_logs/version_0/``."""
    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger

    class Tiny(L.LightningModule):
        def __init__(self, lr: float = 0.01, hidden: int = 32, seed: int = 7):
            super().__init__()
            self.save_hyperparameters()
            self.emb = torch.nn.Embedding(V, hidden)
            self.out = torch.nn.Linear(hidden, V)
            self.g = torch.Generator().manual_seed(0)

        def _loss(self, x, y):
            return torch.nn.functional.cross_entropy(self.out(self.emb(x)).reshape(-1, V),
                                                     y.reshape(-1))

        def training_step(self, batch, i):
            x = batch[0]
            y = (x + 1) % V
            if self.global_step == PL_SPIKE:  # garbage labels: a loss spike at this step
                y = torch.randint(0, V, y.shape, generator=self.g)
            loss = self._loss(x, y)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, i):
            self.log("val_loss", self._loss(batch[0], (batch[0] + 1) % V))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

    L.seed_everything(7, verbose=False)
    xs = torch.randint(0, V, (512, T))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs), batch_size=8)
    trainer = L.Trainer(max_epochs=1, logger=CSVLogger(str(out)), log_every_n_steps=1,
                        enable_progress_bar=False, enable_checkpointing=False,
                        enable_model_summary=False, accelerator="cpu", limit_val_batches=2,
                        val_check_interval=32)
    trainer.fit(Tiny(), loader, torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(xs[:32]), batch_size=8))
    return out / "lightning_logs" / "version_0"


# --------------------------------------------------------------------------- TensorBoard


def curve(n: int, spike: int, seed: int = 0) -> np.ndarray:
    """A falling loss with noise and a 3-step spike of +2 at ``spike``."""
    rng = np.random.default_rng(seed)
    loss = 1.5 + 2.5 * np.exp(-np.arange(n) / 30) + rng.normal(0, 0.01, n)
    loss[spike:spike + 3] += [2.0, 1.0, 0.4]
    return loss


def tensorboard_run(folder: Path, spike: int = TB_SPIKE, seed: int = 3) -> None:
    """``SummaryWriter`` logs of ``curve`` (``Loss/train``), a learning rate, and
    ``add_hparams`` (which writes its own subfolder)."""
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(folder))
    for s, v in enumerate(curve(TB_STEPS, spike, seed)):
        w.add_scalar("Loss/train", float(v), s)
        w.add_scalar("lr", 1e-3 * min(1.0, (s + 1) / 10), s)
    w.add_hparams({"lr": 1e-3, "seed": seed, "optimizer": "adamw"},
                  {"hparam/final_loss": float(curve(TB_STEPS, spike, seed)[-1])})
    w.close()


if __name__ == "__main__":  # the worked examples of docs/logs.md
    out = Path(sys.argv[1])
    hf_all(out)
    lightning_run(out)
    tensorboard_run(out / "tensorboard" / "adamw")
    print(f"written to {out}; spikes at: HF {HF_SPIKES}, Lightning {PL_SPIKE}, "
          f"TensorBoard {TB_SPIKE}")
