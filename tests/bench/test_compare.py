"""The bench's verdicts as pure functions: the exact test, censoring, effects, ratios."""

import math

import pytest

from spikebench.bench.compare import (
    first_mismatch,
    judge_metric,
    judge_perf,
    mann_whitney_greater,
    min_p,
    same_environment,
)


def test_the_exact_test_reaches_its_smallest_p_only_on_complete_separation():
    assert mann_whitney_greater([5, 6, 7, 8], [1, 2, 3, 4]) == pytest.approx(1 / 70)
    assert min_p(4, 4) == pytest.approx(1 / 70)
    assert mann_whitney_greater([1, 2, 3, 4], [5, 6, 7, 8]) == 1.0
    assert 0.1 < mann_whitney_greater([1, 6, 3, 8], [5, 2, 7, 4]) < 0.9


def test_a_miss_is_censored_worse_than_every_hit_and_tied_with_other_misses():
    assert mann_whitney_greater([None] * 4, [10, 20, 30, 40]) == pytest.approx(1 / 70)
    assert mann_whitney_greater([None, None], [None, None]) > 0.5  # all tied: no evidence


def test_a_regression_needs_both_the_test_and_the_minimum_effect():
    base = [3.00, 3.01, 3.02, 3.03]
    worse = judge_metric("s", "final_val_loss", [3.2, 3.21, 3.22, 3.23], base, level=0.05,
                         min_effect=0.05)
    assert worse.verdict == "regressed" and worse.effect == pytest.approx(0.2)
    assert worse.p == pytest.approx(1 / 70) and "Mann-Whitney" in worse.test
    tiny = judge_metric("s", "final_val_loss", [3.04, 3.05, 3.06, 3.07], base, level=0.05,
                        min_effect=0.05)
    assert tiny.verdict == "pass"  # separated, but a shift below the minimum effect
    noisy = judge_metric("s", "final_val_loss", [2.9, 3.5, 2.95, 3.6], base, level=0.05,
                         min_effect=0.05)
    assert noisy.verdict == "pass"  # a large median shift the seeds do not support
    better = judge_metric("s", "severity", [0, 0, 0, 0], [30, 40, 50, 60], level=0.05,
                          min_effect=10)
    assert better.verdict == "improved"


def test_steps_to_target_with_misses_has_an_infinite_median_shift():
    j = judge_metric("s", "steps_to_target", [None] * 4, [40, 45, 50, 55], level=0.05,
                     min_effect=20)
    assert j.verdict == "regressed" and j.current is None and j.effect is None


def test_environment_keys_and_the_first_differing_loss():
    env = {"device": "cpu", "cpu_model": "X [avx2]", "torch_threads": 1, "torch": "2.13.0",
           "python": "3.11.7", "corpus": "abc"}
    assert same_environment(env, dict(env)) == []
    assert same_environment(env, {**env, "torch_threads": 2, "cpu_model": "Y"}) == [
        "cpu_model", "torch_threads"]
    a = {"0": [5.0, 4.0, 3.0], "1": [5.0, 4.5]}
    assert first_mismatch(a, {"0": [5.0, 4.0, 3.0], "1": [5.0, 4.5]}) is None
    assert first_mismatch(a, {"0": [5.0, 4.0, 3.0000001], "1": [5.0, 4.5]}) == (
        "0", 3, 3.0, 3.0000001)
    assert first_mismatch(a, {"0": [5.0, 4.0, 3.0], "1": [5.0]}) == ("1", 2, 4.5, None)
    assert first_mismatch({"0": [math.nan]}, {"0": [math.nan]}) is None


def test_performance_is_judged_on_ratios_with_a_tolerance():
    assert judge_perf("overhead_ratio", 1.30, 1.05, tolerance=0.1).verdict == "regressed"
    assert judge_perf("overhead_ratio", 1.10, 1.05, tolerance=0.1).verdict == "pass"
    assert judge_perf("mfu", 0.08, 0.10, tolerance=0.1).verdict == "regressed"
    assert judge_perf("sweep_scaling", 1.9, 1.5, tolerance=0.1).verdict == "improved"
    assert judge_perf("mfu", None, 0.1, tolerance=0.1).verdict == "pass"


def test_a_ratio_with_its_tolerance_off_is_shown_not_judged():
    j = judge_perf("sweep_scaling", 1.0, 2.0, tolerance=None)
    assert j.verdict == "shown" and j.effect == pytest.approx(-0.5)
