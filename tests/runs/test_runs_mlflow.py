"""MLflow's file store, written in its layout as the HF Trainer's MLflowCallback logs to it
(MLflow is not installed)."""

import json
import shutil

import runs_writers as W
from fuzzkit import refused

from spikebench.cli import main
from spikebench.runs import read_runs


def test_every_run_by_experiment_and_run_name(capsys, hf_out):
    assert main(["spikes", str(hf_out / "mlruns"), "--json"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["run"], [e["onset"] for e in r["events"] if e["metric"] == "loss"], r["seed"])
            for r in rows] == [("tiny-gpt/run-a", [W.HF_SPIKES["run-a"]], 0),
                               ("tiny-gpt/run-b", [W.HF_SPIKES["run-b"]], 1)]
    # The Trainer logs its mean train_loss once, at the end: a summary, not the series.
    assert rows[0]["loss_column"] == "loss" and "'train_loss' ignored" in rows[0]["note"]
    (run, _) = read_runs(hf_out / "mlruns")
    assert run.params["learning_rate"] == 0.01 and run.params["n_embd"] == 32
    assert run.params["lr_scheduler_type"] == "linear"
    assert [r["step"] for r in run.records if "val/loss" in r] == [40, 50]


def test_a_deleted_run_is_skipped_and_said(tmp_path, capsys, hf_out):
    shutil.copytree(hf_out / "mlruns", tmp_path / "mlruns")
    (run_b,) = [p for p in (tmp_path / "mlruns" / "1").iterdir()
                if (p / "tags" / "mlflow.runName").is_file()
                and (p / "tags" / "mlflow.runName").read_text() == "run-b"]
    meta = run_b / "meta.yaml"
    meta.write_text(meta.read_text().replace("lifecycle_stage: active",
                                             "lifecycle_stage: deleted"))
    assert main(["spikes", str(tmp_path / "mlruns"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["run"] for line in out.splitlines()] == ["tiny-gpt/run-a"]
    assert "a deleted MLflow run" in err


def test_a_damaged_metric_line_is_one_line(tmp_path, capsys, hf_out):
    shutil.copytree(hf_out / "mlruns", tmp_path / "mlruns")
    (loss,) = list((tmp_path / "mlruns").glob("1/*/metrics/loss"))[:1]
    with loss.open("a") as f:
        f.write("1700000000000 oops 51\n")
    line = refused(["spikes", "mlruns"], tmp_path, capsys)
    assert "metrics/loss: line 51" in line and "'1700000000000 oops 51'" in line
