"""A run read for the scorecard: its loss events (the labels) and its signals' series.

The labels are the onsets of the loss events the validated detector finds in the run's own
log (:func:`spikebench.runs.score.score_run`, the rule ``spikebench spikes`` applies), so any
log ``spikebench spikes`` reads can be scored. Events in the first ``burn_in`` steps are
left out (every signal moves in a run's steep early drop, and no trailing window is full
yet), as are their rows.

A **control** event is one with a known instant cause in the rows just before it: an
injected batch (``data/injected``) or an LR raised more than ``LR_JUMP`` times over one
step (an LR shock), within ``CAUSE_ROWS`` logged rows up to its onset. Nothing can foresee
such a spike from the model's state, so a signal's lead on the control should come out
about 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from spikebench import metrics as M
from spikebench.runs.model import RunLog
from spikebench.runs.score import score_run

LR_JUMP = 2.0
CAUSE_ROWS = 5


@dataclass
class Labelled:
    """One run: ``steps`` every logged step; ``onsets`` its loss events' onsets (those
    after ``burn_in``), ``control`` the ones with a known instant cause; ``table`` every
    column as floats on ``steps`` (NaN where a row lacks it)."""

    name: str
    seed: int | None
    steps: np.ndarray
    onsets: list[int]
    control: list[int]
    table: dict[str, np.ndarray] = field(default_factory=dict)
    burn_in: int = 0

    @property
    def scored_steps(self) -> int:
        """The steps after the burn-in: what false alarms are counted over."""
        return int((self.steps > self.burn_in).sum())


def _table(run: RunLog) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    steps = np.array([r[M.STEP] for r in run.records], dtype=np.int64)
    keys = sorted({k for r in run.records for k in r} - {M.STEP})
    table = {}
    for k in keys:
        col = np.full(len(steps), np.nan)
        for i, r in enumerate(run.records):
            v = r.get(k)
            if v is not None and not isinstance(v, str):
                col[i] = float(v)
        table[k] = col
    return steps, table


def _caused(steps: np.ndarray, table: dict[str, np.ndarray], onset: int) -> bool:
    i = int(np.searchsorted(steps, onset))
    lo = max(0, i - CAUSE_ROWS)
    inj = table.get(M.INJECTED)
    if inj is not None and np.nansum(inj[lo:i + 1]) > 0:
        return True
    lr = table.get(M.LR)
    if lr is not None and i > 0:
        seg = lr[max(0, lo - 1):i + 1]
        with np.errstate(all="ignore"):
            ratio = seg[1:] / seg[:-1]
        return bool(np.nanmax(ratio, initial=0.0) > LR_JUMP)
    return False


def label(run: RunLog, *, burn_in: int = 50, gap: int = 5) -> Labelled:
    """The run's labels and columns (see the module docstring)."""
    scored = score_run(run, gap=gap)
    steps, table = _table(run)
    onsets, control = [], []
    for e in scored["events"]:
        if e["metric"] != "loss" or e["onset"] is None or e["onset"] <= burn_in:
            continue
        (control if _caused(steps, table, int(e["onset"])) else onsets).append(int(e["onset"]))
    return Labelled(run.name, run.seed, steps, sorted(onsets), sorted(control), table, burn_in)
