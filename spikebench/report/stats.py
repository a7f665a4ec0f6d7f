"""Intervals for success rates: exact Clopper-Pearson for one rate, Newcombe's score interval
(approximate) for a paired or an independent difference of rates, Fisher's exact test of two
independent rates, an exact Bonferroni test and interval for their ratio; the exact Poisson
interval of a count; and pairing values by seed.

Rates need their own intervals: a 0/1 outcome per seed makes a plain interval degenerate
where every seed agrees (three seeds 0 -> 1 would give [+100 pp, +100 pp]), while these stay
wide. Continuous measures use :mod:`.exact`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from spikebench.report.exact import betainc

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval; ``lo``/``hi`` are None where no interval exists
    (fewer than two values), ``value`` is None where there is no data at all."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str = ""


NONE = Estimate(None, None, None, 0, "no data")


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), as I_(1-p)(n - k, k + 1) by its continued
    fraction: no sum of n terms, so the seeds-to-settle search can try large n."""
    if k < 0:
        return 0.0
    return 1.0 if k >= n else betainc(n - k, k + 1, 1 - p)


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


def pair_by_seed(arm: Mapping[int, float | None], base: Mapping[int, float | None]) -> Pairs:
    """(seed, arm value, baseline value) for the seeds both have a value for, in seed order.

    A seed missing on either side (not run, diverged, target missed) drops out of the pair
    set: a paired difference compares like with like, and the caller reports how many
    pairs were left.
    """
    common = sorted(set(arm) & set(base))
    return [(s, float(arm[s]), float(base[s])) for s in common
            if arm[s] is not None and base[s] is not None]


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


def _poisson_cdf(k: int, mu: float) -> float:
    if k < 0:
        return 0.0
    if mu <= 0:
        return 1.0
    return math.fsum(math.exp(i * math.log(mu) - mu - math.lgamma(i + 1)) for i in range(k + 1))


def poisson_ci(k: int, *, level: float = LEVEL) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson mean from one count ``k``: never below 0,
    conservative (covers at least ``level``). 0 gives [0, 3.69]; 3 gives [0.619, 8.77]."""
    if k < 0:
        raise ValueError(f"poisson_ci: k={k} < 0")
    alpha = 1 - level
    top = k + 20 * math.sqrt(k + 1) + 20
    lo = 0.0 if k == 0 else _bisect(lambda m: _poisson_cdf(k - 1, m), 1 - alpha / 2, 0.0, top)
    hi = _bisect(lambda m: _poisson_cdf(k, m), alpha / 2, 0.0, top)
    return lo, hi


def cp_bound(k: int, n: int, tail: float, upper: bool) -> float:
    """One-sided Clopper-Pearson limit of a rate k/n with ``tail`` probability outside it:
    the upper limit solves P(X <= k) = tail, the lower P(X >= k) = tail."""
    if upper:
        return 1.0 if k == n else _bisect(lambda p: _binom_cdf(k, n, p), tail)
    return 0.0 if k == 0 else _bisect(lambda p: _binom_cdf(k - 1, n, p), 1 - tail)


def rate_ratio_p(k1: int, k2: int, n: int, ratio: float, side: int,
                 n2: int | None = None) -> float:
    """One-sided p of "rate1 = ratio x rate2" against ``side`` -1 ("rate1 is below ratio x
    rate2") or +1 ("above"), from one-sided Clopper-Pearson limits of each rate combined by
    Bonferroni: reject at level 2b when rate1's upper limit at b is below ratio x rate2's
    lower limit at b (for side -1). Exact and valid whatever the correlation of the paired
    arms (it uses only each arm's own count), so conservative; for independent samples
    ``n2`` is the second rate's number of trials (default ``n``)."""
    m = n if n2 is None else n2

    def rejects(b: float) -> bool:
        if side < 0:
            return cp_bound(k1, n, b, True) < ratio * cp_bound(k2, m, b, False)
        return cp_bound(k1, n, b, False) > ratio * cp_bound(k2, m, b, True)

    if n <= 0 or m <= 0 or not rejects(0.5):
        return 1.0
    lo, hi = 0.0, 0.5  # rejects(b) grows with b: the smallest b that rejects
    for _ in range(50):
        mid = (lo + hi) / 2
        if rejects(mid):
            hi = mid
        else:
            lo = mid
    return min(1.0, 2 * hi)


def rate_ratio_exact(k1: int, k2: int, n: int, *, level: float = LEVEL,
                     n2: int | None = None) -> Estimate:
    """The ratio of two success rates k1/n over k2/n (``n2``: the second rate's trials,
    default ``n``) and the interval of ratios that :func:`rate_ratio_p` does not reject at
    (1 - level) / 2 on either side: the Clopper-Pearson limits at (1 - level) / 4 each,
    divided. A baseline that never succeeds gives an infinite upper end but a finite lower
    one (6/6 over 0/6: 0.93)."""
    m = n if n2 is None else n2
    if n <= 0 or m <= 0:
        return NONE
    tail = (1 - level) / 4
    l1, u1 = cp_bound(k1, n, tail, False), cp_bound(k1, n, tail, True)
    l2, u2 = cp_bound(k2, m, tail, False), cp_bound(k2, m, tail, True)
    value = (k1 * m / (k2 * n) if k2 else (math.inf if k1 else None))
    return Estimate(value, l1 / u2, u1 / l2 if l2 > 0 else math.inf, n,
                    "exact (Clopper-Pearson limits of each rate, Bonferroni)")


def newcombe_diff_ci(k1: int, n1: int, k2: int, n2: int, *, level: float = LEVEL) -> Estimate:
    """Newcombe's (1998) method 10 interval for a difference of two independent proportions
    k1/n1 - k2/n2: the Wilson score limits of each rate, combined (the paired method with
    no correlation). Approximate; never degenerate where every run agrees. Newcombe's
    examples: 56/70 - 48/80 gives [0.0524, 0.3339]; 9/10 - 3/10 gives [0.1705, 0.8090]."""
    # Newcombe RG, "Interval estimation for the difference between independent proportions:
    # comparison of eleven methods", Stat Med 17:873-890 (1998), method 10:
    #     lower = (p1 - p2) - sqrt((p1 - l1)^2 + (u2 - p2)^2)
    #     upper = (p1 - p2) + sqrt((u1 - p1)^2 + (p2 - l2)^2)
    if n1 <= 0 or n2 <= 0:
        return NONE
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"newcombe_diff_ci: k1={k1}, n1={n1}, k2={k2}, n2={n2}")
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_ci(k1, n1, level=level)
    l2, u2 = wilson_ci(k2, n2, level=level)
    diff = p1 - p2
    lo = diff - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = diff + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Estimate(diff, max(-1.0, lo), min(1.0, hi), n1 + n2,
                    "Newcombe score interval for independent rates (method 10)")


def _hypergeom(k: int, n1: int, n2: int, total: int) -> float:
    """P(first sample has k successes) with ``total`` successes among n1 + n2 trials."""
    return math.comb(n1, k) * math.comb(n2, total - k) / math.comb(n1 + n2, total)


def fisher_p(k1: int, n1: int, k2: int, n2: int, side: int = 0) -> float:
    """Fisher's exact test of two independent success rates k1/n1 and k2/n2, conditional on
    the total successes. ``side`` +1: against "rate 1 is higher" (P(K >= k1)); -1: against
    "lower" (P(K <= k1)); 0: twice the smaller one-sided p, at most 1 (so the two-sided test
    at alpha rejects exactly where a one-sided one at alpha / 2 does). No trials: p = 1."""
    if n1 <= 0 or n2 <= 0:
        return 1.0
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"fisher_p: k1={k1}, n1={n1}, k2={k2}, n2={n2}")
    if side == 0:
        return min(1.0, 2 * min(fisher_p(k1, n1, k2, n2, 1), fisher_p(k1, n1, k2, n2, -1)))
    total = k1 + k2
    lo, hi = max(0, total - n2), min(n1, total)
    ks = range(k1, hi + 1) if side > 0 else range(lo, k1 + 1)
    return min(1.0, math.fsum(_hypergeom(k, n1, n2, total) for k in ks))
