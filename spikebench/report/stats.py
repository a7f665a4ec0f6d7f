"""Confidence intervals for the report: seeded bootstraps, exact binomial intervals, verdicts.

Everything is deterministic: each bootstrap draws from ``numpy.random.default_rng(seed)``
with a fixed default seed, so the same results give the same report byte for byte.

Percentile bootstrap intervals use the ``lower``/``higher`` order statistics (no
interpolation), which keeps them inside the observed values and lets infinite resampled
values (a relative change over a zero baseline) pass through without producing NaN. With
three seeds a bootstrap interval is little more than the range of the data and covers the
truth less often than 95%: the report says so next to the tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
N_BOOT = 2000
SEED = 0
SEEDS_CAP = 1000


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval; ``lo``/``hi`` are None where no interval exists
    (fewer than two values), ``value`` is None where there is no data at all."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str = ""

    @property
    def half_width(self) -> float | None:
        if self.lo is None or self.hi is None or not (math.isfinite(self.lo)
                                                      and math.isfinite(self.hi)):
            return None
        return (self.hi - self.lo) / 2


NONE = Estimate(None, None, None, 0, "no data")


def _stat(name: str | Callable) -> Callable[[np.ndarray], np.ndarray]:
    if callable(name):
        return name
    return {"mean": lambda a: a.mean(axis=-1), "median": lambda a: np.median(a, axis=-1)}[name]


def _percentiles(boot: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    lo = float(np.quantile(boot, alpha, method="lower"))
    hi = float(np.quantile(boot, 1 - alpha, method="higher"))
    return lo, hi


def bootstrap_ci(values: Sequence[float], stat: str | Callable = "mean", *,
                 level: float = LEVEL, n_boot: int = N_BOOT, seed: int = SEED) -> Estimate:
    """Percentile bootstrap interval of ``stat`` ("mean", "median" or a function of a 2-D
    array reducing its last axis) over ``values``.

    No values: :data:`NONE`. One value: the value with no interval (a single seed says
    nothing about the spread). All values equal: a zero-width interval at that value.
    """
    x = np.asarray([float(v) for v in values], dtype=float)
    if x.size == 0:
        return NONE
    f = _stat(stat)
    value = float(f(x[None, :])[0])
    if x.size == 1:
        return Estimate(value, None, None, 1, f"bootstrap {stat}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    lo, hi = _percentiles(f(x[idx]), level)
    return Estimate(value, lo, hi, int(x.size), f"bootstrap {stat}")


def _binom_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _bisect(f: Callable[[float], float], target: float, lo: float = 0.0, hi: float = 1.0,
            decreasing: bool = True) -> float:
    for _ in range(60):  # 2^-60: well below any printed digit
        mid = (lo + hi) / 2
        above = f(mid) > target
        if above == decreasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def rate_ci(k: int, n: int, *, level: float = LEVEL) -> Estimate:
    """Exact (Clopper-Pearson) interval of a success rate ``k``/``n``.

    Solved by bisection on the binomial CDF, so it needs no scipy. ``n == 0``: :data:`NONE`.
    The interval is conservative (covers at least ``level``), and never degenerate: 3 of 3
    gives [0.29, 1].
    """
    if n <= 0:
        return NONE
    if not 0 <= k <= n:
        raise ValueError(f"rate_ci: k={k} outside [0, {n}]")
    alpha = 1 - level
    # lo: P(X >= k | p) = alpha/2; hi: P(X <= k | p) = alpha/2. Both CDFs fall with p.
    lo = 0.0 if k == 0 else _bisect(lambda p: _binom_cdf(k - 1, n, p), 1 - alpha / 2)
    hi = 1.0 if k == n else _bisect(lambda p: _binom_cdf(k, n, p), alpha / 2)
    return Estimate(k / n, lo, hi, n, "exact (Clopper-Pearson)")


Pairs = list[tuple[int, float, float]]
UNDEFINED = "undefined: the baseline's mean over the matched seeds is 0"


def pair_by_seed(arm: Mapping[int, float | None], base: Mapping[int, float | None]) -> Pairs:
    """(seed, arm value, baseline value) for the seeds both have a value for, in seed order.

    A seed missing on either side (not run, diverged, target missed) drops out of the pair
    set: a paired difference compares like with like, and the caller reports how many
    pairs were left.
    """
    common = sorted(set(arm) & set(base))
    return [(s, float(arm[s]), float(base[s])) for s in common
            if arm[s] is not None and base[s] is not None]


def paired_diff_ci(pairs: Pairs, *, level: float = LEVEL, n_boot: int = N_BOOT,
                   seed: int = SEED) -> Estimate:
    """Mean of arm - baseline over matched seeds, with a bootstrap over the seeds."""
    est = bootstrap_ci([a - b for _, a, b in pairs], "mean", level=level, n_boot=n_boot,
                       seed=seed)
    return Estimate(est.value, est.lo, est.hi, est.n, "paired bootstrap mean difference")


def _relative(a_mean: np.ndarray, b_mean: np.ndarray) -> np.ndarray:
    # A zero baseline: any gain is an infinite relative change, no gain is no change.
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = a_mean / b_mean - 1.0
    rel = np.where(b_mean == 0, np.where(a_mean > 0, np.inf, np.where(a_mean < 0, -np.inf,
                                                                         0.0)), rel)
    return rel


def paired_relative_ci(pairs: Pairs, *, level: float = LEVEL, n_boot: int = N_BOOT,
                       seed: int = SEED) -> Estimate:
    """Relative change mean(arm) / mean(baseline) - 1 over matched seeds, with a bootstrap
    that resamples seeds (pairs together).

    A ratio of means rather than a mean of ratios: one seed with a tiny baseline value
    cannot dominate it. A baseline mean of 0 (e.g. no baseline seed succeeded) makes the
    relative change undefined: value None, ``method`` says why. Resamples whose baseline
    mean is 0 count as +inf (arm above zero) or 0 (arm zero too), which only widens the
    interval. One pair: the point estimate with no interval.
    """
    if not pairs:
        return NONE
    a = np.asarray([p[1] for p in pairs], dtype=float)
    b = np.asarray([p[2] for p in pairs], dtype=float)
    if b.mean() == 0:
        return Estimate(None, None, None, len(pairs), UNDEFINED)
    value = float(_relative(a.mean(keepdims=True), b.mean(keepdims=True))[0])
    if len(pairs) == 1:
        return Estimate(value, None, None, 1, "paired bootstrap ratio of means")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(pairs), size=(n_boot, len(pairs)))
    boot = _relative(a[idx].mean(axis=1), b[idx].mean(axis=1))
    lo, hi = _percentiles(boot, level)
    return Estimate(value, lo, hi, len(pairs), "paired bootstrap ratio of means")


SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"

VERDICT_RULES = (
    "supported: the 95% CI of the relative change lies entirely on the claimed side of "
    "zero and reaches the claimed value (contains it or goes beyond it); "
    "not supported: the whole CI falls short of the claimed value (it excludes the claim "
    "on the wrong side, even if it shows a smaller effect in the claimed direction); "
    "inconclusive: anything else (the CI spans zero and the claim), or no matched seeds. "
    "Seeds needed (inconclusive only): n x (CI half-width / distance)^2, where distance is "
    "how far the estimate lies from the farther of zero and the claimed value, i.e. the "
    "smallest CI that would exclude one of them; it assumes the estimate and the spread "
    f"per seed stay as measured, is rounded up, and is capped at {SEEDS_CAP}; it is unknown "
    "where there is no finite interval to extrapolate from (one matched seed, an undefined "
    "or unbounded relative change).")


@dataclass(frozen=True)
class Verdict:
    verdict: str
    seeds_needed: int | None
    reason: str


def verdict(est: Estimate, claimed: float, *, cap: int = SEEDS_CAP) -> Verdict:
    """Judge a claimed relative change against its measured interval (see VERDICT_RULES).

    ``claimed`` > 0 means higher is better (e.g. +0.40 success), < 0 lower is better.
    An estimate without a value (no pairs, or an undefined relative change) or without an
    interval (one pair) is inconclusive; seeds needed is then unknown (None) because there
    is no spread to extrapolate from.
    """
    if est.value is None:
        if est.n and est.method == UNDEFINED:
            return Verdict(INCONCLUSIVE, None, "relative change " + UNDEFINED)
        return Verdict(INCONCLUSIVE, None, "no matched seeds to compare")
    if est.lo is None or est.hi is None:
        return Verdict(INCONCLUSIVE, None, f"only {est.n} matched seed(s): no interval")
    s = 1.0 if claimed > 0 else -1.0
    # In the claimed direction, so "better" is always larger.
    lo, hi = sorted((s * est.lo, s * est.hi))
    c, v = s * claimed, s * est.value
    if lo > 0 and hi >= c:
        return Verdict(SUPPORTED, None, "CI excludes zero and reaches the claim")
    if hi < c:
        why = ("CI is in the claimed direction but short of the claim" if lo > 0
               else "CI lies short of the claimed value")
        return Verdict(NOT_SUPPORTED, None, why)
    distance = max(abs(v), abs(v - c))
    hw = est.half_width
    if hw is None or not math.isfinite(v) or distance == 0:
        return Verdict(INCONCLUSIVE, None, "CI spans zero and the claim")
    needed = math.ceil(est.n * (hw / distance) ** 2)
    needed = max(needed, est.n + 1)
    return Verdict(INCONCLUSIVE, min(needed, cap), "CI spans zero and the claim")
