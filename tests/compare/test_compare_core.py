"""spikebench compare's core on generated runs: grouping, pairing, cutting, the study it
writes and the report sections that read it (paired and unpaired), and bad input."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from compare_runs import PLANTED, STEPS, groups, run

from spikebench.compare import plan
from spikebench.compare.study import write_study
from spikebench.errors import UserError
from spikebench.report import exact, stats
from spikebench.report.data import load_study
from spikebench.report.markdown import render_markdown
from spikebench.report.sections import report_info


def _study(tmp: Path, runs, **options):
    """Plan, write the study (no plots: the sections' info is what is checked) and load it."""
    p = plan(runs, out=tmp / "out", **options)
    folder = tmp / "out" / p.name
    write_study(folder, folder, name=p.name, groups=p.groups, seed_labels=p.labels,
                params={g: p.params(g) for g in p.groups}, spec=p.spec(), info=p.info(),
                detector=p.detector, gap=p.gap, target=p.target, steps=p.aligned.budget)
    study = load_study(folder)
    report = report_info(study)
    return p, study, report, render_markdown(report, {})


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    return _study(tmp_path_factory.mktemp("paired"), groups(6), by="setting",
                  baseline="calm", recipe="spiky", target_loss=3.0)


@pytest.fixture(scope="module")
def unpaired(tmp_path_factory):
    # The same curves, but no run says its seed: two independent samples of 6 and 5.
    runs = groups(6, seeds=False)
    runs = [r for r in runs if r.name != "spiky/run5"]
    return _study(tmp_path_factory.mktemp("unpaired"), runs,
                  groups=["calm=calm/*", "spiky=spiky/*"], target_loss=3.0)


def _rows(report):
    return {r["arm"]: r for r in report["strategy"].rows}


def _per_seed(study, arm, key):
    return {s["seed"]: s[key] for s in study.arm_trial(arm).per_seed}


def test_the_study_is_one_trial_per_group_with_its_runs_as_seeds(paired):
    p, study, report, md = paired
    assert [t.arm for t in study.trials] == ["calm", "spiky"]
    assert study.baseline_arm == "calm" and study.recipe_arm == "spiky"
    assert study.seeds == list(range(6)) and study.steps == STEPS
    assert study.own_trainer  # the runs' parameters are their own: no LR sections
    assert study.paired("spiky") and study.compare["pairing"]["spiky"]["paired"]
    t = study.arm_trial("spiky")
    assert sorted(d.name for d in t.folder.iterdir() if d.is_dir()) == [
        f"seed-{k}" for k in range(6)]
    assert (t.folder / "seed-0" / "metrics.jsonl").is_file()
    assert not report["lr"].available and "read from disk" in report["lr"].reason


def test_spike_counts_find_the_planted_spikes(paired):
    _, study, report, md = paired
    counts = {a["arm"]: a["events"] for a in report["spike_counts"].arms}
    assert counts == {"calm": [0] * 6, "spiky": [len(PLANTED)] * 6}
    rows = _rows(report)
    # Events per 1,000 steps, pooled: 2 per 400-step run.
    assert rows["spiky"]["spikes"]["value"] == pytest.approx(1000 * len(PLANTED) / STEPS)
    assert rows["calm"]["spikes"]["value"] == 0


def test_paired_effects_are_the_sign_flip_tests_on_matched_seeds(paired):
    _, study, report, md = paired
    spiky = _rows(report)["spiky"]
    sev = _per_seed(study, "spiky", "severity")
    base = _per_seed(study, "calm", "severity")
    diffs = [sev[k] - base[k] for k in range(6)]
    want = exact.shift_interval(diffs)
    got = report["spike_counts"].arms[1]["severity"]["delta"]
    assert (got["value"], got["lo"], got["hi"]) == (want.value, want.lo, want.hi)
    assert got["p"] == exact.sign_flip_p(diffs) == pytest.approx(2 / 64)
    assert got["lo"] > 0  # every spiky run is worse: the interval excludes no change
    d = spiky["final_loss"]["delta"]
    assert d["paired"] is True and d["n"] == 6 and "sign-flip" in d["method"]
    assert spiky["spikes"]["delta"]["value"] == pytest.approx(1000 * len(PLANTED) / STEPS)
    assert "paired by seed (spiky)" in md and "two-sample" not in md.split("## 3.")[0]


def test_time_to_target_and_the_claims_for_a_named_recipe(paired):
    _, study, report, md = paired
    steps = _per_seed(study, "calm", "steps_to_target")
    # The validation loss 2.55 + 3 exp(-s/60) reaches 3.0 between 100 and 150: at 150.
    assert set(steps.values()) == {150.0}
    assert report["claims"].available and report["claims"].paired
    assert [r["n_pairs"] for r in report["claims"].rows[:2]] == [6, 6]


def test_unpaired_groups_use_the_exact_two_sample_tests(unpaired):
    p, study, report, md = unpaired
    assert not study.paired("spiky")
    assert "say no seed" in study.compare["pairing"]["spiky"]["why"]
    spiky = _rows(report)["spiky"]
    a = [v["events_per_1k"] for v in study.arm_trial("spiky").per_seed]
    b = [v["events_per_1k"] for v in study.arm_trial("calm").per_seed]
    d = spiky["spikes"]["delta"]
    assert (d["n"], d["m"], d["paired"]) == (5, 6, False)
    assert d["value"] == pytest.approx(sum(a) / 5 - sum(b) / 6)
    # Every run of each group alike: no interval, but the test rejects no change (the
    # observed split is the most extreme of C(11, 5) = 462, both ways).
    assert d["p"] == pytest.approx(2 / 462) and d["lo"] is None
    sev = report["spike_counts"].arms[1]["severity"]["delta"]
    x = [v["severity"] for v in study.arm_trial("spiky").per_seed]
    y = [v["severity"] for v in study.arm_trial("calm").per_seed]
    want = exact.two_sample_shift_interval(x, y)
    assert (sev["value"], sev["lo"], sev["hi"]) == (want.value, want.lo, want.hi)
    assert sev["lo"] > 0 and sev["p"] == exact.two_sample_p(x, y)
    s = spiky["success"]["delta"]
    assert s["p"] == stats.fisher_p(5, 5, 6, 6) == 1.0 and (s["n"], s["m"]) == (5, 6)
    # The report names the unpaired tests, where it uses them.
    assert "exact two-sample permutation test" in md
    assert "Fisher's exact test" in md and "5 vs 6 unpaired" in md
    assert not report["claims"].available  # no --recipe: no claims
    assert "--recipe" in report["claims"].reason


def test_the_claims_of_an_unpaired_recipe(tmp_path):
    runs = groups(4, seeds=False, spiky_kw={"tau": 40.0})
    _, study, report, md = _study(tmp_path, runs, by="setting", recipe="spiky",
                                  target_loss=3.0)
    c = report["claims"]
    assert c.available and not c.paired and "two-sample" in c.rules
    time = c.rows[1]
    assert (time["n_pairs"], time["n_baseline"]) == (4, 4)
    assert time["recipe"] < time["baseline"]  # the faster descent reaches 3.0 sooner
    assert "Runs (recipe and baseline, unpaired)" in md


def test_runs_of_different_lengths_and_intervals_share_their_steps():
    runs = [run("calm", k, seed=k) for k in range(3)] + [
        run("spiky", k, seed=k, steps=600, every=2) for k in range(3)]
    p = plan(runs, out="/nonexistent/out", by="setting")
    a = p.aligned
    assert a.budget == STEPS and "shortest run" in a.budget_from
    assert any("every step after 400 of 3 run(s)" in c for c in a.cut)
    assert any("201 steps every run logged" in c for c in a.cut)  # 0, 2, ..., 400
    calm = a.runs["calm/run0"]
    assert [r["step"] for r in calm.records if "train/loss" in r][:3] == [0, 2, 4]
    assert "thinned from 401 to 201" in "; ".join(calm.cut)
    spiky = a.runs["spiky/run0"]
    assert max(r["step"] for r in spiky.records) == STEPS
    assert "steps 402-600 cut" in spiky.cut[0]
    assert p.pairing["spiky"].paired
    info = p.info()
    assert info["budget"] == STEPS and info["cut"] == a.cut


def test_max_step_leaves_out_shorter_runs_and_says_so():
    runs = [run("calm", k, seed=k, steps=200 if k == 0 else 400) for k in range(3)] + [
        run("spiky", k, seed=k) for k in range(3)]
    p = plan(runs, out="/nonexistent/out", by="setting", max_step=300)
    assert p.aligned.budget == 300 and p.aligned.budget_from == "--max-step"
    assert "calm/run0 (ends at step 200" in p.aligned.dropped[0]
    assert [x.run.name for x in p.groups["calm"]] == ["calm/run1", "calm/run2"]
    assert "seeds differ" in p.pairing["spiky"].why  # 1, 2 against 0, 1, 2


def test_a_diverged_run_does_not_shorten_the_budget():
    runs = groups(3)
    runs[3].records = [r if r["step"] != 150 else {**r, "train/loss": math.nan}
                       for r in runs[3].records[:151]]
    p = plan(runs, out="/nonexistent/out", by="setting")
    assert p.aligned.budget == STEPS and p.aligned.runs["spiky/run0"].diverged_at == 150


def test_without_validation_losses_the_training_loss_is_read(tmp_path):
    runs = groups(4, spiky_kw={"val_every": 0})
    _, study, report, md = _study(tmp_path, runs, by="setting", target_loss=3.0)
    c = study.compare
    assert c["loss"] == "train" and "log no validation loss" in c["loss_note"]
    final = _per_seed(study, "calm", "final_val_loss")
    assert all(2.4 < v < 2.7 for v in final.values())  # the training loss's last mean
    assert "log no validation loss" in md
    assert "**Target:** training loss 3" in md and "Target:** validation" not in md


def test_the_target_defaults_to_the_baseline_median_final_loss():
    p = plan(groups(3), out="/nonexistent/out", by="setting")
    assert p.target == pytest.approx(2.55 + 3.0 * math.exp(-400 / 60))
    assert "median final validation loss of the baseline calm" in p.target_from


@pytest.mark.parametrize("options,message", [
    ({"groups": ["calm=calm/*", "nothing=none/*"]}, "--group nothing=none/*: matches no run"),
    ({"groups": ["all=*", "calm=calm/*"]}, "matches more than one group"),
    ({"groups": ["calm"]}, "give NAME=GLOB"),
    ({"by": "setting", "baseline": "other"}, "--baseline other: not a group (the groups: "
                                             "calm, spiky)"),
    ({"by": "setting", "recipe": "calm"}, "--recipe calm: is the baseline"),
    ({"by": "optim.lr"}, "--by optim.lr: 12 of 12 runs do not say optim.lr"),
    ({"by": "setting", "target_loss": -1.0}, "--target-loss -1.0: must be a loss > 0"),
    ({"by": "setting", "max_step": 10_000}, "--max-step 10000: no run reaches it"),
    ({"by": "lr"}, "only one group"),
    ({}, "one path and no grouping"),
    ({"by": "setting", "name": "../up"}, "--name '../up'"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, options, message):
    with pytest.raises(UserError) as e:
        plan(groups(6), out=tmp_path / "out", **options)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_a_parameter_some_runs_lack_names_them(tmp_path):
    runs = groups(3)
    for r in runs[:2]:
        r.params = {"lr": 3e-3}
    with pytest.raises(UserError, match=r"--by setting: 2 of 6 runs do not say setting "
                                        r"\(calm/run0, calm/run1\)"):
        plan(runs, out=tmp_path / "out", by="setting")


def test_parameters_are_stored_as_json_holds_them():
    import datetime

    from spikebench.compare import plain

    assert plain({"when": datetime.date(2024, 1, 2), "lr": math.nan, "layers": (1, 2)}) == {
        "when": "2024-01-02", "lr": None, "layers": [1, 2]}
