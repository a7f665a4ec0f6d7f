"""What the run API takes and refuses (issue 45): every refusal is one UserError line at
the call that went wrong, nothing half-written; numbers of any numeric type are kept as
numbers; a killed run's rows are kept aside, never overwritten."""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction

import numpy as np
import pytest
import torch

import spikebench
from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.integrations.loop import grad_norm


def rows(folder):
    name = "metrics.jsonl" if (folder / "metrics.jsonl").exists() else "metrics.jsonl.partial"
    return [json.loads(x) for x in (folder / name).read_text().splitlines()]


def test_numbers_of_any_numeric_type_are_kept_as_numbers(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=2)
    run.log(1, loss=np.float32(3.5), grad_norm=np.float64(1.0), lr=Fraction(1, 1000),
            tokens=np.int64(64))
    run.log(2, loss=torch.tensor(3.0), grad_norm=torch.tensor([1.5]), lr=np.array(1e-3),
            tokens=128, val_loss=np.array([3.25], dtype=np.float16))
    summary = run.finish()
    got = rows(tmp_path / "r")
    assert [r[M.TRAIN_LOSS] for r in got] == [3.5, 3.0]
    assert [r[M.TOKENS] for r in got] == [64, 128] and got[0][M.LR] == 0.001
    assert got[1][M.GRAD_NORM] == 1.5 and summary["status"] == "completed"


BAD_VALUES = [
    ("3.5", "a str is not a metric"), ([1.0], "a list is not a metric"),
    ({"a": 1}, "a dict is not a metric"), (1 + 2j, "a complex is not a metric"),
    (True, "a boolean is not a metric"), (np.bool_(True), "a boolean is not a metric"),
    (10**400, "too large for a metric"), (torch.ones(3), "a tensor of shape (3,)"),
    (torch.tensor(1 + 1j), "complex64"), (np.array([1.0, 2.0]), "a ndarray is not a metric"),
    (object(), "a object is not a metric"),
]


@pytest.mark.parametrize(("v", "says"), BAD_VALUES, ids=[s for _, s in BAD_VALUES])
@pytest.mark.parametrize("key", ["loss", "my/metric"])
def test_a_bad_value_is_refused_at_its_log_call(tmp_path, key, v, says):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=3)
    run.log(1, loss=3.0)
    with pytest.raises(UserError) as e:
        run.log(2, **{key: v}) if key.isidentifier() else run.log(2, {key: v})
    assert says in str(e.value) and f"log({key}=" in str(e.value)
    run.log(2, loss=2.9)  # the refused call left nothing: step 2 is still free
    assert [r[M.STEP] for r in rows(tmp_path / "r") if r] == [] and run.finish()
    assert [r[M.STEP] for r in rows(tmp_path / "r")] == [1, 2]


def test_the_steps_and_names_cannot_be_moved_or_given_twice(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=1)
    with pytest.raises(UserError, match=r"log\('step'=...\): the run writes that column"):
        run.log(1, {"step": 1000})
    with pytest.raises(UserError, match=r"given twice in one step \(as 'train/loss'\)"):
        run.log(1, {"train/loss": 5.0}, loss=3.0)
    with pytest.raises(UserError, match="a metric name must be a non-empty string"):
        run.log(1, {3: 1.0})
    with pytest.raises(UserError, match=r"log\(metrics=\[1\]\): must be a dict"):
        run.log(1, [1])
    with pytest.raises(UserError, match="steps must be increasing integers"):
        run.log(1.5, loss=1.0)
    run.log(np.int64(1), loss=3.0)
    assert rows(tmp_path / "r")[0][M.STEP] == 1


def test_completed_is_refused_after_a_non_finite_loss(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=5)
    run.log(1, loss=torch.tensor(math.nan))
    with pytest.raises(UserError, match="not finite at step 1; finish"):
        run.finish("completed")
    assert run.finish()["status"] == "diverged"


BAD_INIT = [
    ({"seed": "abc"}, "seed='abc': must be an integer"),
    ({"gap": "x"}, "gap='x': must be an integer >= 0"),
    ({"params": "lr=1"}, "params='lr=1': must be a dict"),
    ({"params": {"f": object()}}, "cannot be saved as JSON"),
    ({"sinks": [1]}, "sinks=[1]: must be a list"),
    ({"target_loss": "x"}, "target_loss='x': must be a finite number"),
    ({"target_loss": math.nan}, "target_loss=nan"),
    ({"metrics_port": "p"}, "metrics_port='p'"),
    ({"colour": 1}, "unknown argument 'colour'"),
    ({"run_dir": 3}, "run_dir=3: must be a folder path"),
]


@pytest.mark.parametrize(("kwargs", "says"), BAD_INIT, ids=[s for _, s in BAD_INIT])
def test_bad_init_arguments_are_one_line(tmp_path, kwargs, says):
    with pytest.raises(UserError) as e:
        spikebench.init(**{"run_dir": tmp_path / "r", **kwargs})
    assert says in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "r").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_run_dir_is_one_line(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    with pytest.raises(UserError, match="cannot be"):
        spikebench.init(run_dir=tmp_path / "ro" / "r")
    (tmp_path / "ro2").mkdir(mode=0o555)
    with pytest.raises(UserError, match="cannot be written"):
        spikebench.init(run_dir=tmp_path / "ro2")


def test_two_live_runs_in_one_folder(tmp_path):
    run = spikebench.init(run_dir=tmp_path / "r")
    with pytest.raises(UserError, match="another live run writes to it"):
        spikebench.init(run_dir=tmp_path / "r")
    run.log(1, loss=3.0)
    assert run.finish()["status"] == "completed"


def test_init_keeps_a_killed_runs_rows_aside(tmp_path, capsys):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=1)
    for s in range(1, 6):
        run.log(s, loss=3.0)
    killed = (tmp_path / "r" / "metrics.jsonl.partial").read_bytes()
    run.abandon()  # as a kill leaves it
    again = spikebench.init(run_dir=tmp_path / "r", sync_every=1)
    assert "kept aside as metrics.jsonl.partial.killed" in capsys.readouterr().err
    again.log(1, loss=4.0)
    again.abandon()
    spikebench.init(run_dir=tmp_path / "r").finish()
    assert (tmp_path / "r" / "metrics.jsonl.partial.killed").read_bytes() == killed
    assert (tmp_path / "r" / "metrics.jsonl.partial.killed.2").read_text().count("\n") == 1


def test_grad_norm_of_none_is_one_line():
    with pytest.raises(UserError, match=r"grad_norm\(None\)"):
        grad_norm(None)


def test_a_run_dir_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")  # refused for root too, unlike a read-only folder
    with pytest.raises(UserError, match=r"run folder .*file/r: cannot be created"):
        spikebench.init(run_dir=tmp_path / "file" / "r")


def test_a_scratch_runs_log_is_deleted_not_kept_aside(tmp_path, capsys):
    run = spikebench.init(run_dir=tmp_path / "r", sync_every=1)
    run.log(1, loss=3.0)
    run.abandon(keep_log=False)
    spikebench.init(run_dir=tmp_path / "r").finish()
    assert "kept aside" not in capsys.readouterr().err
    assert not list((tmp_path / "r").glob("*.killed*"))
