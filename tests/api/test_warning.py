"""The early warning in a live run (``spikebench.init(warning=...)``): a real torch loop
whose pre-clip gradient norm jumps at a planted step (the loss scaled for backward only,
the update clipped, so the logged loss does not move) warns there, through Run.log."""

import json
import math

import numpy as np
import pytest
import torch

import spikebench
from spikebench import metrics as M
from spikebench.api import warning as W
from spikebench.errors import UserError
from spikebench.precursors.rule import WarningRule

RULE = {"signal": "grad_norm", "window": 16, "threshold": 8.0}


def _setup():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.02)


def _train(run, steps=160, bump_at=120, loss_bump_at=None, start=1, parts=None):
    """A linear model on a fixed regression task, SGD with clipping; at ``bump_at`` the
    gradient is 1000x (the loss scaled for backward only). Returns the decisions that were
    not CONTINUE, by step."""
    model, opt = parts or _setup()
    w = torch.randn(8, 1, generator=torch.Generator().manual_seed(1))
    decisions = {}
    for step in range(start, steps + 1):
        x = torch.randn(128, 8, generator=torch.Generator().manual_seed(step))
        y = x @ w + 0.1 * torch.randn(128, 1, generator=torch.Generator().manual_seed(-step))
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        (loss * (1000.0 if step == bump_at else 1.0)).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        logged = loss.detach() + (3.0 if step == loss_bump_at else 0.0)
        d = run.log(step, loss=logged, grad_norm=norm)
        if d is not spikebench.Decision.CONTINUE:
            decisions[step] = d
    return decisions


def _rows(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_gradient_jump_warns_through_log_and_is_recorded(tmp_path):
    with spikebench.init(run_dir=tmp_path / "r", sync_every=4, warning=RULE) as run:
        decisions = _train(run)
    # Told at the read-back holding step 120 (every 4 steps: step 120 itself).
    assert decisions == {120: spikebench.Decision.WARNING}
    assert run.warnings == 1 and run.last_warning["step"] == 120
    rows = _rows(tmp_path / "r")
    assert [r[M.WARNINGS] for r in rows] == [0] * 119 + [1] * 41
    # The online verdicts are the rule's array form over the logged column, bit for bit.
    rule = WarningRule(**{**RULE, "signal": M.GRAD_NORM})
    scores = rule.scores([r[M.GRAD_NORM] for r in rows])
    assert [r[M.WARNING_SCORE] for r in rows] == scores.tolist()
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["warnings"] == {"rule": WarningRule(**RULE).to_mapping(), "n": 1,
                                   "steps": [120]}
    assert summary["spikes"]["n_events"] == 0  # the loss did not move: a warning alone
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["warning"]["signal"] == "grad_norm"


def test_without_a_rule_nothing_warns_and_no_column_is_added(tmp_path):
    with spikebench.init(run_dir=tmp_path / "r", sync_every=4) as run:
        assert _train(run) == {}
    assert M.WARNINGS not in _rows(tmp_path / "r")[0]
    assert "warnings" not in json.loads((tmp_path / "r" / "summary.json").read_text())


def test_a_spike_in_the_same_read_back_wins_and_the_warning_still_counts(tmp_path):
    with spikebench.init(run_dir=tmp_path / "r", sync_every=8, warning=RULE) as run:
        decisions = _train(run, bump_at=118, loss_bump_at=120)
    assert decisions[120] is spikebench.Decision.SPIKE  # steps 113-120 read back together
    assert spikebench.Decision.WARNING not in decisions.values()
    assert run.warnings == 1 and run.last_warning["step"] == 118


def test_a_per_layer_signal_reads_the_max_over_its_layers(tmp_path):
    rule = {"signal": "probe/norm/*", "window": 8, "threshold": 8.0}
    with spikebench.init(run_dir=tmp_path / "r", sync_every=1, warning=rule) as run:
        got = {}
        for step in range(1, 40):
            layer1 = 1.0 + 0.01 * (step % 3) + (9.0 if step == 30 else 0.0)
            d = run.log(step, {"loss": 2.0 + 0.01 * (step % 5), "probe/norm/0": 1.0,
                               "probe/norm/1": torch.tensor(layer1)})
            got[step] = d
    assert [s for s, d in got.items() if d is spikebench.Decision.WARNING] == [30]


def test_resume_from_a_checkpoint_keeps_the_rules_state(tmp_path):
    with spikebench.init(run_dir=tmp_path / "whole", sync_every=4, warning=RULE) as run:
        _train(run)
    whole = [r[M.WARNING_SCORE] for r in _rows(tmp_path / "whole")]
    # A checkpoint at step 110 (the loop's model and optimizer, the run's state as a JSON
    # trainer state keeps it), then the process dies; a new one resumes from it.
    model, opt = _setup()
    first = spikebench.init(run_dir=tmp_path / "cut", sync_every=4, warning=RULE)
    _train(first, steps=110, parts=(model, opt))
    saved = (model.state_dict(), opt.state_dict(), json.loads(json.dumps(first.state_dict())))
    first.abandon()
    # The state as saved; and one without the rule's state (rebuilt from the log's rows).
    for run_state in (saved[2], {**saved[2], "warning": None}):
        again = spikebench.init(run_dir=tmp_path / "cut", sync_every=4, warning=RULE)
        again.load_state_dict(run_state)
        model, opt = _setup()
        model.load_state_dict(saved[0])
        opt.load_state_dict(saved[1])
        assert _train(again, start=111, parts=(model, opt)) == {
            120: spikebench.Decision.WARNING}
        again.finish()
        assert [r[M.WARNING_SCORE] for r in _rows(tmp_path / "cut")] == whole
        assert again.warnings == 1
        (tmp_path / "cut" / "summary.json").unlink()  # the same folder, resumed again


def test_a_checkpoint_of_another_rule_is_refused(tmp_path):
    first = spikebench.init(run_dir=tmp_path / "r", sync_every=4, warning=RULE)
    _train(first, steps=40)
    state = first.state_dict()
    first.abandon()
    again = spikebench.init(run_dir=tmp_path / "r", sync_every=4,
                            warning={**RULE, "threshold": 5.0})
    with pytest.raises(UserError, match="saved for rule"):
        again.load_state_dict(state)


@pytest.mark.parametrize(("value", "match"), [
    (3, r"warning=3: must be a spikebench.precursors.rule.WarningRule"),
    ("grad_norm", r"warning='grad_norm': must be"),
    ({"window": 8}, r"signal is missing"),
    ({"signal": "grad_norm", "windw": 8}, r"unknown field 'windw'"),
    ({"signal": "grad_norm", "window": 2}, r"window = 2: must be an integer >= 4"),
    ({"signal": "grad_norm", "threshold": math.nan}, r"threshold = nan: must be a finite"),
    ({"signal": "grad_norm", "scale": "mad"}, r"scale = 'mad': must be one of noise, spread"),
])
def test_a_bad_warning_is_refused_at_init_in_one_line(tmp_path, value, match):
    with pytest.raises(UserError, match=match) as e:
        spikebench.init(run_dir=tmp_path / "r", warning=value)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "r").exists()  # refused before the folder is made


def test_warning_true_reads_the_committed_default_rule(tmp_path, monkeypatch):
    path = tmp_path / "default_rule.toml"
    path.write_text('[rule]\nsignal = "probe/update_ratio"\nwindow = 12\nthreshold = 7.5\n')
    monkeypatch.setattr(W, "DEFAULT_RULE", path)
    with spikebench.init(run_dir=tmp_path / "r", warning=True) as run:
        assert run.warning == WarningRule("probe/update_ratio", window=12, threshold=7.5)
    monkeypatch.setattr(W, "DEFAULT_RULE", tmp_path / "none.toml")
    with pytest.raises(UserError, match="no default rule is committed"):
        spikebench.init(run_dir=tmp_path / "r2", warning=True)


def test_the_committed_default_rule_warns_after_a_loss_excursion(tmp_path):
    # default_rule.toml, written by benchmarks/precursor_rule.py --write from the labelled
    # set: a rule on a signal every trainer logs warns a live run after a spike (spikes
    # come in clusters in the set's regimes), and stays quiet on a steady loss.
    rule = W.default_rule()
    assert rule.signal in ("train/loss", "optim/grad_norm") or rule.signal.startswith("probe/")
    rng = np.random.default_rng(0)
    with spikebench.init(run_dir=tmp_path / "r", warning=True) as run:
        got = [run.log(s, loss=3.0 + rng.normal(0, 0.01) + 2.0 * (200 <= s < 205))
               for s in range(1, 300)]
    warned = [s for s, d in enumerate(got, 1) if d is spikebench.Decision.WARNING]
    assert warned and all(s >= 200 for s in warned)
