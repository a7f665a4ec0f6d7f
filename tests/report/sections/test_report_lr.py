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




def test_choice_valued_lrs_are_shown_at_their_own_values(lr_arms, lr_search):
    for st in (lr_arms, lr_search):
        info = lr.info(st)
        assert [(b["lo"], b["hi"], b["trials"]) for b in info.bins] == [
            (0.003, 0.003, 3), (0.03, 0.03, 3), (0.3, 0.3, 3)]
    cells = [row[0].text for row in lr.blocks(lr.info(lr_arms), frozenset())[-1].rows]
    assert cells == ["0.003", "0.03", "0.3"]
