"""Labelled logs from real loss traces: spikes of known onset, shape and height planted in.

A real trace (the per-step training loss of a clean run) has its own trend and noise. Here
its per-step noise is sigma = 1.4826 x MAD of the first differences / sqrt(2), over a
window around each planted position. Heights are in those units. Planted, additively:

- ``single``: one step at height h;
- ``burst``: 2-5 consecutive steps at h (each step x U(0.8, 1));
- ``slow``: a sharp rise to h, then exponential recovery with a time constant of 10-60;
- ``ramp``: a rise over 3-8 steps to h, then a drop back within 1-3 steps.

Negatives, which a detector must leave alone: level shifts up (1.5-3 sigma, persistent) and
down (2-15 sigma, like an LR decay), and bursts of extra noise (10-40 steps at 2-3x the
noise). A sampled log keeps every ``every``-th row (W&B and TensorBoard exports often do).
A label stays only if kept rows see it at least 3 sigma high. Its onset and end move to
the first and last such rows, and its height is the highest those rows show: a spike no
logged row sees cannot be found.
"""

from __future__ import annotations

import math

import numpy as np

from spikebench.spikes.synthetic import InjectedSpike, SyntheticLog

SHAPES = ("single", "burst", "slow", "ramp")
BANDS = ((3.0, 5.0), (5.0, 8.0), (8.0, 20.0))  # heights in sigma, the reported bands


def noise_sigma(loss: np.ndarray, at: int, half: int = 128) -> float:
    """The trace's per-step noise around row ``at``: MAD of first differences / sqrt 2."""
    seg = loss[max(0, at - half): at + half]
    d = np.diff(seg)
    mad = float(np.median(np.abs(d - np.median(d))))
    return 1.4826 * mad / math.sqrt(2)


def _profile(shape: str, h: float, rng: np.random.Generator) -> np.ndarray:
    """The planted addition, in sigma, from its onset."""
    if shape == "single":
        return np.array([h])
    if shape == "burst":
        return h * rng.uniform(0.8, 1.0, int(rng.integers(2, 6)))
    if shape == "slow":
        tau = rng.uniform(10, 60)
        n = int(5 * tau)
        return h * np.exp(-np.arange(n) / tau)
    rise = int(rng.integers(3, 9))  # ramp: up over `rise` steps, down within 1-3
    fall = int(rng.integers(1, 4))
    up = h * np.arange(1, rise + 1) / rise
    return np.concatenate([up, h * np.linspace(1, 0, fall + 1)[1:-1]])


def plant(loss: np.ndarray, seed: int, *, n_spikes: int = 8, n_negatives: int = 4,
          skip: int = 200, every: int = 1) -> SyntheticLog:
    """A labelled log from the clean trace ``loss`` (one value per step from step 1).

    ``n_spikes`` spikes, shape uniform over :data:`SHAPES`, height uniform within a band
    drawn uniformly from :data:`BANDS`; ``n_negatives`` level shifts and noise bursts;
    nothing in the first ``skip`` steps (the steep early drop). Positions are spread so
    that no two plantings overlap. ``every`` > 1 keeps every ``every``-th row.
    """
    rng = np.random.default_rng(seed)
    y = np.asarray(loss, dtype=float).copy()
    n = len(y)
    kinds = ["spike"] * n_spikes + ["negative"] * n_negatives
    rng.shuffle(kinds)
    slots = np.linspace(skip, n - 80, len(kinds) + 1).astype(int)
    spikes: list[InjectedSpike] = []
    shifts: list[tuple[int, str, str, float]] = []
    added = np.zeros(n)  # the planted height at each step, in sigma
    for i, kind in enumerate(kinds):
        lo, hi = slots[i], slots[i + 1] - 60
        at = int(rng.integers(lo, max(lo + 1, hi)))
        sig = noise_sigma(y, at)
        if kind == "spike":
            shape = SHAPES[int(rng.integers(len(SHAPES)))]
            band = BANDS[int(rng.integers(len(BANDS)))]
            h = float(rng.uniform(*band))
            add = _profile(shape, h, rng)[: n - at]
            if shape == "slow":  # the label spans the part above one sigma
                add = add[: max(1, int(np.sum(add > 1.0)))]
            y[at: at + len(add)] += sig * add
            added[at: at + len(add)] = add
            spikes.append(InjectedSpike("loss", shape, at + 1, at + len(add), h))
            continue
        what = ("shift_up", "shift_down", "noise")[int(rng.integers(3))]
        if what == "shift_up":
            s = float(rng.uniform(1.5, 3.0))
            y[at:] += s * sig
        elif what == "shift_down":
            s = -float(rng.uniform(2.0, 15.0))
            y[at:] += s * sig
        else:
            s = float(rng.uniform(2.0, 3.0))
            length = int(rng.integers(10, 41))
            extra = math.sqrt(s * s - 1.0) * sig * rng.standard_normal(length)
            y[at: at + length] += extra[: n - at]
        shifts.append((at + 1, "loss", what, s))
    steps = np.arange(1, n + 1)
    log = SyntheticLog(seed, steps, y, np.ones(n), spikes, shifts)
    return subsample(log, every, added) if every > 1 else log


def subsample(log: SyntheticLog, every: int, added: np.ndarray) -> SyntheticLog:
    """Every ``every``-th row of ``log``. A label keeps the rows that see it, and its
    height becomes the largest planted height those rows show (``added``, per step, in
    sigma); one that no kept row sees 3 sigma high (the lowest band) is dropped."""
    keep = log.steps % every == 0
    steps = log.steps[keep]
    spikes = []
    for sp in log.spikes:
        seen = steps[(steps >= sp.onset) & (steps <= sp.end)]
        height = float(added[seen - 1].max()) if len(seen) else 0.0
        if height >= BANDS[0][0]:
            spikes.append(InjectedSpike(sp.metric, sp.shape, int(seen[0]), int(seen[-1]),
                                        height))
    return SyntheticLog(log.seed, steps, log.loss[keep], log.grad_norm[keep], spikes,
                        log.shifts)


def band_of(height: float) -> int:
    """The index in :data:`BANDS` of a height in sigma."""
    return next(i for i, (lo, hi) in enumerate(BANDS) if lo <= height < hi or (
        i == len(BANDS) - 1 and height >= lo))
