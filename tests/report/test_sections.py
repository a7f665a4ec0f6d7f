import pytest
from fixtures import ARMS, LR, SPACE, make_study, outcome

from spikebench.report import sections as sec
from spikebench.report import stats
from spikebench.report.data import load_study


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("sections")


@pytest.fixture(scope="module")
def study(root):
    return load_study(make_study(root, folder="main", failed=1))


@pytest.fixture(scope="module")
def nocomp(root):
    # No designed comparison, an LR dimension, no trial folders (a study copied bare).
    return load_study(make_study(root, folder="nocomp", arms={}, search=6,
                                 space=SPACE + [LR], folders=False))


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


# ---------------------------------------------------------------- strategies


def test_arms_map_to_the_articles_strategies(study):
    got = {a: sec.classify_arm(study, a)["key"] for a in study.arms}
    assert got == {"baseline": "baseline", "warmup + cosine": "warmup_cosine", "clip 1.0": "clip",
                   "bf16": "bf16", "fp16 + loss scaling": "fp16_loss_scaling",
                   "curriculum (seq-len warmup)": "curriculum", "recipe": "recipe"}
    clip = sec.classify_arm(study, "clip 1.0")
    assert clip["label"] == "clipping at 1" and clip["changes"] == {"optim.clip": [None, 1.0]}
    assert "clipping at 1" in sec.classify_arm(study, "recipe")["label"]


@pytest.mark.parametrize("key,value,expected", [
    ("schedule.warmup_ratio", 0.0, None),
    ("optim.clip", 0.5, ("clip", "clipping at 0.5")),
    ("optim.clip", None, None),
    ("precision.mode", "fp32", None),
    ("precision.mode", "fp16_noscale", ("fp16_noscale", "fp16 without loss scaling")),
    ("curriculum.kind", "easy_first", ("curriculum", "curriculum (easy_first)")),
    ("data.dedup", True, ("data_cleaning", "data dedup & cleaning")),
    ("data.clean", "off", None),
    ("train.rollback", True, ("rollback", "rollback")),
    ("optim.adaptive_clip", 0.01, ("adaptive_clip", "adaptive clipping")),
    ("optim.clip_mode", "adaptive", ("adaptive_clip", "adaptive clipping")),
    ("model.qk_norm", True, ("unknown", "model.qk_norm")),
])
def test_strategy_of_one_value(key, value, expected):
    assert sec.strategy_of(key, value) == expected


def test_unknown_combined_and_identical_arms(root):
    arms = {"baseline": {}, "qk": {"model.qk_norm": True},
            "two": {"optim.clip": 1.0, "precision.mode": "bf16"}, "same": {}}
    base = {**{"model.qk_norm": False}, **{k: v for k, v in
                                          {"optim.clip": None, "precision.mode": "fp32"}.items()}}
    space = [SPACE[1], SPACE[2], {"key": "model.qk_norm", "choices": [False, True]}]
    st = load_study(make_study(root, folder="odd", arms=arms, baseline=base, space=space,
                               search=0, seeds=(0,)))
    assert sec.classify_arm(st, "qk") == {"key": "other", "label": "qk",
                                          "changes": {"model.qk_norm": [False, True]}}
    two = sec.classify_arm(st, "two")
    assert two["key"] == "combo" and two["label"] == "clipping at 1 + bf16 mixed precision"
    assert sec.classify_arm(st, "same")["label"] == "same (identical to the baseline)"
    rows = sec.strategy_table_info(st)["rows"]
    assert rows[1]["claim"]["in_article"] is False
    # One seed: estimates without intervals, not crashes.
    assert rows[0]["spikes"]["lo"] is None and rows[0]["success"]["n"] == 1


def test_strategy_table_rows_measure_each_arm_against_the_baseline(study):
    info = sec.strategy_table_info(study)
    assert info["available"] and info["baseline_complete"]
    rows = {r["arm"]: r for r in info["rows"]}
    assert [r["arm"] for r in info["rows"]] == list(ARMS)
    base, recipe = rows["baseline"], rows["recipe"]
    assert base["spikes"]["value"] == pytest.approx(30.0)  # 3 events / 100 steps
    assert base["spikes"]["delta"] is None
    assert recipe["spikes"]["value"] == pytest.approx(10.0)
    assert recipe["spikes"]["delta"]["value"] == pytest.approx(-20.0)
    assert recipe["spikes"]["delta"]["n"] == 3
    # Time to target: median over seeds that reached, with the count reached.
    assert (base["steps_to_target"]["n"], base["steps_to_target"]["of"]) == (1, 3)
    assert recipe["steps_to_target"]["value"] == pytest.approx(65.0)
    assert recipe["steps_to_target"]["delta"]["n"] == 1  # only seed 0 reached in both
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
    assert any("paraphrase" in n for n in info["notes"])


def test_a_diverged_seed_fails_and_has_no_final_loss(root):
    arms = {"baseline": {}, "bf16": {"precision.mode": "bf16"}}
    outcomes = {"bf16": [outcome(reached_at=50, seconds=5.0),
                         outcome(status="diverged", events=1, diverged_step=30, final=None),
                         outcome(reached_at=55, seconds=5.5)]}
    st = load_study(make_study(root, folder="div", arms=arms, outcomes=outcomes, search=0))
    row = sec.strategy_table_info(st)["rows"][1]
    assert row["diverged"] == 1 and row["success"]["k"] == 2
    assert (row["final_loss"]["n"], row["final_loss"]["of"]) == (2, 3)
    # The diverged seed counts one more event than it logged, as the sweep scores it.
    assert row["spikes"]["value"] == pytest.approx(1000 * (1 + 2 + 1) / 3 / 100)


def test_an_arm_not_run_yet_is_a_row_without_measurements(root):
    st = load_study(make_study(root, folder="partial", search=0, seeds=(0,)))
    st.trials = [t for t in st.trials if t.arm != "bf16"]
    rows = {r["arm"]: r for r in sec.strategy_table_info(st)["rows"]}
    assert rows["bf16"]["status"] == "not run yet" and "spikes" not in rows["bf16"]
    st.trials = [t for t in st.trials if t.arm != "baseline"]
    info = sec.strategy_table_info(st)
    assert not info["baseline_complete"] and any("baseline arm" in n for n in info["notes"])
    assert any(n.startswith("with 1 seed per arm there is no interval") for n in info["notes"])
    recipe = info["rows"][-1]
    assert recipe["spikes"]["value"] == pytest.approx(10.0) and recipe["spikes"]["delta"] is None
    assert "no completed trial" in sec.claims_info(st)["reason"]


def test_no_designed_comparison_says_so(nocomp):
    for info in (sec.strategy_table_info(nocomp), sec.claims_info(nocomp)):
        assert not info["available"]
        assert "no designed comparison" in info["reason"]
        assert info["rows"] == []


# ---------------------------------------------------------------- claims


def test_claims_supported_not_supported_inconclusive(root, study):
    fast = sec.claims_info(_claims_study(root, "fast", (50, 52, 54, 50, 52, 54)))
    rows = {r["key"]: r for r in fast["rows"]}
    assert rows["time_steps"]["verdict"] == stats.SUPPORTED
    assert rows["time_steps"]["relative"]["value"] == pytest.approx(156 / 276 - 1)
    assert rows["time_seconds"]["verdict"] == stats.SUPPORTED
    # Every seed succeeds in both: a +40% gain is out of reach and the CI says so.
    assert rows["success"]["verdict"] == stats.NOT_SUPPORTED
    assert rows["success"]["relative"]["hi"] < 0.4
    slow = {r["key"]: r for r in sec.claims_info(_claims_study(
        root, "slow", (88, 90, 92, 88, 90, 92)))["rows"]}
    assert slow["time_steps"]["verdict"] == stats.NOT_SUPPORTED
    mixed = {r["key"]: r for r in sec.claims_info(_claims_study(
        root, "mixed", (40, 70, 99, 40, 70, 99), base_steps=(60, 80, 90, 60, 80, 90)))["rows"]}
    assert mixed["time_steps"]["verdict"] == stats.INCONCLUSIVE
    assert mixed["time_steps"]["seeds_needed"] > 6
    # The default fixture: the baseline reached the target on one seed only. Its two misses
    # count the whole budget (100 steps), so all three seeds pair up.
    d = {r["key"]: r for r in sec.claims_info(study)["rows"]}
    assert d["time_steps"]["n_pairs"] == 3 and d["time_steps"]["baseline"] == pytest.approx(
        (80 + 100 + 100) / 3)
    # Its CI clears the claim, but 3 seeds are too few for any verdict.
    assert d["time_steps"]["verdict"] == stats.INCONCLUSIVE
    assert d["time_steps"]["relative"]["hi"] <= -0.25  # reaches the -25% claim
    assert d["time_steps"]["seeds_needed"] == stats.MIN_SEEDS
    assert "only 3 matched seeds" in d["time_steps"]["why"]
    # Success is a difference in rate (percentage points): +67 pp over 3 seeds, with
    # Newcombe's interval for the table a=1 (both), b=2 (recipe only), c=d=0.
    assert d["success"]["scale"] == "absolute"
    assert d["success"]["baseline"] == pytest.approx(1 / 3) and d["success"]["recipe"] == 1.0
    assert d["success"]["relative"]["value"] == pytest.approx(2 / 3)
    want = stats.newcombe_paired_ci(1, 2, 0, 0)
    assert (d["success"]["relative"]["lo"], d["success"]["relative"]["hi"]) == (want.lo, want.hi)
    assert d["success"]["verdict"] == stats.INCONCLUSIVE
    assert d["success"]["seeds_needed"] >= stats.MIN_SEEDS
    assert any("emulated" in n for n in sec.claims_info(study)["notes"])


def test_success_claim_over_agreeing_seeds(root):
    # The baseline never reaches the target, the recipe always does.
    three = {r["key"]: r for r in sec.claims_info(_claims_study(
        root, "agree3", (50, 52, 54), base_steps=(None, None, None)))["rows"]}
    s = three["success"]
    assert s["relative"]["value"] == 1.0 and s["relative"]["hi"] == 1.0
    assert s["relative"]["lo"] == pytest.approx(0.2059, abs=1e-4)  # not a zero-width CI
    assert s["verdict"] == stats.INCONCLUSIVE and s["seeds_needed"] >= 6
    six = {r["key"]: r for r in sec.claims_info(_claims_study(
        root, "agree6", (50, 52, 54, 50, 52, 54), base_steps=(None,) * 6))["rows"]}
    assert six["success"]["verdict"] == stats.SUPPORTED
    assert six["success"]["relative"]["lo"] == pytest.approx(0.4480, abs=1e-4)
    assert six["time_steps"]["verdict"] == stats.SUPPORTED  # misses count 100 steps


def test_a_seed_where_one_arm_diverged_stays_in_the_time_claim(root):
    # Seed 0: the recipe diverged (baseline reached 90); seed 1: the baseline diverged
    # (recipe reached 50); seed 2: both reached; seed 3: recipe missed, baseline diverged;
    # seed 4: both diverged. Seeds 3 and 4 have no time in either arm and drop out.
    st = _claims_study(root, "div1", ("div", 50, 52, None, "div"),
                       base_steps=(90, "div", 94, "div", "div"))
    rows = {r["key"]: r for r in sec.claims_info(st)["rows"]}
    steps = rows["time_steps"]
    assert (steps["n_pairs"], steps["of"]) == (3, 5)
    assert steps["recipe"] == pytest.approx((100 + 50 + 52) / 3)    # diverged: the budget
    assert steps["baseline"] == pytest.approx((90 + 100 + 94) / 3)
    secs = rows["time_seconds"]
    assert secs["n_pairs"] == 3
    # The diverged arm's whole run in seconds: the fixture's runs take 10 + seed seconds and
    # diverge at step 30 of 100, so at that pace the budget takes 100 / 30 times as long.
    assert secs["recipe"] == pytest.approx((10.0 * 100 / 30 + 5.0 + 5.2) / 3)
    assert secs["baseline"] == pytest.approx((9.0 + 11.0 * 100 / 30 + 9.4) / 3)
    assert any("diverged" in n and "both arms" in n for n in sec.claims_info(st)["notes"])
    # The success claim counts every seed: both failed on seeds 3 and 4.
    assert rows["success"]["n_pairs"] == 5


def test_claims_need_a_recipe_arm(root):
    st = load_study(make_study(root, folder="norecipe", search=0, seeds=(0,),
                               arms={"baseline": {}, "bf16": {"precision.mode": "bf16"}}))
    info = sec.claims_info(st)
    assert not info["available"] and "no recipe arm" in info["reason"]


# ---------------------------------------------------------------- other sections


def test_pareto_mask():
    assert sec.pareto_mask([], []) == []
    assert sec.pareto_mask([1, 2, 3, 2, 1], [3, 2, 1, 3, 3]) == [True, True, True, False, True]


def test_pareto_info(study):
    info = sec.pareto_info(study)
    pts = {p["number"]: p for p in info["points"]}
    assert len(pts) == len(ARMS) + 2  # the failed trial has no scores
    assert info["front"] and all(pts[n]["front"] for n in info["front"])
    recipe = study.arm_trial("recipe").number
    assert recipe in info["front"]  # fewest spikes and fastest: dominates the rest
    assert "severity" in info["x_label"]


def test_trials_table_lists_every_trial_with_its_params(study):
    info = sec.trials_table_info(study)
    assert len(info["rows"]) == len(study.trials)
    assert {"schedule.warmup_ratio", "optim.clip/on", "optim.clip"} <= set(info["param_keys"])
    failed = info["rows"][-1]
    assert failed["state"] == "fail" and "out of memory" in failed["note"]
    assert info["rows"][0]["params"]["optim.clip"] is None


def test_curves_pick_baseline_best_and_worst_with_events(study):
    info = sec.curves_info(study, max_points=30)
    roles = [p["roles"] for p in info["panels"]]
    assert roles[0].startswith("baseline") and any("best" in r for r in roles)
    assert any("worst" in r for r in roles)
    best = next(p for p in info["panels"] if "best" in p["roles"])
    assert best["arm"] == "recipe"
    seed = info["panels"][0]["seeds"][0]
    assert len(seed["steps"]) <= 30 and seed["steps"][0] == 1
    assert len(seed["events"]) == 3 and seed["events"][0]["loss_at_peak"] is not None
    assert seed["injections"] == [{"kind": "random_bytes", "first": 50, "last": 55}]
    assert seed["val_steps"][0] == 0


def test_curves_without_trial_folders_keep_seeds_without_points(nocomp):
    info = sec.curves_info(nocomp)
    assert info["available"] and info["panels"][0]["roles"].startswith("best")
    assert info["panels"][0]["seeds"][0]["steps"] == []


def test_spike_counts_by_arm_and_by_feature(study):
    info = sec.spike_counts_info(study)
    arms = {a["arm"]: a for a in info["arms"]}
    assert arms["baseline"]["events"] == [3, 3, 3] and arms["recipe"]["mean"] == 1.0
    feats = {f["key"]: f for f in info["features"]}
    assert {"warmup_cosine", "clip", "bf16", "curriculum"} <= set(feats)
    assert feats["clip"]["label"] == "clipping (any threshold)"
    assert feats["clip"]["on_trials"] + feats["clip"]["off_trials"] == len(ARMS) + 2


def test_lr_sensitivity_only_where_lr_was_swept(study, nocomp):
    assert not sec.lr_sensitivity_info(study)["available"]
    info = sec.lr_sensitivity_info(nocomp)
    assert info["available"] and len(info["points"]) == 6
    lrs = [p["lr"] for p in info["points"]]
    assert lrs == sorted(lrs) and all(1e-4 <= x <= 1e-1 for x in lrs)
    assert sum(b["trials"] for b in info["bins"]) == 6
    assert sec.lr_bins([{"lr": 0.01, "spikes": 1.0, "convergence": 2.0,
                         "diverged_seeds": 0}])[0]["trials"] == 1


def test_importance(study):
    info = sec.importance_info(study)
    assert info["available"], info.get("reason")
    assert [o["name"] for o in info["objectives"]] == ["spikes", "convergence"]
    assert "precision.mode" in info["objectives"][0]["importances"]


def test_importance_with_too_few_trials(root):
    st = load_study(make_study(root, folder="tiny", arms={}, search=1, seeds=(0,)))
    assert not sec.importance_info(st)["available"]


def test_header(study, nocomp):
    h = sec.header_info(study)
    assert h["study"] == "main" and h["n_trials"] == len(study.trials)
    assert h["states"] == {"complete": len(ARMS) + 2, "fail": 1}
    env = h["environment"]
    assert env["device"] == ["cpu"] and env["torch"] == ["2.13.0+cpu"]
    assert env["git"] == ["abc123"] and env["corpus_sha256"] == ["f" * 64]
    assert set(env["precision"]) == {"fp32", "bf16 (emulated)", "fp16+scaling (emulated)"}
    assert h["space"][0] == {"key": "schedule.warmup_ratio", "describe": "float in [0, 0.1]"}
    assert h["space"][1]["describe"] == 'float in [0.1, 10] log-uniform or "off"'
    assert h["faults"] == ["random_bytes at steps 50-55"]
    assert "rule 'default'" in h["spike_definition"] and "severity" in h["spike_definition"]
    assert sec.header_info(nocomp)["environment"]["torch"] == []


def test_report_info_has_every_section(study):
    info = sec.report_info(study)
    assert list(info) == ["header", "strategy", "claims", "spike_counts", "curves", "pareto",
                          "importance", "lr", "trials"]
