"""Damaged runs of every format, as a copy cut short, overwritten or spliced would leave them:
each is read (exit 0) or refused in one line (exit 2, never a traceback), nothing is written
beside them, and nothing in them runs (a YAML or pickle that names a command)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from fuzzkit import changed, deadline, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spikebench.cli import main

FAST = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

STATE = json.dumps({"global_step": 4, "log_history": [
    {"step": s, "loss": 3 - s / 10, "grad_norm": 1.0, "learning_rate": 1e-3} for s in range(1, 5)]
    + [{"step": 4, "eval_loss": 2.5}]}, indent=2)
TEMPLATES = {  # a small good run of each format: relative path -> text
    "hf": {"out/checkpoint-4/trainer_state.json": STATE,
           "out/checkpoint-4/config.json": '{"n_layer": 1}'},
    "lightning": {"version_0/metrics.csv": "epoch,step,train_loss_step,val_loss\n"
                  + "".join(f"0,{s},{3 - s / 10},\n" for s in range(6)) + "0,5,,2.4\n",
                  "version_0/hparams.yaml": "lr: 0.01\nseed: 3\nlayers: !!python/tuple [1, 2]\n"},
    "mlflow": {"mlruns/1/meta.yaml": "experiment_id: '1'\nlifecycle_stage: active\nname: e\n",
               "mlruns/1/abc/meta.yaml": "run_id: abc\nrun_name: r\nlifecycle_stage: active\n",
               "mlruns/1/abc/metrics/loss": "".join(f"170000 {3 - s / 10} {s}\n"
                                                    for s in range(6)),
               "mlruns/1/abc/params/seed": "2"},
    "long": {"long.csv": "step,tag,value\n" + "".join(
        f"{s},train/loss,{3 - s / 10}\n{s},lr,0.1\n" for s in range(6))},
    "chart": {"chart.csv": '"Step","a - loss","a - loss__MIN","b - loss"\n' + "".join(
        f'"{s}","{3 - s / 10}","1","{3 - s / 20}"\n' for s in range(6))},
    "wandb": {"history.jsonl": "".join(json.dumps(
        {"_step": s, "train/global_step": s + 1, "train/loss": 3 - s / 10}) + "\n"
        for s in range(6)), "config.yaml": "lr:\n  value: 0.1\n"},
}
PAYLOADS = ["nan", "-1", "1e400", "9" * 400, "\x00", "\udcff", '{"', "]", "\n\n", ",,,",
            "!!python/object/apply:os.system ['touch PWNED']", "&a [*a]", "- *a",
            "log_history", '"step": "x"', " - ", "__MIN", "lifecycle_stage: deleted",
            "1 2 3 4", "true"]


@pytest.fixture(scope="module")
def events() -> bytes:
    pytest.importorskip("tensorboard")
    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    with tempfile.TemporaryDirectory() as d:
        with SummaryWriter(d) as w:
            for s in range(8):
                w.add_scalar("train/loss", 3 - s / 10, s)
        (f,) = Path(d).glob("events.out.tfevents.*")
        return f.read_bytes()


@st.composite
def damage(draw):
    fmt = draw(st.sampled_from([*TEMPLATES, "tensorboard"]))
    kind = draw(st.sampled_from(["truncate", "overwrite", "insert", "none"]))
    return fmt, kind, draw(st.floats(0, 1)), draw(st.sampled_from(PAYLOADS)), draw(
        st.integers(0, 10**6)), draw(st.sampled_from([[], ["--json"], ["--target-loss", "2"]]))


def _damaged(data: bytes, kind: str, where: float, payload: str) -> bytes:
    at = int(where * len(data))
    raw = payload.encode("utf-8", errors="surrogateescape")
    if kind == "truncate":
        return data[:at]
    if kind == "overwrite":
        return data[:at] + raw + data[at + len(raw):]
    if kind == "insert":
        return data[:at] + raw + data[at:]
    return data


@FAST
@given(damage())
def test_a_damaged_run_is_read_or_refused_in_one_line(tmp_path, capsys, events, case):
    fmt, kind, where, payload, pick, extra = case
    box = tmp_path / uuid.uuid4().hex
    files = ({"tb/events.out.tfevents.1.host": events} if fmt == "tensorboard" else
             {k: v.encode() for k, v in TEMPLATES[fmt].items()})
    victim = sorted(files)[pick % len(files)]
    files[victim] = _damaged(files[victim], kind, where, payload)
    for rel, data in files.items():
        (box / rel).parent.mkdir(parents=True, exist_ok=True)
        (box / rel).write_bytes(data)
    before = snapshot(box)
    for target in (box, box / victim):
        with deadline():
            code = main(["spikes", str(target), *extra])
        out, err = capsys.readouterr()
        assert "Traceback" not in err, err
        assert code in (0, 2), (code, err)
        if code == 2:
            assert out == "" and err.count("\n") == 1 and err.startswith("spikebench"), err
        assert not (box / "PWNED").exists() and not Path("PWNED").exists()
    assert not changed(before, snapshot(box))


def test_an_alias_bomb_in_hparams_is_cut_not_expanded(tmp_path, capsys):
    # Nine levels of nine aliases: 9**9 values if expanded; read at once, cut to a budget.
    levels = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    d = tmp_path / "version_0"
    d.mkdir()
    (d / "hparams.yaml").write_text("\n".join(levels) + "\nseed: 3\n")
    (d / "metrics.csv").write_text("step,train_loss\n" + "".join(
        f"{s},{3 - s / 10}\n" for s in range(5)))
    with deadline(60):
        assert main(["spikes", str(tmp_path), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["seed"] == 3 and "..." in json.dumps(row["params"])


def test_a_pickle_sharing_one_list_many_times_is_cut(tmp_path):
    import pickle
    import zipfile

    from spikebench.runs.hf_args import read_training_args

    x: list = [0] * 9
    for _ in range(12):
        x = [x] * 9  # 9**12 leaves if expanded
    with zipfile.ZipFile(tmp_path / "training_args.bin", "w") as z:
        z.writestr("a/data.pkl", pickle.dumps({"seed": 1, "x": x, "big": 10**2000}))
    with deadline(60):
        args = read_training_args(tmp_path / "training_args.bin")
    assert args["seed"] == 1
    from spikebench.runs.table import flatten

    flat = flatten(args, "args")
    assert flat["args.big"] == "..." and json.dumps(flat)
