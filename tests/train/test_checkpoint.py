"""Exact checkpoint and resume, tested for real: a run killed with SIGKILL mid-way and
resumed must log every row an uninterrupted run logs, bit for bit (timing columns aside)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from spikebench import config as c
from spikebench import metrics as M
from spikebench.cli import main
from spikebench.train import checkpoint
from spikebench.train.loop import train

# Quick, with dropout (so the RNG stream matters) and fp16 loss scaling (the scaler's state).
TINY = [
    "model.n_layer=1", "model.n_embd=32", "model.n_head=2", "model.dropout=0.1",
    "data.seq_len=32", "data.batch_size=4", "data.max_bytes=200000", "train.eval_every=50",
    "train.eval_batches=1", "train.log_every=10", "train.probe_every=25", "train.threads=1",
    "train.progress=false", "train.checkpoint_every=50", "train.keep_checkpoints=3",
    "precision.mode=fp16", "optim.lr=3e-3",
]
TIMING = M.VOLATILE


def _args(tmp_path: Path, name: str, steps: int) -> list[str]:
    return [*TINY, f"train.steps={steps}", f"run.out_dir={tmp_path}", f"run.name={name}"]


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def _summary(run_dir: Path) -> dict:
    s = json.loads((run_dir / "summary.json").read_text())
    return {k: v for k, v in s.items() if k not in ("seconds", "checkpoints", "spikes")} | {
        "events": s["spikes"]["events"], "final": s["spikes"]["final_loss"]}


def _start(tmp_path: Path, name: str, steps: int) -> subprocess.Popen:
    sets = [a for x in _args(tmp_path, name, steps) for a in ("--set", x)]
    return subprocess.Popen([sys.executable, "-m", "spikebench", "train", *sets],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_after(proc: subprocess.Popen, marker: Path, timeout: float = 120) -> None:
    """SIGKILL the run as soon as ``marker`` (a checkpoint's checksum) exists."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None, "the run ended before its checkpoint"
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of the same config."""
    tmp = tmp_path_factory.mktemp("ref")
    train(c.load(None, _args(tmp, "ref", 400)))
    return tmp / "ref"


def test_killed_run_resumes_bit_identical(tmp_path, reference, capsys):
    proc = _start(tmp_path, "k", 400)
    _kill_after(proc, tmp_path / "k" / "checkpoints" / "step-00000150.sha256")
    assert not (tmp_path / "k" / "summary.json").exists()
    # Rows logged after the newest checkpoint that reached the disk before the kill: the
    # resumed run must cut them, or they would be logged twice.
    partial = tmp_path / "k" / "metrics.jsonl.partial"
    lines = partial.read_text().splitlines(keepends=True)
    partial.write_text("".join(lines + lines[-3:]))
    assert main(["train", "--resume", str(tmp_path / "k")]) == 0
    assert _rows(tmp_path / "k") == _rows(reference)
    assert _summary(tmp_path / "k") == _summary(reference)
    meta = json.loads((tmp_path / "k" / "meta.json").read_text())
    assert [r["step"] for r in meta["resumes"]] != [] and meta["resumes"][0]["step"] >= 150
    # The newest K checkpoints are kept, the one at the end among them.
    names = [p.name for p in checkpoint.saved(tmp_path / "k")]
    assert names == ["step-00000400.pt", "step-00000350.pt", "step-00000300.pt"]


def test_a_corrupted_checkpoint_is_named_and_the_previous_one_used(tmp_path, reference, capsys):
    proc = _start(tmp_path, "c", 400)
    _kill_after(proc, tmp_path / "c" / "checkpoints" / "step-00000200.sha256")
    newest = checkpoint.saved(tmp_path / "c")[0]
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])  # truncated, as by a full disk
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert f"checkpoint {newest}: checksum mismatch (truncated or corrupted); using the " \
           "previous one" in err
    assert _rows(tmp_path / "c") == _rows(reference)
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    assert meta["resumes"][0]["step"] == int(newest.stem.split("-")[1]) - 50


def test_checkpoints_load_weights_only_and_hold_every_stream(reference):
    path = checkpoint.saved(reference)[0]
    state = torch.load(path, weights_only=True)
    assert state["step"] == 400 and state["scaler"]["scale"] > 0
    assert isinstance(state["rng"]["cpu"], torch.Tensor)
    assert state["monitor"]["series"][M.TRAIN_LOSS]["n"] == 400
    assert state["precision_impl"] in ("real", "emulated")  # what "auto" resolved to
    assert state["log_bytes"] == (reference / "metrics.jsonl").stat().st_size
    assert (path.with_suffix(".sha256")).read_text().strip()


def test_a_resume_keeps_what_auto_resolved_to(monkeypatch):
    # Another machine or thread count could measure otherwise; the run must not switch
    # from emulated to real half precision (or back) halfway.
    from spikebench import precision_auto
    from spikebench.config import load
    from spikebench.train.dist import SINGLE
    from spikebench.train.setup import resolve_precision

    monkeypatch.setattr(precision_auto, "choose", lambda mode, flags=None: ("real", "why"))
    cfg = load(None, ["precision.mode=bf16"])
    cpu = torch.device("cpu")
    assert resolve_precision(cfg, cpu, SINGLE, None).impl == "real"
    kept = resolve_precision(cfg, cpu, SINGLE, {"precision_impl": "emulated"})
    assert kept.impl == "emulated" and kept.label == "bf16 (emulated)"
    assert resolve_precision(cfg, cpu, SINGLE, {}).impl == "real"  # a checkpoint from before


def test_resume_without_a_checkpoint_starts_again(tmp_path, reference, capsys):
    proc = _start(tmp_path, "early", 400)
    _kill_after(proc, tmp_path / "early" / "meta.json")  # before the first checkpoint
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "early")]) == 0
    assert "no usable checkpoint; training again from step 0" in capsys.readouterr().err
    assert _rows(tmp_path / "early") == _rows(reference)


def test_resume_refuses_in_one_line(tmp_path, reference, capsys):
    assert main(["train", "--resume", str(reference)]) == 2
    assert "the run already finished" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "nope")]) == 2
    assert "not a run folder (no config.json)" in capsys.readouterr().err
    assert main(["train", "x.toml", "--resume", str(reference)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give no config file and no --set" in err


def test_a_runs_config_json_replays_it(tmp_path, reference):
    out = tmp_path / "replay"
    assert main(["train", str(reference / "config.json"), "--set", f"run.out_dir={out}"]) == 0
    (replay,) = out.iterdir()
    assert _rows(replay) == _rows(reference)
