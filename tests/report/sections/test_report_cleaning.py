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


def test_domain_shares_before_and_after_the_cap(tmp_path):
    def rep(big_out):
        r = _report(0.0, 0.0, 6000 - big_out)
        r["domains"] = {"big": {"in": 6000, "out": big_out}, "small": {"in": 4000, "out": 4000}}
        return r

    arms = {"baseline": {}, "cap": {"clean.max_domain_share": 0.5}}
    st = load_study(make_study(tmp_path, folder="cd", arms=arms, search=0, seeds=(0, 1),
                               space=[], baseline={}, outcomes={"cap": [
                                   outcome(cleaning=rep(4000)), outcome(cleaning=rep(2000))]}))
    info = cleaning.info(st)
    rows = {r["domain"]: r for r in info.domains}
    assert [r["domain"] for r in info.domains] == ["big", "small"]  # largest share first
    assert rows["big"]["share_in"]["mean"] == pytest.approx(0.6)
    assert rows["big"]["share_out"] == {"mean": pytest.approx((0.5 + 2 / 6) / 2),
                                        "lo": pytest.approx(2 / 6), "hi": 0.5, "n": 2}
    assert rows["small"]["share_out"]["hi"] == pytest.approx(4 / 6)
    text = "\n".join(str(b) for b in cleaning.blocks(info, frozenset()))
    assert "Share after" in text
