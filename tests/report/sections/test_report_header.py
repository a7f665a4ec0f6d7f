from fixtures import ARMS

from spikebench.report.sections import header
from spikebench.spikes.evidence import EvidenceParams


def test_header(study, nocomp):
    h = header.info(study)
    assert h.study == "main" and h.n_trials == len(study.trials)
    assert h.states == {"complete": len(ARMS) + 2, "fail": 1}
    env = h.environment
    assert env["device"] == ["cpu"] and env["torch"] == ["2.13.0+cpu"]
    assert env["git"] == ["abc123"] and env["corpus_sha256"] == ["f" * 64]
    assert set(env["precision"]) == {"fp32", "bf16 (emulated)", "fp16+scaling (emulated)"}
    assert h.space[0] == {"key": "schedule.warmup_ratio", "describe": "float in [0, 0.1]"}
    assert h.space[1]["describe"] == 'float in [0.1, 10] log-uniform or "off"'
    # The sweep's own Param.describe(): choices as JSON, as `spikebench sweep --dry-run` prints.
    assert h.space[2]["describe"] == 'one of "fp32", "fp16", "bf16"'
    assert h.faults == ["random_bytes at steps 50-55"]
    assert "rule 'default'" in h.spike_definition and "severity" in h.spike_definition
    # The default rule is described from its own thresholds (multi-step evidence).
    e = EvidenceParams()
    for k in (e.k_big, e.k_peak, e.k_multi):
        assert f"{k:g} sigma" in h.spike_definition
    assert "level shift" in h.spike_definition
    assert header.info(nocomp).environment["torch"] == []




def test_pruning_counts_the_steps_pruned_trials_did_not_run():
    from spikebench.report.data import TrialRecord

    def trial(n, state, **attrs):
        return TrialRecord(number=n, state=state, arm="search", params={}, values=None,
                           attrs=attrs, folder=None, duration_s=None)

    trials = [trial(0, "COMPLETE"), trial(1, "PRUNED", pruned_at_step=40),
              trial(2, "PRUNED", pruned_at_step=100), trial(3, "FAIL")]
    # 3 trials ran or were pruned, x 3 seeds x 100 steps; the pruned ones ran 40 and 100
    # steps of their first seed and skipped the rest.
    assert header.pruning(trials, steps=100, n_seeds=3) == header.Pruning(
        pruned=2, spent=140, saved=600 - 140, budget=900)
    assert header.pruning(trials, steps=None, n_seeds=3) == header.Pruning(0, 0, 0, 0)
