import pytest
from fixtures import make_study, outcome

from spikebench.report.data import load_study
from spikebench.report.sections import cleaning


def _report(precision, recall, removed):
    return {"bytes_in": 10000, "bytes_out": 10000 - removed, "removed_bytes": removed,
            "precision": precision, "recall": recall,
            "by_reason": {"garbled": {"units": 3, "removed_bytes": removed,
                                      "precision": precision, "recall": recall,
                                      "examples": ["\x00\x01 bad"]}}}


def test_what_each_cleaner_removed_against_what_was_planted(tmp_path, study):
    arms = {"baseline": {}, "clean": {"clean.quality": True}}
    st = load_study(make_study(tmp_path, folder="cl", arms=arms, search=0, seeds=(0, 1),
                               space=[], baseline={}, outcomes={"clean": [
                                   outcome(cleaning=_report(0.9, 1.0, 2000)),
                                   outcome(cleaning=_report(0.7, 0.8, 1000))]}))
    info = cleaning.info(st)
    rows = {(r["arm"], r["reason"]): r for r in info.rows}
    assert set(rows) == {("clean", "all"), ("clean", "garbled")}
    total = rows[("clean", "all")]
    assert total["seeds"] == 2
    assert total["precision"] == {"mean": pytest.approx(0.8), "lo": 0.7, "hi": 0.9, "n": 2}
    assert total["recall"]["mean"] == pytest.approx(0.9)
    assert total["share"]["mean"] == pytest.approx(0.15)
    assert rows[("clean", "garbled")]["units"]["mean"] == 3
    assert rows[("clean", "garbled")]["example"] == "\x00\x01 bad"
    # A study whose arms never cleaned says so.
    assert not cleaning.info(study).available
