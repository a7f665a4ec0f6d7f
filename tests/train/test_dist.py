"""Data-parallel runs (DDP over gloo on CPU, two ranks): each rank trains its share of the
same global batch, so the run is the single-process run up to float rounding; rank 0
writes the files, and what it decides (a rollback) every rank does."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from procs import processes_with

from spikebench import config as c
from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.train.dist import SINGLE, Dist
from spikebench.train.loop import train

TINY = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
        "data.batch_size=8", "data.max_bytes=200000", "train.eval_batches=2",
        "train.log_every=5", "train.progress=false", "train.threads=2", "optim.lr=1e-2"]
# Over the first 10 steps two ranks matched one process to 1.6e-7 relative (float
# rounding: the gradients are summed in another order; benchmarks/ddp_match.py). Later the
# rounding grows as any perturbation does: the loss to 1.2e-2 over 120 steps with a
# rollback. A rank 1 that did not roll back moved the loss by up to 0.52.
TOLERANCE, FIRST_STEPS, DRIFT = 1e-5, 10, 5e-2
FILES = {"config.json", "meta.json", "metrics.jsonl", "summary.json"}


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]


def _single(tmp_path, name, *over):
    train(c.load(None, [*TINY, f"run.out_dir={tmp_path}", f"run.name={name}", *over]))
    return _rows(tmp_path / name)


def _ranks(tmp_path, name, *over, env=None):
    """`spikebench train` with train.nproc=2: it starts the two ranks itself."""
    args = [a for o in [*TINY, f"run.out_dir={tmp_path}", f"run.name={name}",
                        "train.nproc=2", *over] for a in ("--set", o)]
    out = subprocess.run([sys.executable, "-m", "spikebench", "train", *args],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, **(env or {})})
    return out


def _close(a, b, key):
    """Within TOLERANCE for the first FIRST_STEPS steps, within DRIFT after."""
    assert [x[M.STEP] for x in a] == [y[M.STEP] for y in b]
    diffs = [(x[M.STEP], abs(x[key] - y[key]) / abs(x[key])) for x, y in zip(a, b, strict=True)
             if key in x]
    assert diffs and max(d for s, d in diffs if s <= FIRST_STEPS) <= TOLERANCE, (key, diffs)
    assert max(d for _, d in diffs) <= DRIFT, (key, diffs)


def test_each_rank_trains_its_own_block_of_the_global_batch():
    x = torch.arange(16).view(8, 2)
    assert Dist(rank=1, world=2).shard(x)[:, 0].tolist() == [8, 10, 12, 14]
    assert Dist(rank=0, world=4).shard(x)[:, 0].tolist() == [0, 2]
    assert SINGLE.shard(x) is x
    t = torch.tensor(3.0)
    assert SINGLE.mean_(t) is t and float(t) == 3.0 and SINGLE.broadcast("a") == "a"


def test_ranks_that_cannot_share_the_batch_equally_are_refused():
    with pytest.raises(UserError, match=r"train.nproc = 4: nproc x optim.grad_accum = 8 must "
                                        r"divide data.batch_size = 12"):
        c.load(None, ["data.batch_size=12", "optim.grad_accum=2", "train.nproc=4"])


def test_nproc_outside_torchrun_is_refused_before_anything_is_written(tmp_path):
    cfg = c.load(None, [*TINY, f"run.out_dir={tmp_path}", "train.nproc=2"])
    with pytest.raises(UserError, match="train.nproc = 2: this process was not started by "
                                        "torchrun"):
        train(cfg)
    assert list(tmp_path.iterdir()) == []


# 20 steps, checkpoints at 10 and 20 (they change no loss), two micro-batches per rank.
SHORT = ("train.steps=20", "train.eval_every=10", "optim.grad_accum=2",
         "train.checkpoint_every=10")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One two-rank run of SHORT, for the tests that compare against it."""
    root = tmp_path_factory.mktemp("ranks")
    out = _ranks(root, "two", *SHORT)
    assert out.returncode == 0, out.stderr[-3000:]
    return root / "two"


def test_two_gloo_ranks_match_one_process_with_the_same_global_batch(tmp_path, two_ranks):
    one = _single(tmp_path, "one", *SHORT)
    two = _rows(two_ranks)
    for key in (M.TRAIN_LOSS, M.GRAD_NORM, M.VAL_LOSS):
        _close(one, two, key)
    assert [r[M.TOKENS] for r in one] == [r[M.TOKENS] for r in two]  # global tokens
    assert {p.name for p in two_ranks.iterdir()} == {*FILES, "checkpoints"}  # rank 0's only
    assert json.loads((two_ranks / "meta.json").read_text())["nproc"] == 2
    assert json.loads((two_ranks / "config.json").read_text())["train"]["nproc"] == 2


# The default scenario cut down: a 10-step burst of random bytes at steps 61-70 of 120.
BURST = ("train.steps=120", "train.eval_every=40", "faults.burst=random_bytes",
         "faults.at=0.5", "faults.length=10", "response.kind=rollback",
         "response.skip_batches=15")


def test_a_rollback_rank_zero_decides_is_made_by_every_rank(tmp_path):
    one = _single(tmp_path, "one", *BURST)
    out = _ranks(tmp_path, "two", *BURST)
    assert out.returncode == 0, out.stderr[-3000:]
    two = _rows(tmp_path / "two")
    events = [json.loads((tmp_path / n / "summary.json").read_text())["response"]["rollbacks"]
              for n in ("one", "two")]
    assert len(events[0]) == 1 and events[0] == events[1]
    # Had rank 1 not gone back too, the ranks' averaged gradients would leave the
    # single-process run after the rollback.
    _close(one, two, M.TRAIN_LOSS)
    assert [r.get(M.POSITION) for r in one] == [r.get(M.POSITION) for r in two]


def test_skip_step_decides_the_same_on_every_rank(tmp_path):
    # Skip-step needs no broadcast: it judges the all-reduced loss and the grad norm of the
    # all-reduced gradients, the same values on every rank. A rank that skipped alone
    # would hold other weights, and the run's end-of-run check would fail it.
    over = ("train.steps=80", "train.eval_every=40", *BURST[2:5], "response.kind=skip_step",
            "response.skip_window=32")  # the burst at steps 41-50
    one = _single(tmp_path, "one", *over)
    out = _ranks(tmp_path, "two", *over)
    assert out.returncode == 0, out.stderr[-3000:]
    two = _rows(tmp_path / "two")
    skipped = [[r[M.STEP] for r in rows if r.get(M.SKIPPED_UPDATE)] for rows in (one, two)]
    assert skipped[0] and skipped[0] == skipped[1]
    _close(one, two, M.TRAIN_LOSS)
    # Planted: rank 1 never skips. The end-of-run check sees its other weights.
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "sitecustomize.py").write_text(RANK_1_NEVER_SKIPS)
    path = os.pathsep.join([str(tmp_path / "planted"), os.environ.get("PYTHONPATH", "")])
    alone = _ranks(tmp_path, "alone", *over, env={"PYTHONPATH": path})
    assert alone.returncode == 1
    assert "hold other weights than rank 0" in alone.stderr.splitlines()[-1]


RANK_1_NEVER_SKIPS = """
import os
if os.environ.get("RANK") == "1":
    import torch
    import spikebench.train.skip_step as ss
    _check = ss.SkipStep.check
    ss.SkipStep.check = lambda self, loss, norm: torch.zeros_like(_check(self, loss, norm))
"""


# Rank 0 kills itself at step 15 (between the checkpoints at 10 and 20).
KILL_AT_15 = """
import os, signal
if os.environ.get("RANK") == "0" and not os.environ.get("SPIKEBENCH_NO_KILL"):
    import spikebench.train.loop as loop
    _step, _n = loop.train_step, [0]
    def _planted(*a, **k):
        _n[0] += 1
        if _n[0] == 15:
            os.kill(os.getpid(), signal.SIGKILL)
        return _step(*a, **k)
    loop.train_step = _planted
"""


def test_a_killed_data_parallel_run_resumes_to_the_uninterrupted_losses(tmp_path, two_ranks):
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "sitecustomize.py").write_text(KILL_AT_15)
    path = os.pathsep.join([str(tmp_path / "planted"), os.environ.get("PYTHONPATH", "")])
    killed = _ranks(tmp_path, "killed", *SHORT, env={"PYTHONPATH": path})
    assert killed.returncode == 1
    assert "rank 0" in killed.stderr and "SIGKILL" in killed.stderr.splitlines()[-1]
    assert not (tmp_path / "killed" / "summary.json").exists()
    out = subprocess.run([sys.executable, "-m", "spikebench", "train", "--resume",
                          str(tmp_path / "killed")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    # Resumed from step 10 on both ranks: the same losses as the run never killed, bit
    # for bit (the same CPU, threads and torch).
    assert [r.get(M.TRAIN_LOSS) for r in _rows(tmp_path / "killed")] == [
        r.get(M.TRAIN_LOSS) for r in _rows(two_ranks)]
    meta = json.loads((tmp_path / "killed" / "meta.json").read_text())
    assert [r["step"] for r in meta["resumes"]] == [10]


def test_ranks_die_with_a_killed_spikebench_train(tmp_path):
    marker = f"ranks-of-{os.getpid()}"
    args = [a for o in [*TINY, f"run.out_dir={tmp_path}", f"run.name={marker}",
                        "train.nproc=2", "train.steps=100000"] for a in ("--set", o)]
    cli = subprocess.Popen([sys.executable, "-m", "spikebench", "train", *args],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (tmp_path / marker / "metrics.jsonl.partial").exists():  # the ranks train
        assert time.monotonic() < deadline and cli.poll() is None
        time.sleep(0.2)
    assert len(processes_with(marker)) >= 4  # the command, the agent, two ranks
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    deadline = time.monotonic() + 30
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == []
