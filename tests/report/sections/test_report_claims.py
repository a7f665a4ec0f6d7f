import pytest
from fixtures import ARMS, make_study, outcome

from spikebench.report import stats, verdicts
from spikebench.report.data import load_study
from spikebench.report.sections import claims


def _claims_study(root, folder, recipe_steps, base_steps=(90, 92, 94, 90, 92, 94)):
    """Baseline, one strategy and the recipe on len(base_steps) seeds; a step of None is a
    missed target, "div" a divergence at step 30."""
    def out(s, events, final):
        if s == "div":
            return outcome(status="diverged", events=events, diverged_step=30, final=None)
        return outcome(events=events, reached_at=s, seconds=None if s is None else s / 10,
                       final=final)

    arms = {"baseline": {}, "clip 1.0": {"optim.clip": 1.0}, "recipe": ARMS["recipe"]}
    outcomes = {"baseline": [out(s, 2, 2.9) for s in base_steps],
                "clip 1.0": [out(s, 1, 2.9) for s in base_steps],
                "recipe": [out(s, 0, 2.8) for s in recipe_steps]}
    return load_study(make_study(root, folder=folder, arms=arms, outcomes=outcomes, search=0,
                                 seeds=tuple(range(len(base_steps)))))

def test_claims_supported_not_supported_inconclusive(root, study):
    base = (90, 92, 94, 90, 92, 94, 91, 93)
    fast = claims.info(_claims_study(root, "fast", (50, 52, 54, 50, 52, 54, 51, 53), base))
    rows = {r["key"]: r for r in fast.rows}
    # The fixture's recipe runs emulated bf16: its wall time is shown, never judged, so the
    # family is success and steps, each interval at 97.5%.
    assert rows["time_seconds"]["verdict"] == verdicts.NOT_JUDGED
    assert rows["time_steps"]["family"] == 2 and rows["time_steps"]["level"] == 0.975
    assert rows["time_steps"]["verdict"] == verdicts.SUPPORTED
    assert rows["time_steps"]["relative"]["value"] == pytest.approx(416 / 736 - 1)
    assert rows["time_steps"]["relative"]["hi"] <= -0.25
    assert rows["time_steps"]["test"] == verdicts.TIME_TEST
    # Every seed succeeds in both: a ratio of 1, and 8 seeds cannot exclude +40%.
    assert rows["success"]["verdict"] == verdicts.INCONCLUSIVE
    assert rows["success"]["relative"]["value"] == 0.0
    assert rows["success"]["relative"]["hi"] > 0.4
    assert "Bonferroni" in fast.rules and "97.5%" in fast.rules
    slow = {r["key"]: r for r in claims.info(_claims_study(
        root, "slow", (88, 90, 92, 88, 90, 92, 89, 91), base)).rows}
    # Two steps faster on every seed: a real change, smaller than the claim.
    assert slow["time_steps"]["verdict"] == verdicts.SMALLER
    assert -0.25 < slow["time_steps"]["relative"]["lo"] < slow["time_steps"]["relative"]["hi"] < 0
    mixed = {r["key"]: r for r in claims.info(_claims_study(
        root, "mixed", (40, 70, 99, 40, 70, 99, 55, 85), (60, 80, 90, 60, 80, 90, 70, 75))).rows}
    assert mixed["time_steps"]["verdict"] == verdicts.INCONCLUSIVE
    assert mixed["time_steps"]["seeds_needed"] > 8
    # The default fixture: the baseline reached the target on seed 0 only; its misses are
    # counted at the budget (100 steps) and open the interval's lower end.
    d = {r["key"]: r for r in claims.info(study).rows}
    assert d["time_steps"]["n_pairs"] == 3 and d["time_steps"]["baseline"] == pytest.approx(
        (80 + 100 + 100) / 3)
    assert d["time_steps"]["missed"] == [0, 2]
    assert d["time_steps"]["verdict"] == verdicts.INCONCLUSIVE
    assert d["time_steps"]["relative"]["lo"] is None  # 3 pairs: no exact interval
    assert d["time_steps"]["seeds_needed"] == 7 and d["time_steps"]["seeds_at_least"]
    assert "needs 7" in d["time_steps"]["why"] and "baseline missed on 2" in d["time_steps"]["why"]
    # Success: judged as a ratio of rates, with the difference in percentage points
    # (Newcombe, a=1 both, b=2 recipe only) beside it.
    assert d["success"]["baseline"] == pytest.approx(1 / 3) and d["success"]["recipe"] == 1.0
    assert d["success"]["relative"]["value"] == pytest.approx(2.0)  # 3/3 over 1/3, -1
    want = stats.newcombe_paired_ci(1, 2, 0, 0)
    assert (d["success"]["points"]["lo"], d["success"]["points"]["hi"]) == (want.lo, want.hi)
    assert d["success"]["verdict"] == verdicts.INCONCLUSIVE
    assert any("emulated" in n for n in claims.info(study).notes)


def test_success_claim_over_agreeing_seeds(root):
    # The baseline never reaches the target, the recipe always does.
    three = {r["key"]: r for r in claims.info(_claims_study(
        root, "agree3", (50, 52, 54), base_steps=(None, None, None))).rows}
    s = three["success"]
    assert s["points"]["value"] == 1.0 and s["points"]["hi"] == 1.0
    assert s["points"]["lo"] == pytest.approx(0.2059, abs=1e-4)  # not a zero-width CI
    assert s["verdict"] == verdicts.INCONCLUSIVE
    twelve = {r["key"]: r for r in claims.info(_claims_study(
        root, "agree12", (50, 52, 54) * 4, base_steps=(None,) * 12)).rows}
    assert twelve["success"]["verdict"] == verdicts.SUPPORTED
    assert twelve["success"]["relative"]["lo"] >= 0.40  # read off the printed interval
    # The baseline's misses count the budget (100 steps) and leave the lower end open; the
    # upper end, the one the claim needs, is the restricted interval's.
    steps = twelve["time_steps"]
    assert steps["verdict"] == verdicts.SUPPORTED and steps["open_lo"]
    text = claims.change_text(steps)
    assert text.startswith("≤ -48.0% […, ") and "shorter, one-sided" in text


def test_a_seed_where_one_arm_diverged_stays_in_the_time_claim(root):
    # Seed 0: the recipe diverged (baseline reached 90); seed 1: the baseline diverged
    # (recipe reached 50); seed 2: both reached; seed 3: recipe missed, baseline diverged;
    # seed 4: both diverged. A miss or a divergence is censored at the budget (steps) or the
    # whole run (seconds), so every seed stays.
    st = _claims_study(root, "div1", ("div", 50, 52, None, "div"),
                       base_steps=(90, "div", 94, "div", "div"))
    rows = {r["key"]: r for r in claims.info(st).rows}
    steps = rows["time_steps"]
    assert (steps["n_pairs"], steps["of"]) == (5, 5)
    assert steps["recipe"] == pytest.approx((100 + 50 + 52 + 100 + 100) / 5)
    assert steps["baseline"] == pytest.approx((90 + 100 + 94 + 100 + 100) / 5)
    secs = rows["time_seconds"]
    assert secs["n_pairs"] == 5
    # A diverged run's whole run in seconds: the fixture's runs take 10 + seed seconds and
    # diverge at step 30 of 100, so at that pace the budget takes 100 / 30 times as long.
    pace = 100 / 30
    assert secs["recipe"] == pytest.approx((10.0 * pace + 5.0 + 5.2 + 13.0 + 14.0 * pace) / 5)
    assert secs["baseline"] == pytest.approx(
        (9.0 + 11.0 * pace + 9.4 + 13.0 * pace + 14.0 * pace) / 5)
    assert rows["success"]["n_pairs"] == 5


def test_claims_need_a_recipe_arm(root):
    st = load_study(make_study(root, folder="norecipe", search=0, seeds=(0,),
                               arms={"baseline": {}, "bf16": {"precision.mode": "bf16"}}))
    info = claims.info(st)
    assert not info.available and "no recipe arm" in info.reason

