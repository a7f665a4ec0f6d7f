"""One pretraining trial, every stability strategy a config switch. Read it top to bottom.

The hot loop never reads a value back from the device: losses, grad norms, loss scales and
the non-finite flag are kept as device tensors and read once per ``train.log_every`` steps.
A non-finite loss or grad norm is caught *before* the optimizer step without a sync: the
fused AdamW step takes a ``found_inf`` tensor (the same contract GradScaler uses) and skips
the update on the device; the trial then ends ``diverged`` at the next read-back.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from spikebench.batches import BatchStream
from spikebench.config import Config, ConfigError
from spikebench.corpus import derive_seed, load_corpus
from spikebench.detectors import INJECTED_KEY, SpikeMonitor
from spikebench.model import build_model, model_class, probe
from spikebench.precision import loss_scale_tensor, make_precision
from spikebench.runio import atomic_write_json, environment
from spikebench.schedule import lr_factor
from spikebench.scores import summarize
from spikebench.sinks import JsonlSink, Sink


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"train.device = {name!r}: must be auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device = {name!r}: CUDA is not available on this machine")
    return device


def make_optimizer(model: torch.nn.Module, cfg: Config, device: torch.device):
    """AdamW with decoupled weight decay on matrices; embeddings and norms opt in by config."""
    o = cfg.optim
    decay, no_decay = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if isinstance(module, torch.nn.Embedding):
                wants = o.wd_embeddings
            elif isinstance(module, torch.nn.LayerNorm | torch.nn.RMSNorm) or name == "bias":
                wants = o.wd_norms
            else:
                wants = p.dim() >= 2
            (decay if wants else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": o.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # fused: one kernel per step, and it honours found_inf, so skipping a bad step needs no sync.
    return torch.optim.AdamW(
        groups, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.eps, fused=True
    )


def lr_shock_steps(cfg: Config) -> range:
    """0-based indices of the steps whose LR is multiplied by ``faults.lr_shock_factor``."""
    f = cfg.faults
    if f.lr_shock_at is None:
        return range(0)
    start = int(f.lr_shock_at * cfg.train.steps)
    return range(start, min(start + f.lr_shock_steps, cfg.train.steps))


@torch.no_grad()
def evaluate(model, batches, precision) -> torch.Tensor:
    model.eval()
    total = torch.zeros((), device=batches[0][0].device)
    for x, y in batches:
        with precision.autocast():
            _, loss = model(x, y)
        total += loss.float()
    model.train()
    return total / len(batches)


def _update_ratio(params: Sequence[torch.Tensor], before: Sequence[torch.Tensor]) -> torch.Tensor:
    """RMS of the update over RMS of the weights, over all parameters (a device scalar)."""
    diff = torch.stack([(p - b).pow(2).sum() for p, b in zip(params, before, strict=True)]).sum()
    norm = torch.stack([b.pow(2).sum() for b in before]).sum()
    return (diff / norm.clamp_min(1e-30)).sqrt()


def new_run_dir(cfg: Config) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = cfg.run.name or f"{stamp}-{cfg.model.preset}-s{cfg.train.seed}"
    path = Path(cfg.run.out_dir) / name
    n = 1
    while path.exists():
        n += 1
        path = Path(cfg.run.out_dir) / f"{name}-{n}"
    return path


def preflight(cfg: Config) -> None:
    """The cheap checks a run makes before it reads data: the device exists, the model class
    imports, the corpus path exists. Raises ConfigError (one line)."""
    resolve_device(cfg.train.device)
    model_class(cfg.model)
    source = cfg.data.corpus
    if source != "stdlib" and not Path(source).expanduser().exists():
        raise ConfigError(f"data.corpus = {source!r}: no such file or folder")


def train(cfg: Config, run_dir: str | Path | None = None, sinks: Sequence[Sink] = ()) -> dict:
    """Run one trial; write ``config.json``, ``meta.json``, ``metrics.jsonl``, ``summary.json``.

    Everything that can be refused (device, corpus, model class) is resolved before the run
    folder is created, so a bad config leaves nothing behind. Returns the summary dict.
    """
    t = cfg.train
    device = resolve_device(t.device)
    if t.threads:
        torch.set_num_threads(t.threads)
    corpus = load_corpus(cfg)
    stream = BatchStream(corpus, cfg, device)
    torch.manual_seed(derive_seed(t.seed, "init"))
    model = build_model(cfg.model).to(device)
    torch.manual_seed(derive_seed(t.seed, "dropout"))
    precision = make_precision(cfg.precision, device)
    opt = make_optimizer(model, cfg, device)
    params = [p for p in model.parameters() if p.requires_grad]
    scaler = precision.scaler
    clip = cfg.optim.clip if cfg.optim.clip is not None else math.inf
    val_batches = stream.val_batches()
    probe_x = val_batches[0][0]
    # Injections in logged step numbers (index i is logged as step i + 1), first and last
    # step inclusive, so a report can tell injected spikes from spontaneous ones.
    injections = list(stream.injections)
    shocked = lr_shock_steps(cfg)
    if shocked:
        injections.append({"kind": "lr_shock", "factor": cfg.faults.lr_shock_factor,
                           "first_step": shocked.start + 1, "last_step": shocked.stop})
    if corpus.meta.get("contamination"):
        injections.append({"kind": cfg.faults.burst, "target": "corpus",
                           "segments": len(corpus.meta["contamination"])})

    run_dir = Path(run_dir) if run_dir is not None else new_run_dir(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "config.json", cfg.to_dict())
    meta = {
        "environment": environment(device),
        "precision": precision.label,
        "precision_impl": precision.impl,
        "n_params": sum(p.numel() for p in params),
        "corpus": corpus.meta,
        "injections": injections,
    }
    atomic_write_json(run_dir / "meta.json", meta)
    sinks = [JsonlSink(run_dir / "metrics.jsonl"), *sinks]
    for s in sinks:
        s.start({**meta, "run_dir": str(run_dir)})
    # The online spike monitor: O(1) per step, fed host floats at each read-back.
    monitor = SpikeMonitor(cfg.spikes.detector, ("train/loss", "optim/grad_norm"),
                           gap=cfg.spikes.gap)

    # Device-side records of the current log interval, read back together in flush().
    pending: list[dict[str, Any]] = []
    first_bad = torch.full((), -1, dtype=torch.long, device=device)
    skipped = torch.zeros((), dtype=torch.long, device=device)
    tokens = 0
    t0 = last_flush = time.perf_counter()
    tokens_at_flush = 0
    status, diverged_step = "completed", None
    val_history: list[tuple[int, float]] = []

    def emit(records: list[dict[str, Any]]) -> None:
        for rec in records:
            monitor.update(rec["step"], rec)
            for s in sinks:
                s.write(rec)

    def flush() -> tuple[list[dict[str, Any]], int | None]:
        """Read the interval's metrics back in one sync: (records, first bad step or None)."""
        nonlocal last_flush, tokens_at_flush
        keys = [(i, k) for i, rec in enumerate(pending) for k, v in rec.items()
                if isinstance(v, torch.Tensor)]
        # float64 keeps step numbers exact; first_bad rides along so this is the only sync.
        values = torch.stack([pending[i][k].double() for i, k in keys]
                             + [first_bad.double()]).tolist()
        *values, bad = values
        for (i, k), v in zip(keys, values, strict=True):
            pending[i][k] = v
        bad = int(bad)
        now = time.perf_counter()
        rate = (tokens - tokens_at_flush) / max(now - last_flush, 1e-9)
        for rec in pending:
            rec["perf/tokens_per_s"] = rate
        records = [r for r in pending if bad < 0 or r["step"] <= bad]
        if records:  # after a divergence: when it was read back (steps do not sync)
            records[-1]["time/elapsed_s"] = now - t0
        pending.clear()
        last_flush, tokens_at_flush = now, tokens
        return records, (bad if bad >= 0 else None)

    def run_eval(step: int) -> float:
        # Evaluation time is excluded from the trial's clock (AlgoPerf's convention).
        nonlocal t0, last_flush
        start = time.perf_counter()
        val = float(evaluate(model, val_batches, precision))
        val_history.append((step, val))
        spent = time.perf_counter() - start
        t0, last_flush = t0 + spent, last_flush + spent
        return val

    emit([{"step": 0, "data/tokens": 0, "val/loss": run_eval(0), "time/elapsed_s": 0.0}])
    model.train()
    step = 0
    for step in range(1, t.steps + 1):
        i = step - 1  # 0-based index for schedules and data
        lr = cfg.optim.lr * lr_factor(i, t.steps, cfg.schedule) * (
            cfg.faults.lr_shock_factor if i in shocked else 1.0)
        for group in opt.param_groups:
            group["lr"] = lr

        x, y = stream.batch(i)
        loss_sum = torch.zeros((), device=device)
        for xm, ym in zip(x.chunk(cfg.optim.grad_accum), y.chunk(cfg.optim.grad_accum),
                          strict=True):
            with precision.autocast():
                _, loss = model(xm, ym)
            loss = loss / cfg.optim.grad_accum
            (scaler.scale(loss) if scaler else loss).backward()
            loss_sum += loss.detach()
        tokens += x.numel()

        if scaler:
            scaler.unscale_(opt)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
        # With a scaler, non-finite grads are fp16 overflow: the scaler skips the step and
        # lowers the scale (counted, not fatal). Only a non-finite loss means divergence then.
        bad = ~torch.isfinite(loss_sum) if scaler else ~(
            torch.isfinite(loss_sum) & torch.isfinite(grad_norm))
        first_bad.copy_(torch.where(bad & (first_bad < 0), step, first_bad))

        probing = step % t.probe_every == 0
        before = [p.detach().clone() for p in params] if probing else None
        if scaler:
            scale_before = loss_scale_tensor(scaler).clone()
            scaler.step(opt)
            scaler.update()
            scale_now = loss_scale_tensor(scaler)
            skipped += (scale_now < scale_before).long()
        else:
            opt.grad_scale, opt.found_inf = None, bad.float()
            opt.step()
            del opt.grad_scale, opt.found_inf
        opt.zero_grad(set_to_none=True)

        rec: dict[str, Any] = {
            "step": step,
            "train/loss": loss_sum,
            "optim/grad_norm": grad_norm,
            "optim/lr": lr,
            "data/tokens": tokens,
            "data/seq_len": x.shape[1],
        }
        if i in stream.fault_steps:
            rec[INJECTED_KEY] = 1
        if scaler:
            rec["optim/loss_scale"] = scale_now.clone()
            rec["optim/skipped_steps"] = skipped.clone()
        else:
            rec["optim/loss_scale"] = 1.0  # every mode logs one, so logs share their keys
        if probing:
            rec["probe/update_ratio"] = _update_ratio(params, before)
            rec.update(probe(model, probe_x))
        pending.append(rec)

        evaluating = step % t.eval_every == 0 or step == t.steps
        if step % t.log_every == 0 or evaluating:
            records, diverged_step = flush()
            if diverged_step is None and evaluating:
                records[-1]["val/loss"] = run_eval(step)
            emit(records)
            if diverged_step is not None:
                status = "diverged"
                tokens = records[-1]["data/tokens"]  # as of the bad step, not the interval
                break

    seconds = time.perf_counter() - t0
    monitor.finish()
    vals = [v for _, v in val_history if math.isfinite(v)]
    summary = {
        "status": status,
        "steps": diverged_step if diverged_step is not None else step,
        "tokens": tokens,
        "seconds": seconds,
        "diverged_step": diverged_step,
        "initial_val_loss": val_history[0][1],
        "final_val_loss": val_history[-1][1] if status == "completed" else None,
        "best_val_loss": min(vals) if vals else None,
        "skipped_steps": int(skipped),
        "precision": precision.label,
        "evals": [{"step": s, "val/loss": v} for s, v in val_history],
    }
    for s in sinks:
        s.close(summary)
    # Scores are pure functions of the log just written (the same code as `spikebench spikes`),
    # with the events the online monitor found.
    with open(run_dir / "metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    summary["spikes"] = summarize(
        records, rule=cfg.spikes.detector, tokens_key="data/tokens",
        seconds_key="time/elapsed_s", target=cfg.spikes.target_loss,
        diverged_step=diverged_step, events=monitor.events, gap=cfg.spikes.gap)
    atomic_write_json(run_dir / "summary.json", summary)
    return summary
