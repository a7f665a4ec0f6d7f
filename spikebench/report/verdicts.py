"""Verdicts on the article's claims: each decided by two one-sided exact tests, both named
and printed.

A claim "the recipe changes X by c" gets one of five verdicts (:data:`VERDICTS`): the claim
is reached (*supported*), a real change smaller than claimed, a real change whose size the
seeds cannot pin down, the claim rejected with no real change shown (*not supported*), or
neither test rejects (*inconclusive*). Each one-sided test runs at ``ALPHA / 2``, so a
verdict agrees with the two-sided 95% interval printed beside it. Times are judged as a
restricted mean at the budget (a miss counts the budget), a quantity every seed measures
exactly, so one missed seed cannot block a verdict for ever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spikebench.report import stats
from spikebench.report.exact import (
    ALPHA,
    MIN_PAIRS,
    MIN_RUNS,
    Interval,
    ratio_p,
    relative_interval,
    sign_flip_p,
    two_sample_can_reject,
    two_sample_ratio_p,
    two_sample_relative_interval,
)

SIDE_ALPHA = ALPHA / 2  # each one-sided test; together they match the 95% interval
SUPPORTED = "supported"
SMALLER = "real, smaller than claimed"
REAL = "real, size not shown"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive"
NOT_JUDGED = "not judged"
SEEDS_CAP = 1000

# What each verdict means, in the order a reader meets them; the report prints these.
VERDICTS = {
    SUPPORTED: "the claim was reached: the estimate is at or beyond the claimed change and "
               "the test rejects no change in the claimed direction",
    SMALLER: "the test rejects no change in the claimed direction and rejects the claimed "
             "change: a real effect, smaller than the claim",
    REAL: "the test rejects no change in the claimed direction, the estimate falls short "
          "of the claim and the claim is not rejected: a real effect whose size the seeds "
          "cannot pin down",
    NOT_SUPPORTED: "the claimed change is rejected and no change in its direction is shown",
    INCONCLUSIVE: "neither no change nor the claimed change is rejected",
}

RULES = (
    "each claim is a relative change of the recipe's mean over the baseline's on matched "
    "seeds (recipe / baseline - 1). Two one-sided exact tests decide, each at "
    f"p < {SIDE_ALPHA:g}: one against no change, in the claimed direction, and one against "
    "the claimed change, in the direction that would refute it; at that level they reject "
    "exactly the changes outside the two-sided 95% interval. Time: the paired sign-flip "
    "permutation test on recipe - (1 + change) x baseline (it assumes those differences "
    "are symmetric under the change tested); the interval is every change it does not "
    "reject. The estimand is the restricted mean time to target at the budget: a miss or a "
    "divergence counts the budget (the steps, or the whole run's wall time), so every "
    "seed's value is known and a miss cannot block a verdict. Success (0/1 per seed): no "
    "change is tested with McNemar's exact test (the sign-flip test on 0/1 pairs), the "
    "claimed ratio of rates with each rate's one-sided Clopper-Pearson limit combined by "
    "Bonferroni (exact whatever the arms' correlation, so conservative), and the interval "
    "of the ratio inverts that second test, so it can hold no change where McNemar's test, "
    "which uses the pairing, rejects it. The verdicts: "
    + "; ".join(f"{k}: {v}" for k, v in VERDICTS.items())
    + f". With fewer than {MIN_PAIRS} differing pairs the test against no change cannot "
    f"reach p < {SIDE_ALPHA:g} (its smallest p, all pairs in one direction, is "
    f"1/2^{MIN_PAIRS - 1} = {0.5 ** (MIN_PAIRS - 1):.4f} with {MIN_PAIRS - 1} and "
    f"1/2^{MIN_PAIRS} = {0.5 ** MIN_PAIRS:.4f} with {MIN_PAIRS}), so such a claim can be "
    "rejected but not supported; with "
    f"fewer than {MIN_PAIRS} pairs no interval is given. Where both arms miss the target on "
    "every seed the verdict is "
    "inconclusive: the budget, not the seeds, blocks it; a verdict against a time claim "
    "names the baseline's misses, counted at the budget though their times are longer. The "
    "verdict on time uses steps, which do not depend on the hardware; "
    "wall time is judged only where no arm's precision is emulated. p-values and intervals "
    "are not adjusted for the number of claims. Seeds to settle (inconclusive, or a real "
    "change of unknown size): n x (interval half-width / distance)^2, where distance is how "
    "far the estimate lies from the farther of zero and the claim (from the claim, for a "
    "real change); it assumes the estimate and spread stay as measured, and is capped at "
    f"{SEEDS_CAP} (printed ≥{SEEDS_CAP}). With fewer than {MIN_PAIRS} differing pairs it is "
    f"the seeds that would give {MIN_PAIRS} at the measured rate of differing pairs, a lower "
    "bound (printed ≥); none where every seed ties.")


# The same verdicts on two independent groups of runs (no seed shared: spikebench compare).
RULES_UNPAIRED = (
    "the recipe's and the baseline's runs share no seed, so they are compared as two "
    "independent groups: each claim is a relative change of the recipe's mean over the "
    "baseline's (recipe / baseline - 1). Two one-sided exact tests decide, each at "
    f"p < {SIDE_ALPHA:g}: one against no change, in the claimed direction, and one against "
    "the claimed change, in the direction that would refute it; at that level they reject "
    "exactly the changes outside the two-sided 95% interval. Time: the exact two-sample "
    "permutation test of the difference in means of the recipe's times and (1 + change) x "
    "the baseline's (every split of the pooled runs into groups of the two sizes; it "
    "assumes the recipe's times are distributed as the baseline's scaled by 1 + change); "
    "the interval is every change it does not reject. The estimand is the restricted mean "
    "time to target at the budget: a miss or a divergence counts the budget, so every run's "
    "value is known. Success (0/1 per run): no change is tested with Fisher's exact test, "
    "the claimed ratio of rates with each rate's one-sided Clopper-Pearson limit combined "
    "by Bonferroni (exact, conservative), and the interval of the ratio inverts that second "
    "test. The verdicts: " + "; ".join(f"{k}: {v}" for k, v in VERDICTS.items())
    + f". With n and m runs the tests can reject only when 1 / C(n + m, n) < {SIDE_ALPHA:g} "
    f"(at least {MIN_RUNS} runs in each group of equal size); with fewer no interval is given "
    "and a claim can be rejected but not supported. Where both groups miss the target on "
    "every run the verdict is inconclusive. p-values and intervals are not adjusted for the "
    "number of claims. Runs to settle (inconclusive, or a real change of unknown size), per "
    "group: n x (interval half-width / distance)^2 with n the smaller group's runs, as for "
    f"paired seeds, capped at {SEEDS_CAP}; with too few runs to reject anything, the "
    f"{MIN_RUNS} per group that could (a lower bound, printed ≥).")


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    p_no_change: float | None  # one-sided, in the claimed direction
    p_claim: float | None  # one-sided, in the direction that would refute the claim
    interval: Interval  # estimate and 95% interval of the relative change
    seeds_needed: int | None
    seeds_at_least: bool = False  # seeds_needed is a lower bound (printed ≥)


def _p(x: float) -> str:
    return f"{x:.3g}"


def _decide(p0: float, pc: float, change: float | None, claimed: float) -> str:
    s = 1.0 if claimed > 0 else -1.0
    real = p0 < SIDE_ALPHA
    refuted = pc < SIDE_ALPHA
    reached = change is not None and not math.isnan(change) and s * change >= s * claimed
    if real and reached:
        return SUPPORTED
    if real:
        return SMALLER if refuted else REAL
    return NOT_SUPPORTED if refuted else INCONCLUSIVE


def _reason(verdict: str, p0: float, pc: float, iv: Interval, claimed: float,
            test0: str) -> str:
    tests = f"{test0}p = {_p(p0)} against no change, p = {_p(pc)} against the claim"
    if verdict == SUPPORTED:
        return f"{test0}p = {_p(p0)} against no change; the estimate reaches the claim"
    if verdict == REAL:
        return f"{tests}, which lies inside the 95% interval"
    if verdict == NOT_SUPPORTED and iv.value is not None and iv.value * claimed < 0:
        return f"{tests}; the change goes the other way"
    return tests


def _seeds(verdict: str, iv: Interval, claimed: float, differing: int,
           n: int) -> tuple[int | None, bool]:
    """Seeds that would likely settle an open verdict, and whether that is a lower bound."""
    if verdict not in (INCONCLUSIVE, REAL):
        return None, False
    if differing < MIN_PAIRS:
        if differing == 0:  # every seed ties: nothing to extrapolate from
            return None, False
        need = math.ceil(n * MIN_PAIRS / differing)
        return min(max(need, MIN_PAIRS), SEEDS_CAP), True
    if iv.value is None or iv.lo is None or iv.hi is None or not all(
            math.isfinite(x) for x in (iv.value, iv.lo, iv.hi)):
        return None, False
    distance = (abs(iv.value - claimed) if verdict == REAL
                else max(abs(iv.value), abs(iv.value - claimed)))
    if distance == 0:
        return None, False
    need = math.ceil(n * ((iv.hi - iv.lo) / 2 / distance) ** 2)
    need = min(max(need, n + 1, MIN_PAIRS), SEEDS_CAP)
    return need, need == SEEDS_CAP


def _verdict(p0: float, pc: float, iv: Interval, claimed: float, differing: int, n: int,
             *, test0: str = "", pairs: str = "differing") -> Verdict:
    verdict = _decide(p0, pc, iv.value, claimed)
    why = _reason(verdict, p0, pc, iv, claimed, test0)
    if verdict == INCONCLUSIVE and differing < MIN_PAIRS:
        why = (f"only {differing} {pairs} pair(s): {test0 or 'an exact test '}needs "
               f"{MIN_PAIRS} to reject no change at p < {SIDE_ALPHA:g}")
    need, at_least = _seeds(verdict, iv, claimed, differing, n)
    return Verdict(verdict, why, p0, pc, iv, need, at_least)


def _verdict_two(p0: float, pc: float, iv: Interval, claimed: float, n: int, m: int, *,
                 test0: str = "") -> Verdict:
    """:func:`_verdict` for two independent groups of ``n`` and ``m`` runs."""
    verdict = _decide(p0, pc, iv.value, claimed)
    why = _reason(verdict, p0, pc, iv, claimed, test0)
    need, at_least = None, False
    if verdict == INCONCLUSIVE and not two_sample_can_reject(n, m):
        why = (f"only {n} and {m} run(s): {test0 or 'the exact two-sample test '}needs "
               f"{MIN_RUNS} and {MIN_RUNS} (or more) to reject no change at p < {SIDE_ALPHA:g}")
    if verdict in (INCONCLUSIVE, REAL):
        if not two_sample_can_reject(n, m):
            need, at_least = max(MIN_RUNS, min(n, m) + 1), True
        elif iv.value is not None and iv.lo is not None and iv.hi is not None and all(
                math.isfinite(x) for x in (iv.value, iv.lo, iv.hi)):
            distance = (abs(iv.value - claimed) if verdict == REAL
                        else max(abs(iv.value), abs(iv.value - claimed)))
            if distance:
                need = math.ceil(min(n, m) * ((iv.hi - iv.lo) / 2 / distance) ** 2)
                need = min(max(need, min(n, m) + 1, MIN_RUNS), SEEDS_CAP)
                at_least = need == SEEDS_CAP
    return Verdict(verdict, why, p0, pc, iv, need, at_least)


def judge(shown: tuple[list[float], list[float]], claimed: float, *,
          misses: tuple[list[bool], list[bool]] | None = None, paired: bool = True) -> Verdict:
    """The verdict on ``claimed`` (e.g. -0.25) from paired values (recipe, baseline), each a
    restricted time (a miss at the budget); ``misses`` flags the values that are misses:
    where both arms miss on every seed the budget, not the seeds, blocks a verdict, and a
    verdict against the claim says how many baseline misses it counted at the budget.
    ``paired`` False: the two lists are independent groups of runs (any lengths), judged
    by the exact two-sample permutation test (:data:`RULES_UNPAIRED`)."""
    a, b = shown
    s = 1 if claimed > 0 else -1
    if paired:
        iv = relative_interval(a, b)
        if not a:
            return Verdict(INCONCLUSIVE, "no matched seeds", None, None, iv, None)
        p0, pc = ratio_p(a, b, 1.0, s), ratio_p(a, b, 1.0 + claimed, -s)
        differing = sum(1 for x, y in zip(a, b, strict=True) if x != y)
        v = _verdict(p0, pc, iv, claimed, differing, len(a))
    else:
        iv = two_sample_relative_interval(a, b)
        if not a or not b:
            return Verdict(INCONCLUSIVE, "no run of " + ("either group" if not a and not b else
                                                         "one group") + " has a value",
                           None, None, iv, None)
        p0 = two_sample_ratio_p(a, b, 1.0, s)
        pc = two_sample_ratio_p(a, b, 1.0 + claimed, -s)
        v = _verdict_two(p0, pc, iv, claimed, len(a), len(b))
    if misses is None:
        return v
    if all(misses[0]) and all(misses[1]):
        return Verdict(INCONCLUSIVE, f"both arms miss the target on every "
                       f"{'seed' if paired else 'run'}: a longer budget, not more "
                       f"{'seeds' if paired else 'runs'}, would settle it", p0, pc, iv, None)
    base_missed = sum(misses[1])
    if v.verdict in (SMALLER, NOT_SUPPORTED) and base_missed:
        # The restricted mean counts a miss at the budget: it understates a gain there.
        return Verdict(v.verdict, v.reason + f"; the baseline missed on {base_missed} "
                       f"{'seed' if paired else 'run'}(s), "
                       "counted at the budget though its times there are longer", p0, pc, iv,
                       v.seeds_needed, v.seeds_at_least)
    return v


def not_judged(shown: tuple[list[float], list[float]], why: str, *,
               paired: bool = True) -> Verdict:
    """Numbers shown, no verdict (e.g. wall time of an emulated precision)."""
    iv = relative_interval(*shown) if paired else two_sample_relative_interval(*shown)
    return Verdict(NOT_JUDGED, why, None, None, iv, None)


def judge_success(shown: tuple[list[float], list[float]], claimed: float, *,
                  paired: bool = True) -> Verdict:
    """The verdict on a relative change of the success rate: McNemar's exact test against
    no change, the Bonferroni-combined Clopper-Pearson test against the claimed ratio, and
    the interval that inverts it (:func:`~spikebench.report.stats.rate_ratio_exact`).
    ``paired`` False: two independent groups (any sizes), Fisher's exact test against no
    change."""
    a, b = shown
    if not paired:
        return _judge_success_two(a, b, claimed)
    n = len(a)
    k1, k2 = int(sum(a)), int(sum(b))
    est = stats.rate_ratio_exact(k1, k2, n)
    method = "exact ratio of rates (Clopper-Pearson, Bonferroni)"

    def rel(x):
        return None if x is None else x - 1

    iv = Interval(rel(est.value), rel(est.lo), rel(est.hi), n, method,
                  "" if est.value is not None else "neither arm ever succeeds")
    if not n:
        return Verdict(INCONCLUSIVE, "no matched seeds", None, None, iv, None)
    s = 1 if claimed > 0 else -1
    p0 = sign_flip_p([x - y for x, y in zip(a, b, strict=True)], s)
    pc = stats.rate_ratio_p(k1, k2, n, 1.0 + claimed, -s)
    discordant = sum(1 for x, y in zip(a, b, strict=True) if x != y)
    return _verdict(p0, pc, iv, claimed, discordant, n, test0="McNemar ",
                    pairs="discordant")


def _judge_success_two(a: list[float], b: list[float], claimed: float) -> Verdict:
    n, m = len(a), len(b)
    k1, k2 = int(sum(a)), int(sum(b))
    est = stats.rate_ratio_exact(k1, k2, n, n2=m)
    method = "exact ratio of rates (Clopper-Pearson, Bonferroni)"

    def rel(x):
        return None if x is None else x - 1

    iv = Interval(rel(est.value), rel(est.lo), rel(est.hi), n, method,
                  "" if est.value is not None else "neither group ever succeeds", m)
    if not n or not m:
        return Verdict(INCONCLUSIVE, "a group has no runs", None, None, iv, None)
    s = 1 if claimed > 0 else -1
    p0 = stats.fisher_p(k1, n, k2, m, s)
    pc = stats.rate_ratio_p(k1, k2, n, 1.0 + claimed, -s, n2=m)
    return _verdict_two(p0, pc, iv, claimed, n, m, test0="Fisher ")
