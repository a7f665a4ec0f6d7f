"""Kendall's tau between two rankings of the same arms, with an exact permutation p and a
bootstrap interval over seeds.

The report's "across sizes" section asks whether a small model ranks the strategies as the
largest one does. Each ranking is of the arms' means over seeds, so tau's sampling error
comes from the seeds: the interval resamples the seeds (the same draw for every arm and
both sizes, so seed-matched pairs stay matched) and ranks again. The permutation p asks
whether the agreement is more than chance: every assignment of one size's values to the
arms (a seeded sample past :data:`EXACT_UP_TO` arms).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

EXACT_UP_TO = 8  # arms whose every permutation is enumerated (8! = 40,320); beyond, sampled
N_SAMPLED = 20_000
N_BOOT = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Tau:
    """tau-b of two rankings, its percentile bootstrap interval over seeds (None where no
    resample gives one) and the one-sided permutation p of "they agree no more than
    chance"; ``n`` arms, ``seeds`` the seeds resampled, ``why`` where tau has no value."""

    value: float | None
    lo: float | None
    hi: float | None
    p: float | None
    n: int
    seeds: int
    why: str = ""


def tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row pair of ``x`` and ``y`` (shape (..., n)), ties counted
    as neither concordant nor discordant; NaN where a row is all ties. Infinite values
    rank last and tie with each other."""
    x, y = np.atleast_2d(x), np.atleast_2d(y)
    i, j = np.triu_indices(x.shape[-1], k=1)

    def sign(a):
        d = a[..., i] - a[..., j]
        both_inf = np.isinf(a[..., i]) & np.isinf(a[..., j]) & (a[..., i] == a[..., j])
        return np.where(both_inf, 0.0, np.sign(np.nan_to_num(d, nan=0.0)))

    sx, sy = sign(x), sign(y)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sx * sy).sum(-1) / np.sqrt((sx != 0).sum(-1) * (sy != 0).sum(-1))


def permutation_p(x: np.ndarray, y: np.ndarray) -> float:
    """One-sided p of tau >= the observed one when ``y``'s values are assigned to the arms
    at random: exact up to :data:`EXACT_UP_TO` arms, else a seeded sample that holds the
    observed assignment."""
    n = len(x)
    if n <= EXACT_UP_TO:
        perms = np.array(list(itertools.permutations(range(n))))
    else:
        rng = np.random.default_rng(0)
        perms = np.array([np.arange(n)] + [rng.permutation(n) for _ in range(N_SAMPLED - 1)])
    taus = tau_b(np.broadcast_to(x, (len(perms), n)), np.asarray(y)[perms])
    observed = float(tau_b(x, y)[0])
    return float(np.mean(np.nan_to_num(taus, nan=-2.0) >= observed - 1e-12))


def _means(values: np.ndarray) -> np.ndarray:
    """Each arm's mean over the last axis (seeds); a seed's +inf (a run that diverged, for
    final loss) makes the mean +inf: that arm ranks last."""
    return values.mean(axis=-1)


def agreement(small: np.ndarray, large: np.ndarray, *, n_boot: int = N_BOOT) -> Tau:
    """tau between the arms' means at two sizes; ``small`` and ``large`` are (arms, seeds),
    the same arms and seeds in the same order."""
    arms, seeds = small.shape
    if arms < 3:
        return Tau(None, None, None, None, arms, seeds, f"{arms} arm(s): tau needs 3")
    if seeds == 0 or np.isnan(small).any() or np.isnan(large).any():
        return Tau(None, None, None, None, arms, seeds, "no seed with a value for every arm")
    x, y = _means(small), _means(large)
    value = float(tau_b(x, y)[0])
    if math.isnan(value):
        return Tau(None, None, None, None, arms, seeds, "every arm ties at a size")
    rng = np.random.default_rng(0)
    draw = rng.integers(0, seeds, size=(n_boot, seeds))
    boot = tau_b(_means(small[:, draw].transpose(1, 0, 2)),
                 _means(large[:, draw].transpose(1, 0, 2)))
    boot = boot[~np.isnan(boot)]  # a resample in which every arm ties at a size
    lo = hi = None
    if seeds > 1 and boot.size:
        tail = (1 - LEVEL) / 2
        lo, hi = (float(v) for v in np.quantile(boot, [tail, 1 - tail]))
    return Tau(value, lo, hi, permutation_p(x, y), arms, seeds)
