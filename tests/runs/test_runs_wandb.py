"""W&B exports in the layout W&B writes them (the library is not installed): a run's history
as the HF Trainer's WandbCallback logs it, and a panel's CSV export of two runs."""

import json

import pandas as pd
import runs_writers as W
from fuzzkit import refused

from spikebench.cli import main
from spikebench.runs import read_runs


def loss_onsets(res):
    return [e["onset"] for e in res["events"] if e["metric"] == "loss"]


def spikes_json(capsys, *argv):
    assert main(["spikes", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_history_is_read_on_the_trainer_s_step_not_w_and_b_s(capsys, hf_out):
    # Failure 4: it was read on _step, every onset one step off (and more after each
    # evaluation row), with no way to choose the step column.
    spike = W.HF_SPIKES["run-a"]
    for ext in ("csv", "jsonl"):
        path = hf_out / "wandb" / f"run-a-history.{ext}"
        res, err = spikes_json(capsys, path)
        assert loss_onsets(res) == [spike] and res["steps"] == W.HF_STEPS
        assert "step column 'train/global_step', the trainer's step" in err  # said so
        assert main(["spikes", str(path)]) == 0
        assert "note: step column 'train/global_step'" in capsys.readouterr().out
        # --step chooses: W&B's own counter, one behind the trainer's step until the
        # evaluation row at step 40 (then level with it, and ahead after the next).
        res, _ = spikes_json(capsys, path, "--step", "_step")
        assert loss_onsets(res) == [spike - 1]


def test_history_records_and_config(tmp_path, hf_out):
    rows = pd.read_csv(hf_out / "wandb" / "run-a-history.csv", index_col=0)
    rows["config/seed"] = 7  # a config column, where an export has them
    rows.to_csv(tmp_path / "history.csv")
    (tmp_path / "config.yaml").write_text(
        "_wandb:\n  value:\n    cli_version: 0.19.0\nlr:\n  desc: null\n  value: 0.01\n")
    (run,) = read_runs(tmp_path / "history.csv")
    assert run.format == "wandb-history" and run.step_column == "train/global_step"
    assert run.params == {"lr": 0.01, "seed": 7} and run.seed == 7
    assert [r["step"] for r in run.records if "val/loss" in r] == [40, 50]


def test_a_chart_export_of_two_runs_reads_both_by_name(capsys, hf_out):
    # Failure 5: read as one run, silently analysing only the first.
    path = hf_out / "wandb" / "chart-export.csv"
    assert main(["spikes", str(path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["run"], loss_onsets(r), r["steps"]) for r in rows] == [
        ("run-a", [W.HF_SPIKES["run-a"]], W.HF_STEPS),
        ("run-b", [W.HF_SPIKES["run-b"]], W.HF_STEPS)]
    assert main(["spikes", str(path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2].split()[:3] == ["run-a", "wandb-chart", "50"]
    assert table[3].split()[:3] == ["run-b", "wandb-chart", "50"]
    # The old reader, asked directly, no longer takes the first run's column either.
    from spikebench.errors import UserError
    from spikebench.runs.text import read_log

    try:
        read_log(path)
        raise AssertionError("read_log took one run of two")
    except UserError as e:
        assert "several runs" in str(e) and "run-a - train/loss" in str(e)


def test_two_trainer_step_columns_are_refused_naming_both(tmp_path, capsys):
    (tmp_path / "h.csv").write_text("_step,step,global_step,loss\n0,1,2,3.0\n1,2,4,2.9\n")
    line = refused(["spikes", "h.csv"], tmp_path, capsys)
    assert "several step columns: 'step', 'global_step', '_step'" in line and "--step" in line
    res, _ = spikes_json(capsys, tmp_path / "h.csv", "--step", "global_step")
    assert res["steps"] == 2


def test_a_chart_run_without_a_loss_is_named(tmp_path, capsys):
    (tmp_path / "c.csv").write_text('"Step","a - train/loss","b - train/acc"\n1,2.0,0.5\n')
    line = refused(["spikes", "c.csv"], tmp_path, capsys)
    assert "run 'b'" in line and "no loss column" in line
