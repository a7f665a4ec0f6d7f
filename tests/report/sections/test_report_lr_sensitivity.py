import pytest
from fixtures import make_lr_study

from spikebench.report.data import load_study
from spikebench.report.sections import lr_sensitivity


def _rows(study):
    return {r["label"]: r for r in lr_sensitivity.info(study).rows}


def test_sensitivity_per_setting_paired_against_the_baseline(lr_arms):
    rows = _rows(lr_arms)
    # Per seed: mean of min(final, initial) over the grid minus the best final. The
    # baseline's seeds 0-4: (3.0 + 2.8 + 4.0) / 3 - 2.8; seed 5 diverged at LR 0.3 (5.5).
    base = [(3.0 + 2.8 + 4.0) / 3 - 2.8] * 5 + [(3.05 + 2.85 + 5.5) / 3 - 2.85]
    assert rows["baseline"]["sensitivity"]["value"] == pytest.approx(sum(base) / 6)
    assert rows["baseline"]["delta"] is None and rows["baseline"]["seeds"] == 6
    qk = rows["qk-layernorm"]
    assert qk["sensitivity"]["value"] == pytest.approx((3.0 + 2.75 + 2.9) / 3 - 2.75)
    assert qk["delta"]["value"] == pytest.approx(qk["sensitivity"]["value"] - sum(base) / 6)
    assert qk["delta"]["hi"] < 0 and qk["delta"]["n"] == 6
    # Six pairs all in one direction: the exact sign-flip test's smallest p, 2/2^6.
    assert qk["verdict"] == {"verdict": "lower", "p": pytest.approx(2 / 64), "why": ""}


def test_reads_the_same_from_arms_and_from_search_trials(lr_arms, lr_search):
    a, s = lr_sensitivity.info(lr_arms), lr_sensitivity.info(lr_search)
    assert a.rows == s.rows and a.lrs == s.lrs


def test_three_seeds_give_an_estimate_but_no_verdict(tmp_path):
    rows = _rows(load_study(make_lr_study(tmp_path, "three", seeds=(0, 1, 2))))
    qk = rows["qk-layernorm"]
    assert qk["delta"]["value"] < 0 and qk["delta"]["lo"] is None
    assert qk["verdict"]["verdict"] == "not tested" and "needs 6" in qk["verdict"]["why"]


def test_a_setting_missing_a_grid_point_has_no_sensitivity(tmp_path):
    st = load_study(make_lr_study(tmp_path, "gap", seeds=(0, 1)))
    # Drop the clip setting's trial at the top LR, as if it had failed.
    st.trials = [t for t in st.trials if t.arm != "clip 1.0 @ optim.lr=0.3"]
    row = _rows(st)["clipping at 1"]
    assert row["missing"] == [0.3] and row["seeds"] == 0 and row["delta"] is None
