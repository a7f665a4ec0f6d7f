import math

import pytest

from spikebench.report import stats


def test_bootstrap_is_deterministic_and_brackets_the_estimate():
    xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    a, b = stats.bootstrap_ci(xs), stats.bootstrap_ci(xs)
    assert a == b
    assert a.value == pytest.approx(sum(xs) / len(xs))
    assert min(xs) <= a.lo <= a.value <= a.hi <= max(xs)
    assert a.n == len(xs)
    med = stats.bootstrap_ci(xs, "median")
    assert med.value == pytest.approx(3.5)


def test_bootstrap_edge_cases():
    assert stats.bootstrap_ci([]) is stats.NONE
    one = stats.bootstrap_ci([2.5])
    assert (one.value, one.lo, one.hi, one.n) == (2.5, None, None, 1)
    same = stats.bootstrap_ci([4.0, 4.0, 4.0])
    assert (same.lo, same.hi) == (4.0, 4.0)
    assert same.half_width == 0.0


@pytest.mark.parametrize("k,n,lo,hi", [
    (0, 3, 0.0, 1 - 0.025 ** (1 / 3)),
    (3, 3, 0.025 ** (1 / 3), 1.0),
    (0, 1, 0.0, 0.975),
    (5, 10, 0.18708602, 0.81291398),  # the textbook Clopper-Pearson interval
])
def test_rate_ci_matches_clopper_pearson(k, n, lo, hi):
    e = stats.rate_ci(k, n)
    assert e.value == pytest.approx(k / n)
    assert e.lo == pytest.approx(lo, abs=1e-6)
    assert e.hi == pytest.approx(hi, abs=1e-6)


def test_rate_ci_edge_cases():
    assert stats.rate_ci(0, 0) is stats.NONE
    with pytest.raises(ValueError):
        stats.rate_ci(4, 3)


def test_pairs_keep_only_seeds_both_arms_have_a_value_for():
    pairs = stats.pair_by_seed({0: 1.0, 1: None, 2: 3.0, 5: 1.0}, {0: 2.0, 1: 2.0, 2: None,
                                                                  3: 4.0})
    assert pairs == [(0, 1.0, 2.0)]


def test_paired_difference_and_relative_change():
    pairs = [(0, 8.0, 10.0), (1, 6.0, 10.0), (2, 7.0, 10.0)]
    d = stats.paired_diff_ci(pairs)
    assert d.value == pytest.approx(-3.0)
    assert d.lo <= -3.0 <= d.hi and d.n == 3
    r = stats.paired_relative_ci(pairs)
    assert r.value == pytest.approx(21 / 30 - 1)
    assert r.lo == pytest.approx(-0.4) and r.hi == pytest.approx(-0.2)
    assert stats.paired_relative_ci(pairs) == r  # seeded


def test_relative_change_of_a_zero_baseline_is_undefined():
    r = stats.paired_relative_ci([(0, 1.0, 0.0), (1, 1.0, 0.0)])
    assert r.value is None and r.n == 2 and r.method == stats.UNDEFINED
    v = stats.verdict(r, 0.4)
    assert v.verdict == stats.INCONCLUSIVE and "undefined" in v.reason
    # A baseline that is zero only in some resamples widens the interval to +inf.
    r = stats.paired_relative_ci([(0, 1.0, 0.0), (1, 1.0, 0.0), (2, 1.0, 1.0)])
    assert r.value == pytest.approx(2.0) and r.hi == math.inf
    assert stats.verdict(r, 0.4).seeds_needed is None


def E(value, lo, hi, n=6):
    return stats.Estimate(value, lo, hi, n)


@pytest.mark.parametrize("est,claimed,expected", [
    (E(0.5, 0.2, 0.9), 0.4, stats.SUPPORTED),        # excludes 0, contains the claim
    (E(0.9, 0.6, 1.2), 0.4, stats.SUPPORTED),        # beyond the claim
    (E(0.1, 0.05, 0.2), 0.4, stats.NOT_SUPPORTED),   # right direction, short of it
    (E(-0.1, -0.3, 0.1), 0.4, stats.NOT_SUPPORTED),  # spans 0, excludes the claim
    (E(0.3, -0.1, 0.6), 0.4, stats.INCONCLUSIVE),    # spans both
    (E(-0.4, -0.5, -0.3), -0.25, stats.SUPPORTED),   # time: lower is better
    (E(-0.1, -0.2, -0.05), -0.25, stats.NOT_SUPPORTED),
    (E(-0.2, -0.5, 0.1), -0.25, stats.INCONCLUSIVE),
])
def test_verdicts(est, claimed, expected):
    assert stats.verdict(est, claimed).verdict == expected


def test_min_seeds_is_the_fewest_an_exact_paired_test_can_be_significant_with():
    assert stats.MIN_SEEDS == stats.min_seeds_exact(0.95) == 6  # 2/2^6 = 0.031; 2/2^5 = 0.0625
    assert stats.min_seeds_exact(0.99) == 8  # 2/2^8 = 0.0078; 2/2^7 = 0.016
    assert str(stats.MIN_SEEDS) in stats.VERDICT_RULES and "0.031" in stats.VERDICT_RULES


@pytest.mark.parametrize("est,claimed", [
    (E(0.5, 0.2, 0.9, n=5), 0.4),       # the CI alone would say supported
    (E(0.1, 0.05, 0.2, n=5), 0.4),      # ... not supported
    (E(-0.4, -0.5, -0.3, n=3), -0.25),
])
def test_fewer_than_min_seeds_is_inconclusive_whatever_the_ci_says(est, claimed):
    v = stats.verdict(est, claimed)
    assert v.verdict == stats.INCONCLUSIVE
    assert v.seeds_needed == stats.MIN_SEEDS
    assert f"only {est.n} matched seeds" in v.reason and "p < 0.05" in v.reason
    assert stats.verdict(stats.Estimate(est.value, est.lo, est.hi, 6), claimed).verdict \
        != stats.INCONCLUSIVE


def test_seeds_needed_extrapolates_the_half_width_and_is_capped():
    # half-width 0.35, estimate 0.25 lies 0.25 from 0 and 0.15 from 0.4: distance 0.25.
    v = stats.verdict(E(0.25, -0.1, 0.6, n=6), 0.4)
    assert v.verdict == stats.INCONCLUSIVE
    assert v.seeds_needed == math.ceil(6 * (0.35 / 0.25) ** 2)
    wide = stats.verdict(E(0.2, -50.0, 50.0, n=6), 0.4)
    assert wide.seeds_needed == stats.SEEDS_CAP
    # An asymmetric interval can settle with fewer seeds than the formula's n: ask for one more.
    v = stats.verdict(E(0.39, -0.01, 0.41, n=6), 0.4)
    assert v.seeds_needed == 7
    # Below the minimum: at least MIN_SEEDS, the extrapolation where it asks for more.
    assert stats.verdict(E(0.39, -0.01, 0.41, n=3), 0.4).seeds_needed == stats.MIN_SEEDS
    v = stats.verdict(E(0.25, -0.3, 0.8, n=3), 0.4)
    assert v.seeds_needed == math.ceil(3 * (0.55 / 0.25) ** 2) > stats.MIN_SEEDS
    assert stats.verdict(E(0.2, -50.0, 50.0, n=3), 0.4).seeds_needed == stats.SEEDS_CAP


def test_verdict_without_data_or_interval_is_inconclusive():
    assert stats.verdict(stats.NONE, 0.4).verdict == stats.INCONCLUSIVE
    v = stats.verdict(E(0.5, None, None, n=1), 0.4)
    assert v.verdict == stats.INCONCLUSIVE and v.seeds_needed is None


# ---------------------------------------------------------------- paired success rates

Z = 1.959963984540054  # the 97.5% normal quantile


@pytest.mark.parametrize("k,n,lo,hi", [
    (81, 263, 0.2553, 0.3662),  # Newcombe (1998a) Stat Med 17:857, Table I, method 3
    (15, 148, 0.0624, 0.1605),
    (0, 3, 0.0, Z**2 / (3 + Z**2)),  # k = 0 or n: the limit is n/(n + z^2) from 0 or 1
    (3, 3, 3 / (3 + Z**2), 1.0),
])
def test_wilson_score_interval(k, n, lo, hi):
    got = stats.wilson_ci(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)


@pytest.mark.parametrize("abcd,lo,hi", [
    # Newcombe (1998) Stat Med 17:2635, Table II, method 10 (a, b, c, d as in the function).
    ((36, 12, 2, 0), 0.0569, 0.3404),
    ((18, 12, 2, 18), 0.0562, 0.3290),
    ((53, 0, 0, 1), -0.0729, 0.0729),
    ((0, 30, 0, 0), 0.8395, 1.0),
    # Derived by hand: p1 = 21/44 = 0.4773, p2 = 14/44 = 0.3182; Wilson limits
    # (0.3375, 0.6206) and (0.2000, 0.4656); ad - bc = 234 > n/2 = 22, so
    # phi = 212 / sqrt(21 * 23 * 14 * 30) = 0.4707; lower = 0.1591 - sqrt(0.1398^2 -
    # 2 phi 0.1398 0.1474 + 0.1474^2) = 0.0112, upper = 0.1591 + sqrt(0.1434^2 -
    # 2 phi 0.1434 0.1182 + 0.1182^2) = 0.2954.
    ((12, 9, 2, 21), 0.0112, 0.2954),
])
def test_newcombe_paired_interval(abcd, lo, hi):
    a, b, c, d = abcd
    e = stats.newcombe_paired_ci(a, b, c, d)
    assert e.value == pytest.approx((b - c) / (a + b + c + d))
    assert (e.lo, e.hi) == pytest.approx((lo, hi), abs=1e-4)
    assert e.n == a + b + c + d and "Newcombe" in e.method


def test_newcombe_with_every_seed_agreeing_is_not_degenerate():
    # 3 seeds, the baseline fails and the arm succeeds on each: a margin is empty, so
    # phi = 0 and the lower limit is 1 - sqrt(2) * z^2 / (3 + z^2) (Wilson limits above).
    e = stats.newcombe_paired_ci(0, 3, 0, 0)
    assert e.value == 1.0 and e.hi == 1.0
    assert e.lo == pytest.approx(1 - math.sqrt(2) * Z**2 / (3 + Z**2))  # 0.206
    # No difference on 3 seeds: symmetric about 0 and wide.
    same = stats.newcombe_paired_ci(3, 0, 0, 0)
    assert same.value == 0 and same.lo == pytest.approx(-same.hi) and same.hi > 0.5
    assert stats.newcombe_paired_ci(0, 0, 0, 0) is stats.NONE
    with pytest.raises(ValueError):
        stats.newcombe_paired_ci(1, -1, 0, 0)


def test_paired_rate_difference_counts_the_table_arm_first():
    pairs = [(0, 1.0, 0.0), (1, 1.0, 1.0), (2, 0.0, 1.0), (3, 0.0, 0.0), (4, 1.0, 0.0)]
    assert stats.paired_rate_diff_ci(pairs) == stats.newcombe_paired_ci(1, 2, 1, 1)
    assert stats.paired_rate_diff_ci(pairs).value == pytest.approx(1 / 5)
    assert stats.paired_rate_diff_ci([]) is stats.NONE
    with pytest.raises(ValueError):
        stats.paired_rate_diff_ci([(0, 0.5, 1.0)])


def test_success_verdicts_over_agreeing_seeds():
    # 3 seeds, 0 -> 1 on each: the interval [+21 pp, +100 pp] clears zero and the +40 pp
    # claim, but an exact paired test on 3 seeds gives p = 0.25: inconclusive.
    three = stats.verdict(stats.paired_rate_diff_ci([(s, 1.0, 0.0) for s in range(3)]), 0.4)
    assert three.verdict == stats.INCONCLUSIVE and three.seeds_needed >= 6
    # 3 seeds with no difference: inconclusive too, not "not supported".
    none = stats.verdict(stats.paired_rate_diff_ci([(s, 1.0, 1.0) for s in range(3)]), 0.4)
    assert none.verdict == stats.INCONCLUSIVE and none.seeds_needed >= 6
    six = stats.paired_rate_diff_ci([(s, 1.0, 0.0) for s in range(6)])
    assert six.lo == pytest.approx(1 - math.sqrt(2) * Z**2 / (6 + Z**2))  # 0.448
    assert stats.verdict(six, 0.4).verdict == stats.SUPPORTED
