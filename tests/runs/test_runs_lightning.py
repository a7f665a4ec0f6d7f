"""Lightning's CSVLogger, from a real Lightning run with one batch of garbage labels."""

import json

import runs_writers as W

from spikebench.cli import main
from spikebench.runs import read_runs


def test_train_loss_step_is_the_loss_without_metric(capsys, pl_run):
    # Failure 6: the train_loss_step column needed --metric.
    for path in (pl_run / "metrics.csv", pl_run):
        assert main(["spikes", str(path), "--json"]) == 0, capsys.readouterr().err
        res = json.loads(capsys.readouterr().out)
        assert [e["onset"] for e in res["events"]][:1] == [W.PL_SPIKE]
        assert res["steps"] == 64


def test_hparams_and_merged_rows(pl_run):
    (run,) = read_runs(pl_run)
    assert run.format == "lightning-csv" and run.name == "version_0"
    assert run.loss_column == "train_loss_step" and run.step_column == "step"
    assert run.params == {"lr": 0.01, "hidden": 32, "seed": 7} and run.seed == 7
    # Validation rows (written apart) join their step; the epoch mean is no loss.
    assert [r["step"] for r in run.records if "val/loss" in r] == [31, 63]
    assert all("train/loss" in r for r in run.records)
