from fixtures import ARMS

from spikebench.report.sections import header


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
    assert header.info(nocomp).environment["torch"] == []


