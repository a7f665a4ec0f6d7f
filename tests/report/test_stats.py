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


def E(value, lo, hi, n=3):
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


def test_seeds_needed_extrapolates_the_half_width_and_is_capped():
    # half-width 0.35, estimate 0.25 lies 0.25 from 0 and 0.15 from 0.4: distance 0.25.
    v = stats.verdict(E(0.25, -0.1, 0.6, n=3), 0.4)
    assert v.verdict == stats.INCONCLUSIVE
    assert v.seeds_needed == math.ceil(3 * (0.35 / 0.25) ** 2)
    wide = stats.verdict(E(0.2, -50.0, 50.0, n=3), 0.4)
    assert wide.seeds_needed == stats.SEEDS_CAP
    # An asymmetric interval can settle with fewer seeds than the formula's n: ask for one more.
    v = stats.verdict(E(0.39, -0.01, 0.41, n=3), 0.4)
    assert v.seeds_needed == 4


def test_verdict_without_data_or_interval_is_inconclusive():
    assert stats.verdict(stats.NONE, 0.4).verdict == stats.INCONCLUSIVE
    v = stats.verdict(E(0.5, None, None, n=1), 0.4)
    assert v.verdict == stats.INCONCLUSIVE and v.seeds_needed is None
