import math

from spikebench.report import verdicts as v

FAST = [100, 110, 120, 105, 115, 117]


def test_time_supported_not_supported_inconclusive():
    assert v.judge((FAST, [300] * 6), -0.25).verdict == v.SUPPORTED
    assert v.judge(([290, 295, 300, 290, 295, 300], [300] * 6), -0.25).verdict \
        == v.NOT_SUPPORTED
    mixed = v.judge(([40, 70, 99, 40, 70, 99], [60, 80, 90, 60, 80, 90]), -0.25)
    assert mixed.verdict == v.INCONCLUSIVE and mixed.seeds_needed > 6
    assert mixed.p_no_change is not None and mixed.p_claim is not None


def test_a_verdict_needs_the_exact_test_not_just_an_interval():
    # Five seeds all faster: every interval method would clear zero, the exact test cannot.
    five = v.judge((FAST[:5], [300] * 5), -0.25)
    assert five.verdict == v.INCONCLUSIVE and "needs 6" in five.reason
    assert five.seeds_needed == 6
    # A reversal on one seed leaves p = 0.0625: not supported, not "supported" either.
    one_back = v.judge(([100, 110, 120, 105, 115, 301], [300] * 6), -0.25)
    assert one_back.verdict == v.INCONCLUSIVE and one_back.p_no_change > 0.05


def test_censored_times_must_agree_for_every_value():
    # Six seeds the recipe wins, one where both missed: counted at the budget the seed is a
    # tie and the claim looks supported; but the recipe's miss could be any time at all.
    shown = (FAST + [300], [300] * 7)
    worst = (FAST + [math.inf], [300] * 7)
    best = (FAST + [300], [math.inf] * 7)
    assert v.judge(shown, -0.25).verdict == v.SUPPORTED
    honest = v.judge(shown, -0.25, worst=worst, best=best)
    assert honest.verdict == v.INCONCLUSIVE and "censored" in honest.reason
    # A baseline that missed everywhere while the recipe hit: supported whatever the misses.
    sure = v.judge((FAST, [300] * 6), -0.25, worst=(FAST, [300] * 6),
                   best=(FAST, [math.inf] * 6))
    assert sure.verdict == v.SUPPORTED


def test_success_is_judged_as_a_ratio_with_mcnemar():
    # (3, 3, 0, 0): 3 seeds both succeed, 3 only the recipe: McNemar p = 0.25.
    mixed = v.judge_success(([1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]), 0.40)
    assert mixed.verdict == v.INCONCLUSIVE and mixed.p_no_change == 0.25
    assert mixed.interval.value == 1.0  # 6/6 over 3/6 - 1: +100%
    six = v.judge_success(([1] * 6, [0] * 6), 0.40)
    assert six.verdict == v.SUPPORTED and six.p_no_change == 2 / 64
    # Both always succeed: the ratio is 1, and +40% is not excluded on 6 seeds.
    both = v.judge_success(([1] * 6, [1] * 6), 0.40)
    assert both.verdict == v.INCONCLUSIVE
    many = v.judge_success(([1] * 40, [1] * 40), 0.40)
    assert many.verdict == v.NOT_SUPPORTED
