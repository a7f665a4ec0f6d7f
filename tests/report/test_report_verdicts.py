import math
import re

import numpy as np
import pytest

from spikebench.report import verdicts as v
from spikebench.report.sections.claims import change_text, exact_pct

FAST = [100, 110, 120, 105, 115, 117]
BASE = [300] * 6


@pytest.mark.parametrize("lo,hi,claimed,want", [
    (-0.67, -0.60, -0.25, v.SUPPORTED),
    (-0.50, -0.25, -0.25, v.SUPPORTED),  # the near end at the claim: "at or beyond"
    (-0.50, -0.18, -0.25, v.CONSISTENT),
    (-0.20, -0.05, -0.25, v.SMALLER),
    (-0.40, 0.10, -0.25, v.INCONCLUSIVE),
    (-0.10, 0.0, -0.25, v.NOT_SUPPORTED),  # a closed end at 0 holds no change
    (0.05, 0.20, -0.25, v.OPPOSITE),
    (None, None, -0.25, v.INCONCLUSIVE),  # no interval: the whole line
    (0.5, math.inf, 0.40, v.SUPPORTED),
    (-0.07, math.inf, 0.40, v.INCONCLUSIVE),
    (0.1, 0.3, 0.40, v.SMALLER),
    (-0.6, -0.1, 0.40, v.OPPOSITE),
])
def test_a_verdict_is_read_off_the_interval(lo, hi, claimed, want):
    assert v.read(lo, hi, claimed) == want


def _parse(text: str) -> tuple[float | None, float | None]:
    """The interval as printed in the claims table, read back: "…" is an open end
    (-100% below, +inf above)."""
    m = re.search(r"\[([^,\]]+), ([^\]]+)\]", text)
    if not m:
        return None, None

    def num(s: str, open_as: float) -> float:
        s = s.strip()
        if s == "…":
            return open_as
        return math.inf if s == "+inf" else float(s.rstrip("%")) / 100

    return num(m.group(1), -1.0), num(m.group(2), math.inf)


def _printed(verdict: v.Verdict, claimed: float) -> str:
    iv = verdict.interval
    return change_text({"relative": {"value": iv.value, "lo": iv.lo, "hi": iv.hi,
                                     "why": iv.why}, "claimed": claimed,
                        "level": verdict.level, "open_lo": verdict.open_lo,
                        "open_hi": verdict.open_hi})


def _agrees(verdict: v.Verdict, claimed: float) -> bool:
    return v.read(*_parse(_printed(verdict, claimed)), claimed) == verdict.verdict


def test_every_verdict_the_code_prints_is_read_back_from_the_printed_interval():
    rng = np.random.default_rng(1)
    seen = set()
    for i in range(300):
        n = int(rng.integers(3, 10))
        base = 200 * np.exp(rng.normal(0, 0.2, n))
        recipe = base * float(rng.choice([0.5, 0.7, 0.78, 0.85, 0.95, 1.0, 1.2])) * np.exp(
            rng.normal(0, 0.15, n))
        budget = 260.0
        misses = (list(recipe >= budget), list(base >= budget))
        shown = (list(np.minimum(recipe, budget)), list(np.minimum(base, budget)))
        got = v.judge(shown, -0.25, misses=misses if i % 2 else None,
                      paired=bool(i % 3), family=1 + i % 2)
        assert _agrees(got, -0.25), (shown, misses, got)
        seen.add(got.verdict)
    for n, m in ((8, 8), (20, 20), (6, 9)):
        for k1 in range(n + 1):
            for k2 in range(m + 1):
                got = v.judge_success(([1] * k1 + [0] * (n - k1), [1] * k2 + [0] * (m - k2)),
                                      0.40, paired=n == m, settle=False)
                assert _agrees(got, 0.40), (k1, n, k2, m, got)
                seen.add(got.verdict)
    assert seen == set(v.VERDICTS)


def test_the_issues_cases():
    # Supported no longer rests on the estimate: one seed moved by 2 steps changes nothing.
    for last in (246, 248):
        got = v.judge(([150, 230, 236, 240, 244, last], BASE), -0.25)
        assert got.verdict == v.CONSISTENT and got.interval.hi > -0.25
    # A baseline that misses every seed bounds the reduction on one side only.
    one = v.judge(([250] * 6, BASE), -0.25, misses=([False] * 6, [True] * 6))
    assert one.verdict == v.CONSISTENT and one.open_lo and one.budget_limits
    text = _printed(one, -0.25)
    assert text.startswith("≤ -16.7% […, -16.7%] (95%)") and "at least 16.7% shorter" in text
    assert "budget limits" in one.reason and one.seeds_needed is None
    # The recipe's misses are disclosed too: they open the end that would support it.
    recipe = [100] * 8 + [300] * 4
    got = v.judge((recipe, [290] * 12), -0.25, misses=([False] * 8 + [True] * 4, [False] * 12))
    assert got.verdict == v.INCONCLUSIVE and got.open_hi and got.budget_limits
    assert "recipe missed on 4 seed(s)" in got.reason
    # Success, 6/6 against 0/6: the printed interval holds no change, and so does the test.
    six = v.judge_success(([1] * 6, [0] * 6), 0.40)
    assert six.interval.lo < 0 and six.verdict == v.INCONCLUSIVE
    four = v.judge_success(([1] * 4, [0] * 4), 0.40, paired=False)
    assert four.interval.lo < 0 and four.verdict == v.INCONCLUSIVE


def test_the_time_verdicts_and_their_reasons():
    assert v.judge((FAST, BASE), -0.25).verdict == v.SUPPORTED
    smaller = v.judge(([250, 252, 254, 250, 252, 254], BASE), -0.25)
    assert smaller.verdict == v.SMALLER and smaller.interval.hi < 0
    slow = v.judge(([290, 295, 300, 290, 295, 300], BASE), -0.25)
    assert slow.verdict == v.NOT_SUPPORTED and slow.interval.hi == pytest.approx(0)
    worse = v.judge(([330, 340, 350, 330, 340, 350], BASE), -0.25)
    assert worse.verdict == v.OPPOSITE and worse.reason == v.VERDICTS[v.OPPOSITE]
    mixed = v.judge(([40, 70, 99, 40, 70, 99], [60, 80, 90, 60, 80, 90]), -0.25)
    assert mixed.verdict == v.INCONCLUSIVE and mixed.seeds_needed > 6
    both = v.judge((BASE, BASE), -0.25, misses=([True] * 6, [True] * 6))
    assert both.verdict == v.INCONCLUSIVE and both.budget_limits and both.seeds_needed is None
    assert "unbounded" in _printed(both, -0.25)


def test_the_claims_are_one_family():
    one, two = v.judge((FAST, BASE), -0.25), v.judge((FAST, BASE), -0.25, family=2)
    assert one.level == 0.95 and two.level == 0.975
    # At 97.5% the sign-flip test needs 7 pairs: 6 can support nothing.
    assert two.verdict == v.INCONCLUSIVE and two.interval.lo is None and "needs 7" in two.reason
    assert (two.seeds_needed, two.seeds_at_least) == (7, True)
    seven = v.judge((FAST + [108], [300] * 7), -0.25, family=2)
    assert seven.verdict == v.SUPPORTED
    assert v.judge_success(([1] * 12, [0] * 12), 0.40, family=2).verdict == v.SUPPORTED


def test_too_few_differing_pairs_gives_a_lower_bound_on_seeds():
    five = v.judge((FAST[:5], BASE[:5]), -0.25)
    assert five.verdict == v.INCONCLUSIVE and "needs 6" in five.reason
    assert five.seeds_needed == 6 and five.seeds_at_least
    # Two of six pairs differ: six differing pairs need about 18 seeds at that rate.
    two = v.judge(([100, 110, 300, 300, 300, 300], BASE), -0.25)
    assert two.verdict == v.INCONCLUSIVE and (two.seeds_needed, two.seeds_at_least) == (18, True)


def test_success_seeds_to_settle_is_where_the_interval_would_settle():
    six = v.judge_success(([1] * 6, [0] * 6), 0.40)
    assert six.seeds_needed == 9 and not six.seeds_at_least
    assert v.judge_success(([1] * 9, [0] * 9), 0.40).verdict == v.SUPPORTED
    assert v.judge_success(([1] * 8, [0] * 8), 0.40).verdict in (v.INCONCLUSIVE, v.CONSISTENT)


def test_printed_ends_keep_their_side_of_the_marks():
    assert exact_pct(-0.2496, (0.0, -0.25)) == "-24.96%"
    assert exact_pct(-0.25, (0.0, -0.25)) == "-25.0%"
    assert exact_pct(0.0, (0.0, -0.25)) == "0%"
    assert exact_pct(-0.00001, (0.0, -0.25)) == "-0.001%"


def test_the_rules_text_is_built_from_the_constants():
    for family, level, pairs in ((1, "95%", 6), (2, "97.5%", 7), (3, "98.33%", 7)):
        text = v.rules(family=family)
        assert f"each interval is at {level}" in text and f"fewer than {pairs} " in text
        for name, meaning in v.VERDICTS.items():
            assert f"{name}: {meaning}" in text
        assert "{" not in text and "}" not in text  # no unformatted placeholder
    assert "4 and 4 runs" in v.rules(paired=False) and "5 and 5" in v.rules(paired=False,
                                                                             family=2)
