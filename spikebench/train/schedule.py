"""Learning-rate schedules as pure functions of the step."""

from __future__ import annotations

import math

from spikebench.config import Config, ScheduleConfig


def warmup_steps(cfg: ScheduleConfig, total_steps: int) -> int:
    return round(cfg.warmup_ratio * total_steps)


def lr_factor(step: int, total_steps: int, cfg: ScheduleConfig) -> float:
    """Multiplier of the peak LR at 0-based ``step`` of ``total_steps``.

    Linear warmup from 1/warmup to 1 over the first ``warmup_ratio`` of the steps (so step 0
    never trains at LR 0), then ``cfg.kind`` decay from 1 to ``min_lr_ratio`` at the last step.
    With no warmup the decay starts at step 0; with warmup_ratio = 1 there is no decay.
    """
    warm = warmup_steps(cfg, total_steps)
    if step < warm:
        return (step + 1) / warm
    span = total_steps - warm - 1
    progress = min(1.0, (step - warm) / span) if span > 0 else 1.0
    low = cfg.min_lr_ratio
    if cfg.kind == "constant":
        return 1.0
    if cfg.kind == "linear":
        return 1.0 - (1.0 - low) * progress
    return low + (1.0 - low) * 0.5 * (1.0 + math.cos(math.pi * progress))


def lr_at(step: int, cfg: Config, shocked: range, at: int | None = None) -> float:
    """The LR applied at 0-based schedule position ``step``: peak x schedule factor x the LR
    shock where it applies (``shocked``: :func:`spikebench.data.faults.lr_shock_steps`),
    timed by ``at``, the 0-based step worked (default ``step``; they differ after a rollback,
    which redoes positions of the schedule but not the time the shock happened at)."""
    at = step if at is None else at
    return cfg.optim.lr * lr_factor(step, cfg.train.steps, cfg.schedule) * (
        cfg.faults.lr_shock_factor if at in shocked else 1.0)
