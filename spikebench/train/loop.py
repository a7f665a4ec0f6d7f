"""One pretraining trial, every stability strategy a config switch. Read it top to bottom.

The hot loop never reads a value back from the device: :func:`train_step` returns device
tensors, and :class:`~spikebench.train.buffer.MetricsBuffer` reads a log interval back in
one sync. A non-finite loss or grad norm is caught *before* the optimizer step without a
sync: the fused AdamW step takes a ``found_inf`` tensor (the contract GradScaler uses) and
skips the update on the device; the trial ends ``diverged`` at the next read-back
(``SPIKEBENCH_SYNC_DEBUG=error`` checks this on CUDA: :mod:`.sync_debug`).

``train.compile`` runs the training step through ``torch.compile`` (:mod:`.compile`); the
steps that compile are off the training clock, and their time is the summary's
``compile_s``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from spikebench import metrics as M
from spikebench.config import Config
from spikebench.data.batches import BatchStream
from spikebench.data.corpus import load_corpus
from spikebench.data.faults import injections, lr_shock_steps
from spikebench.data.seeds import derive_seed
from spikebench.errors import UserError
from spikebench.model import build_model, probed, probing
from spikebench.precision import Precision, loss_scale_tensor
from spikebench.runio import atomic_write_json, environment, memory, new_run_dir
from spikebench.scoring.run import summarize
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.study import layout as L
from spikebench.train import checkpoint
from spikebench.train.buffer import MetricsBuffer
from spikebench.train.compile import CompileClock, choose, compile_model
from spikebench.train.dist import SINGLE, Dist, setup
from spikebench.train.optim import adam_probes, make_optimizer, update_probes
from spikebench.train.rollback import Rollback
from spikebench.train.schedule import lr_at
from spikebench.train.setup import (
    check_resume,
    check_world,
    preflight,
    resolve_device,
    resolve_precision,
    resumable,
)
from spikebench.train.sinks import JsonlSink, Sink
from spikebench.train.skip_step import SkipStep
from spikebench.train.state import (
    Progress,
    capture,
    load_train_state,
    read_log,
    restore,
    train_state,
)
from spikebench.train.sync_debug import SyncDebug
from spikebench.train.zclip import ZClip


@dataclass
class StepOutput:
    """One step's results, all device tensors (nothing here has synced)."""

    loss: torch.Tensor  # mean over the micro-batches
    grad_norm: torch.Tensor  # pre-clip global norm
    bad: torch.Tensor  # bool: the update was skipped as non-finite (divergence)
    loss_scale: torch.Tensor | None = None  # fp16 with scaling only
    overflow: torch.Tensor | None = None  # bool: the scaler skipped this step (fp16)
    probes: dict[str, torch.Tensor] | None = None  # the update and Adam probes, when probed
    skipped: torch.Tensor | None = None  # bool: skip-step skipped the update
    clip_bound: torch.Tensor | None = None  # ZClip's bound


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, params: list[torch.Tensor],
               x: torch.Tensor, y: torch.Tensor, *, precision: Precision, grad_accum: int,
               clip: float, probe_update: bool = False, zclip: ZClip | None = None,
               skipper: SkipStep | None = None, dist: Dist = SINGLE) -> StepOutput:
    """Forward and backward over ``grad_accum`` micro-batches, unscale, clip (fixed, then
    ZClip's bound), step; skip-step and the divergence guard skip the update on the
    device. Data-parallel (``model`` a DDP module, ``x`` this rank's rows): the gradients
    are averaged once, in the last micro-batch's backward, and the loss over the ranks, so
    every rank judges the same global values."""
    scaler = precision.scaler
    loss_sum = None
    micro = list(zip(x.chunk(grad_accum), y.chunk(grad_accum), strict=True))
    for j, (xm, ym) in enumerate(micro):
        quiet = j < len(micro) - 1 and hasattr(model, "no_sync")  # DDP: all-reduce once
        with model.no_sync() if quiet else nullcontext():
            with precision.autocast():
                _, loss = model(xm, ym)
            if grad_accum > 1:  # one micro-batch: no division, the bare loop's ops
                loss = loss / grad_accum
            (scaler.scale(loss) if scaler else loss).backward()
        # The first term starts the sum (fp32 whatever the model returns; no copy if it is).
        loss_sum = loss.detach().float() if loss_sum is None else loss_sum + loss.detach()
    dist.mean_(loss_sum)  # on the device: an all-reduce, no host sync

    if scaler:
        scaler.unscale_(opt)
    grad_norm = torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
    # With a scaler, non-finite grads are fp16 overflow: the scaler skips the step and lowers
    # the scale (counted, not fatal). Only a non-finite loss means divergence then.
    # (A sum is non-finite if either term is: one op fewer than two isfinite and an and.)
    bad = ~torch.isfinite(loss_sum if scaler else loss_sum + grad_norm)
    out = StepOutput(loss_sum, grad_norm, bad)
    if zclip is not None:
        grads = [p.grad for p in params if p.grad is not None]
        out.clip_bound = zclip.clip_(grads, grad_norm.clamp(max=clip))
    skip = bad
    if skipper is not None:
        out.skipped = skipper.check(loss_sum, grad_norm)
        skip = bad | out.skipped

    before = [p.detach().clone() for p in params] if probe_update else None
    adam = adam_probes(opt) if probe_update else {}  # v before this step's gradient enters
    if scaler:
        scale_before = loss_scale_tensor(scaler).clone()
        scaler.step(opt)
        scaler.update()
        out.loss_scale = loss_scale_tensor(scaler)
        out.overflow = out.loss_scale < scale_before
    else:
        opt.grad_scale, opt.found_inf = None, skip.float()
        opt.step()
        del opt.grad_scale, opt.found_inf
    opt.zero_grad(set_to_none=True)
    if before is not None:
        out.probes = {**update_probes(params, before), **adam}
    return out


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


def train(cfg: Config, run_dir: str | Path | None = None, sinks: Sequence[Sink] = (), *,
          resume: bool = False) -> dict:
    """Run one trial; write ``config.json``, ``meta.json``, ``metrics.jsonl``, ``summary.json``.

    Everything that can be refused (device, corpus, model class) is resolved before the run
    folder is created, so a bad config leaves nothing behind. ``resume``: continue the
    killed run in ``run_dir`` from its newest usable checkpoint (from step 0 if it has
    none). Returns the summary dict.

    Under torchrun (``WORLD_SIZE`` > 1) this is one rank of a data-parallel run
    (:mod:`.dist`); only rank 0 writes files and calls ``sinks``, and the other ranks
    return ``{"status", "steps", "rank"}``.
    """
    guard = SyncDebug.from_env("cuda")  # a bad SPIKEBENCH_SYNC_DEBUG is refused first
    try:
        return _train(cfg, run_dir, sinks, resume=resume, guard=guard)
    finally:
        guard.disarm()  # also when the run fails: the process goes on without the check


def _train(cfg: Config, run_dir: str | Path | None, sinks: Sequence[Sink], *, resume: bool,
           guard: SyncDebug) -> dict:
    t = cfg.train
    preflight(cfg, run_dir=run_dir)
    if resume:
        check_resume(Path(run_dir))
    dist, device = setup(resolve_device(t.device), t.dist_timeout_s)
    if device.type != "cuda":
        guard.mode = None
    compiling = choose(t.compile, device)
    check_world(cfg, dist)
    # Sinks that act ([warning]: spikebench.api.engine_warning) see each record before the
    # others, and scale the LR; the rule sits above this package, so callers hand it in.
    acting = [s for s in sinks if hasattr(s, "lr_factor")]
    if cfg.warning.signal and dist.main and not acting:
        raise UserError("warning.signal is set, but this caller of train() gave no warning "
                        "sink (spikebench.api.engine_warning.sinks_for(cfg))")
    if t.threads or dist.world > 1:  # a trial's threads (or the cores) shared by its ranks
        torch.set_num_threads(max(1, (t.threads or os.cpu_count() or 1) // dist.local_world))
    # An automatic cleaning cache lives in the output folder: beside the run folder.
    corpus = load_corpus(cfg, cache_home=None if run_dir is None else Path(run_dir).parent)
    stream = BatchStream(corpus, cfg, device)
    torch.manual_seed(derive_seed(t.seed, "init"))
    model = build_model(cfg.model).to(device)
    # Each rank its own dropout stream (rank 0's is the single-process one).
    torch.manual_seed(derive_seed(t.seed, "dropout", *([dist.rank] if dist.rank else [])))
    opt = make_optimizer(model, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    step_model = dist.wrap(model, device)  # the model itself when single-process
    # Compiled around DDP (its graphs split at the gradient buckets); `model` stays the
    # plain module that evaluation, probes and checkpoints use.
    clock = CompileClock() if compiling.enabled else None
    if compiling.enabled:
        step_model = compile_model(step_model, compiling)
    clip = cfg.optim.clip if cfg.optim.clip is not None else math.inf
    val_batches = stream.val_batches()
    local_val = [(dist.shard(x), dist.shard(y)) for x, y in val_batches]
    shocked = lr_shock_steps(cfg)

    if dist.main:
        run_dir = Path(run_dir) if run_dir is not None else new_run_dir(cfg)
    run_dir = Path(dist.broadcast(str(run_dir)))
    log_path = run_dir / L.METRICS
    saved = resumable(cfg, run_dir, log_path, model, opt) if resume and dist.main else None
    saved = dist.broadcast(saved) if resume else None  # the checkpoint rank 0 chose
    precision = resolve_precision(cfg, device, dist, saved)
    # The online spike monitor: O(1) per step, fed host floats at each read-back.
    monitor = SpikeMonitor(cfg.spikes.detector, (M.TRAIN_LOSS, M.GRAD_NORM), gap=cfg.spikes.gap)
    r = cfg.response
    parts = {"zclip": ZClip(cfg.optim.zclip_alpha, cfg.optim.zclip_z, cfg.optim.zclip_warmup,
                            device) if cfg.optim.clip_mode == "zclip" else None,
             "skipper": SkipStep(r.skip_window, r.skip_k, device)
             if r.kind == "skip_step" else None}
    # Every rank keeps its own ring (a disk ring: rank 0's in the run folder).
    ring_dir = run_dir if dist.main else run_dir / f"rank-{dist.rank}"
    rollback = Rollback(r, cfg.spikes.gap, ring_dir) if r.kind == "rollback" else None
    if saved is not None:  # restored before the run folder is touched: a failure leaves it
        try:
            at = restore(saved, model, opt, precision, monitor, {**parts, "rollback": rollback})
        except Exception as e:  # noqa: BLE001 - a damaged state that passed usable()
            raise UserError(f"--resume {run_dir}: the checkpoint of step {saved['step']} "
                            f"cannot be restored ({type(e).__name__}: "
                            f"{(str(e).splitlines() or [''])[0][:200]})") from None
    meta = {
        "environment": environment(device),
        "nproc": dist.world,
        "precision": precision.label,
        "precision_impl": precision.impl,
        **({"precision_choice": precision.why} if precision.why else {}),
        "compile": compiling.meta(),
        "n_params": sum(p.numel() for p in params),
        "corpus": corpus.meta,
        "injections": injections(cfg, stream.faults, corpus.meta["contamination"]),
    }
    if dist.main:
        if saved is None:
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(run_dir / L.CONFIG_JSON, cfg.to_dict())
        else:  # the first run's meta stands; each resume adds where and from which step
            first = json.loads((run_dir / L.META_JSON).read_text())
            meta = {**first, "resumes": [*first.get("resumes", []), {
                "step": saved["step"], "environment": meta["environment"],
                "precision_impl": precision.impl, "compile": compiling.enabled}]}
        atomic_write_json(run_dir / L.META_JSON, meta)
        log = JsonlSink(log_path, resume_at=saved["log_bytes"] if saved else None)
        sinks = [log, *sinks]
        for s in sinks:
            s.start({**meta, "run_dir": str(run_dir)})
    history: list[dict[str, Any]] = []  # every record, for the scores at the end

    def emit(records: list[dict[str, Any]]) -> None:
        if not dist.main:
            return
        for rec in records:
            monitor.update(rec[M.STEP], rec)
            rec[M.SPIKE_EVENTS] = monitor.n_events(M.TRAIN_LOSS)  # for live monitoring
            rec[M.SPIKE_REPORTED] = monitor.n_reported(M.TRAIN_LOSS)
            rec[M.SPIKE_WITHDRAWN] = monitor.n_withdrawn(M.TRAIN_LOSS)
            if rec is records[-1]:  # once per read-back: the process's memory
                rec.update(memory(device))
            for a in acting:
                a.observe(rec)
            for s in sinks:
                s.write(rec)
        log.flush()  # once per read-back: live readers (a sweep's metrics) see these rows
        history.extend(records)

    buffer = MetricsBuffer(device)
    skipped = torch.zeros((), dtype=torch.long, device=device)
    val_history: list[tuple[int, float]] = []
    costs = {"saved": 0, "bytes": 0, "seconds": 0.0}

    def run_eval(step: int) -> float:
        start = time.perf_counter()
        val = float(dist.mean_(evaluate(model, local_val, precision)))
        val_history.append((step, val))
        buffer.pause(time.perf_counter() - start)
        return val

    def save_checkpoint(step: int) -> None:
        start = time.perf_counter()
        progress = Progress(step, position, tokens, int(skipped), buffer.elapsed(),
                            val_history)
        state = capture(cfg, model, opt, precision, monitor, progress, log.sync(),
                        {**parts, "rollback": rollback})
        _, size = checkpoint.save(run_dir, step, state, t.keep_checkpoints)
        took = time.perf_counter() - start
        buffer.pause(took)  # off the trial's clock, as evaluation is
        costs.update(saved=costs["saved"] + 1, bytes=size, seconds=costs["seconds"] + took)

    tokens, start, position, status, diverged_step = 0, 0, 0, "completed", None
    if saved is None:
        emit([{M.STEP: 0, M.TOKENS: 0, M.VAL_LOSS: run_eval(0), M.ELAPSED_S: 0.0}])
    else:
        if dist.main:
            history.extend(read_log(log.partial, saved["log_bytes"]))
        start, position, tokens, val_history[:] = at.step, at.position, at.tokens, at.val_history
        skipped.fill_(at.skipped)
        buffer.resume(at.elapsed, at.tokens)
    model.train()
    step = start
    guard.arm()  # SPIKEBENCH_SYNC_DEBUG on CUDA: from here to a read-back, no sync
    for step in range(start + 1, t.steps + 1):
        position += 1  # = step, unless a rollback went back
        i = rollback.batch(position) if rollback else position - 1  # the batch index
        lr = lr_at(position - 1, cfg, shocked, at=step - 1) * (
            rollback.lr_factor(position) if rollback else 1.0)
        for a in acting:
            lr *= a.lr_factor(step)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = stream.batch(i)  # the global batch; this rank trains its rows
        probe_step = step % t.probe_every == 0
        if clock:
            clock.begin()
        # A probe step's forward records the precursors beside itself (no extra forward).
        with probing(model) if probe_step else nullcontext():
            out = train_step(step_model, opt, params, dist.shard(x), dist.shard(y),
                             precision=precision, grad_accum=cfg.optim.grad_accum, clip=clip,
                             probe_update=probe_step, dist=dist, **parts)
        if clock:  # a step that compiled is off the clock, as evaluation is
            buffer.pause(clock.end())
        tokens += x.numel()

        rec: dict[str, Any] = {M.STEP: step, M.TRAIN_LOSS: out.loss,
                               M.GRAD_NORM: out.grad_norm, M.LR: lr, M.TOKENS: tokens,
                               M.SEQ_LEN: x.shape[1]}
        if i in stream.fault_steps:
            rec[M.INJECTED] = 1
        if rollback:
            rec[M.POSITION] = position
        if out.skipped is not None:
            rec[M.SKIPPED_UPDATE] = out.skipped
        if out.clip_bound is not None:
            rec[M.CLIP_BOUND] = out.clip_bound
        if out.loss_scale is not None:
            skipped += out.overflow.long()
            rec[M.LOSS_SCALE] = out.loss_scale.clone()
            rec[M.SKIPPED_STEPS] = skipped.clone()
        else:
            rec[M.LOSS_SCALE] = 1.0  # every mode logs one, so logs share their keys
        if probe_step:
            rec.update(out.probes)
            if dist.main:
                rec.update(probed(model))
        buffer.add(rec, out.bad)

        # The state after this update, for the ring (a rollback drops it if it is late).
        if rollback and position % r.every == 0 and not (
                rollback.ring and rollback.ring[-1].position == position):
            rollback.keep(position, train_state(model, opt, precision, parts))

        evaluating = step % t.eval_every == 0 or step == t.steps
        checkpointing = t.checkpoint_every > 0 and (step % t.checkpoint_every == 0
                                                    or step == t.steps)
        regular = step % t.log_every == 0 or evaluating  # not a checkpoint's extra read-back
        if regular or checkpointing:
            guard.disarm()  # the read-back, evaluation, a rollback, a checkpoint: they sync
            records, diverged_step = buffer.flush(tokens)
            if diverged_step is None and evaluating:
                records[-1][M.VAL_LOSS] = run_eval(step)
            if diverged_step is None and rollback:
                onset = rollback.triggered(records, act=regular and step < t.steps)
                if dist.world > 1 and regular and step < t.steps:
                    onset = dist.broadcast(onset)  # rank 0 decides for every rank
                back = None if onset is None else rollback.roll_back(
                    onset, position, step,
                    lambda st: load_train_state(st, model, opt, precision, parts))
                if back is not None:
                    records[-1][M.ROLLBACK] = 1
                    position = back
            emit(records)
            if diverged_step is not None:
                status = "diverged"
                tokens = records[-1][M.TOKENS]  # as of the bad step, not the interval
                break
            if checkpointing and dist.main:
                save_checkpoint(step)
            guard.arm()

    guard.disarm()
    dist.check_in_sync(params)
    if not dist.main:
        return {"status": status, "steps": diverged_step or step, "rank": dist.rank}
    seconds = buffer.elapsed()
    monitor.finish()
    vals = [v for _, v in val_history if math.isfinite(v)]
    # The largest pre-softmax attention logit any probe saw: the quantity that grows without
    # bound at high LR in small Transformers (Wortsman et al. 2023) unless qk-norm bounds it.
    logits = [float(v) for r in history for k, v in r.items()
              if k.startswith(M.ATTN_LOGIT_MAX) and math.isfinite(float(v))]
    summary = {
        "status": status,
        "steps": diverged_step if diverged_step is not None else step,
        "tokens": tokens,
        "seconds": seconds,
        "diverged_step": diverged_step,
        "initial_val_loss": val_history[0][1],
        "final_val_loss": val_history[-1][1] if status == "completed" else None,
        "best_val_loss": min(vals) if vals else None,
        "max_attn_logit": max(logits) if logits else None,
        "skipped_steps": int(skipped),
        "checkpoints": costs,
        # Seconds of the steps that compiled (off the clock, as evaluation is); None: eager.
        "compile_s": clock.seconds if clock else None,
        "response": {
            "kind": r.kind,
            "rollbacks": rollback.events if rollback else [],
            "redone_steps": sum(e["redone_steps"] for e in rollback.events) if rollback else 0,
            "skipped_batches": rollback.offset if rollback else 0,
            "skipped_updates": int(sum(rec.get(M.SKIPPED_UPDATE) or 0 for rec in history)),
        },
        "precision": precision.label,
        "evals": [{M.STEP: s, M.VAL_LOSS: v} for s, v in val_history],
    }
    # Scores are pure functions of the records (the same code as `spikebench spikes`), with
    # the events the online monitor found.
    summary["spikes"] = summarize(
        history, rule=cfg.spikes.detector, tokens_key=M.TOKENS, seconds_key=M.ELAPSED_S,
        target=cfg.spikes.target_loss, diverged_step=diverged_step, events=monitor.events,
        gap=cfg.spikes.gap, reports=monitor.reports(M.TRAIN_LOSS))
    for s in sinks:  # after the spikes: the end settles their counts
        s.close(summary)
    atomic_write_json(run_dir / L.SUMMARY_JSON, summary)
    return summary
