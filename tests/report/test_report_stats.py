import math

import pytest

from spikebench.report import stats


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


def test_poisson_interval_matches_garwood():
    # Garwood's exact limits: chi2 quantiles / 2 (e.g. Ulm 1990's table).
    assert stats.poisson_ci(0) == (0.0, pytest.approx(3.6889, abs=1e-4))
    lo, hi = stats.poisson_ci(3)
    assert lo == pytest.approx(0.6187, abs=1e-4) and hi == pytest.approx(8.7673, abs=1e-4)
    lo, hi = stats.poisson_ci(100)
    assert lo == pytest.approx(81.364, abs=1e-3) and hi == pytest.approx(121.627, abs=1e-3)


def test_rate_ratio_test_and_its_interval_agree():
    e = stats.rate_ratio_exact(6, 3, 6)
    assert e.value == 2.0 and 0 < e.lo < 1 < e.value < e.hi
    # The interval is every ratio the one-sided tests do not reject at 2.5% each.
    for r, side, inside in ((e.lo * 0.99, 1, False), (e.lo * 1.01, 1, True),
                            (e.hi * 1.01, -1, False), (e.hi * 0.99, -1, True)):
        assert (stats.rate_ratio_p(6, 3, 6, r, side) >= 0.025) == inside, (r, side)
    never = stats.rate_ratio_exact(6, 0, 6)
    assert never.value == math.inf and never.hi == math.inf
    assert never.lo == pytest.approx(0.0125 ** (1 / 6) / (1 - 0.0125 ** (1 / 6)))
    # 40 of 40 in both arms refutes +40%; 10 of 10 cannot.
    assert stats.rate_ratio_p(40, 40, 40, 1.4, -1) < 0.001
    assert stats.rate_ratio_p(10, 10, 10, 1.4, -1) > 0.025
