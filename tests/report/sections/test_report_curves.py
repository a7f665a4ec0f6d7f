from spikebench.report.sections import curves


def test_curves_pick_baseline_best_and_worst_with_events(study):
    info = curves.info(study, max_points=30)
    roles = [p["roles"] for p in info.panels]
    assert roles[0].startswith("baseline") and any("best" in r for r in roles)
    assert any("worst" in r for r in roles)
    best = next(p for p in info.panels if "best" in p["roles"])
    assert best["arm"] == "recipe"
    seed = info.panels[0]["seeds"][0]
    assert len(seed["steps"]) <= 30 and seed["steps"][0] == 1
    assert len(seed["events"]) == 3 and seed["events"][0]["loss_at_peak"] is not None
    assert seed["injections"] == [{"kind": "random_bytes", "first": 50, "last": 55}]
    assert seed["val_steps"][0] == 0


def test_curves_without_trial_folders_keep_seeds_without_points(nocomp):
    info = curves.info(nocomp)
    assert info.available and info.panels[0]["roles"].startswith("best")
    assert info.panels[0]["seeds"][0]["steps"] == []


