"""spikebench.integrations.loop.SpikebenchLoop in a plain torch loop (a bigram model on a
token stream the test builds): the planted LR shock, pruning, divergence, a checkpoint and a
resume that gives the uninterrupted run's log, the Prometheus endpoint; and the imports."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import urllib.request

import pytest
import torch
import torch.nn.functional as F
from integration_kit import VOCAB, folder, loss_onsets, offline_loss_onsets, sequences, shock

import spikebench
from spikebench import metrics as M
from spikebench.api import context
from spikebench.errors import UserError
from spikebench.integrations.loop import SpikebenchLoop, grad_norm

LR = 1e-2


class Bigram(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(VOCAB, 32)
        self.out = torch.nn.Linear(32, VOCAB)

    def loss(self, x):
        logits = self.out(torch.tanh(self.emb(x[:, :-1])))
        return F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))


def train(sb, steps, *, at=None, factor=100.0, start=1, model=None, opt=None, sched=None,
          on_step=None, nan_from=None):
    """A hand-written loop: the model, the optimizer and the schedule are its own."""
    data, val = sequences(steps * 8, 1), sequences(32, 2)
    if model is None:
        model = Bigram()
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, shock(at, factor) if at else
                                                  (lambda i: 1.0))
    for step in range(start, steps + 1):
        loss = model.loss(data[(step - 1) * 8: step * 8])
        if nan_from is not None and step >= nan_from:
            loss = loss * math.nan
        opt.zero_grad()
        loss.backward()
        norm = grad_norm(model.parameters())  # a tensor: no host sync
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        with torch.no_grad():
            v = model.loss(val) if step % 20 == 0 else None
        sb.log(step, loss=loss.detach(), grad_norm=norm, lr=lr, val_loss=v)
        if on_step is not None:
            on_step(step, model, opt, sched)
        if sb.should_stop:
            return step
    return steps


def test_a_planted_lr_shock_is_logged_and_found_as_offline(tmp_path):
    with SpikebenchLoop(run_dir=tmp_path / "run") as sb:
        train(sb, 100, at=60)
    rows, summary = folder(tmp_path / "run")
    assert [r[M.STEP] for r in rows] == list(range(1, 101))
    assert [r[M.LR] for r in rows[58:62]] == pytest.approx([LR, LR * 100, LR * 100, LR])
    assert [r[M.STEP] for r in rows if M.VAL_LOSS in r] == [20, 40, 60, 80, 100]
    assert summary["status"] == "completed" and summary["steps"] == 100
    assert loss_onsets(summary) == offline_loss_onsets(tmp_path / "run") == [61]
    assert sb.spikes == 1 and not sb.should_stop  # logged only


def test_the_sweeps_prune_stops_the_loop(tmp_path, monkeypatch):
    prune = tmp_path / "prune"
    monkeypatch.setenv(context.PRUNE_FILE, str(prune))

    def touch_at_10(step, *_):
        if step == 10:
            prune.touch()

    with SpikebenchLoop(run_dir=tmp_path / "run", sync_every=1) as sb:
        last = train(sb, 60, on_step=touch_at_10)
    assert last == 11 and sb.stop_reason == "pruned"  # seen at the next step's log
    rows, summary = folder(tmp_path / "run")
    assert summary["status"] == "pruned" and summary["steps"] == 11


@pytest.mark.parametrize("stop", [True, False])
def test_a_non_finite_loss_stops_the_loop_unless_asked_not_to(tmp_path, stop):
    with SpikebenchLoop(run_dir=tmp_path / "run", stop_on_divergence=stop) as sb:
        last = train(sb, 40, nan_from=15)
    summary = folder(tmp_path / "run")[1]
    assert summary["status"] == "diverged" and summary["diverged_step"] == 15
    # Tensors are read back every sync_every (10) steps: the stop comes at the read-back.
    assert last == 20 if stop else last == 40


def test_a_checkpoint_and_resume_give_the_uninterrupted_runs_log(tmp_path):
    """Checkpoint at step 30 (the state goes in the loop's own torch.save), die at 37,
    resume from the checkpoint: the log is the uninterrupted run's, row for row."""
    ckpt = tmp_path / "ckpt.pt"

    class Killed(Exception):
        pass

    def save_30_die_37(step, model, opt, sched):
        if step == 30:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "spikebench": sb.state_dict()}, ckpt)
        if step == 37:
            raise Killed

    with pytest.raises(Killed):
        with SpikebenchLoop(run_dir=tmp_path / "run") as sb:
            train(sb, 80, at=50, on_step=save_30_die_37)
    assert not (tmp_path / "run" / "summary.json").exists()  # left for the resume

    state = torch.load(ckpt, weights_only=True)
    model = Bigram()
    model.load_state_dict(state["model"])
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    opt.load_state_dict(state["opt"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, shock(50))
    sched.load_state_dict(state["sched"])
    with SpikebenchLoop(run_dir=tmp_path / "run") as sb:
        sb.load_state_dict(state["spikebench"])
        assert sb.state_dict()["run"]["monitor"] == state["spikebench"]["run"]["monitor"]
        train(sb, 80, start=31, model=model, opt=opt, sched=sched)

    with SpikebenchLoop(run_dir=tmp_path / "straight") as straight:
        train(straight, 80, at=50)
    rows, summary = folder(tmp_path / "run")
    expected_rows, expected = folder(tmp_path / "straight")

    def same(rs):
        return [{k: v for k, v in r.items() if k != M.ELAPSED_S} for r in rs]

    assert same(rows) == same(expected_rows)  # steps 1..80 once each, the same values
    assert loss_onsets(summary) == loss_onsets(expected) == [51]
    for key in ("status", "steps", "evals", "best_val_loss"):
        assert summary[key] == expected[key]
    assert summary["spikes"]["events"] == expected["spikes"]["events"]


def test_the_run_feeds_the_prometheus_endpoint(tmp_path, capsys):
    pytest.importorskip("prometheus_client")
    with SpikebenchLoop(run_dir=tmp_path / "run", metrics_port=0, sync_every=1) as sb:
        train(sb, 5)
        port = re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics",
                         capsys.readouterr().err).group(1)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    step = re.search(rb'^spikebench_step\{[^}]*\} (\S+)$', text, re.MULTILINE)
    assert step and float(step.group(1)) == 5
    assert re.search(rb"^spikebench_train_loss\{", text, re.MULTILINE)


def test_a_given_run_and_a_loop_finished_without_steps(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "given", sync_every=1)
    with SpikebenchLoop(run) as sb:
        sb.log(1, loss=3.0)
    assert run.status == "completed" and sb.run is run
    with SpikebenchLoop(run_dir=tmp_path / "never") as sb:
        pass
    assert not (tmp_path / "never").exists()  # no step, no run folder
    with pytest.raises(UserError, match="not both"):
        SpikebenchLoop(run, gap=3)


def test_importing_spikebench_imports_no_framework_and_a_missing_one_is_one_line():
    code = ("import sys, spikebench, spikebench.integrations, spikebench.integrations.loop\n"
            "bad = [m for m in ('transformers', 'lightning') if m in sys.modules]\n"
            "assert not bad, bad\n"
            "sys.modules['transformers'] = sys.modules['lightning'] = None  # not installed\n"
            "for name in ('hf', 'lightning'):\n"
            "    try:\n"
            "        __import__('spikebench.integrations.' + name)\n"
            "    except ImportError as e:\n"
            "        print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "spikebench.integrations.hf needs transformers: pip install 'spikebench[hf]'",
        "spikebench.integrations.lightning needs lightning: "
        "pip install 'spikebench[lightning]'"]


def test_state_dicts_are_plain_json(tmp_path):
    with SpikebenchLoop(run_dir=tmp_path / "run") as sb:
        for step in range(1, 16):  # rows 11-15 pending (tensors) at the state
            sb.log(step, loss=torch.tensor(3.0 - 0.01 * step), grad_norm=torch.tensor(1.0))
        sb.hold(16, loss=torch.tensor(math.inf))
        state = sb.state_dict()
        text = json.dumps(state, allow_nan=False)
        assert state["run"]["log"].count("\n") == 10 and len(state["run"]["pending"]) == 5
        assert state["held"] == [16, {"loss": "inf"}]
    other = SpikebenchLoop(run_dir=tmp_path / "other")
    other.load_state_dict(json.loads(text))
    assert other.state_dict()["held"] == [16, {"loss": "inf"}]
    summary = other.finish()
    assert summary["status"] == "diverged" and summary["diverged_step"] == 16
    assert [r[M.STEP] for r in folder(tmp_path / "other")[0]] == list(range(1, 17))
