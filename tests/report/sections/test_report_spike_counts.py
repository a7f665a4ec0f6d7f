import pytest
from fixtures import ARMS

from spikebench.report.sections import spike_counts


def test_spike_counts_by_arm_and_by_feature(study):
    info = spike_counts.info(study)
    arms = {a["arm"]: a for a in info.arms}
    assert arms["baseline"]["events"] == [3, 3, 3] and arms["recipe"]["mean"] == 1.0
    feats = {f["key"]: f for f in info.features}
    assert {"warmup_cosine", "clip", "bf16", "curriculum"} <= set(feats)
    assert feats["clip"]["label"] == "clipping (any threshold)"
    assert feats["clip"]["on_trials"] + feats["clip"]["off_trials"] == len(ARMS) + 2
    base, recipe = arms["baseline"]["severity"], arms["recipe"]["severity"]
    assert len(base["per_seed"]) == 3 and "delta" not in base
    d = recipe["delta"]
    assert d["value"] == pytest.approx(recipe["mean"] - base["mean"]) and d["n"] == 3
    assert base["mean"] > recipe["mean"] > 0  # 3 events per seed vs 1
    assert d["lo"] is None and d["p"] == 0.25  # 3 pairs: no interval; 2 / 2^3




def test_spike_responses_and_their_cost_per_seed(tmp_path):
    from fixtures import BASELINE, make_study, outcome

    from spikebench.report.data import load_study

    rb = {"kind": "rollback", "rollbacks": [{"step": 60, "redone_steps": 10}],
          "redone_steps": 10, "skipped_batches": 20, "skipped_updates": 0}
    arms = {"baseline": {}, "rollback": {"response.kind": "rollback"}}
    st = load_study(make_study(tmp_path, folder="resp", arms=arms, search=0, seeds=(0, 1),
                               baseline=BASELINE, outcomes={
                                   "rollback": [outcome(response=rb), outcome()]}))
    info = spike_counts.info(st)
    row = {a["arm"]: a for a in info.arms}["rollback"]
    assert row["label"] == "rollback on a spike (PaLM)"
    assert row["responses"] == {"rollbacks": [1, 0], "redone_steps": [10, 0],
                                "skipped_batches": [20, 0], "skipped_updates": [0, 0]}
    from spikebench.report.blocks import Table

    tables = [b for b in spike_counts.blocks(info, frozenset()) if isinstance(b, Table)]
    table = tables[2]  # after the designed comparison's event counts and severities
    assert [c.text for c in table.rows[0]] == ["rollback", "1, 0", "10, 0", "20, 0", "0, 0"]
