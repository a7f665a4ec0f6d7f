"""Acting on an early warning: LowerLR, and the built-in loop's [warning] table (a real
gpt-tiny run with a planted LR shock; a run killed mid-way and resumed acts as one that
was not)."""

import json

import pytest

from spikebench import config as c
from spikebench import metrics as M
from spikebench.api.engine_warning import sinks_for
from spikebench.errors import UserError
from spikebench.responses import LowerLR
from spikebench.train.loop import train
from spikebench.train.sinks import Sink

TINY = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
        "data.batch_size=4", "data.max_bytes=200000", "train.eval_every=100",
        "train.eval_batches=1", "train.log_every=5", "train.threads=1",
        "train.progress=false", "train.steps=80", "schedule.kind=constant",
        # LR x30 at steps 25-26: the grad norm after it warns.
        "faults.lr_shock_at=0.3", "faults.lr_shock_factor=30", "faults.lr_shock_steps=2",
        "warning.signal=optim/grad_norm", "warning.window=16", "warning.threshold=6"]


def test_lower_lr_lowers_for_n_steps_and_a_warning_inside_extends_it():
    lower = LowerLR(factor=0.25, steps=10)
    assert lower.factor(5) == 1.0
    lower.warn(20)
    assert [lower.factor(s) for s in (20, 21, 30, 31)] == [1.0, 0.25, 0.25, 1.0]
    lower.warn(28)  # inside the stretch: it now ends at 38
    assert lower.factor(38) == 0.25 and lower.factor(39) == 1.0
    lower.warn(50)
    again = LowerLR(factor=0.25, steps=10)
    again.load_state_dict(json.loads(json.dumps(lower.state_dict())))
    assert again.summary() == lower.summary()
    assert again.summary()["lowered"] == [[21, 38], [51, 60]]
    for bad in ({"factor": 1.0}, {"factor": 0}, {"steps": 0}, {"steps": 2.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            LowerLR(**bad)


class _Kill(Sink):
    """Fails the run at a step's record: as a kill after the checkpoint before it."""

    def __init__(self, at):
        self.at = at

    def write(self, metrics):
        if metrics[M.STEP] == self.at:
            raise KeyboardInterrupt


def _rows(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_loop_lowers_the_lr_after_a_warning_and_a_resume_does_the_same(tmp_path):
    cfg = c.load(None, [*TINY, "warning.response=lower_lr", "warning.lr_steps=30",
                        "warning.lr_factor=0.5", "train.checkpoint_every=40"])
    summary = train(cfg, tmp_path / "whole", sinks=sinks_for(cfg))
    rows = _rows(tmp_path / "whole")
    first = summary["warnings"]["steps"][0]
    assert 25 <= first <= 27  # the shocked updates' grad norm
    lowered = [r[M.STEP] for r in rows if r[M.STEP] > 0 and r[M.LR] < cfg.optim.lr * 0.99]
    shocked = {25, 26}
    lowered = [s for s in lowered if s not in shocked]
    # From the step after the read-back that saw it (every 5 steps) to 30 after it.
    told = -(-first // 5) * 5
    last = summary["warnings"]["response"]["lowered"][-1][1]
    assert lowered == list(range(told + 1, last + 1)) and last >= first + 30
    assert [r[M.WARNINGS] for r in rows][-1] == summary["warnings"]["n"]
    # Killed at step 70 (its checkpoint: step 40, inside the stretch), then resumed.
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "cut", sinks=[*sinks_for(cfg), _Kill(70)])
    again = train(cfg, tmp_path / "cut", sinks=sinks_for(cfg), resume=True)
    cut = _rows(tmp_path / "cut")
    keys = (M.STEP, M.LR, M.TRAIN_LOSS, M.WARNINGS, M.WARNING_SCORE)
    assert [[r.get(k) for k in keys] for r in cut] == [[r.get(k) for k in keys] for r in rows]
    assert again["warnings"] == summary["warnings"]


def test_log_only_records_warnings_and_leaves_the_lr(tmp_path):
    cfg = c.load(None, TINY)
    summary = train(cfg, tmp_path / "r", sinks=sinks_for(cfg))
    assert summary["warnings"]["n"] >= 1 and summary["warnings"]["response"] == {"kind": "log"}
    rows = _rows(tmp_path / "r")
    assert {r[M.LR] for r in rows if r[M.STEP] not in (0, 25, 26)} == {cfg.optim.lr}


def test_a_warning_table_without_its_sink_is_refused_before_the_run_folder(tmp_path):
    cfg = c.load(None, TINY)
    with pytest.raises(UserError, match="gave no warning sink"):
        train(cfg, tmp_path / "r")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("over", "match"), [
    (["warning.response=lower_lr"], r"warning.signal = '': must name a logged metric"),
    (["warning.signal=/*"], r"warning.signal = '/\*': must name"),
    (["warning.window=3"], r"warning.window = 3: must be in \[4, inf\]"),
    (["warning.lr_factor=1.5"], r"warning.lr_factor = 1.5: must be in \(0, 1\)"),
    (["warning.scale=mad"], r"warning.scale = 'mad': must be one of 'noise', 'spread'"),
    (["warning.signal=optim/grad_norm", "warning.response=lower_lr", "train.nproc=2"],
     r'warning.response = "lower_lr": single-process runs only'),
])
def test_a_bad_warning_table_is_refused_at_load_in_one_line(over, match):
    with pytest.raises(UserError, match=match) as e:
        c.load(None, over)
    assert "\n" not in str(e.value)


def test_spikebench_train_hands_the_warning_table_to_the_loop(tmp_path):
    from spikebench.cli import main

    sets = [a for o in [*TINY, f"run.out_dir={tmp_path}", "run.name=r"] for a in ("--set", o)]
    assert main(["train", *sets]) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["warnings"]["n"] >= 1 and summary["warnings"]["rule"]["window"] == 16


def test_a_sweep_trial_hands_the_warning_table_to_the_loop(tmp_path):
    from spikebench.cli import main

    sweep = tmp_path / "warn.toml"
    sweep.write_text('[study]\nname = "warn"\nobjective = "multi"\ntarget_loss = 3.3\nseeds = [0]\ntrials = 1\n'
                     "\n[config]\n" + "\n".join(
                         f"{k} = {v if v[0].isdigit() or v in ('false', 'true') else repr(v)}"
                         for k, v in (o.split("=", 1) for o in TINY)) + "\n"
                     '\n[space]\n"schedule.min_lr_ratio" = { low = 0.1, high = 0.2 }\n')
    assert main(["sweep", str(sweep), "--results", str(tmp_path / "results")]) == 0
    summaries = list((tmp_path / "results").rglob("summary.json"))
    assert summaries and all(json.loads(p.read_text())["warnings"]["n"] >= 1
                             for p in summaries)
