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


