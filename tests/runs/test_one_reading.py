"""One log, one reading: every supported format, as a file and inside a folder, read by every
consumer (``spikebench spikes``, the run readers of the API, a command trial whole and
followed as it grows, ``compare``, a bench's reading of a trainer's log) gives the same
steps, the same columns and the same loss events. Runs written by the real libraries
(tests/runs/conftest.py) plus plain logs; the W&B case is issue 44's: ``_step`` beside the
HF Trainer's ``train/global_step``, a spike at global step 605."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from spikebench import metrics as M
from spikebench.cli import main
from spikebench.runs import read_runs
from spikebench.runs.score import score_run
from spikebench.runs.tail import Tail

SPIKE = 605


def _wandb_csv(path: Path) -> None:
    rows = ["_step,train/global_step,train/loss,tokens_per_s"]
    for i in range(700):  # _step is one behind the trainer's step, and falls further back
        g = i + 1 + i // 100
        rows.append(f"{i},{g},{8.0 if g == SPIKE else 3 - g / 1000},{1000 + i % 7}")
    path.write_text("\n".join(rows) + "\n")


def _jsonl(path: Path) -> None:
    with path.open("w") as f:
        for s in range(300):
            f.write(json.dumps({"step": s, "loss": 7.0 if s == 200 else 3 - s / 500}) + "\n")
            if s % 50 == 0:  # an evaluation on a line of its own
                f.write(json.dumps({"step": s, "val_loss": 3.1 - s / 500}) + "\n")


def _spikebench(folder: Path) -> None:
    from spikebench.api.run import Run

    with Run(params={"lr": 1e-3}, seed=2, run_dir=folder) as run:
        for s in range(1, 200):
            run.log(s, loss=9.0 if s == 150 else 3 - s / 400)


@pytest.fixture(scope="module")
def sources(tmp_path_factory, hf_out, pl_run, tb_run) -> dict[str, Path]:
    """name -> a path holding exactly one run: each format as a file (where it has one)
    and inside a folder of its own."""
    d = tmp_path_factory.mktemp("one")
    plain = d / "plain"
    plain.mkdir()
    _wandb_csv(plain / "history.csv")
    _jsonl(plain / "log.jsonl")
    _spikebench(d / "api")
    tb_file = next(tb_run.glob("*tfevents*"))
    files = {
        "wandb-history": plain / "history.csv",
        "jsonl": plain / "log.jsonl",
        "hf-trainer-state": hf_out / "run-a" / "checkpoint-50" / "trainer_state.json",
        "wandb-history-jsonl": hf_out / "wandb" / "run-a-history.jsonl",
        "long-csv": hf_out / "long" / "scalars.csv",
        "lightning-csv": pl_run / "metrics.csv",
        "tensorboard": tb_file,
    }
    out = {f"{k} (file)": v for k, v in files.items()}
    for k, v in files.items():  # each file alone in a folder
        folder = d / "in" / k
        folder.mkdir(parents=True)
        shutil.copy2(v, folder / v.name)
        if k == "lightning-csv":
            shutil.copy2(pl_run / "hparams.yaml", folder / "hparams.yaml")
        out[f"{k} (in a folder)"] = folder
    out["hf-trainer-state (output folder)"] = hf_out / "run-a"
    out["tensorboard (folder)"] = tb_run
    out["lightning-csv (version folder)"] = pl_run
    out["mlflow (run folder)"] = next(p.parent for p in (hf_out / "mlruns").rglob("meta.yaml")
                                      if (p.parent / "metrics").is_dir())
    out["spikebench (run folder)"] = d / "api"
    return out


CASES = ["wandb-history", "jsonl", "hf-trainer-state", "wandb-history-jsonl", "long-csv",
         "lightning-csv", "tensorboard"]
NAMES = ([f"{k} (file)" for k in CASES] + [f"{k} (in a folder)" for k in CASES]
         + ["hf-trainer-state (output folder)", "tensorboard (folder)",
            "lightning-csv (version folder)", "mlflow (run folder)", "spikebench (run folder)"])


def _spikes(path: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["spikes", str(path), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _onsets(events, metric: str) -> list[int]:
    return [e["onset"] for e in events if e["metric"] == metric]


def _trial(tmp: Path, source: Path, steps: int) -> dict:
    """A command trial whose command copies ``source`` into its run folder as its log."""
    log = source.name
    job = {"trainer": {"command": ["cp", "-r", str(source), "{run_dir}/"], "log": log,
                       "env": {}, "grace_s": 5, "steps": steps},
           "params": {}, "seeds": [0],
           "spikes": {"detector": "default", "gap": 5, "target_loss": 0.5}}
    tmp.mkdir()
    (tmp / "trial.json").write_text(json.dumps(job))
    from spikebench.sweep.command import run

    assert run(tmp) == 0
    return json.loads((tmp / "seed-0" / "summary.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_one_reading_everywhere(name, sources, capsys, tmp_path):
    path = sources[name]
    (run,) = read_runs(path)  # the run readers: the API's consumers read these records
    spikes = _spikes(path, capsys)
    steps = [r[M.STEP] for r in run.records if M.TRAIN_LOSS in r]
    scored = score_run(run)
    assert spikes["steps"] == scored["steps"] == len(steps)
    assert (spikes["step_column"], spikes["loss_column"]) == (
        scored["step_column"], scored["loss_column"]) == (run.step_column, run.loss_column)
    assert spikes["events"] == [{k: e[k] for k in spikes["events"][0]} for e in
                                scored["events"]] if spikes["events"] else not scored["events"]
    loss_onsets = _onsets(spikes["events"], "loss")

    # Followed as it grows, to its end: the whole read's records.
    assert Tail(path).poll(final=True) == run.records

    # A command trial: the log read whole (its live view too) and scored by the run API.
    summary = _trial(tmp_path / "trial", path, steps[-1])
    assert summary["spikes"]["steps"] == len(steps) and summary["steps"] == steps[-1]
    assert _onsets(summary["spikes"]["events"], M.TRAIN_LOSS) == loss_onsets

    # A bench's reading of that trainer log: through the same reader.
    from spikebench.bench.run import log_speed

    suite = SimpleNamespace(spec=SimpleNamespace(trainer={"log": path.name}),
                            perf=SimpleNamespace(columns={}), path="suite.toml")
    speed = log_speed(tmp_path / "trial" / "seed-0", suite, "here")
    assert ("tokens_per_s" in speed) == (M.TOKENS_PER_S in run.columns)

    # compare: two groups of this one run (two copies) read and scored alike; a file in a
    # folder of its own is read as the file was above (compare reads through read_runs).
    if "(in a folder)" in name:
        return
    (tmp_path / "b").mkdir()
    copy = tmp_path / "b" / path.name
    (shutil.copytree if path.is_dir() else shutil.copy2)(path, copy)
    if name.startswith("lightning-csv (file"):
        shutil.copy2(path.parent / "hparams.yaml", tmp_path / "b" / "hparams.yaml")
    out = tmp_path / "cmp"
    assert main(["compare", str(path), str(copy), "--out", str(out)]) == 0, \
        capsys.readouterr().err
    for seed_summary in out.rglob("summary.json"):
        got = json.loads(seed_summary.read_text())
        assert got["spikes"]["steps"] == len(steps), seed_summary
        assert _onsets(got["spikes"]["events"], M.TRAIN_LOSS) == loss_onsets


def test_the_wandb_case_reads_the_trainers_step(sources, capsys):
    # Issue 44: the spike at global step 605, wherever the file is read.
    res = _spikes(sources["wandb-history (file)"], capsys)
    assert res["step_column"] == "train/global_step" and _onsets(res["events"], "loss") == [
        SPIKE]


def test_an_ambiguous_step_is_refused_alike_everywhere(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("step,global_step,loss\n" + "".join(f"{s},{s},{3 - s / 100}\n"
                                                      for s in range(30)))
    assert main(["spikes", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "several step columns: 'step', 'global_step'" in err
    job = {"trainer": {"command": ["cp", str(log), "{run_dir}/"], "log": "log.csv",
                       "env": {}, "grace_s": 5, "steps": 29},
           "params": {}, "seeds": [0], "spikes": {"detector": "default", "gap": 5,
                                                  "target_loss": 0.5}}
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "trial.json").write_text(json.dumps(job))
    from spikebench.sweep.command import run

    assert run(trial) == 1
    assert "several step columns: 'step', 'global_step'" in capsys.readouterr().err
