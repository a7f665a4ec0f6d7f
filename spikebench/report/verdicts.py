"""Verdicts on the article's claims, each read off the interval printed beside it.

A claim "the recipe changes X by c" gets one of six verdicts (:data:`VERDICTS`), a pure
function of that interval and c (:func:`read`), so a reader can check it by eye. The
interval inverts one exact test, named beside it: the values it holds are those the test
does not reject. The judged claims are one family: each interval is at level
1 - ALPHA / k for k judged claims (Bonferroni), so all k cover together with probability at
least 1 - ALPHA. Times are measured as a restricted mean at the budget (a miss counts the
budget); a miss makes the true time unknown above the budget, so the interval's end on that
side is opened (:func:`censor`) and printed as a one-sided bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from spikebench.report import stats
from spikebench.report.exact import (
    ALPHA,
    TWO_SAMPLE,
    Interval,
    min_pairs,
    min_runs,
    relative_interval,
    two_sample_can_reject,
    two_sample_relative_interval,
)

SUPPORTED = "supported"
CONSISTENT = "real, consistent with the claim"
SMALLER = "real, smaller than claimed"
INCONCLUSIVE = "inconclusive"
NOT_SUPPORTED = "not supported"
OPPOSITE = "opposite"
NOT_JUDGED = "not judged"
SEEDS_CAP = 1000

# What each verdict means, as read off the interval; the report prints these.
VERDICTS = {
    SUPPORTED: "the interval excludes no change and its end nearest no change is at or "
               "beyond the claim",
    CONSISTENT: "the interval excludes no change and holds the claim",
    SMALLER: "the interval excludes no change and lies between no change and the claim",
    INCONCLUSIVE: "the interval holds both no change and the claim",
    NOT_SUPPORTED: "the interval excludes the claim and holds no change",
    OPPOSITE: "the interval excludes no change on the other side",
}
TIME_TEST = "exact sign-flip test of recipe - (1 + c) x baseline over matched seeds"
TIME_TEST_TWO = f"{TWO_SAMPLE} of the recipe's runs against (1 + c) x the baseline's"
SUCCESS_TEST = ("exact test of the ratio of success rates: each arm's one-sided "
                "Clopper-Pearson limit, combined by Bonferroni")


def family_alpha(k: int) -> float:
    """Each interval's two-sided level in a family of ``k`` judged claims (Bonferroni)."""
    return ALPHA / max(1, k)


def read(lo: float | None, hi: float | None, claimed: float) -> str:
    """The verdict on a relative change ``claimed`` (its sign the better direction) from
    the printed interval [lo, hi] of the change, no change being 0; no interval (None) is
    the whole line, which holds both."""
    lo = -1.0 if lo is None else lo
    hi = math.inf if hi is None else hi
    s = 1.0 if claimed > 0 else -1.0
    near, far = sorted((s * lo, s * hi))  # in the claimed direction: the gain's bounds
    c = abs(claimed)
    if near > 0:
        return SUPPORTED if near >= c else CONSISTENT if far >= c else SMALLER
    if far < 0:
        return OPPOSITE
    return INCONCLUSIVE if far >= c else NOT_SUPPORTED


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    interval: Interval  # the estimate and the interval the verdict is read from
    test: str  # the exact test the interval inverts
    level: float  # the interval's two-sided coverage, e.g. 0.975
    seeds_needed: int | None
    seeds_at_least: bool = False  # seeds_needed is a lower bound (printed ≥)
    open_lo: bool = False  # the lower end is a censoring bound (the baseline missed)
    open_hi: bool = False  # the upper end is (the recipe missed)
    budget_limits: bool = False  # only a longer budget, not more seeds, could settle it


def censor(iv: Interval, recipe_missed: int, base_missed: int) -> tuple[Interval, bool, bool]:
    """The interval of the unrestricted change given the restricted one: a baseline miss
    makes its true time longer than counted, so the change may be larger, down to -100%
    (lower end open); a recipe miss the other way (upper end open, +inf)."""
    lo, hi = iv.lo, iv.hi
    open_lo, open_hi = base_missed > 0, recipe_missed > 0
    if lo is None or hi is None:
        return iv, open_lo, open_hi
    return (replace(iv, lo=-1.0 if open_lo else lo, hi=math.inf if open_hi else hi),
            open_lo, open_hi)


def _reason(verdict: str, iv: Interval, level: float) -> str:
    if iv.lo is None or iv.hi is None:
        return f"no {100 * level:.4g}% interval ({iv.why}): it holds both"
    return VERDICTS[verdict]


def _censored(unit: str, recipe_missed: int, base_missed: int, blocked: bool) -> str:
    parts = []
    if base_missed:
        parts.append(f"the baseline missed on {base_missed} {unit}(s): its times there are "
                     "longer than the budget it counts, so the change may be larger (lower "
                     "end open)")
    if recipe_missed:
        parts.append(f"the recipe missed on {recipe_missed} {unit}(s): its times there are "
                     "longer than the budget it counts, so the change may be smaller (upper "
                     "end open)")
    text = "; ".join(parts)
    if blocked:
        text += "; the budget limits this verdict: a longer one, not more " + unit + "s, " \
                "would settle it"
    return text


def _seeds(verdict: str, iv: Interval, claimed: float, n: int, need_min: int) -> int | None:
    """Seeds that would likely settle an open verdict: n x (half-width / distance)^2, the
    estimate and spread as measured."""
    if verdict not in (INCONCLUSIVE, CONSISTENT) or None in (iv.value, iv.lo, iv.hi) or \
            not all(math.isfinite(x) for x in (iv.value, iv.lo, iv.hi)):
        return None
    distance = (abs(iv.value - claimed) if verdict == CONSISTENT
                else max(abs(iv.value), abs(iv.value - claimed)))
    if distance == 0:
        return None
    need = math.ceil(n * ((iv.hi - iv.lo) / 2 / distance) ** 2)
    return min(max(need, n + 1, need_min), SEEDS_CAP)


def judge(shown: tuple[list[float], list[float]], claimed: float, *,
          misses: tuple[list[bool], list[bool]] | None = None, paired: bool = True,
          family: int = 1) -> Verdict:
    """The verdict on ``claimed`` (e.g. -0.25) from (recipe, baseline) restricted times
    (a miss at the budget), paired by seed or (``paired`` False) two independent groups;
    ``misses`` flags the values that are misses, which open the interval's end on their
    side (:func:`censor`); ``family``: the number of judged claims (Bonferroni)."""
    a, b = shown
    alpha = family_alpha(family)
    level = 1 - alpha
    unit = "seed" if paired else "run"
    test = TIME_TEST if paired else TIME_TEST_TWO
    raw = relative_interval(a, b, alpha) if paired else two_sample_relative_interval(a, b, alpha)
    rm, bm = (sum(misses[0]), sum(misses[1])) if misses else (0, 0)
    iv, open_lo, open_hi = censor(raw, rm, bm)
    verdict = read(iv.lo, iv.hi, claimed)
    why = _reason(verdict, iv, level)
    need, at_least = None, False
    blocked = _budget_limits(verdict, raw, claimed, open_lo, open_hi)
    if rm or bm:
        why += "; " + _censored(unit, rm, bm, blocked)
    if not blocked and verdict in (INCONCLUSIVE, CONSISTENT):
        if paired:
            differing = sum(1 for x, y in zip(a, b, strict=True) if x != y)
            k = min_pairs(alpha)
            if len(a) < k or differing < k:
                if differing:
                    need, at_least = min(max(math.ceil(len(a) * k / differing), k),
                                         SEEDS_CAP), True
            else:
                need = _seeds(verdict, raw, claimed, len(a), k)
        elif a and b:
            k = min_runs(alpha)
            if not two_sample_can_reject(len(a), len(b), alpha):
                need, at_least = max(k, min(len(a), len(b)) + 1), True
            else:
                need = _seeds(verdict, raw, claimed, min(len(a), len(b)), k)
        at_least = at_least or need == SEEDS_CAP
    return Verdict(verdict, why, iv, test, level, need, at_least, open_lo and iv.lo is not None,
                   open_hi and iv.hi is not None, blocked)


def _budget_limits(verdict: str, raw: Interval, claimed: float, open_lo: bool,
                   open_hi: bool) -> bool:
    """Whether only a longer budget could settle an open verdict: the interval's end
    toward no change is open (nothing real can be shown), or its far end is open and the
    restricted estimate itself falls short of the claim (the near end can never pass it)."""
    if verdict not in (INCONCLUSIVE, CONSISTENT):
        return False
    s = 1 if claimed > 0 else -1
    near_open, far_open = (open_hi, open_lo) if s < 0 else (open_lo, open_hi)
    reaches = raw.value is not None and s * raw.value >= s * claimed
    return near_open or (far_open and verdict == CONSISTENT and not reaches)


def not_judged(shown: tuple[list[float], list[float]], why: str, *,
               misses: tuple[list[bool], list[bool]] | None = None,
               paired: bool = True) -> Verdict:
    """Numbers shown, no verdict (e.g. wall time of an emulated precision): the 95%
    interval, its ends opened by misses as for a verdict."""
    raw = relative_interval(*shown) if paired else two_sample_relative_interval(*shown)
    rm, bm = (sum(misses[0]), sum(misses[1])) if misses else (0, 0)
    iv, open_lo, open_hi = censor(raw, rm, bm)
    return Verdict(NOT_JUDGED, why, iv, TIME_TEST if paired else TIME_TEST_TWO, 1 - ALPHA,
                   None, False, open_lo and iv.lo is not None, open_hi and iv.hi is not None)


def success_interval(k1: int, n1: int, k2: int, n2: int, alpha: float) -> Interval:
    """The relative change of the success rate, k1/n1 over k2/n2 - 1, and the interval
    that inverts :func:`~spikebench.report.stats.rate_ratio_p` at two-sided ``alpha``."""
    est = stats.rate_ratio_exact(k1, k2, n1, level=1 - alpha, n2=n2)

    def rel(x):
        return None if x is None else x - 1

    return Interval(rel(est.value), rel(est.lo), rel(est.hi), n1, SUCCESS_TEST,
                    "" if est.value is not None else "neither arm ever succeeds",
                    None if n2 == n1 else n2)


def judge_success(shown: tuple[list[float], list[float]], claimed: float, *,
                  paired: bool = True, family: int = 1, settle: bool = True) -> Verdict:
    """The verdict on a relative change of the success rate (0/1 per seed or run) from the
    exact ratio interval (:func:`success_interval`): valid paired or not, whatever the arms'
    correlation, so conservative; ``settle`` False skips the seeds-to-settle search."""
    a, b = shown
    n, m = len(a), len(b)
    alpha = family_alpha(family)
    if not n or not m:
        iv = Interval(None, None, None, n, SUCCESS_TEST, "no seeds", m)
        return Verdict(INCONCLUSIVE, "no seeds to compare", iv, SUCCESS_TEST, 1 - alpha, None)
    k1, k2 = int(sum(a)), int(sum(b))
    iv = success_interval(k1, n, k2, m, alpha)
    verdict = read(iv.lo, iv.hi, claimed)
    need, at_least = (_success_seeds(verdict, k1 / n, k2 / m, claimed, max(n, m), alpha)
                      if settle else (None, False))
    return Verdict(verdict, _reason(verdict, iv, 1 - alpha), iv, SUCCESS_TEST, 1 - alpha,
                   need, at_least)


def _success_seeds(verdict: str, r1: float, r2: float, claimed: float, n: int,
                   alpha: float) -> tuple[int | None, bool]:
    """The fewest seeds per arm at which, the rates staying as measured, the interval
    would settle an open verdict: a grid rising by a quarter, then bisection within the
    step that settles; ≥ the cap where none does."""
    if verdict not in (INCONCLUSIVE, CONSISTENT) or (r1 == r2 == 0):
        return None, False

    def settles(k: int) -> bool:
        iv = success_interval(round(r1 * k), k, round(r2 * k), k, alpha)
        return read(iv.lo, iv.hi, claimed) not in (INCONCLUSIVE, CONSISTENT)

    lo = hi = n
    while not settles(hi):
        if hi >= SEEDS_CAP:
            return SEEDS_CAP, True
        lo, hi = hi, min(SEEDS_CAP, max(hi + 1, math.ceil(hi * 1.25)))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if settles(mid) else (mid, hi)
    return hi, False


def rules(*, paired: bool = True, family: int = 1) -> str:
    """What the code does, for the report: built from the constants and the family."""
    alpha = family_alpha(family)
    k_pairs, k_runs = min_pairs(alpha), min_runs(alpha)
    unit = "seed" if paired else "run"
    time_test = (f"time: the {TIME_TEST} (it assumes those differences are symmetric under "
                 "the change tested)" if paired else
                 f"time: the {TIME_TEST_TWO} (every split of the pooled runs into groups of "
                 "the two sizes; it assumes the recipe's times are distributed as the "
                 "baseline's scaled by 1 + c)")
    few = (f"with fewer than {k_pairs} differing pairs the sign-flip test cannot reject "
           f"anything at this level (its smallest two-sided p is 2 / 2^n), so no time "
           "interval is given and the verdict is inconclusive" if paired else
           f"groups too small for the two-sample test to reject anything at this level "
           f"(1 / C(n + m, n) must be below {alpha / 2:.4g}: e.g. {k_runs} and {k_runs} "
           "runs) get no time interval, and the verdict is inconclusive")
    return (
        f"each claim is a relative change c of the recipe over the baseline (recipe / "
        f"baseline - 1), and its interval holds every c that one exact test, named in the "
        f"row, does not reject. The {family} judged claim(s) are one family: each interval "
        f"is at {100 * (1 - alpha):.4g}% (Bonferroni, {ALPHA:g} / {family}), so together "
        f"they cover at {1 - ALPHA:.0%} at least. (Holm's step-down procedure would reject as much or "
        "more, but gives no interval a verdict could be read from.) The verdict is read off "
        "the interval alone, no change being 0: "
        + "; ".join(f"{k}: {v}" for k, v in VERDICTS.items())
        + f". The tests: {time_test}; success: the {SUCCESS_TEST} (exact whatever the "
        f"arms' correlation, so valid {'paired' if paired else 'unpaired'} and "
        "conservative; the difference in points printed beside it is approximate and no "
        f"verdict rests on it). {few[0].upper() + few[1:]}. Time is measured as the "
        "restricted mean time to target at the budget: a miss or a divergence counts the "
        "budget (the steps, or the whole run's wall time). A miss's true time is longer, "
        "so a baseline's miss opens the interval's lower end (the change may be larger) and "
        "a recipe's miss its upper end (the change may be smaller): the interval is then "
        "printed as a one-sided bound (≤ or ≥), the verdict is read from it as printed, "
        "and where only a longer budget could settle it the verdict says so. Wall time is "
        "judged only where no arm's precision is emulated; otherwise its 95% interval is "
        f"shown, not judged. {unit.capitalize()}s to settle (inconclusive, or real and "
        f"consistent with the claim): n x (interval half-width / distance)^2, distance "
        "being how far the estimate lies from the farther of no change and the claim (from "
        "the claim, for a real change), the estimate and spread as measured; for success, "
        f"the fewest {unit}s at which the interval would settle with the rates as measured; "
        f"capped at {SEEDS_CAP} (printed ≥{SEEDS_CAP}); a lower bound (≥) where too few "
        f"{unit}s differ to extrapolate from.")
