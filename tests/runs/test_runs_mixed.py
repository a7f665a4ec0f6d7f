"""Folders that hold more than one run, and logs followed as they grow: every log read or
named as skipped, TensorBoard event files merged only as TensorBoard shows one run, a
trial's log checked against its budget, and the tailer's records those of the whole read."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from spikebench import metrics as M
from spikebench.cli import main
from spikebench.runs import read_runs
from spikebench.runs.discover import discover
from spikebench.runs.tail import Tail


def _tb(folder: Path, values, suffix: str = "") -> None:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(folder), filename_suffix=suffix)
    for s, v in values:
        w.add_scalar("train/loss", v, s)
    w.close()
    time.sleep(1.05)  # event files are named by the second they were opened


def _onsets(run) -> list[int]:
    from spikebench.runs.score import score_run

    return [e["onset"] for e in score_run(run)["events"] if e["metric"] == "loss"]


def test_two_runs_in_one_tensorboard_folder_are_read_apart(tmp_path):
    pytest.importorskip("tensorboard")
    d = tmp_path / "tb"
    _tb(d, [(s, 9.0 if s == 122 else 3 - s / 100) for s in range(201)], ".hf")
    _tb(d, [(s, 3.5 - s / 100) for s in range(201)], ".loop")
    runs = read_runs(d)
    assert len(runs) == 2 and all(len(r.records) == 201 for r in runs)
    assert sorted(_onsets(r) for r in runs) == [[], [122]]  # the HF run's spike kept
    assert all("read apart" in r.note for r in runs)


def test_a_resumed_tensorboard_run_is_one_run_and_says_what_it_dropped(tmp_path):
    pytest.importorskip("tensorboard")
    d = tmp_path / "tb"
    _tb(d, [(s, 3 - s / 100) for s in range(150)])
    _tb(d, [(s, 3.01 - s / 100) for s in range(100, 200)])
    (run,) = read_runs(d)
    assert [r[M.STEP] for r in run.records] == list(range(200))
    assert run.records[120][M.TRAIN_LOSS] == pytest.approx(3.01 - 1.2)  # the resumed file's
    assert "resumes at step 100" in run.note and "100 to 149 dropped" in run.note


def test_logs_beside_a_trainer_state_are_runs_of_their_own(tmp_path, hf_out, capsys):
    # Issue 44: a folder with a trainer_state.json and other logs was read as the HF run only.
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copy2(hf_out / "run-a" / "checkpoint-50" / "trainer_state.json", d)
    shutil.copy2(hf_out / "wandb" / "run-b-history.csv", d)
    shutil.copy2(hf_out / "long" / "scalars.csv", d)
    (d / "plain.jsonl").write_text("".join(json.dumps({"step": s, "loss": 3 - s / 90}) + "\n"
                                           for s in range(90)))
    found = discover(d)
    assert sorted(r.format for r in found.runs) == ["hf-trainer-state", "jsonl", "long-csv",
                                                   "wandb-history"]
    assert main(["spikes", str(d)]) == 0
    out = capsys.readouterr().out
    assert "4 runs" in out and "plain.jsonl" in out and "run-b-history.csv" in out


def test_an_hf_folders_own_logs_and_a_spikebench_runs_trainer_log_are_named(tmp_path, hf_out):
    d = tmp_path / "d"
    shutil.copytree(hf_out / "run-a", d / "hf")
    from spikebench.api.run import Run

    with Run(params={}, seed=0, run_dir=d / "api") as run:
        for s in range(1, 30):
            run.log(s, loss=3 - s / 50)
    (d / "api" / "log.csv").write_text("step,loss\n1,3.0\n")
    found = discover(d)
    assert sorted(r.name for r in found.runs) == ["api", "hf"]
    said = "\n".join(found.skipped)
    assert "checkpoint-20" in said and "a checkpoint of the same run" in said
    assert "runs (" in said and "the same run" in said
    assert "log.csv (the log of the spikebench run beside it" in said


@pytest.mark.parametrize("kind", ["csv", "jsonl", "tb"])
def test_the_tail_gives_the_whole_reads_records(tmp_path, kind):
    if kind == "tb":
        pytest.importorskip("tensorboard")
    values = [(s, 8.0 if s == 40 else 3 - s / 100) for s in range(60)]
    path = tmp_path / {"csv": "log.csv", "jsonl": "log.jsonl", "tb": "tb"}[kind]
    tail, got = Tail(path), []
    if kind == "tb":
        from torch.utils.tensorboard import SummaryWriter

        w = SummaryWriter(str(path))
        for i, (s, v) in enumerate(values):
            w.add_scalar("loss", v, s)
            if i % 20 == 19:
                w.flush()
                tail.read_at = 0.0  # read again now, not after REREAD_S
                got += tail.poll()
        w.close()
    else:
        with path.open("w") as f:
            f.write("step,loss\n" if kind == "csv" else "")
            for i, (s, v) in enumerate(values):
                f.write(f"{s},{v}\n" if kind == "csv" else json.dumps({"step": s, "loss": v})
                        + "\n")
                f.flush()
                if i % 9 == 0:
                    got += tail.poll()
    got += tail.poll(final=True)
    assert got == read_runs(path)[0].records and not tail.ended


def _job(tmp: Path, command: list[str], log: str, steps: int) -> Path:
    job = {"trainer": {"command": command, "log": log, "env": {}, "grace_s": 5,
                       "steps": steps},
           "params": {}, "seeds": [0],
           "spikes": {"detector": "default", "gap": 5, "target_loss": 0.5}}
    tmp.mkdir()
    (tmp / "trial.json").write_text(json.dumps(job))
    return tmp


def _csv(path: Path, last: int) -> Path:
    path.write_text("step,loss\n" + "".join(f"{s},{3 - s / 100}\n" for s in range(1, last + 1)))
    return path


@pytest.mark.parametrize("last,budget,said", [
    (3, 10, "ends at step 3, short of the budget of 10 steps"),
    (50, 10, "reaches step 50, past the budget of 10 steps"),
])
def test_a_trials_log_is_checked_against_its_budget(tmp_path, capsys, last, budget, said):
    from spikebench.sweep.command import run

    log = _csv(tmp_path / "log.csv", last)
    trial = _job(tmp_path / "t", ["cp", str(log), "{run_dir}/"], "log.csv", budget)
    assert run(trial) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def test_a_tensorboard_trainer_is_a_command_trial(tmp_path):
    # Issue 44: log = "tb" failed every seed with "wrote neither summary.json ... nor its log".
    pytest.importorskip("tensorboard")
    script = tmp_path / "train.py"
    script.write_text(
        "from torch.utils.tensorboard import SummaryWriter\n"
        "w = SummaryWriter('tb')\n"
        "for s in range(1, 81):\n"
        "    w.add_scalar('train/loss', 8.0 if s == 60 else 3 - s / 100, s)\n"
        "w.close()\n")
    import sys

    from spikebench.sweep.command import run

    trial = _job(tmp_path / "t", [sys.executable, str(script)], "tb", 80)
    assert run(trial) == 0
    summary = json.loads((trial / "seed-0" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["spikes"]["steps"] == 80
    assert [e["onset"] for e in summary["spikes"]["events"]
            if e["metric"] == M.TRAIN_LOSS] == [60]


def test_a_cut_error_ends_at_a_word():
    from spikebench.sweep.driver import clip

    msg = ("seed 0: exited 0 but wrote neither summary.json (spikebench.init) nor its log "
           "'tb'")
    assert clip(msg).endswith("nor its log…") and len(clip(msg)) <= 80
    assert clip("short") == "short"


def test_compare_names_what_it_did_not_read(tmp_path, capsys):
    # Issue 45: a ';'-separated CSV, a results table and repeated steps changed a group
    # unsaid.
    for group in ("a", "b"):
        for seed in (0, 1):
            rows = [{"step": s, "loss": 3 - s / 100 + seed / 10} for s in range(60)]
            if group == "a" and seed == 0:
                rows.insert(30, {"step": 10, "loss": 2.95})  # a restart logs step 10 again
            (tmp_path / group).mkdir(exist_ok=True)
            (tmp_path / group / f"s{seed}.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "a" / "semi.csv").write_text("step;loss\n1;2.0\n")
    (tmp_path / "a" / "results.csv").write_text("arm,final\nx,1\n")
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                 "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "semi.csv (no step column" in err and "results.csv" in err
    assert "s0.jsonl: 1 step(s) logged more than once" in err


def test_a_damaged_event_file_and_a_version_without_its_log_are_said(tmp_path):
    # Issue 45: a damaged TensorBoard file ended its run early unsaid; a Lightning version
    # folder without metrics.csv was passed over unsaid.
    pytest.importorskip("tensorboard")
    d = tmp_path / "runs"
    _tb(d / "tb", [(s, 3 - s / 100) for s in range(200)])
    f = next((d / "tb").glob("*tfevents*"))
    data = bytearray(f.read_bytes())
    data[len(data) // 2:len(data) // 2 + 8] = b"\xff" * 8
    f.write_bytes(bytes(data))
    (d / "version_1").mkdir()
    (d / "version_1" / "hparams.yaml").write_text("lr: 0.1\n")
    found = discover(d)
    (run,) = found.runs
    assert len(run.records) < 200 and "cut or damaged at byte" in run.note
    assert any("version_1 (hparams.yaml and no log" in s for s in found.skipped)
