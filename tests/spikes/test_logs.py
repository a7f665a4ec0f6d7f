import json
import math

import pytest

from spikebench.errors import UserError
from spikebench.runs.text import read_log


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_our_jsonl_skips_eval_lines_keeps_nan(tmp_path):
    lines = [
        {"step": 1, "train/loss": 5.0, "optim/grad_norm": 1.0},
        {"step": 2, "train/loss": 4.0},
        {"step": 2, "val/loss": 4.5},
        {"step": 3, "train/loss": float("nan"), "optim/grad_norm": 2.0},
    ]
    p = write(tmp_path, "metrics.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    log = read_log(p)
    f = log.frame
    assert f["step"].tolist() == [1, 2, 3]
    assert math.isnan(f["loss"].iloc[2])
    assert log.grad_column == "optim/grad_norm"
    assert f["grad_norm_missing"].tolist() == [False, True, False]


def test_wandb_csv(tmp_path):
    p = write(tmp_path, "wandb.csv",
              "Step,run-1 - train/loss,run-1 - train/loss__MIN,run-1 - train/loss__MAX\n"
              "0,5.0,5.0,5.0\n1,4.0,4.0,4.0\n2,,,\n3,3.0,3.0,3.0\n")
    log = read_log(p)
    assert log.loss_column == "run-1 - train/loss" and log.step_column == "Step"
    assert log.frame["loss"].tolist() == [5.0, 4.0, 3.0] and not log.has_grad_norm


def test_tensorboard_csv_and_global_step(tmp_path):
    p = write(tmp_path, "tb.csv", "Wall time,Step,Value\n1.0,10,2.5\n2.0,20,2.4\n")
    assert read_log(p).loss_column == "Value"
    p = write(tmp_path, "x.csv", "GLOBAL_STEP,Loss,grad_norm\n2,1.5,0.3\n1,1.6,inf\n2,1.4,0.2\n")
    log = read_log(p)
    assert log.frame["step"].tolist() == [1, 2] and log.frame["loss"].tolist() == [1.6, 1.4]
    assert math.isinf(log.frame["grad_norm"].iloc[0])


def test_metric_option(tmp_path):
    p = write(tmp_path, "a.csv", "step,lm_loss,loss\n0,1.0,9.0\n")
    assert read_log(p, metric="lm_loss").frame["loss"].tolist() == [1.0]
    with pytest.raises(UserError, match="'nope'"):
        read_log(p, metric="nope")


@pytest.mark.parametrize(
    "name,text,match",
    [
        ("a.csv", "step,acc\n0,1\n", "no loss column"),
        ("b.csv", "iter,loss\n0,1\n", "no step column"),
        ("c.csv", "step,loss\n0,1.0\n1,abc\n", r"column 'loss', row 2: non-numeric value 'abc'"),
        ("d.csv", "", "empty"),
        ("e.jsonl", '{"step": 1, "loss": 1}\n{oops\n', "line 2: not valid JSON"),
        ("f.csv", "step,loss\n0.5,1.0\n", "not an integer"),
        ("g.jsonl", '{"step": 1, "loss": "x"}\n', "non-numeric value 'x'"),
        ("h.csv", "step,loss\n0,\n", "has no values"),
    ],
)
def test_errors_are_one_line_and_named(tmp_path, name, text, match):
    p = write(tmp_path, name, text)
    with pytest.raises(UserError, match=match) as e:
        read_log(p)
    assert "\n" not in str(e.value) and name in str(e.value)


def test_missing_file_and_binary(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_log(tmp_path / "nope.csv")
    p = tmp_path / "bin.csv"
    p.write_bytes(b"\xff\xfe\x00\x01garbage\x00")
    with pytest.raises(UserError):
        read_log(p)
