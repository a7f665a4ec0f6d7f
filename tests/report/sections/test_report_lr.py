from spikebench.report.sections import lr


def test_lr_sensitivity_only_where_lr_was_swept(study, nocomp):
    assert not lr.info(study).available
    info = lr.info(nocomp)
    assert info.available and len(info.points) == 6
    lrs = [p["lr"] for p in info.points]
    assert lrs == sorted(lrs) and all(1e-4 <= x <= 1e-1 for x in lrs)
    assert sum(b["trials"] for b in info.bins) == 6
    assert lr.lr_bins([{"lr": 0.01, "spikes": 1.0, "convergence": 2.0,
                         "diverged_seeds": 0}])[0]["trials"] == 1


