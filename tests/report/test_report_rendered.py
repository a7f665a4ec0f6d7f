"""The numbers a reader sees: known cells of a known fixture study, in markdown and HTML.

The fixture's outcomes are fixed (fixtures.default_outcome): the baseline reaches the target
on seed 0 only (at step 80, 8 s); the recipe on every seed (steps 60, 65, 70; 6, 6.5, 7 s);
the runs take 10 + seed seconds; the budget is 100 steps. So, by hand: success 1/3 vs 3/3
(+67 pp); steps to target, a miss counting the whole budget: mean 93.3 vs 65 (-30%); wall
time, a miss counting the whole run: mean 10.3 s vs 6.5 s (-37%).
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
    # Columns: claim, measured as, baseline, recipe, matched seeds, change, verdict, seeds.
    assert success[2:6] == ["33%", "100%", "3/3", r"+67 pp \[-6 pp, +94 pp\]"]
    assert success[6].startswith("inconclusive<br>(only 3 matched seeds, fewer than the 6")
    assert success[7] == "6"
    steps = _row(md, "-25% training time", "steps to target")
    wall = _row(md, "-25% training time", "wall time to target")
    assert steps[2:6] == ["93.3", "65.0", "3/3", r"-30% \[-35%, -25%\]"]
    assert wall[2:6] == ["10.3", "6.5", "3/3", r"-37% \[-42%, -25%\]"]
    for row in (steps, wall):
        assert row[6].startswith("inconclusive<br>(only 3 matched seeds")


def test_strategy_table_cells_in_markdown(md):
    recipe = _row(md, "combined recipe", cells=11)
    assert recipe[1:3] == ["recipe", "3"]
    assert recipe[4] == (r"65.0 \[60.0, 70.0\]<br>3/3 reached<br>Δ -20.0 (no CI, n=1), "
                         "1 matched")
    # Exact Clopper-Pearson for 3/3: [0.025^(1/3), 1] = [29%, 100%].
    assert recipe[7] == r"100% \[29%, 100%\] (3/3)<br>Δ +67 pp \[-6 pp, +94 pp\], 3 matched"
    base = _row(md, "baseline", cells=11)
    # 1/3: [1 - 0.975^(1/3), the p with P(X <= 1) = 0.025] = [1%, 91%].
    assert base[7] == r"33% \[1%, 91%\] (1/3)"


def test_the_same_cells_in_html(page):
    assert ("<td>33%</td><td>100%</td><td>3/3</td><td>+67 pp [-6 pp, +94 pp]</td>"
            "<td>inconclusive<br>(only 3 matched seeds") in page
    assert "<td>93.3</td><td>65.0</td><td>3/3</td><td>-30% [-35%, -25%]</td>" in page
    assert "<td>100% [29%, 100%] (3/3)<br>Δ +67 pp [-6 pp, +94 pp], 3 matched</td>" in page
