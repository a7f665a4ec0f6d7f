"""The public run API on a real torch loop: the run folder, the monitor, divergence,
pruning, the trial context, data-parallel ranks."""

import json
import math

import pytest
import torch

import spikebench
from spikebench import metrics as M
from spikebench.api import context
from spikebench.errors import UserError
from spikebench.scoring.run import summarize
from spikebench.scoring.trial import seed_values
from spikebench.spikes.monitor import SpikeMonitor


def _loss(step: int) -> float:
    # A decaying curve with a 3-nat spike at steps 150-152.
    return 5.0 * math.exp(-step / 80) + 2.5 + 0.02 * math.sin(step) + (
        3.0 if 150 <= step < 153 else 0.0)


def _train(run, steps=300, nan_at=None):
    decisions = {}
    for step in range(1, steps + 1):
        loss = torch.tensor(math.nan if step == nan_at else _loss(step))
        d = run.log(step, loss=loss, grad_norm=torch.tensor(1.0 + 0.01 * (step % 7)), lr=1e-3,
                    val_loss=_loss(step) if step % 50 == 0 else None, tokens=step * 64)
        if d is not spikebench.Decision.CONTINUE:
            decisions[step] = d
    return decisions


def test_a_run_writes_the_standard_folder_with_the_built_in_scores(tmp_path):
    with spikebench.init(run_dir=tmp_path / "r", target_loss=3.0, sync_every=5) as run:
        decisions = _train(run)
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"config.json", "meta.json", "metrics.jsonl", "summary.json"} <= files
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r[M.STEP] for r in rows] == list(range(1, 301))
    assert rows[149][M.TRAIN_LOSS] == pytest.approx(_loss(150))  # tensors read back as floats
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 300
    # The online monitor's events are those the offline monitor finds in the same rows.
    offline = SpikeMonitor("default", (M.TRAIN_LOSS, M.GRAD_NORM), gap=5)
    for r in rows:
        offline.update(r[M.STEP], r)
    offline.finish()
    expected = summarize(rows, target=3.0, tokens_key=M.TOKENS, seconds_key=M.ELAPSED_S,
                         events=offline.events)
    assert summary["spikes"]["n_events"] == expected["n_events"] == 1
    assert summary["spikes"]["events"] == expected["events"]
    # The spike at step 150 is told at the read-back that holds its first row (sync every
    # 5: step 150 itself), provisional; the rule's verdict 73 rows later confirms it.
    assert decisions == {150: spikebench.Decision.SPIKE}
    assert run.last_report.onset == 150 and run.last_report.state == "confirmed"
    assert run.last_report.decided == 150 + 73 and run.last_event.onset == 150
    told = {r[M.STEP]: (r[M.SPIKE_REPORTED], r[M.SPIKE_EVENTS]) for r in rows}
    assert told[149] == (0, 0) and told[150] == (1, 0) and told[222] == (1, 0)
    assert told[223] == (1, 1) and rows[-1][M.SPIKE_WITHDRAWN] == 0
    # A sweep scores it like a built-in trial's summary.
    v = seed_values(summary, steps=300, target=3.0)
    assert v["n_events"] == 1 and v["steps_to_target"] == summary["spikes"][
        "time_to_target"]["steps"]
    assert json.loads((tmp_path / "r" / "config.json").read_text())["trainer"] == "api"


def test_a_non_finite_loss_is_a_divergence(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=1)
    decisions = _train(run, steps=60, nan_at=40)
    assert decisions[40] is spikebench.Decision.DIVERGED
    summary = run.finish()
    assert summary["status"] == "diverged" and summary["diverged_step"] == 40
    assert summary["final_val_loss"] is None


def test_pruning_reaches_every_rank_through_the_sweeps_file(tmp_path, monkeypatch):
    prune = tmp_path / "prune"
    monkeypatch.setenv(context.PRUNE_FILE, str(prune))
    with pytest.raises(spikebench.TrialPruned):
        with spikebench.init(run_dir=tmp_path / "r", sync_every=1) as run:
            assert run.log(1, loss=3.0) is spikebench.Decision.CONTINUE
            prune.touch()
            assert run.log(2, loss=3.0) is spikebench.Decision.PRUNE and run.should_prune()
            run.check_prune()
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["status"] == "pruned"
    monkeypatch.setenv("RANK", "1")  # another rank: writes nothing, sees the prune
    other = spikebench.init(run_dir=tmp_path / "r1")
    assert other.log(1, loss=3.0) is spikebench.Decision.PRUNE
    assert other.finish() is None and not (tmp_path / "r1").exists()


def test_an_exception_in_the_loop_records_a_failed_run(tmp_path):
    with pytest.raises(RuntimeError):
        with spikebench.init(run_dir=tmp_path / "r") as run:
            run.log(1, loss=3.0)
            raise RuntimeError("out of memory")
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["status"] == "failed"


def test_the_sweeps_context_takes_precedence_over_the_arguments(tmp_path, monkeypatch):
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"lr": 3e-4, "warmup": 100}))
    monkeypatch.setenv(context.PARAMS_FILE, str(params))
    monkeypatch.setenv(context.RUN_DIR, str(tmp_path / "trial" / "seed-3"))
    monkeypatch.setenv(context.SEED, "3")
    monkeypatch.setenv(context.TARGET_LOSS, "2.9")
    run = spikebench.init(params={"lr": 1e-3, "clip": 1.0}, seed=0, run_dir=tmp_path / "x")
    assert run.params == {"lr": 3e-4, "warmup": 100, "clip": 1.0}
    assert run.seed == 3 and run.dir == tmp_path / "trial" / "seed-3"
    assert run.target_loss == 2.9
    run.finish()
    monkeypatch.setenv(context.SEED, "three")
    with pytest.raises(UserError, match="SPIKEBENCH_SEED='three': must be an integer"):
        spikebench.init()


def test_bad_calls_are_one_line_errors(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "r")
    run.log(5, loss=3.0)
    with pytest.raises(UserError, match="steps must be increasing"):
        run.log(5, loss=3.0)
    with pytest.raises(UserError, match="allowed: completed, diverged, failed, pruned"):
        run.finish("done")
    run.finish()
    with pytest.raises(UserError, match="already finished"):
        spikebench.init(run_dir=tmp_path / "r")
    with pytest.raises(UserError, match="not a spike rule"):
        spikebench.init(run_dir=tmp_path / "q", detector="magic")
