"""The bench's verdicts as pure functions: the exact test, censoring, effects, ratios, and
Holm's correction over a run's tests with the false-alarm statement it prints."""

import copy
import itertools
import json
import math
import random
from pathlib import Path

import pytest

from spikebench.bench.compare import (
    Family,
    MetricCase,
    false_alarm_note,
    family_of,
    first_mismatch,
    gates_note,
    holm,
    holm_adjusted,
    judge_metric,
    judge_metrics,
    judge_perf,
    judged_gates,
    mann_whitney_greater,
    min_p,
    out_of_order_allowed,
    same_environment,
)

ROOT = Path(__file__).resolve().parents[2]


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


def test_holm_on_a_textbook_example():
    # Sorted: 0.005 <= 0.05/4 and 0.01 <= 0.05/3 are rejected; 0.03 > 0.05/2 stops there,
    # so 0.04, under 0.05 alone, is not rejected either.
    ps = [0.01, 0.04, 0.03, 0.005]
    assert holm(ps, 0.05) == [True, False, False, True]
    assert holm_adjusted(ps) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05], 0.05) == [True, False, False, False, False]
    assert holm([0.001, 0.5, 0.011, 0.012], 0.05) == [True, False, True, True]
    assert holm([0.05], 0.05) == [True] and holm([], 0.05) == []


def test_holm_is_closed_testing_of_bonferroni():
    """Holm rejects a hypothesis exactly when every intersection containing it is rejected
    by Bonferroni (the closure principle), and exactly when its adjusted p is <= level."""
    rng = random.Random(38)
    for _ in range(300):
        m = rng.randint(1, 6)
        ps = [rng.choice([rng.random() * 0.06, rng.random(), 1 / 70, 2 / 70]) for _ in range(m)]
        closed = [all(min(ps[j] for j in sub) <= 0.05 / len(sub)
                      for r in range(1, m + 1) for sub in itertools.combinations(range(m), r)
                      if i in sub) for i in range(m)]
        assert holm(ps, 0.05) == closed, ps
        assert [a <= 0.05 for a in holm_adjusted(ps)] == closed, ps


BASE = [3.00, 3.01, 3.02, 3.03]
ONE_PAIR_OUT = [3.025, 3.2, 3.21, 3.22]  # above every baseline seed but 3.03: one pair out


def test_one_pair_out_of_order_is_no_regression_in_a_family_of_tests():
    assert mann_whitney_greater(ONE_PAIR_OUT, BASE) == pytest.approx(2 / 70)  # < 0.05
    alone = judge_metric("s", "final_val_loss", ONE_PAIR_OUT, BASE, level=0.05,
                         min_effect=0.05)
    assert alone.verdict == "regressed"  # a test alone at 0.05: 2/70 is enough
    cases = [MetricCase("s", "final_val_loss", ONE_PAIR_OUT, BASE, 0.05)] + [
        MetricCase(f"s{i}", "final_val_loss", [3.0, 3.1, 3.02, 3.03], BASE, 0.05)
        for i in range(5)]
    j = judge_metrics(cases, level=0.05)
    assert [v.verdict for v in j] == ["pass"] * 6  # 2/70 > 0.05/6: Holm's first step fails
    assert j[0].p == pytest.approx(2 / 70) and j[0].p_holm == pytest.approx(6 * 2 / 70)
    assert "Holm over 6 tests at family level 0.05" in j[0].test
    assert "Mann-Whitney over 4 vs 4 seeds" in j[0].test


def test_holm_steps_down_and_the_minimum_effect_still_applies():
    separated = [3.2, 3.21, 3.22, 3.23]  # p = 1/70 each
    cases = [MetricCase("a", "final_val_loss", separated, BASE, 0.05),
             MetricCase("b", "final_val_loss", ONE_PAIR_OUT, BASE, 0.05),
             MetricCase("c", "final_val_loss", [3.04, 3.05, 3.06, 3.07], BASE, 0.05)]
    # Sorted "worse" p's: 1/70 (a) and 1/70 (c) <= 0.05/3 and 0.05/2, then 2/70 (b) <= 0.05.
    j = judge_metrics(cases, level=0.05)
    assert [v.verdict for v in j] == ["regressed", "regressed", "pass"]  # c: shift 0.045
    # Adjusted: 3 x 1/70, then max(3/70, 2 x 1/70), then max(3/70, 1 x 2/70).
    assert [v.p_holm for v in j] == pytest.approx([3 / 70] * 3)
    # A fourth, null test makes the first threshold 0.05/4 = 0.0125 < 1/70: nothing goes.
    j4 = judge_metrics(cases + [MetricCase("d", "final_val_loss", BASE, BASE, 0.05)],
                       level=0.05)
    assert [v.verdict for v in j4] == ["pass"] * 4


def test_improvements_are_their_own_holm_family():
    better, worse = [2.0, 2.1, 2.2, 2.3], [3.2, 3.21, 3.22, 3.23]
    cases = [MetricCase("a", "final_val_loss", worse, BASE, 0.05),
             MetricCase("b", "final_val_loss", better, BASE, 0.05),
             MetricCase("c", "final_val_loss", BASE, BASE, 0.05)]
    j = judge_metrics(cases, level=0.05)
    # Each family's smallest p is 1/70 <= 0.05/3: in one family of 6 p's (0.05/6) neither
    # would be called.
    assert [v.verdict for v in j] == ["regressed", "improved", "pass"]
    assert j[1].p == pytest.approx(1 / 70) and j[1].p_holm == pytest.approx(3 / 70)
    assert [v.verdict for v in judge_metrics(cases + [cases[2]], level=0.05)] == [
        "pass"] * 4  # 4 tests: 1/70 > 0.05/4


def test_the_first_holm_step_needs_this_many_pairs_in_order():
    # The exact test on constructed seeds: k pairs out of order give p = P(U' <= k).
    base = [1, 2, 3, 4]
    for k, cur in enumerate([[5, 6, 7, 8], [3.5, 5, 6, 7], [2.5, 5, 6, 7]]):
        p = mann_whitney_greater(cur, base)
        assert out_of_order_allowed(4, 4, p) == k
        assert out_of_order_allowed(4, 4, p * 0.999) == (k - 1 if k else None)
    assert out_of_order_allowed(4, 4, 0.05) == 1  # 2/70 < 0.05 < 4/70
    assert out_of_order_allowed(6, 6, 0.05 / 24) == 0  # 1/924 <= 0.00208 < 2/924
    # Against every split of 3 vs 5 distinct values.
    n, m = 3, 5
    counts = [0] * (n * m + 1)
    for idx in itertools.combinations(range(n + m), n):
        counts[sum(b > a for a in idx for b in set(range(n + m)) - set(idx))] += 1
    for k in range(n * m + 1):
        assert out_of_order_allowed(n, m, sum(counts[:k + 1]) / math.comb(8, 3)) == k


def test_the_false_alarm_statement_follows_the_family():
    assert family_of([MetricCase("s", "m", [1] * 4, [1] * 4, 1)] * 24, 0.05) == Family(
        24, 0.05, (4, 4))
    f = family_of([MetricCase("s", "m", [1] * 4, [1] * 4, 1)] * 23
                  + [MetricCase("s", "m", [1] * 6, [1] * 6, 1)], 0.05)
    assert f.seeds == (6, 6) and f.smallest_p == pytest.approx(1 / 924) and f.can_reject
    no = false_alarm_note(Family(24, 0.05, (4, 4)))
    assert "24 Mann-Whitney tests" in no and "Holm" in no and "at most 0.05 (5%)" in no
    assert "1/70 = 0.0143, above Holm's first threshold 0.05/24 = 0.00208" in no
    assert "no test of this family can call a regression" in no
    assert "at least 6 seeds per side" in no and "at most 3 tests per family" in no
    yes = false_alarm_note(Family(24, 0.05, (7, 7)))
    assert "at most 0.05 (5%)" in yes and "no test" not in yes
    assert "within Holm's first threshold" in yes and "at most 3 of its 49 seed pairs" in yes
    assert "separate completely" in false_alarm_note(Family(24, 0.05, (6, 6)))
    other = false_alarm_note(Family(8, 0.2, (2, 2)))
    assert "8 Mann-Whitney tests" in other and "at most 0.2 (20%)" in other
    assert "at least 4 seeds per side" in other


def test_the_printed_bound_covers_every_gate_the_run_applies():
    from spikebench.bench.run import compare

    suite, cur, base = _cpu_suite_rerun(0.0)
    cur["perf"] = dict(base["perf"])
    verdicts, _ = compare(cur, base, suite)
    gates = judged_gates(verdicts, suite.perf.tolerance)
    # The CPU suite judges the overhead ratio only; MFU, scaling and the report are shown.
    assert gates == [("overhead_ratio", 0.10)]
    f = Family(24, 0.05, (7, 7))
    note = gates_note(f, gates, exact=False)
    assert "1 performance gate (overhead_ratio (10%))" in note
    assert "at most 0.05 plus the chance that noise alone moves a gated ratio" in note
    assert "cannot fail unchanged code" in gates_note(f, gates, exact=True)
    assert "no performance ratio is judged" in gates_note(f, [], exact=False)
    off = {**suite.perf.tolerance, "overhead_ratio": None}
    assert judged_gates(verdicts, off) == []


def _cpu_suite_rerun(shift: float):
    """The committed CPU baseline, and a rerun from another environment with each
    scenario's final val loss moved by ``shift`` on every seed."""
    from spikebench.bench.suite import load_suite

    suite = load_suite(ROOT / "benchmarks" / "suites" / "cpu.toml")
    base = json.loads((ROOT / "benchmarks" / "baselines" / "cpu.json").read_text())
    cur = copy.deepcopy(base)
    cur["environment"]["cpu_model"] = "Another CPU"
    for sc in cur["scenarios"].values():
        for seed in sc["seeds"].values():
            seed["final_val_loss"] += shift
    return suite, cur, base


def test_the_cpu_suite_can_call_a_regression_over_its_family():
    from spikebench.bench.run import compare, markdown, metric_cases

    suite, cur, base = _cpu_suite_rerun(1.0)  # every scenario's final loss up by 1 nat
    cases = metric_cases(cur, base, suite)
    family = family_of(cases, suite.level)
    assert family.tests == len(base["scenarios"]) * 4 == 24 and family.seeds == (7, 7)
    # 7 seeds per side: the smallest p, 1/3432, is within Holm's first threshold 0.05/24.
    assert family.smallest_p == pytest.approx(1 / 3432) and family.can_reject
    verdicts, differs = compare(cur, base, suite)
    tested = [v for v in verdicts if "Mann-Whitney" in v.test]
    assert len(tested) == 24 and differs == ["cpu_model"]
    assert {v.scenario for v in tested if v.verdict == "regressed"} == set(base["scenarios"])
    assert all(v.verdict == "pass" for v in tested if v.metric != "final_val_loss")
    note = false_alarm_note(family)
    md = markdown("cpu", "bench cpu: 6 regression(s)", note, verdicts)
    assert note in md and "at most 0.05 (5%)" in md and "no test of this family" not in md
    assert "Holm p (decides)" in md and "Holm over 24 tests at family level 0.05" in md
    # The same figures again (another CPU, nothing changed): nothing is called.
    suite, same, base = _cpu_suite_rerun(0.0)
    assert all(v.verdict == "pass" for v in compare(same, base, suite)[0]
               if "Mann-Whitney" in v.test)


def test_the_tiny_family_that_can_reject_catches_a_complete_separation():
    from spikebench.bench.run import compare

    suite, cur, base = _cpu_suite_rerun(1.0)
    for d in (cur, base):
        d["scenarios"] = {"recipe": d["scenarios"]["recipe"]}
    suite = type(suite)(path=suite.path, spec=suite.spec, level=0.06,
                        min_effect=suite.min_effect, perf=suite.perf)
    # 4 tests at family level 0.06: 1/70 <= 0.06/4 = 0.015.
    verdicts, _ = compare(cur, base, suite)
    v = {x.metric: x.verdict for x in verdicts}
    assert v["final_val_loss"] == "regressed"
    assert {v[m] for m in ("n_events", "severity", "steps_to_target")} == {"pass"}
