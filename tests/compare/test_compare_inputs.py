"""What ``spikebench compare`` may read and write (issue 45): an output among its inputs,
overlapping inputs, a report it did not write, a study name that is a report file, and
runs it could not read, named in the report and on stderr; a final validation loss logged
one step past the last training step; ``--max-step`` too small for a comparison."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from fuzzkit import refused, snapshot

from spikebench import metrics as M
from spikebench.cli import main
from spikebench.compare.align import align
from spikebench.runs.model import RunLog


def write_csv(path: Path, seed: int, steps: int = 60, val: bool = True) -> None:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["step,loss,val_loss"]
    for s in range(steps + 1):
        v = f"{2.5 + 3 * math.exp(-s / 20):.4f}" if val and s and s % 20 == 0 else ""
        lines.append(f"{s},{2.5 + 3 * math.exp(-s / 20) + rng.gauss(0, .02):.4f},{v}")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def box(tmp_path):
    """runs/a and runs/b, two runs each, as the working directory's inputs."""
    for g in "ab":
        for k in range(2):
            write_csv(tmp_path / "runs" / g / f"r{k}.csv", k + 10 * (g == "b"))
    return tmp_path


@pytest.mark.parametrize("argv,expect", [
    (["runs/a", "runs/b", "--out", "runs/b"], "--out runs/b: is the input runs/b"),
    (["runs/a", "runs/b", "--out", "runs/b/x"], "--out runs/b/x: is inside the input runs/b"),
    (["runs/a", "runs/b", "--out", "runs"], "--out runs: holds the input runs/a"),
    (["runs/a", "runs/b", "--out", "."], "--out .: holds the input runs/a"),
    (["runs/a", "runs/b", "--out", ""], "--out '': give a folder"),
    (["runs/a", "runs/b", "--out", " "], "--out ' ': give a folder"),
    (["runs/a", "runs/b", "--out", "o", "--name", "report.md"], "--name report.md: is the "
                                                                 "study's folder"),
    (["runs/a", "runs/b", "--out", "o", "--name", "curves.PNG"], "--name curves.PNG"),
    (["", "runs/b"], "PATH '': give a run's file or folder"),
    (["runs", "runs/a"], "runs/a: is inside runs, also given"),
    (["runs/a", "runs"], "runs/a: is inside runs, also given"),
    (["runs/a/r0.csv", "runs/a"], "runs/a/r0.csv: is inside runs/a"),
    (["runs/a", "runs/a/"], "runs/a/: is runs/a again (the same folder)"),
    (["runs/a", "./runs/a", "runs/b"], "./runs/a: is runs/a again"),
    (["runs/a", "link", "runs/b"], "link: is runs/a again"),
    (["runs/a", "runs/b", "--out", "o", "--max-step", "0"],
     "--max-step 0: leaves runs/a/r0.csv 1 logged training step(s)"),
    (["runs/a", "runs/b", "--out", "o", "--metric", "nope"],
     "--metric nope: no column 'nope' in any of the 2 log(s) under runs/a"),
    (["runs/a", "runs/b", "--out", "o", "--step", "nope"], "--step nope: no column 'nope'"),
    (["runs/a", "runs/b", "--out", "o", "--grad-metric", "gn"], "--grad-metric gn: no column"),
])
def test_refused_in_one_line_before_anything_is_written(box, capsys, argv, expect):
    (box / "link").symlink_to(box / "runs" / "a")
    refused(["compare", *argv], box, capsys, expect=expect)


def test_a_report_it_did_not_write_is_not_overwritten(box, capsys):
    (box / "mine").mkdir()
    (box / "mine" / "report.md").write_text("my notes")
    refused(["compare", "runs/a", "runs/b", "--out", "mine"], box, capsys,
            expect="--out mine: holds report.md, which spikebench compare did not write")
    (box / "file").write_text("x")
    refused(["compare", "runs/a", "runs/b", "--out", "file"], box, capsys,
            expect="--out file: not a folder")
    refused(["compare", "runs/a", "runs/b", "--out", "file/x"], box, capsys,
            expect=f"--out file/x: {box / 'file'} is not a folder")


def test_runs_not_read_are_named_on_stderr_and_in_the_report(box, capsys):
    a = box / "runs" / "a"
    (a / "semi.csv").write_text("step;loss\n1;2\n2;3\n")
    (a / "results.csv").write_text("step,accuracy\n1,0.5\n")
    (a / "nostep.csv").write_text("loss,acc\n1,2\n")
    (a / "lightning_logs" / "version_0").mkdir(parents=True)
    (a / "lightning_logs" / "version_0" / "hparams.yaml").write_text("lr: 1\n")
    # A restarted run: steps 20-25 logged again; every run then ends at step 60.
    text = (a / "r1.csv").read_text().splitlines()
    (a / "r1.csv").write_text("\n".join(text[:27] + text[21:]) + "\n")
    before = snapshot(box / "runs")
    assert main(["compare", str(box / "runs" / "a"), str(box / "runs" / "b"),
                 "--out", str(box / "out")]) == 0
    out, err = capsys.readouterr()
    assert "4 runs in 2 groups" in out  # the two read of each path, none more, none less
    assert snapshot(box / "runs") == before
    md = (box / "out" / "report.md").read_text()
    for name, why in [("semi.csv", "its header reads as one column"),
                      ("results.csv", "no loss column"), ("nostep.csv", "no step column"),
                      ("version_0", "without its metrics.csv")]:
        line = next(x for x in err.splitlines() if name in x)
        assert line.startswith("spikebench compare: note: skipped") and why in line, line
        assert f"left out: {a / name if name != 'version_0' else a / 'lightning_logs' / name}" \
            in md and why in md, name
    assert "r1.csv: 6 step(s) logged more than once" in err
    assert "read: 6 step(s) logged more than once" in md


def _run(name: str, seed: int, *, final_val_at: int | None) -> RunLog:
    rng = random.Random(seed)
    records = [{M.STEP: s, M.TRAIN_LOSS: 2.5 + 3 * math.exp(-s / 30) + rng.gauss(0, .02)}
               for s in range(100)]
    if final_val_at is not None:  # Lightning's CSVLogger: the last evaluation at step 100
        records.append({M.STEP: final_val_at, M.VAL_LOSS: 2.6 + seed / 100})
    return RunLog(name=name, path=Path(f"/nonexistent/{name}"), format="lightning-csv",
                  records=records, step_column="step", loss_column="train_loss")


def test_a_validation_loss_one_step_past_the_last_training_step_is_read():
    aligned = align([_run(f"r{k}", k, final_val_at=100) for k in range(4)])
    assert aligned.loss == "val" and aligned.budget == 99
    p = aligned.runs["r2"]
    assert p.records[-1] == {M.STEP: 99, M.TRAIN_LOSS: p.records[-1][M.TRAIN_LOSS],
                             M.VAL_LOSS: 2.62}
    assert p.cut == ["the validation loss logged at step 100, after the last training "
                     "step, read as step 99's evaluation"]
    # Two intervals past the end it is no evaluation of this run: cut, and said.
    aligned = align([_run(f"r{k}", k, final_val_at=102) for k in range(4)])
    assert aligned.loss == "train" and "log no validation loss" in aligned.loss_note


def test_a_damaged_tensorboard_run_that_cuts_every_run_is_named(box, capsys):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    tb = box / "runs" / "a" / "tb"
    w = SummaryWriter(str(tb))
    for s in range(61):
        w.add_scalar("train/loss", 2.5 + 3 * math.exp(-s / 20), s)
    w.close()
    f = next(tb.glob("*tfevents*"))
    data = bytearray(f.read_bytes())
    data[len(data) // 2:len(data) // 2 + 8] = b"\xff" * 8  # a record's length destroyed
    f.write_bytes(bytes(data))
    assert main(["compare", str(box / "runs" / "a"), str(box / "runs" / "b"),
                 "--out", str(box / "out")]) == 0
    out, err = capsys.readouterr()
    assert "5 runs in 2 groups" in out
    note = next(x for x in err.splitlines() if ": tb: " in x)
    # Damage inside a record (its checksum) or to its framing: both said, with the file.
    why = note.split(": tb: ")[1]
    assert note.startswith("spikebench compare: note: ") and "tfevents" in why
    assert "is damaged: a record fails its checksum" in why or "cut or damaged at byte" in why
    md = (box / "out" / "report.md").read_text()
    assert "the last step of the shortest run, tb" in md and f"read: {why}" in md
