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
    # Columns: claim, measured as, baseline, recipe, matched, change, p, verdict, seeds.
    assert success[2:5] == ["33%", "100%", "3/3"]
    # 3/3 over 1/3: +200% as a ratio; +67 pp as a difference (Newcombe, a=1, b=2).
    assert success[5].startswith(r"+200% \[") and success[5].endswith(
        r"(ratio of rates)<br>+67 pp \[-6 pp, +94 pp\] (difference, approximate)")
    # McNemar on 2 discordant pairs, one-sided: 0.5^2 = 0.25. Against +40%: 1/3's upper
    # Clopper-Pearson limit is above 1.4 x 3/3's lower one at every level: p = 1.
    assert success[6] == "0.25; 1"
    assert success[7] == ("inconclusive<br>(only 2 discordant pair(s): McNemar needs 6 to "
                          "reject no change at p &lt; 0.025)")
    steps = _row(md, "-25% training time", "steps to target")
    wall = _row(md, "-25% training time", "wall time to target")
    # 3 pairs, all faster: the one-sided sign-flip test gives 1/2^3 = 0.125. Against -25%,
    # recipe - 0.75 x baseline is 60 - 60 = 0, 65 - 75 = -10, 70 - 75 = -5: nothing on the
    # side that would refute the claim, p = 1.
    assert steps[2:7] == ["93.3", "65", "3/3",
                          "-30% (no 95% interval: 3 pair(s): an exact test needs 6)",
                          "0.125; 1"]
    assert steps[7].startswith("inconclusive<br>(only 3 differing pair(s)")
    assert wall[2:5] == ["10.3", "6.5", "3/3"] and wall[5].startswith("-37% ")
    assert wall[7] == "not judged<br>(emulated precision)"


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
    assert "<td>33%</td><td>100%</td><td>3/3</td><td>+200% [" in page
    assert ("<td>93.3</td><td>65</td><td>3/3</td><td>-30% (no 95% interval: 3 pair(s): an "
            "exact test needs 6)</td><td>0.125; 1</td><td>inconclusive<br>") in page
    assert "<details><summary>Detail: " in page
    assert "<td>100% [29%, 100%] (3/3)<br>Δ +67 pp [-6 pp, +94 pp], 3 matched</td>" in page
