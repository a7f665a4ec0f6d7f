"""Run.state_dict / Run.load_state_dict, which the integrations keep in checkpoints: a run
killed after its checkpoint continues its folder from it; what cannot be continued is a
one-line error."""

from __future__ import annotations

import json
import math

import pytest

import spikebench
from spikebench import metrics as M
from spikebench.errors import UserError


def _loss(step: int) -> float:  # a decaying curve with a 3-nat spike at steps 150-152
    return 5.0 * math.exp(-step / 80) + 2.5 + 0.02 * math.sin(step) + (
        3.0 if 150 <= step < 153 else 0.0)


def _log(run, steps):
    return [run.log(s, loss=_loss(s), grad_norm=1.0 + 0.01 * (s % 7),
                    val_loss=_loss(s) if s % 50 == 0 else None) for s in steps]


def test_a_killed_run_continues_from_its_checkpoint_as_if_never_killed(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=5)
    _log(run, range(1, 141))
    state = json.loads(json.dumps(run.state_dict(), allow_nan=False))  # plain JSON
    _log(run, range(141, 161))  # then killed: no finish, 160 rows in the partial log
    killed = (tmp_path / "r" / "metrics.jsonl.partial").read_bytes()
    with pytest.raises(UserError, match="another live run writes to it"):
        spikebench.init(run_dir=tmp_path / "r")  # the first still holds the folder
    run.abandon()  # as a kill leaves it
    again = spikebench.init(run_dir=tmp_path / "r", sync_every=5)
    # The killed rows are kept aside, not overwritten; the checkpoint's log continues.
    assert (tmp_path / "r" / "metrics.jsonl.partial.killed").read_bytes() == killed
    again.load_state_dict(state)
    assert again.state_dict()["monitor"] == state["monitor"]
    with pytest.raises(UserError, match="steps must be increasing"):
        again.log(140, loss=3.0)
    _log(again, range(141, 301))
    summary = again.finish()

    straight = spikebench.init(run_dir=tmp_path / "s", sync_every=5)
    _log(straight, range(1, 301))
    expected = straight.finish()
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r[M.STEP] for r in rows] == list(range(1, 301))
    assert summary["spikes"]["events"] == expected["spikes"]["events"]
    assert [e["onset"] for e in summary["spikes"]["events"] if e["metric"] == M.TRAIN_LOSS
            ] == [150]
    assert summary["evals"] == expected["evals"] and summary["status"] == "completed"


def test_what_cannot_be_continued_is_a_one_line_error(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "a", sync_every=1)
    _log(run, range(1, 11))
    state = run.state_dict()
    with pytest.raises(UserError, match="before the run's first log"):
        run.load_state_dict(state)
    with pytest.raises(UserError, match="spike rule is 'default' with gap 5"):
        spikebench.init(run_dir=tmp_path / "b", gap=3).load_state_dict(state)
    with pytest.raises(UserError, match="needs a Run.state_dict"):
        spikebench.init(run_dir=tmp_path / "c").load_state_dict({"monitor": {}})
    run.finish()
    with pytest.raises(UserError, match="had finished"):
        spikebench.init(run_dir=tmp_path / "d").load_state_dict(run.state_dict())


def test_other_ranks_keep_only_the_step(tmp_path, monkeypatch):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=1)
    _log(run, range(1, 11))
    state = run.state_dict()
    monkeypatch.setenv("RANK", "1")
    other = spikebench.init(run_dir=tmp_path / "r1")
    other.load_state_dict(state)
    assert other.state_dict() == {"version": 1, "rank": 1, "last_step": 10, "status": None,
                                  "diverged_step": None}
    with pytest.raises(UserError, match="rank 1's, which holds no monitor"):
        monkeypatch.setenv("RANK", "0")
        spikebench.init(run_dir=tmp_path / "r2").load_state_dict(other.state_dict())
    assert not (tmp_path / "r1").exists()
