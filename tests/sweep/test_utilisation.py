"""Sweep utilisation from trial folders: finished seeds by their summaries, a pruned or
killed seed by its last logged clock, seeds taken over from a retried trial not at all."""

import json

import pytest

from spikebench import metrics as M
from spikebench.sweep.utilisation import measure, training_seconds


def _trial(path, carried=None):
    path.mkdir(parents=True)
    (path / "trial.json").write_text(json.dumps({"carried_over": carried or {}}))
    return path


def test_training_seconds_count_what_the_trial_itself_trained(tmp_path):
    t = _trial(tmp_path / "00001", carried={"2": "done"})
    for seed, secs in ((0, 3.5), (2, 100.0)):
        (t / f"seed-{seed}").mkdir()
        (t / f"seed-{seed}" / "summary.json").write_text(json.dumps({"seconds": secs}))
    (t / "seed-1").mkdir()  # pruned: its log ends with a line the kill cut short
    (t / "seed-1" / "metrics.jsonl.partial").write_text(
        json.dumps({M.STEP: 10, M.ELAPSED_S: 1.25}) + "\n" + '{"step": 11, "ti')
    assert training_seconds(t) == pytest.approx(3.5 + 1.25)
    assert training_seconds(tmp_path / "missing") == 0.0


def test_utilisation_is_training_over_worker_seconds(tmp_path):
    t = _trial(tmp_path / "00000")
    (t / "seed-0").mkdir()
    (t / "seed-0" / "summary.json").write_text(json.dumps({"seconds": 30.0}))
    used = measure([t], workers=2, wall_s=20.0)
    assert used.share == pytest.approx(0.75) and used.train_s == 30.0
    assert used.line().startswith("utilisation: 75.0% of 2 worker(s) x 20 s spent training")
    assert measure([], workers=0, wall_s=0.0).share == 0.0
