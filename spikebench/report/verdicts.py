"""Verdicts on the article's claims: each decided by an exact paired test, named and printed.

A claim "the recipe changes X by c" is *supported* when the sign-flip test rejects "no
change" (p < 0.05) in the claimed direction and does not reject c, or the estimate goes
beyond c; *not supported* when it rejects c with the estimate short of it; else
*inconclusive*. A censored time (a miss: at least the budget) must agree with the verdict
whatever its true value: "supported" is tested with the recipe's misses unbounded and the
baseline's at the budget, "not supported" the other way round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spikebench.report import stats
from spikebench.report.exact import (
    ALPHA,
    MIN_PAIRS,
    Interval,
    ratio_p,
    relative_interval,
    sign_flip_p,
)

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
NOT_JUDGED = "not judged"
SEEDS_CAP = 1000

RULES = (
    "each claim is a relative change of the recipe's mean over the baseline's on matched "
    "seeds (recipe / baseline - 1). Time: tested with the exact paired sign-flip "
    "permutation test on recipe - (1 + change) x baseline (it assumes those differences are "
    "symmetric); its 95% interval is every change the test does not reject at 5%. Success "
    "(0/1 per seed): no change is tested with McNemar's exact test, and the ratio of the "
    "two rates gets the MOVER interval of their Wilson limits. supported: the test rejects "
    "no change (p < 0.05) with the estimate in the claimed direction, and the interval "
    "reaches the claimed change; not supported: the claimed change is rejected (the sign-flip "
    "test at it gives p < 0.05, or for success it lies outside the 95% interval) with the "
    "estimate short of it; inconclusive: anything else. With fewer than {MIN_PAIRS} differing pairs no test can reach p < 0.05 "
    f"(all in one direction: 2/2^{MIN_PAIRS - 1} = {2 * 0.5 ** (MIN_PAIRS - 1):.4f}), so "
    "no interval is given and the verdict is inconclusive. Time to target is censored: a "
    "miss or a divergence only says the time is at least the budget (the steps, or the "
    "run's whole wall time); the table shows the restricted mean (misses counted at the "
    "budget, a lower bound), and a verdict stands only if it holds for every value the "
    "censored times could take. The verdict on time uses steps, which do not depend on the "
    "hardware; wall time is judged only where no arm's precision is emulated. p-values and "
    "intervals are not adjusted for the number of claims. Seeds to settle (inconclusive "
    "only): n x (interval half-width / distance)^2, where distance is how far the estimate "
    "lies from the farther of zero and the claim; it assumes the estimate and spread stay as "
    f"measured, is at least {MIN_PAIRS} and at most {SEEDS_CAP}.")


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    p_no_change: float | None  # the test of "no change" that decides "supported"
    p_claim: float | None  # the test of the claimed change that decides "not supported"
    interval: Interval  # estimate and interval on the values as shown (misses at budget)
    seeds_needed: int | None


def _decide(a: list[float], b: list[float], claimed: float) -> tuple[str, float, float]:
    p0, pc = ratio_p(a, b, 1.0), ratio_p(a, b, 1.0 + claimed)
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    s = 1.0 if claimed > 0 else -1.0
    if not all(math.isfinite(x) for x in a + b) or mb == 0:
        # Unbounded values test nothing; a zero baseline makes any gain infinite.
        change = math.inf * s if mb == 0 and ma > 0 and s > 0 else math.nan
    else:
        change = ma / mb - 1
    if p0 < ALPHA and s * change > 0 and (s * change >= s * claimed or pc >= ALPHA):
        return SUPPORTED, p0, pc
    if pc < ALPHA and s * change < s * claimed:
        return NOT_SUPPORTED, p0, pc
    return INCONCLUSIVE, p0, pc


def judge(shown: tuple[list[float], list[float]], claimed: float, *,
          worst: tuple[list[float], list[float]] | None = None,
          best: tuple[list[float], list[float]] | None = None) -> Verdict:
    """The verdict on ``claimed`` (e.g. -0.25) from paired values (recipe, baseline).

    ``shown`` are the values the table prints; for censored data ``worst`` and ``best`` are
    the same pairs with each censored value at the bound least and most favourable to the
    claim: "supported" must hold on ``worst``, "not supported" on ``best``.
    """
    a, b = shown
    iv = relative_interval(a, b)
    if not a:
        return Verdict(INCONCLUSIVE, "no matched seeds", None, None, iv, None)
    sup, p0, _ = _decide(*(worst or shown), claimed)
    nots, _, pc = _decide(*(best or shown), claimed)
    # The table prints the p-values of the values it shows; a reason names the decisive one.
    shown_verdict, p0_shown, pc_shown = _decide(a, b, claimed)
    differing = sum(1 for x, y in zip(a, b, strict=True) if x != y)
    if sup == SUPPORTED:
        return Verdict(SUPPORTED, f"p = {p0:.3g} against no change", p0_shown, pc_shown, iv,
                       None)
    if nots == NOT_SUPPORTED:
        return Verdict(NOT_SUPPORTED, f"p = {pc:.3g} against the claimed change", p0_shown,
                       pc_shown, iv, None)
    if differing < MIN_PAIRS:
        why = (f"only {differing} differing pair(s): an exact test needs {MIN_PAIRS} to "
               "reach p < 0.05")
    elif shown_verdict != INCONCLUSIVE:
        why = (f"{shown_verdict} only if the censored times stop at the budget; they could "
               "be longer")
    else:
        why = f"p = {p0_shown:.3g} against no change, {pc_shown:.3g} against the claim"
    return Verdict(INCONCLUSIVE, why, p0_shown, pc_shown, iv,
                   _seeds_needed(iv, claimed, differing))


def _seeds_needed(iv: Interval, claimed: float, differing: int) -> int | None:
    if iv.value is None or not math.isfinite(iv.value):
        return None
    if iv.lo is None or iv.hi is None or not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
        return MIN_PAIRS if differing < MIN_PAIRS else None
    distance = max(abs(iv.value), abs(iv.value - claimed))
    if distance == 0:
        return None
    need = math.ceil(iv.n * ((iv.hi - iv.lo) / 2 / distance) ** 2)
    return min(max(need, iv.n + 1, MIN_PAIRS), SEEDS_CAP)


def not_judged(shown: tuple[list[float], list[float]], why: str) -> Verdict:
    """Numbers shown, no verdict (e.g. wall time of an emulated precision)."""
    return Verdict(NOT_JUDGED, why, None, None, relative_interval(*shown), None)


def judge_success(shown: tuple[list[float], list[float]], claimed: float) -> Verdict:
    """The verdict on a relative change of the success rate: McNemar's exact test against
    no change, the MOVER interval of the rate ratio against the claim."""
    a, b = shown
    n = len(a)
    est = stats.rate_ratio_ci(int(sum(a)), int(sum(b)), n)
    iv = Interval(None if est.value is None else est.value - 1,
                  None if est.lo is None else est.lo - 1,
                  None if est.hi is None else est.hi - 1, n, est.method,
                  "" if est.lo is not None else "the baseline never succeeds")
    if not n:
        return Verdict(INCONCLUSIVE, "no matched seeds", None, None, iv, None)
    p0 = sign_flip_p([x - y for x, y in zip(a, b, strict=True)])
    change = iv.value if iv.value is not None else math.nan
    reaches = iv.hi is not None and iv.hi >= claimed
    if p0 < ALPHA and change > 0 and (change >= claimed or reaches):
        return Verdict(SUPPORTED, f"McNemar p = {p0:.3g} against no change", p0, None, iv, None)
    if iv.hi is not None and iv.hi < claimed:
        return Verdict(NOT_SUPPORTED, "the claimed change lies above the 95% interval", p0,
                       None, iv, None)
    discordant = sum(1 for x, y in zip(a, b, strict=True) if x != y)
    why = (f"only {discordant} discordant pair(s): McNemar's test needs {MIN_PAIRS} to reach "
           "p < 0.05" if discordant < MIN_PAIRS else f"McNemar p = {p0:.3g} against no change")
    return Verdict(INCONCLUSIVE, why, p0, None, iv, _seeds_needed(iv, claimed, discordant))

