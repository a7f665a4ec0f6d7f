from fixtures import LR_GRID, lr_outcome, make_study

from spikebench.report.arms import table_arms
from spikebench.report.data import load_study
from spikebench.report.lr_grid import grid_values, lr_grid


def _shape(grid):
    return [(s.label, s.baseline, s.values, sorted(s.trials)) for s in grid.settings]


def test_grid_from_arms_and_from_search_trials_is_the_same(lr_arms, lr_search):
    a, s = lr_grid(lr_arms), lr_grid(lr_search)
    assert a.lrs == s.lrs == LR_GRID
    assert _shape(a) == _shape(s)
    assert [x.label for x in a.settings] == ["baseline", "clipping at 1", "qk-layernorm"]
    assert a.baseline.values == (("optim.clip", None), ("model.qk_norm", False))
    # Each cell is that setting's own trial.
    qk = a.settings[2].trials[0.3]
    assert qk.arm == "qk-layernorm @ optim.lr=0.3"


def test_lrs_are_the_grid_values_not_bins(lr_arms, nocomp):
    assert grid_values(lr_arms) == LR_GRID
    # A continuous LR dimension's search trials are no grid.
    assert grid_values(nocomp) == [] and lr_grid(nocomp) is None


def test_strategy_table_compares_the_arms_at_the_base_lr(lr_arms, study):
    assert list(table_arms(lr_arms)) == ["baseline", "clip 1.0", "qk-layernorm"]
    assert table_arms(study) == study.arms  # no grid: every arm


def test_no_baseline_without_a_plain_setting(tmp_path):
    # Both settings switch a strategy on: neither is the baseline; labels name the values.
    space = [{"key": "optim.lr", "choices": LR_GRID}, {"key": "optim.clip", "choices": [0.5, 1.0]}]
    values = [{"optim.lr": lr, "optim.clip": c} for c in (0.5, 1.0) for lr in LR_GRID]
    st = load_study(make_study(tmp_path, folder="nobase", arms={}, space=space,
                               search=len(values), search_values=values, seeds=(0, 1),
                               outcome_of=lambda a, v, s: lr_outcome(v, s)))
    grid = lr_grid(st)
    assert grid.baseline is None
    assert [x.label for x in grid.settings] == ["optim.clip = 0.5", "optim.clip = 1"]
