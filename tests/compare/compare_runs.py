"""Generated runs for the compare tests: :class:`RunLog` lists built in memory, no reader.

Two groups of seeded runs whose training loss decays to a floor: ``calm`` with no spike,
``spiky`` with :data:`PLANTED` spikes per run at fixed steps (big enough that the default
detector finds each). Seeds, lengths, logging intervals and validation losses are chosen
per call, so one helper makes the paired, the unpaired and the cut cases.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from spikebench import metrics as M
from spikebench.runs.model import RunLog

STEPS = 400
PLANTED = (120, 260)  # the spiky group's spikes, each a 1.5-nat jump decaying over 4 steps


def records(seed: int, *, steps: int = STEPS, every: int = 1, spikes=(), val_every: int = 50,
            tau: float = 60.0, offset: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for s in range(offset, steps + 1, every):
        loss = 2.5 + 3.0 * math.exp(-s / tau) + rng.gauss(0, 0.02)
        for at in spikes:
            if at <= s < at + 4:
                loss += 1.5 * (1 - (s - at) / 4)
        r = {M.STEP: s, M.TRAIN_LOSS: loss, M.GRAD_NORM: 1.0 + 0.1 * rng.random()}
        if val_every and s and s % val_every == 0:
            r[M.VAL_LOSS] = 2.55 + 3.0 * math.exp(-s / tau)
        out.append(r)
    return out


def run(group: str, k: int, *, seed: int | None = None, **kw) -> RunLog:
    spiky = group == "spiky"
    return RunLog(name=f"{group}/run{k}", path=Path(f"/nonexistent/{group}/run{k}"),
                  format="jsonl", step_column="step", loss_column="loss",
                  records=records(1000 * spiky + k, spikes=PLANTED if spiky else (), **kw),
                  params={"setting": group, "lr": 3e-3}, seed=seed)


def groups(n: int = 6, *, seeds: bool = True, spiky_kw=None, calm_kw=None) -> list[RunLog]:
    """``n`` calm and ``n`` spiky runs; seeds 0..n-1 in both (paired) or none (unpaired)."""
    return ([run("calm", k, seed=k if seeds else None, **(calm_kw or {})) for k in range(n)]
            + [run("spiky", k, seed=k if seeds else None, **(spiky_kw or {}))
               for k in range(n)])
