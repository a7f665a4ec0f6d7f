"""TensorBoard event files and run folders, written by torch's SummaryWriter."""

import json
import sys

import pytest
import runs_writers as W
from fuzzkit import refused

from spikebench.cli import main
from spikebench.runs import read_runs


def onsets(capsys, path, *extra):
    assert main(["spikes", str(path), "--json", *extra]) == 0, capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)
    return [e["onset"] for e in res["events"] if e["metric"] == "loss"], res


def test_an_event_file_and_its_folder_are_read(capsys, tb_run):
    # Failure 2: the file was refused with a UTF-8 decoding error, its folder with
    # "is a directory".
    (event_file,) = tb_run.glob("events.out.tfevents.*")
    for path in (event_file, tb_run):
        got, res = onsets(capsys, path)
        assert got == [W.TB_SPIKE] and res["steps"] == W.TB_STEPS


def test_a_renamed_event_file_is_known_by_its_content(tmp_path, capsys, tb_run):
    (event_file,) = tb_run.glob("events.out.tfevents.*")
    (tmp_path / "log.bin").write_bytes(event_file.read_bytes())
    assert onsets(capsys, tmp_path / "log.bin")[0] == [W.TB_SPIKE]


def test_add_hparams_subfolder_gives_the_parameters_not_a_run(tb_run):
    (run,) = read_runs(tb_run)
    assert run.format == "tensorboard" and run.loss_column == "Loss/train"
    assert run.params == {"lr": pytest.approx(1e-3), "seed": 3.0, "optimizer": "adamw"}
    assert run.seed == 3
    assert [r["step"] for r in run.records] == list(range(W.TB_STEPS))
    assert run.records[0]["optim/lr"] == pytest.approx(1e-4)
    assert run.records[W.TB_SPIKE]["train/loss"] == pytest.approx(
        W.curve(W.TB_STEPS, W.TB_SPIKE, 3)[W.TB_SPIKE], rel=1e-6)  # float32 as stored


def test_the_hf_trainer_s_tensorboard_tags(capsys, hf_out):
    got, res = onsets(capsys, hf_out / "run-a" / "runs" / "tb")
    assert got == [W.HF_SPIKES["run-a"]] and res["steps"] == W.HF_STEPS
    (run,) = read_runs(hf_out / "run-a" / "runs" / "tb")
    assert run.loss_column == "train/loss" and run.grad_column == "train/grad_norm"
    assert [r["step"] for r in run.records if "val/loss" in r] == [40, 50]


def test_a_folder_of_tensorboard_runs(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    W.tensorboard_run(tmp_path / "lr-1e-3", spike=40, seed=1)
    W.tensorboard_run(tmp_path / "lr-3e-3", spike=70, seed=2)
    assert main(["spikes", str(tmp_path), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["run"], [e["onset"] for e in r["events"] if e["metric"] == "loss"], r["seed"])
            for r in rows] == [("lr-1e-3", [40], 1), ("lr-3e-3", [70], 2)]


def test_no_loss_tag_lists_the_tags(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path / "run")) as w:
        for s in range(5):
            w.add_scalar("accuracy", 0.5, s)
            w.add_scalar("objective", 1.0, s)
    line = refused(["spikes", "run"], tmp_path, capsys)
    assert "no loss tag" in line and "'accuracy', 'objective'" in line and "--metric" in line
    assert main(["spikes", str(tmp_path / "run"), "--metric", "objective", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 5
    line = refused(["spikes", "run", "--metric", "objective", "--step", "epoch"], tmp_path,
                   capsys)
    assert "--step epoch" in line and "carry their own steps" in line


def test_a_file_that_only_looks_like_events(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"\x00\xff" * 100)
    line = refused(["spikes", "events.out.tfevents.1.host"], tmp_path, capsys)
    assert "no scalars" in line


def test_without_tensorboard_one_line_names_the_extra(tmp_path, capsys, monkeypatch):
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"\x00" * 64)
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing", None)
    line = refused(["spikes", "events.out.tfevents.1.host"], tmp_path, capsys)
    assert "pip install 'spikebench[tensorboard]'" in line
