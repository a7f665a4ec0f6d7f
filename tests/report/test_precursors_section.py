"""The "precursors" section on a study whose seed logs carry a planted precursor: in the
spiky arm a probe/update_norm that rises over the 30 steps before each loss spike, in
another arm the same spikes with a flat probe, a calm arm, and calm search trials
(fixtures.make_study, its seeds' metrics.jsonl rewritten); and on a study whose logs have
no probe column, where the section is left out."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fixtures import make_study

from spikebench import metrics as M
from spikebench.report.data import load_study
from spikebench.report.html import render_html
from spikebench.report.markdown import render_markdown
from spikebench.report.sections import headings, report_info
from spikebench.report.sections import precursors as P

STEPS, LEAD, ONSETS = 600, 30, (200, 420)
ARMS = {"baseline": {}, "clip 1.0": {"optim.clip": 1.0},
        "bf16": {"precision.mode": "bf16"}}
TITLE = "Precursors: which signal moved first"


def _rows(rng, onsets=(), warns=True):
    """A log like the scorecard test's: a flat noisy loss with a bump at each onset; the
    probe, every 2 steps, rises to e^2 over the LEAD steps before it where ``warns``."""
    rows = []
    for t in range(1, STEPS + 1):
        loss = 3.0 - 0.001 * t + rng.normal(0, 0.01)
        sig = math.exp(rng.normal(0, 0.02))
        for o in onsets:
            if warns and o - LEAD <= t < o:
                sig *= math.exp(2.0 * (t - (o - LEAD)) / LEAD)
            if o <= t < o + 10:
                loss += 1.0 * math.exp(-(t - o) / 3)
        row = {M.STEP: t, M.TRAIN_LOSS: loss, M.LR: 1e-3}
        if t % 2 == 0:
            row[M.UPDATE_NORM] = sig
        rows.append(row)
    return rows


def _planted(study_dir):
    """Rewrite every seed's metrics.jsonl: the baseline spikes after a rising probe, bf16
    spikes with a flat probe, every other trial is calm."""
    for trial in sorted((study_dir / "trials").iterdir()):
        arm = json.loads((trial / "trial.json").read_text())["arm"]
        for seed_dir in sorted(trial.glob("seed-*")):
            seed = int(seed_dir.name[5:])
            rng = np.random.default_rng(100 * int(trial.name) + seed)
            onsets = ONSETS if arm in ("baseline", "bf16") else ()
            rows = _rows(rng, onsets, warns=arm == "baseline")
            (seed_dir / "metrics.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    d = make_study(tmp_path_factory.mktemp("precursors"), folder="probed", arms=ARMS,
                   search=2, steps=STEPS)
    _planted(d)
    return load_study(d)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return load_study(make_study(tmp_path_factory.mktemp("plain"), folder="plain",
                                 arms=ARMS, search=1, steps=STEPS))


def test_the_planted_precursor_moves_first_in_the_spiky_arm(probed):
    info = P.info(probed)
    assert info.available, info.reason
    arms = {a["label"]: a for a in info.arms}
    base = arms["baseline"]
    assert base["events"] == 6 and base["runs"] == 3 and base["control"] == 0
    first = base["first"]
    assert first["signal"] == M.UPDATE_NORM
    assert 10 <= first["median_lead"] <= LEAD and first["recall"] == 1.0
    # The loss moves at its own onset, not before.
    loss = next(r for r in base["rows"] if r["signal"] == M.TRAIN_LOSS)
    assert loss["recall"] == 0.0
    text = P.line(base)
    assert text.startswith(f"first to move: {M.UPDATE_NORM} (median lead ")
    assert text.endswith("recall at ≥ 10 steps 100%)")
    # The same spikes with a flat probe: nothing warned ahead.
    assert arms["bf16"]["events"] == 6 and arms["bf16"]["first"] is None
    assert P.line(arms["bf16"]) == P.NONE_AHEAD
    # Calm groups are named, not given a line; one threshold per signal over every run.
    assert info.calm == ["clip 1.0", P.SEARCH] and info.runs == 15
    assert list(info.thresholds) == [M.TRAIN_LOSS, M.UPDATE_NORM]


def test_the_section_is_shown_between_lr_and_the_trials(probed):
    report = report_info(probed)
    keys = [k for k, _ in headings(report)]
    assert "precursors" in keys and keys.index("precursors") == keys.index("lr") + 1
    md, page = render_markdown(report), render_html(report)
    assert TITLE in md and TITLE in page
    assert f"**baseline:** first to move: {M.UPDATE_NORM}" in md
    assert f"**bf16:** {P.NONE_AHEAD}" in md
    assert "at most 1 false alarm per 10,000 steps" in md
    assert "over all 15 runs" in md


def test_a_study_without_probes_leaves_the_section_out(plain, monkeypatch):
    # Only the head of a log is read: no run is read in full, none labelled.
    import spikebench.runs.discover as discover

    def never(*a, **k):
        raise AssertionError("a run was read")

    monkeypatch.setattr(discover, "discover", never)
    info = P.info(plain)
    assert not info.available and info.reason == P.NO_PROBES
    report = report_info(plain)
    assert "precursors" not in dict(headings(report))
    assert TITLE not in render_markdown(report) and TITLE not in render_html(report)


def test_probes_without_a_loss_event_leave_the_section_out(tmp_path):
    d = make_study(tmp_path, folder="calm", arms={"baseline": {}}, search=0, seeds=(0, 1),
                   steps=STEPS)
    for seed_dir in (d / "trials").glob("*/seed-*"):
        rows = _rows(np.random.default_rng(int(seed_dir.name[5:])))
        (seed_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    info = P.info(load_study(d))
    assert not info.available and info.reason == P.NO_EVENTS


def test_first_to_move_prefers_recall_then_the_longer_lead():
    rows = [{"signal": "a", "events": 4, "recall": 0.5, "median_lead": 40.0},
            {"signal": "b", "events": 4, "recall": 0.75, "median_lead": 12.0},
            {"signal": "c", "events": 4, "recall": 0.75, "median_lead": 20.0},
            {"signal": "d", "events": 4, "recall": 0.0, "median_lead": 3.0}]
    assert P.first_to_move(rows)["signal"] == "c"
    assert P.first_to_move([rows[3]]) is None
