"""The numbers a reader sees: known cells of a known fixture study, in markdown and HTML.

The fixture's outcomes are fixed (fixtures.default_outcome): the baseline reaches the target
on seed 0 only (at step 80, 8 s); the recipe on every seed (steps 60, 65, 70; 6, 6.5, 7 s);
the runs take 10 + seed seconds; the budget is 100 steps. So, by hand: success 1/3 vs 3/3
(+67 pp; a ratio of 3: +200%); steps to target, a miss counting the whole budget: mean 93.3
vs 65 (-30%); wall time, a miss counting the whole run: mean 10.3 s vs 6.5 s (-37%).
"""

import re

import pytest


def _row(md: str, first: str, *needles: str, cells: int | None = None) -> list[str]:
    """The cells of the first table row whose first cell starts with ``first`` and that
    holds every needle (and has ``cells`` cells, if given)."""
    for line in md.splitlines():
        row = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if (row and row[0].startswith(first) and all(n in line for n in needles)
                and (cells is None or len(row) == cells)):
            return row
    raise AssertionError(f"no row {first!r} with {needles}")


@pytest.fixture(scope="module")
def md(built):
    return built["main"]["markdown"].read_text()


@pytest.fixture(scope="module")
def page(built):
    return built["main"]["html"].read_text()


def test_claims_rows_in_markdown(md):
    success = _row(md, "+40% training success")
    assert success[1].startswith("success rate")
    # Columns: claim, measured as, baseline, recipe, matched, change, test, verdict, seeds.
    assert success[2:5] == ["33%", "100%", "3/3"]
    # Wall time is emulated, so success and steps are the family: each at 97.5%. 3/3 over
    # 1/3: +200%; lower end: 3/3's lower Clopper-Pearson limit at 0.025 / 4, 0.00625^(1/3)
    # = 0.184, over 1/3's upper one, 0.954: 0.193, so -80.7%. +67 pp as a difference
    # (Newcombe, a=1, b=2).
    assert success[5].startswith(r"+200.0% \[-80.7%, +") and success[5].endswith(
        r"(97.5%) (ratio of rates)<br>+67 pp \[-6 pp, +94 pp\] (difference, approximate, "
        "no verdict)")
    assert success[6].startswith("exact test of the ratio of success rates")
    assert success[7] == "inconclusive<br>(the interval holds both no change and the claim)"
    steps = _row(md, "-25% training time", "steps to target")
    wall = _row(md, "-25% training time", "wall time to target")
    # 3 pairs: at 97.5% the sign-flip test needs 7 (its smallest two-sided p is 2 / 2^n).
    assert steps[2:7] == ["93.3", "65", "3/3<br>missed: recipe 0, baseline 2",
                          "-30.4% (no 97.5% interval: 3 pair(s): an exact test at 97.5% "
                          "needs 7)", "exact sign-flip test of recipe - (1 + c) x baseline "
                          "over matched seeds"]
    assert steps[7].startswith("inconclusive<br>(no 97.5% interval") and steps[8] == "≥7"
    assert wall[2:5] == ["10.3", "6.5", "3/3<br>missed: recipe 0, baseline 2"]
    assert wall[5].startswith("-37.1% ") and wall[7] == "not judged<br>(emulated precision)"


def test_strategy_table_cells_in_markdown(md):
    recipe = _row(md, "combined recipe", cells=11)
    assert recipe[1:3] == ["recipe", "3"]
    # Restricted mean steps 65 (t-interval over 60, 65, 70: 65 +- 4.303 x 5 / sqrt(3)).
    assert recipe[4] == r"65 \[52.6, 77.4\]<br>3/3 reached<br>Δ -28.3 (no interval), 3 matched"
    # Exact Clopper-Pearson for 3/3: [0.025^(1/3), 1] = [29%, 100%].
    assert recipe[7] == r"100% \[29%, 100%\] (3/3)<br>Δ +67 pp \[-6 pp, +94 pp\], 3 matched"
    base = _row(md, "baseline", cells=11)
    # 1/3: [1 - 0.975^(1/3), the p with P(X <= 1) = 0.025] = [1%, 91%].
    assert base[7] == r"33% \[1%, 91%\] (1/3)"
    # 3 events on each of 3 seeds of 100 steps: 9 in 300 steps, exact Poisson [4.12, 17.1].
    assert base[3] == r"30 \[13.7, 56.9\]"
    assert base[6] == r"3.2 \[2.95, 3.45\]<br>3/3 completed"
    # Steps: the t-interval's upper end (122) is cut at the 100-step budget.
    assert base[4] == r"93.3 \[64.6, 100\]<br>1/3 reached"


def test_the_same_cells_in_html(page):
    assert "<td>33%</td><td>100%</td><td>3/3</td><td>+200.0% [-80.7%, +" in page
    assert ("<td>93.3</td><td>65</td><td>3/3<br>missed: recipe 0, baseline 2</td><td>-30.4% "
            "(no 97.5% interval: 3 pair(s): an exact test at 97.5% needs 7)</td>") in page
    assert "<details><summary>Detail: " in page
    assert "<td>100% [29%, 100%] (3/3)<br>Δ +67 pp [-6 pp, +94 pp], 3 matched</td>" in page
