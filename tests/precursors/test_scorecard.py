"""The precursor scorecard on logs whose precursor is planted: a signal that rises 30 steps
before each loss spike, spikes an LR jump causes (the control), spike-free runs; labelled
by the real detector through ``spikebench precursors``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from spikebench.cli import main
from spikebench.precursors import scorecard as S

STEPS, LEAD, ONSETS = 600, 30, (200, 420)


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(rng, onsets=(), shock=None):
    rows = []
    for t in range(1, STEPS + 1):
        loss = 3.0 - 0.001 * t + rng.normal(0, 0.01)
        sig = math.exp(rng.normal(0, 0.02))
        lr = 1e-3
        for o in onsets:
            if o - LEAD <= t < o:
                sig *= math.exp(2.0 * (t - (o - LEAD)) / LEAD)  # rises to e^2 by the onset
            if o <= t < o + 10:
                loss += 1.0 * math.exp(-(t - o) / 3)
        if shock is not None:
            if shock <= t < shock + 3:
                lr = 1e-2
            if shock + 1 <= t < shock + 11:
                loss += 1.0 * math.exp(-(t - shock - 1) / 3)
        row = {"step": t, "loss": loss, "lr": lr}
        if t % 2 == 0:
            row["probe/update_norm"] = sig
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def card(tmp_path_factory):
    root = tmp_path_factory.mktemp("precursors")
    for seed in range(6):
        rng = np.random.default_rng(seed)
        _write(root / f"spiky-s{seed}" / "log.jsonl", _run(rng, ONSETS))
        _write(root / f"shock-s{seed}" / "log.jsonl", _run(rng, shock=300))
        _write(root / f"calm-s{seed}" / "log.jsonl", _run(rng))
    return root


def _json(capsys, *args):
    assert main(["precursors", *map(str, args), "--json", "--boot", "200"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_planted_precursor_leads_and_beats_the_loss(card, capsys):
    out = _json(capsys, card)
    assert out["runs"] == 18 and out["events"] == 12 and out["control_events"] == 6
    assert out["spike_free_runs"] == 6
    labels = {r["run"]: r for r in out["labels"]}  # stored beside the figures
    assert sum(len(r["onsets"]) for r in labels.values()) == 12
    assert [r["control"] for n, r in labels.items() if "shock" in n] == [[301]] * 6
    sig = {s["signal"]: s for s in out["signals"]}
    loss, probe = sig["train/loss"], sig["probe/update_norm"]
    # The probe warns within the 30 steps its rise takes, every event, no false alarm.
    assert probe["recall_10"] == 1.0 and probe["recall_50"] == 0.0
    assert 10 <= probe["median_lead"] <= LEAD
    assert probe["fa_per_10k"] == 0.0
    # Positives span the HORIZON (100 steps) before an onset; the rise fills 30 of them.
    assert probe["pr_auc"] > 2.5 * probe["base_rate"] > 0
    assert probe["vs_loss"]["verdict"] == S.BEATS and probe["vs_loss"]["interval"][0] > 0
    # The loss cannot warn of its own spike: it moves at the onset, not before.
    assert loss["recall_10"] == 0.0 and loss["median_lead"] in (0.0, None)
    for s in out["signals"]:
        for key, iv in s["intervals"].items():
            if iv is not None and key.startswith(("recall", "pr_auc")):
                assert 0.0 <= iv[0] <= s[key] <= iv[1] <= 1.0, (s["signal"], key)


def test_the_control_has_no_lead(card, capsys):
    out = _json(capsys, card)
    probe = next(s for s in out["signals"] if s["signal"] == "probe/update_norm")
    assert probe["control"] == 6
    assert probe["control_recall_10"] == 0.0  # nothing rose before an LR jump's spike


def test_too_few_events_withhold_the_verdict(card, capsys):
    out = _json(capsys, card / "spiky-s0", card / "calm-s1")
    probe = next(s for s in out["signals"] if s["signal"] == "probe/update_norm")
    assert probe["vs_loss"]["verdict"].startswith("too few to tell")


def test_one_seed_gives_no_interval_rather_than_a_zero_width_one(card, capsys):
    out = _json(capsys, card / "spiky-s0")  # names no seed: the run is its own
    assert out["seeds"] == 1
    for s in out["signals"]:
        assert all(iv is None for iv in s["intervals"].values()), s["signal"]
        assert s["vs_loss"].get("interval") is None
    assert main(["precursors", str(card / "spiky-s0"), "--boot", "200"]) == 0
    text = capsys.readouterr().out
    assert "(none: one seed)" in text and "[" not in text.split("|---", 1)[1]


def test_average_precision_by_hand():
    assert S.average_precision(np.array([3.0, 2.0, 1.0]), np.array([1, 0, 1])) == \
        pytest.approx((1 / 1 + 2 / 3) / 2)
    assert S.average_precision(np.array([1.0, 1.0]), np.array([1, 0])) == pytest.approx(0.5)
    assert math.isnan(S.average_precision(np.array([1.0]), np.array([0])))


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["precursors", str(tmp_path), "--budget", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--budget" in err[0] and "must be a number > 0" in err[0]
    assert main(["precursors", str(tmp_path), "--boot", "0"]) == 2  # would give no interval
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--boot" in err[0] and "must be an integer >= 100" in err[0]
    assert main(["precursors", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
