"""Long-format CSV (step, tag, value), as tbparse writes TensorBoard scalars: here the HF
Trainer's own tags, read back from its TensorBoard events."""

import csv
import json

import runs_writers as W
from fuzzkit import refused

from spikebench.cli import main
from spikebench.runs import read_runs


def test_the_loss_is_the_loss_tag_not_the_last_value_of_each_step(capsys, hf_out):
    # Failure 3: accepted silently, the "loss" taken from whatever tag came last at a step
    # (1.492 was train_steps_per_second).
    path = hf_out / "long" / "scalars.csv"
    rows = list(csv.DictReader(path.open()))
    assert {"train/loss", "train/train_steps_per_second"} <= {r["tag"] for r in rows}
    assert main(["spikes", str(path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [e["onset"] for e in res["events"] if e["metric"] == "loss"] == [
        W.HF_SPIKES["run-a"]]
    (run,) = read_runs(path)
    assert run.format == "long-csv" and run.loss_column == "train/loss"
    loss = {int(r["step"]): float(r["value"]) for r in rows if r["tag"] == "train/loss"}
    assert {r["step"]: r["train/loss"] for r in run.records} == loss
    assert run.grad_column == "train/grad_norm"


def test_two_loss_tags_are_refused_naming_both(tmp_path, capsys):
    (tmp_path / "l.csv").write_text("step,tag,value\n" + "".join(
        f"{s},loss,{3 - s / 10}\n{s},train/loss,{3 - s / 20}\n{s},lr,0.1\n" for s in range(5)))
    line = refused(["spikes", "l.csv"], tmp_path, capsys)
    assert "several loss tags: 'loss', 'train/loss'" in line and "--metric" in line
    assert main(["spikes", str(tmp_path / "l.csv"), "--metric", "train/loss", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 5


def test_no_loss_tag_lists_the_tags(tmp_path, capsys):
    (tmp_path / "l.csv").write_text("step,tag,value\n0,acc,0.5\n0,lr,0.1\n")
    line = refused(["spikes", "l.csv"], tmp_path, capsys)
    assert "no loss tag" in line and "'acc', 'lr'" in line


def test_a_run_column_gives_each_run_by_name(tmp_path, capsys):
    lines = ["wall_time,step,tag,value,dir_name"]
    for run, spike in (("seed-0", 30), ("seed-1", 45)):
        for s, v in enumerate(W.curve(80, spike)):
            lines.append(f"0.0,{s},Loss/train,{v},{run}")
    (tmp_path / "runs.csv").write_text("\n".join(lines) + "\n")
    assert main(["spikes", str(tmp_path / "runs.csv"), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["run"], [e["onset"] for e in r["events"]]) for r in rows] == [
        ("seed-0", [30]), ("seed-1", [45])]


def test_a_bad_value_names_its_row(tmp_path, capsys):
    (tmp_path / "l.csv").write_text("step,tag,value\n0,loss,1.0\n1,loss,oops\n")
    line = refused(["spikes", "l.csv"], tmp_path, capsys)
    assert "column 'value', row 2: non-numeric value 'oops'" in line
