import pytest
from fixtures import ARMS, make_study, outcome

from spikebench.report import stats
from spikebench.report.data import load_study
from spikebench.report.sections import claims, strategy


def test_strategy_table_rows_measure_each_arm_against_the_baseline(study):
    info = strategy.info(study)
    assert info.available and info.baseline_complete
    rows = {r["arm"]: r for r in info.rows}
    assert [r["arm"] for r in info.rows] == list(ARMS)
    base, recipe = rows["baseline"], rows["recipe"]
    assert base["spikes"]["value"] == pytest.approx(30.0)  # 3 events / 100 steps
    assert base["spikes"]["delta"] is None
    assert recipe["spikes"]["value"] == pytest.approx(10.0)
    assert recipe["spikes"]["delta"]["value"] == pytest.approx(-20.0)
    assert recipe["spikes"]["delta"]["n"] == 3
    # Time to target: the restricted mean (a miss counts the budget, 100 steps, as in the
    # claims), with the count reached; every seed pairs up.
    assert (base["steps_to_target"]["reached"], base["steps_to_target"]["of"]) == (1, 3)
    assert base["steps_to_target"]["value"] == pytest.approx((80 + 100 + 100) / 3)
    assert recipe["steps_to_target"]["value"] == pytest.approx(65.0)
    assert recipe["steps_to_target"]["delta"]["n"] == 3
    assert recipe["steps_to_target"]["delta"]["value"] == pytest.approx(65 - 280 / 3)
    assert recipe["steps_to_target"]["delta"]["lo"] is None  # 3 pairs: no exact interval
    assert recipe["seconds_to_target"]["value"] == pytest.approx(6.5)
    assert (base["success"]["k"], recipe["success"]["k"]) == (1, 3)
    assert recipe["success"]["delta"]["value"] == pytest.approx(2 / 3)
    # The success difference is Newcombe's paired interval, never zero-width.
    want = stats.newcombe_paired_ci(1, 2, 0, 0)
    assert (recipe["success"]["delta"]["lo"], recipe["success"]["delta"]["hi"]) == (want.lo,
                                                                                 want.hi)
    assert "Newcombe" in recipe["success"]["delta"]["method"]
    assert recipe["success"]["lo"] == pytest.approx(0.025 ** (1 / 3))
    assert recipe["claim"]["effect"].startswith("+40% training success")
    assert rows["warmup + cosine"]["claim"]["applies"] == "all pretraining, early steps"
    assert any("paraphrase" in n for n in info.notes)


def test_a_diverged_seed_fails_and_has_no_final_loss(root):
    arms = {"baseline": {}, "bf16": {"precision.mode": "bf16"}}
    outcomes = {"bf16": [outcome(reached_at=50, seconds=5.0),
                         outcome(status="diverged", events=1, diverged_step=30, final=None),
                         outcome(reached_at=55, seconds=5.5)]}
    st = load_study(make_study(root, folder="div", arms=arms, outcomes=outcomes, search=0))
    row = strategy.info(st).rows[1]
    assert row["diverged"] == 1 and row["success"]["k"] == 2
    assert (row["final_loss"]["n"], row["final_loss"]["of"]) == (2, 3)
    # The diverged seed counts one more event than it logged, as the sweep scores it.
    assert row["spikes"]["value"] == pytest.approx(1000 * (1 + 2 + 1) / 3 / 100)


def test_an_arm_not_run_yet_is_a_row_without_measurements(root):
    st = load_study(make_study(root, folder="partial", search=0, seeds=(0,)))
    st.trials = [t for t in st.trials if t.arm != "bf16"]
    rows = {r["arm"]: r for r in strategy.info(st).rows}
    assert rows["bf16"]["status"] == "not run yet" and "spikes" not in rows["bf16"]
    st.trials = [t for t in st.trials if t.arm != "baseline"]
    info = strategy.info(st)
    assert not info.baseline_complete and any("baseline arm" in n for n in info.notes)
    assert any(n.startswith("with 1 seed(s) per arm no paired difference has an exact")
               for n in info.notes)
    recipe = info.rows[-1]
    assert recipe["spikes"]["value"] == pytest.approx(10.0) and recipe["spikes"]["delta"] is None
    assert "no completed trial" in claims.info(st).reason


def test_no_designed_comparison_says_so(nocomp):
    for info in (strategy.info(nocomp), claims.info(nocomp)):
        assert not info.available
        assert "no designed comparison" in info.reason
        assert info.rows == []

