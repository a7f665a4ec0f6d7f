"""The exact tests for two independent groups of runs (spikebench compare without shared
seeds), against cases small enough to count by hand."""

import math

import pytest

from spikebench.report import exact, stats, verdicts


def test_permutation_p_counts_the_splits():
    low, high = [1, 2, 3, 4], [5, 6, 7, 8]
    # C(8, 4) = 70 splits; only the observed one puts every high value in the first group.
    assert exact.two_sample_p(high, low, +1) == pytest.approx(1 / 70)
    assert exact.two_sample_p(high, low, -1) == 1.0
    assert exact.two_sample_p(high, low) == pytest.approx(2 / 70)  # twice the smaller side
    # One swap (4 above 5): the observed split and the one swapping 4 and 5 back: 2/70.
    assert exact.two_sample_p([4, 6, 7, 8], [1, 2, 3, 5], +1) == pytest.approx(2 / 70)
    # Unequal sizes: C(5, 2) = 10 splits, the observed one the most extreme.
    assert exact.two_sample_p([9, 10], [1, 2, 3], +1) == pytest.approx(1 / 10)
    assert exact.two_sample_p([], [1, 2]) == 1.0
    assert exact.two_sample_p([1, math.inf], [1, 2]) == 1.0


def test_the_shift_interval_inverts_the_test():
    iv = exact.two_sample_shift_interval([5, 6, 7, 8], [1, 2, 3, 4])
    # At 4 and 4 runs only the most extreme split (1/70 one-sided) rejects at 2.5%: a shift
    # d is rejected when every 5..8 - d lies above every 1..4 (d < 1) or below (d > 7).
    assert (iv.value, iv.lo, iv.hi, iv.n, iv.m) == (4.0, pytest.approx(1.0),
                                                    pytest.approx(7.0), 4, 4)
    assert exact.two_sample_p([x - 0.99 for x in (5, 6, 7, 8)], [1, 2, 3, 4]) < 0.05
    assert exact.two_sample_p([x - 1.01 for x in (5, 6, 7, 8)], [1, 2, 3, 4]) >= 0.05
    assert "permutation" in iv.method


def test_too_few_runs_give_no_interval():
    assert exact.MIN_RUNS == 4
    assert not exact.two_sample_can_reject(3, 4)  # 1/35 > 0.025
    assert exact.two_sample_can_reject(3, 5)  # 1/56
    small = exact.two_sample_shift_interval([5, 6, 7], [1, 2, 3])
    assert small.value == 4.0 and small.lo is None and "3 and 3" in small.why
    flat = exact.two_sample_shift_interval([2.0] * 4, [1.0] * 4)
    assert flat.value == 1.0 and flat.lo is None and "equal" in flat.why


def test_the_relative_interval_inverts_the_ratio_test():
    recipe, base = [100.0, 110.0, 120.0, 105.0], [300.0, 290.0, 310.0, 305.0]
    iv = exact.two_sample_relative_interval(recipe, base)
    assert iv.value == pytest.approx(sum(recipe) / sum(base) - 1)
    # A ratio r is rejected once every recipe value lies below every r x baseline value
    # (r above max(recipe) / min(base) = 120 / 290) or above it (below 100 / 310).
    assert iv.hi == pytest.approx(120 / 290 - 1, abs=1e-6)
    assert iv.lo == pytest.approx(100 / 310 - 1, abs=1e-6)
    assert exact.two_sample_ratio_p(recipe, base, 0.45, -1) == pytest.approx(1 / 70)
    assert exact.two_sample_ratio_p(recipe, base, 0.40, -1) == pytest.approx(3 / 70)


def test_fisher_exact_test():
    # Lady tasting tea: 3 of 4 against 1 of 4; P(K >= 3) = (16 + 1) / 70.
    assert stats.fisher_p(3, 4, 1, 4, +1) == pytest.approx(17 / 70)
    assert stats.fisher_p(3, 4, 1, 4, -1) == pytest.approx(1 - 1 / 70)
    assert stats.fisher_p(3, 4, 1, 4) == pytest.approx(34 / 70)
    assert stats.fisher_p(3, 3, 0, 3, +1) == pytest.approx(1 / 20)
    assert stats.fisher_p(2, 2, 2, 2) == 1.0 and stats.fisher_p(0, 0, 1, 2) == 1.0


@pytest.mark.parametrize("counts,lo,hi", [((56, 70, 48, 80), 0.0524, 0.3339),
                                          ((9, 10, 3, 10), 0.1705, 0.8090)])
def test_newcombe_interval_for_independent_rates(counts, lo, hi):
    e = stats.newcombe_diff_ci(*counts)  # Newcombe (1998), Stat Med 17:873, method 10
    assert (e.lo, e.hi) == (pytest.approx(lo, abs=5e-5), pytest.approx(hi, abs=5e-5))


def test_rate_ratio_with_unequal_groups():
    est = stats.rate_ratio_exact(3, 2, 4, n2=8)  # 3/4 over 2/8
    assert est.value == pytest.approx(3.0) and est.lo < 3.0 < est.hi
    assert stats.rate_ratio_exact(3, 3, 4).value == 1.0  # the paired form is unchanged


def test_unpaired_verdicts_name_their_tests():
    faster = verdicts.judge(([100.0, 105.0, 110.0, 102.0], [300.0, 310.0, 290.0, 305.0]),
                            -0.25, paired=False)
    assert faster.verdict == verdicts.SUPPORTED and faster.test == verdicts.TIME_TEST_TWO
    # At 4 and 4 the interval's ends are the extreme ratios the test rejects at 1/70.
    assert faster.interval.hi == pytest.approx(110 / 290 - 1, abs=1e-6)
    few = verdicts.judge(([100.0, 105.0, 110.0], [300.0, 310.0, 290.0]), -0.25, paired=False)
    assert few.verdict == verdicts.INCONCLUSIVE and "3 and 3" in few.reason
    assert few.seeds_needed == 4 and few.seeds_at_least
    # In a family of two, 4 and 4 runs (smallest p 1/70) cannot reach 0.0125: 5 and 5 can.
    fam = verdicts.judge(([100.0, 105.0, 110.0, 102.0], [300.0, 310.0, 290.0, 305.0]),
                         -0.25, paired=False, family=2)
    assert fam.verdict == verdicts.INCONCLUSIVE and fam.seeds_needed == 5
    success = verdicts.judge_success(([1.0] * 4, [0.0] * 4), 0.40, paired=False)
    assert success.test == verdicts.SUCCESS_TEST and success.interval.m is None
    assert success.verdict == verdicts.read(success.interval.lo, success.interval.hi, 0.40)
    uneven = verdicts.judge_success(([1.0] * 4, [0.0] * 8), 0.40, paired=False)
    assert uneven.interval.m == 8
    assert "two-sample permutation" in verdicts.rules(paired=False)
    assert "valid unpaired" in verdicts.rules(paired=False)


def test_a_sweep_study_stays_paired_on_its_baseline_arm(study):
    from spikebench.report.sections import strategy

    assert study.compare is None and study.baseline_arm == "baseline"
    assert study.recipe_arm == "recipe" and study.paired("recipe")
    rows = {r["arm"]: r for r in strategy.info(study).rows}
    assert rows["recipe"]["spikes"]["delta"]["paired"] is True
    assert rows["recipe"]["spikes"]["delta"]["m"] is None
