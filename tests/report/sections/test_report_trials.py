from spikebench.report.sections import trials


def test_trials_table_lists_every_trial_with_its_params(study):
    info = trials.info(study)
    assert len(info.rows) == len(study.trials)
    assert {"schedule.warmup_ratio", "optim.clip/on", "optim.clip"} <= set(info.param_keys)
    failed = info.rows[-1]
    assert failed["state"] == "fail" and "out of memory" in failed["note"]
    assert info.rows[0]["params"]["optim.clip"] is None


