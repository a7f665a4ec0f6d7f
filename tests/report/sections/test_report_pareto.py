from fixtures import ARMS

from spikebench.report.sections import pareto


def test_pareto_mask():
    assert pareto.pareto_mask([], []) == []
    assert pareto.pareto_mask([1, 2, 3, 2, 1], [3, 2, 1, 3, 3]) == [True, True, True, False, True]


def test_pareto_info(study):
    info = pareto.info(study)
    pts = {p["number"]: p for p in info.points}
    assert len(pts) == len(ARMS) + 2  # the failed trial has no scores
    assert info.front and all(pts[n]["front"] for n in info.front)
    recipe = study.arm_trial("recipe").number
    assert recipe in info.front  # fewest spikes and fastest: dominates the rest
    assert "severity" in info.x_label




def test_the_convergence_axis_states_the_score_the_sweep_computes():
    from spikebench.report.scores import CONVERGENCE_LABEL as label
    from spikebench.scoring.trial import convergence

    # A miss: steps x (2 - target / final loss); 300 steps, target 2.75, final 3.3.
    assert convergence(None, 3.3, steps=300, target=2.75, diverged=False) == \
        300 * (2 - 2.75 / 3.3)
    assert "2 - target / final loss" in label and "final/target" not in label
