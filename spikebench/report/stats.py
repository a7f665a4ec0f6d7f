"""Confidence intervals and verdicts for the report: seeded bootstraps, exact binomial
intervals, and Newcombe's score interval for a paired difference of success rates.

Every bootstrap draws from a fixed-seed generator, so the same results give the same report
byte for byte. Percentile bounds are order statistics (no interpolation): they stay inside
the observed values and let an infinite resampled value pass through without making NaN.
"""

# With three seeds a bootstrap interval is little more than the range of the data and covers
# the truth less often than 95%: the report says so next to the tables. A paired difference
# of success rates (one 0/1 outcome per seed and arm) uses Newcombe's score interval instead,
# which stays wide where every seed agrees (three seeds 0 -> 1 give [+21 pp, +100 pp], not a
# zero-width [+100 pp, +100 pp]).

from __future__ import annotations

import math
import statistics
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


def _z(level: float) -> float:
    return statistics.NormalDist().inv_cdf((1 + level) / 2)


def wilson_ci(k: int, n: int, *, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) of a proportion ``k``/``n``, n > 0.

    Newcombe (1998a, Stat Med 17:857) method 3: 81/263 gives [0.2553, 0.3662].
    """
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"wilson_ci: k={k}, n={n}")
    z, p = _z(level), k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # Exact at the ends (the formula gives 0 or 1 up to rounding there).
    return (0.0 if k == 0 else centre - half), (1.0 if k == n else centre + half)


def newcombe_paired_ci(a: int, b: int, c: int, d: int, *, level: float = LEVEL) -> Estimate:
    """Newcombe's (1998) method 10 interval for a difference of paired proportions.

    Counts over n = a+b+c+d pairs: ``a`` both succeed, ``b`` only the first, ``c`` only the
    second, ``d`` neither; the estimate is p1 - p2 = (b - c)/n. Unlike a bootstrap it never
    collapses to zero width where every pair agrees (3 pairs 0 -> 1 give [0.206, 1]).
    """
    # Newcombe RG, "Improved confidence intervals for the difference between binomial
    # proportions based on paired data", Stat Med 17:2635-2650 (1998), method 10: the Wilson
    # score limits (no continuity correction) of each marginal proportion, combined with the
    # correlation between them. With p1 = (a+b)/n, p2 = (a+c)/n and their Wilson limits
    # (l1, u1), (l2, u2):
    #     lower = (p1 - p2) - sqrt((p1-l1)^2 - 2 phi (p1-l1)(u2-p2) + (u2-p2)^2)
    #     upper = (p1 - p2) + sqrt((u1-p1)^2 - 2 phi (u1-p1)(p2-l2) + (p2-l2)^2)
    # phi is the correlation of the table, (ad - bc)/sqrt((a+b)(c+d)(a+c)(b+d)), with
    # Newcombe's adjustment: where ad > bc its numerator is max(ad - bc - n/2, 0); it is 0
    # where the denominator is 0 (a margin is empty: all seeds succeed, or fail, in an arm).
    # With this phi the function reproduces Newcombe's Table II examples (36, 12, 2, 0 gives
    # [0.0569, 0.3404]; 18, 12, 2, 18 gives [0.0562, 0.3290]; 53, 0, 0, 1 gives
    # [-0.0729, 0.0729]; 0, 30, 0, 0 gives [0.8395, 1]). No pairs: NONE.
    if min(a, b, c, d) < 0:
        raise ValueError(f"newcombe_paired_ci: negative count in {(a, b, c, d)}")
    n = a + b + c + d
    if n == 0:
        return NONE
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_ci(a + b, n, level=level)
    l2, u2 = wilson_ci(a + c, n, level=level)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    num = a * d - b * c
    if num > 0:
        num = max(num - n / 2, 0.0)
    phi = num / math.sqrt(denom) if denom else 0.0
    diff = p1 - p2
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return Estimate(diff, max(-1.0, diff - below), min(1.0, diff + above), n,
                    "Newcombe paired score interval (method 10)")


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


def paired_rate_diff_ci(pairs: Pairs, *, level: float = LEVEL) -> Estimate:
    """Difference of success rates (arm - baseline) over matched seeds, each value 0 or 1,
    with :func:`newcombe_paired_ci`. Raises ValueError on a value other than 0 or 1."""
    counts = {(1, 1): 0, (1, 0): 0, (0, 1): 0, (0, 0): 0}
    for seed, x, y in pairs:
        if x not in (0, 1) or y not in (0, 1):
            raise ValueError(f"paired_rate_diff_ci: seed {seed} has a non-binary outcome "
                             f"({x}, {y})")
        counts[int(x), int(y)] += 1
    return newcombe_paired_ci(counts[1, 1], counts[1, 0], counts[0, 1], counts[0, 0],
                              level=level)


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

    A ratio of means rather than a mean of ratios, so one seed with a tiny baseline value
    cannot dominate it. A baseline mean of 0 makes it undefined: value None, ``method`` why.
    """
    # Resamples whose baseline mean is 0 count as +inf (arm above zero) or 0 (arm zero too),
    # which only widens the interval. One pair: the point estimate with no interval.
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


def min_seeds_exact(level: float = LEVEL) -> int:
    """The fewest matched seeds with which an exact two-sided paired test (sign-flip, or
    McNemar on binary outcomes) can reach p < 1 - ``level``: with n pairs all in one
    direction its smallest p-value is 2 / 2^n, so 6 at 95% (2/64 = 0.031; 5 give 0.0625)."""
    n = 1
    while 2 * 0.5**n >= 1 - level:
        n += 1
    return n


MIN_SEEDS = min_seeds_exact()

VERDICT_RULES = (
    "supported: the 95% CI of the change (relative; in percentage points for success) lies "
    "entirely on the claimed side of zero and reaches the claimed value (contains it or goes "
    "beyond it); "
    "not supported: the whole CI falls short of the claimed value (it excludes the claim "
    "on the wrong side, even if it shows a smaller effect in the claimed direction); "
    "inconclusive: anything else (the CI spans zero and the claim), no matched seeds, or "
    f"fewer than {MIN_SEEDS} matched seeds whatever the CI says: {MIN_SEEDS} is the fewest "
    "with which an exact two-sided paired test (sign-flip, or McNemar for success) can reach "
    f"p < 0.05 (all {MIN_SEEDS} seeds in one direction: 2/2^{MIN_SEEDS} = "
    f"{2 * 0.5**MIN_SEEDS:.3f}), so with fewer no result can be significant. "
    "Seeds needed (inconclusive only): n x (CI half-width / distance)^2, where distance is "
    "how far the estimate lies from the farther of zero and the claimed value, i.e. the "
    "smallest CI that would exclude one of them; it assumes the estimate and the spread "
    f"per seed stay as measured, is rounded up, is at least {MIN_SEEDS}, and is capped at "
    f"{SEEDS_CAP}; it is unknown where there is no finite interval to extrapolate from (one "
    "matched seed, an undefined or unbounded relative change).")


@dataclass(frozen=True)
class Verdict:
    verdict: str
    seeds_needed: int | None
    reason: str


def _ci_verdict(est: Estimate, claimed: float, cap: int) -> Verdict:
    """The verdict the interval alone gives (est has a value and both bounds)."""
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


def verdict(est: Estimate, claimed: float, *, cap: int = SEEDS_CAP,
            min_seeds: int = MIN_SEEDS) -> Verdict:
    """Judge a claimed change against its measured interval (see VERDICT_RULES).

    ``claimed`` > 0 means higher is better (e.g. +0.40 success), < 0 lower is better. Fewer
    than ``min_seeds`` pairs is inconclusive whatever the interval says, because no exact
    paired test could reach p < 0.05 with them; the reason says what the interval alone says.
    """
    # No value (no pairs, or an undefined relative change) or no interval (one pair):
    # inconclusive, seeds needed unknown (no spread to extrapolate from). With too few pairs,
    # seeds needed is at least ``min_seeds`` (the extrapolation where it asks for more;
    # unknown where the interval has no finite half-width to extrapolate from).
    if est.value is None:
        if est.n and est.method == UNDEFINED:
            return Verdict(INCONCLUSIVE, None, "relative change " + UNDEFINED)
        return Verdict(INCONCLUSIVE, None, "no matched seeds to compare")
    if est.lo is None or est.hi is None:
        return Verdict(INCONCLUSIVE, None, f"only {est.n} matched seed(s): no interval")
    ci = _ci_verdict(est, claimed, cap)
    if est.n >= min_seeds:
        return ci
    if ci.verdict == INCONCLUSIVE and ci.seeds_needed is None:
        needed = None
    else:
        needed = min(max(ci.seeds_needed or 0, min_seeds), max(cap, min_seeds))
    seeds = f"{est.n} matched seed" + ("" if est.n == 1 else "s")
    return Verdict(INCONCLUSIVE, needed,
                   f"only {seeds}, fewer than the {min_seeds} an exact paired test needs to "
                   f"reach p < 0.05; the CI alone {ci.reason.removeprefix('CI ')}")
