import pytest

from spikebench.report import verdicts as v
from spikebench.report.blocks import interval, pct

FAST = [100, 110, 120, 105, 115, 117]


def test_the_five_verdicts_on_time():
    assert v.judge((FAST, [300] * 6), -0.25).verdict == v.SUPPORTED
    smaller = v.judge(([250, 252, 254, 250, 252, 254], [300] * 6), -0.25)
    assert smaller.verdict == v.SMALLER  # -16%: real, and -25% rejected
    assert smaller.p_no_change < v.SIDE_ALPHA and smaller.p_claim < v.SIDE_ALPHA
    slow = v.judge(([290, 295, 300, 290, 295, 300], [300] * 6), -0.25)
    assert slow.verdict == v.NOT_SUPPORTED and slow.p_no_change > v.SIDE_ALPHA
    worse = v.judge(([330, 340, 350, 330, 340, 350], [300] * 6), -0.25)
    assert worse.verdict == v.NOT_SUPPORTED and "other way" in worse.reason
    mixed = v.judge(([40, 70, 99, 40, 70, 99], [60, 80, 90, 60, 80, 90]), -0.25)
    assert mixed.verdict == v.INCONCLUSIVE and mixed.seeds_needed > 6
    assert not mixed.seeds_at_least


def test_supported_means_the_claim_was_reached():
    # The case: -8% [-40%, -0.3%] against a -25% claim used to read "supported".
    small = v.judge(([180, 290, 292, 294, 296, 299], [300] * 6), -0.25)
    assert small.interval.value == pytest.approx(1651 / 1800 - 1)
    assert small.interval.lo == pytest.approx(-0.40) and small.interval.hi < 0
    assert small.verdict == v.REAL and "inside the 95% interval" in small.reason
    assert small.seeds_needed is not None and small.seeds_needed > 6


def test_p_values_are_one_sided_each_in_its_own_direction():
    sup = v.judge((FAST, [300] * 6), -0.25)
    assert sup.p_no_change == pytest.approx(1 / 64)  # all six faster: 1/2^6, one-sided
    assert sup.p_claim > 0.5  # the data lie on the claim's side: nothing refutes it
    slow = v.judge(([290, 295, 300, 290, 295, 300], [300] * 6), -0.25)
    assert slow.p_claim == pytest.approx(1 / 64) and slow.p_no_change > v.SIDE_ALPHA


def test_one_missed_seed_does_not_block_the_verdict_for_ever():
    # 11 seeds reach the target at step 100 and one misses; the baseline always misses.
    recipe, base = [100] * 11 + [300], [300] * 12
    missed = ([False] * 11 + [True], [True] * 12)
    got = v.judge((recipe, base), -0.25, misses=missed)
    assert got.verdict == v.SUPPORTED and got.seeds_needed is None
    assert got.p_no_change == pytest.approx(1 / 2 ** 11)


def test_when_censoring_blocks_no_seed_count_is_promised():
    both = v.judge(([300] * 6, [300] * 6), -0.25, misses=([True] * 6, [True] * 6))
    assert both.verdict == v.INCONCLUSIVE and both.seeds_needed is None
    assert "budget" in both.reason
    # A verdict against the claim names the baseline's misses it counted at the budget.
    near = v.judge(([280, 285, 290, 280, 285, 290], [300] * 6),
                   -0.25, misses=([False] * 6, [True] * 6))
    assert near.verdict == v.SMALLER and "missed on 6 seed(s)" in near.reason


def test_too_few_differing_pairs_gives_a_lower_bound_on_seeds():
    five = v.judge((FAST[:5], [300] * 5), -0.25)
    assert five.verdict == v.INCONCLUSIVE and "needs 6" in five.reason
    assert five.seeds_needed == 6 and five.seeds_at_least
    # Two of six pairs differ: six differing pairs need about 18 seeds at that rate.
    two = v.judge(([100, 110, 300, 300, 300, 300], [300] * 6), -0.25)
    assert two.verdict == v.INCONCLUSIVE and (two.seeds_needed, two.seeds_at_least) == (18, True)


def test_success_supported_only_where_the_claim_is_reached():
    # 30/30 vs 22/30: +36%, McNemar rejects no change, +40% is inside the interval. The
    # old rule called this "supported" through the interval's upper end.
    near = v.judge_success(([1] * 30, [1] * 22 + [0] * 8), 0.40)
    assert near.verdict == v.REAL and near.p_no_change == pytest.approx(1 / 256)
    assert near.interval.lo < 0.40 < near.interval.hi
    six = v.judge_success(([1] * 6, [0] * 6), 0.40)
    assert six.verdict == v.SUPPORTED and six.p_no_change == pytest.approx(1 / 64)
    # 40/40 in both arms: +40% is rejected even though no pair is discordant.
    same = v.judge_success(([1] * 40, [1] * 40), 0.40)
    assert same.verdict == v.NOT_SUPPORTED and same.p_claim < v.SIDE_ALPHA
    three = v.judge_success(([1] * 6, [1] * 3 + [0] * 3), 0.40)
    assert three.verdict == v.INCONCLUSIVE and three.seeds_at_least


def test_a_baseline_that_never_succeeds_keeps_its_finite_lower_limit():
    six = v.judge_success(([1] * 6, [0] * 6), 0.40)
    iv = six.interval
    assert iv.value == float("inf") and iv.hi == float("inf")
    assert iv.lo == pytest.approx(0.4816 / 0.5184 - 1, abs=1e-3)
    shown = interval({"value": iv.value, "lo": iv.lo, "hi": iv.hi},
                     lambda x: pct(x, sign=True))
    assert shown == "+inf [-7%, +inf]"


def test_the_rules_text_is_built_from_the_constants():
    assert f"p < {v.SIDE_ALPHA:g}" in v.RULES
    for name, meaning in v.VERDICTS.items():
        assert f"{name}: {meaning}" in v.RULES
    assert "{" not in v.RULES and "}" not in v.RULES  # no unformatted placeholder
