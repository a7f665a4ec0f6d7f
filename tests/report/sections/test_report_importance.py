from fixtures import make_study

from spikebench.report.data import load_study
from spikebench.report.sections import importance


def test_importance(study):
    info = importance.info(study)
    assert info.available, info.reason
    assert [o["name"] for o in info.objectives] == ["spikes", "convergence"]
    assert "precision.mode" in info.objectives[0]["importances"]


def test_importance_with_too_few_trials(root):
    st = load_study(make_study(root, folder="tiny", arms={}, search=1, seeds=(0,)))
    assert not importance.info(st).available


