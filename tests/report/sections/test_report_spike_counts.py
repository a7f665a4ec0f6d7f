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


