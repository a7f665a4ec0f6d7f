import math

import pytest

from spikebench.report import exact


@pytest.mark.parametrize("z,p", [
    ([1, 1, 1, 1, 1, 1], 2 / 64),           # all six one way: the smallest p at n = 6
    ([-0.01, 1, 1, 1, 1, 1], 4 / 64),       # one small reversal: no longer significant
    ([1, 1, 1, 0, 0, 0], 2 / 8),            # success (3, 3, 0, 0): McNemar p = 0.25
    ([1, 1, 1, 1, 1], 2 / 32),              # 5 pairs can never reach 0.05
    ([0, 0, 0], 1.0),
    ([1, -1, 2, -2], 1.0),
])
def test_sign_flip_p_values(z, p):
    assert exact.sign_flip_p(z) == pytest.approx(p)


def test_one_sided_p_is_half_the_two_sided_in_its_direction():
    z = [1, 2, 3, -0.5, 4, 5]
    two = exact.sign_flip_p(z)
    assert exact.sign_flip_p(z, +1) == pytest.approx(two / 2)
    assert exact.sign_flip_p(z, -1) == pytest.approx(1 - two / 2 + 1 / 64)
    assert exact.sign_flip_p([1] * 6, +1) == pytest.approx(1 / 64)
    assert exact.sign_flip_p([1] * 6, -1) == 1.0


def test_an_unbounded_value_tests_nothing():
    assert exact.sign_flip_p([1, 1, 1, 1, 1, 1, math.inf]) == 1.0


def test_min_pairs():
    assert exact.MIN_PAIRS == exact.min_pairs(0.05) == 6
    assert exact.min_pairs(0.01) == 8


def test_shift_interval_inverts_the_test():
    iv = exact.shift_interval([1, 2, 3, 4, 5, 6])
    # At n = 6 a shift is rejected only when every difference falls on one side of it.
    assert iv.value == 3.5 and iv.lo == pytest.approx(1) and iv.hi == pytest.approx(6)
    assert exact.sign_flip_p([d - 0.99 for d in range(1, 7)]) < 0.05
    short = exact.shift_interval([1, 2, 3])
    assert short.value == 2 and short.lo is None and "needs 6" in short.why
    same = exact.shift_interval([2.0] * 6)
    assert same.lo is None and "equally" in same.why


def test_relative_interval_of_times():
    recipe, base = [100, 110, 120, 105, 115, 117], [300] * 6
    iv = exact.relative_interval(recipe, base)
    assert iv.value == pytest.approx(sum(recipe) / 1800 - 1)
    # With a constant baseline the ratio interval is the range of recipe / baseline.
    assert iv.lo == pytest.approx(100 / 300 - 1, abs=1e-6)
    assert iv.hi == pytest.approx(120 / 300 - 1, abs=1e-6)
    assert exact.ratio_p(recipe, base, 1.0) < 0.05 < exact.ratio_p(recipe, base, 0.37)
    assert exact.relative_interval([1, 2], [2, 2]).lo is None
    assert exact.relative_interval([1] * 6, [0] * 6).value == math.inf


@pytest.mark.parametrize("df,q", [(1, 12.706), (2, 4.303), (5, 2.571), (9, 2.262),
                                  (30, 2.042)])
def test_t_quantiles_match_the_tables(df, q):
    assert exact.t_quantile(0.975, df) == pytest.approx(q, abs=5e-4)


def test_t_interval():
    iv = exact.t_interval([1.0, 2.0, 3.0])
    assert iv.value == 2.0 and iv.hi - iv.value == pytest.approx(4.303 / math.sqrt(3), abs=1e-3)
    assert exact.t_interval([5.0]).lo is None and exact.t_interval([5.0, 5.0]).lo is None
    # Truncated to what is possible: a mean of steps cannot pass the budget nor go below 0.
    cut = exact.t_interval([300.0, 300.0, 100.0], 0.0, 300.0)
    assert cut.hi == 300.0 and cut.lo == 0.0 and "truncated" in cut.method
