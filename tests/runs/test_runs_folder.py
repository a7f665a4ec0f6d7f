"""A folder of runs in every format: one line (or JSON object) per run, names unique, files
that are no training log skipped and said; bad input one line."""

import json
import os
import shutil

import pytest
import runs_writers as W
from fuzzkit import refused

from spikebench.cli import main
from spikebench.runs import read_runs
from spikebench.spikes.synthetic import generate


@pytest.fixture(scope="module")
def folder(tmp_path_factory, hf_out, pl_run, tb_run):
    """HF, Lightning, TensorBoard, MLflow, W&B, long-CSV runs, a plain CSV, a spikebench
    run folder, and a results table that is no log."""
    from spikebench.api.run import Run

    d = tmp_path_factory.mktemp("runs")
    shutil.copytree(hf_out, d / "hf")
    shutil.copytree(pl_run.parent.parent, d / "pl")
    shutil.copytree(tb_run, d / "tb" / "adamw")
    lg = generate(1, 400, early_jump=False)
    lg.to_frame().to_csv(d / "plain.csv", index=False)
    with Run(params={"lr": 3e-3, "optim": {"clip": 1.0}}, seed=4, run_dir=d / "api") as run:
        for s, v in enumerate(W.curve(100, 50)):
            run.log(s, loss=float(v))
    (d / "trials.csv").write_text("trial,arm,final_loss\n0,baseline,3.1\n")
    return d, lg


EXPECTED = {  # run -> (format, loss onsets)
    "api": ("spikebench", [50]),
    "hf/long/scalars.csv": ("long-csv", [30]),
    "hf/mlruns/tiny-gpt/run-a": ("mlflow", [30]),
    "hf/mlruns/tiny-gpt/run-b": ("mlflow", [38]),
    "hf/run-a": ("hf-trainer-state", [30]),
    "hf/run-b": ("hf-trainer-state", [38]),
    "hf/wandb/chart-export.csv:run-a": ("wandb-chart", [30]),
    "hf/wandb/chart-export.csv:run-b": ("wandb-chart", [38]),
    "hf/wandb/run-a-history.csv": ("wandb-history", [30]),
    "hf/wandb/run-a-history.jsonl": ("wandb-history", [30]),
    "hf/wandb/run-b-history.csv": ("wandb-history", [38]),
    "hf/wandb/run-b-history.jsonl": ("wandb-history", [38]),
    "pl/lightning_logs/version_0": ("lightning-csv", [W.PL_SPIKE]),
    "tb/adamw": ("tensorboard", [W.TB_SPIKE]),
}


def test_every_run_once_by_name_with_its_onsets(folder, capsys):
    d, lg = folder
    assert main(["spikes", str(d), "--json"]) == 0
    out, err = capsys.readouterr()
    rows = {r["run"]: r for r in map(json.loads, out.splitlines())}
    plain = rows.pop("plain.csv")
    assert plain["format"] == "csv" and plain["steps"] == 400
    assert {e["onset"] for e in plain["events"] if e["metric"] == "loss"} >= {
        s.onset for s in lg.spikes}
    assert {name: (r["format"], [e["onset"] for e in r["events"] if e["metric"] == "loss"])
            for name, r in rows.items()} == EXPECTED
    # The results table is no log: skipped, and said so on stderr.
    assert "skipped" in err and "trials.csv (no step column" in err
    # Parameters and seeds from each run's own metadata.
    assert rows["api"]["params"] == {"lr": 3e-3, "optim.clip": 1.0} and rows["api"]["seed"] == 4
    assert rows["tb/adamw"]["seed"] == 3 and rows["pl/lightning_logs/version_0"]["seed"] == 7
    assert rows["hf/run-b"]["seed"] == 1


def test_the_table_one_line_per_run_and_time_to_target(folder, capsys):
    d, _ = folder
    assert main(["spikes", str(d / "hf"), "--target-loss", "1.2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:8] == ["run", "format", "steps", "step", "column", "loss", "column",
                                    "events"]
    assert "step at loss <= 1.2" in lines[0]
    body = {line.split()[0]: line.split() for line in lines[2:] if line.split()
            and not line.startswith(("note:",)) and "runs," not in line}
    assert len(body) == 11  # hf/: 2 HF runs, 2 MLflow, 2 in the chart, 4 histories, long
    assert body["run-a"][1:6] == ["hf-trainer-state", "50", "step", "loss", "1"]
    assert body["run-a"][-2:] == ["40", "(val)"]  # the first evaluation (40, 50) at or below
    assert body["wandb/chart-export.csv:run-a"][-1] == "(train)"  # no validation loss there
    assert any(line.startswith("note: wandb/run-a-history.csv: step column") for line in lines)


def test_read_runs_gives_unique_names(folder):
    d, _ = folder
    runs = read_runs(d)
    assert len({r.name for r in runs}) == len(runs) == len(EXPECTED) + 1
    for r in runs:
        assert r.records and all(a["step"] < b["step"] for a, b in zip(
            r.records, r.records[1:], strict=False))


def test_names_are_unique_and_printable(tmp_path):
    (tmp_path / "x.csv").write_text('"Step","r.csv - loss","\x1b[2Jr - loss"\n0,1,2\n1,1,2\n')
    (tmp_path / "x.csv:r.csv").write_text("step,loss\n0,1\n1,1\n")
    names = sorted(r.name for r in read_runs(tmp_path))
    assert names == ["x.csv:\\x1b[2Jr", "x.csv:r.csv", "x.csv:r.csv (2)"]


def test_a_plot_of_many_runs_is_refused(folder, capsys, tmp_path):
    d, _ = folder
    line = refused(["spikes", str(d / "hf" / "wandb"), "--plot", str(tmp_path / "p.png")],
                   tmp_path, capsys)
    assert "draws one run" in line and "holds 6 runs" in line


def test_an_empty_folder_and_one_of_no_logs(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    line = refused(["spikes", "empty"], tmp_path, capsys)
    assert "is a directory with no training runs in it" in line
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "t.csv").write_text("a,b\n1,2\n")
    line = refused(["spikes", "notes"], tmp_path, capsys)
    assert "no training runs" in line and "t.csv (no step column" in line


def test_a_bad_log_in_a_folder_stops_with_its_name(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "ok.csv").write_text("step,loss\n0,1.0\n1,0.9\n")
    (tmp_path / "runs" / "bad.csv").write_text("step,loss\n0,1.0\n1,abc\n")
    line = refused(["spikes", "runs"], tmp_path, capsys)
    assert "bad.csv: column 'loss', row 2: non-numeric value 'abc'" in line


def test_fifos_and_links_in_a_folder_are_skipped_not_opened(tmp_path, capsys):
    d = tmp_path / "runs"
    d.mkdir()
    (d / "ok.csv").write_text("step,loss\n0,1.0\n1,0.9\n2,0.8\n")
    os.mkfifo(d / "pipe.csv")
    (d / "zero.jsonl").symlink_to("/dev/zero")
    (d / "loop").symlink_to(d)  # a link to a folder is not followed
    from fuzzkit import deadline

    with deadline():
        assert main(["spikes", str(d), "--json"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["run"] for line in out.splitlines()] == ["ok.csv"]
    assert "pipe.csv (not a regular file)" in err and "zero.jsonl (not a regular file)" in err
