"""Seeds spread over idle workers: a helper trains the last trial's seeds from the end, each
seed trained once and as the trial's own process would, and a seed whose helper died is
taken over by the trial's process."""

import json
import os
import subprocess
from pathlib import Path

import optuna
from optuna.trial import TrialState
from sweep_helpers import TINY_CONFIG, write_sweep

from spikebench import config as cfgmod
from spikebench.sweep import claims
from spikebench.sweep.driver import run_sweep
from spikebench.sweep.runner import run
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage
from spikebench.train.loop import train

SEEDS = [0, 1, 2, 3, 4, 5]


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").open()]


def test_an_idle_worker_helps_the_only_trial_and_changes_no_result(tmp_path):
    # One trial (the baseline; no recipe, no search) on two workers: the second helps it.
    spec = load_sweep(write_sweep(tmp_path, trials=0, seeds=str(SEEDS), steps=24,
                                  comparison='baseline = { "optim.clip" = "off" }\n'
                                             'recipe = false\n'))
    out = run_sweep(spec, results=tmp_path / "r", jobs=2, log=lambda s: None)
    assert out["done"] == out["total"] == 1
    study = optuna.load_study(study_name="tiny",
                              storage=default_storage(tmp_path / "r" / "tiny"))
    (trial,) = study.get_trials()
    assert trial.state == TrialState.COMPLETE
    assert [s["seed"] for s in trial.user_attrs["per_seed"]] == SEEDS
    d = Path(trial.user_attrs["dir"])
    pids = {s: (d / f"seed-{s}.claim").read_text() for s in SEEDS}
    helped = [s for s in SEEDS if pids[s] != pids[0]]
    assert helped and 0 not in helped, pids  # the first seed is the trial process's own
    assert [r["seed"] for r in json.loads((d / "result.json").read_text())["seeds"]] == SEEDS
    # A helped seed is the seed the trial's process would have trained: retrained here with
    # its own config (one thread, as its slot), every logged loss is the same, bit for bit.
    seed = helped[-1]
    cfg = cfgmod.from_dict(json.loads((d / f"seed-{seed}" / "config.json").read_text()))
    train(cfg, run_dir=tmp_path / "again")
    key = "train/loss"
    assert ([r[key] for r in _metrics(d / f"seed-{seed}") if key in r]
            == [r[key] for r in _metrics(tmp_path / "again") if key in r])


def test_a_seed_whose_helper_died_is_taken_over_by_the_trial(tmp_path):
    overrides = [line.replace(" = ", "=") for line in TINY_CONFIG.strip().splitlines()[1:]]
    cfg = cfgmod.load(None, [*(o.format(steps=12) for o in overrides), "train.threads=1"])
    trial_dir = tmp_path / "00000"
    trial_dir.mkdir()
    (trial_dir / "trial.json").write_text(json.dumps(
        {"number": 0, "seeds": [0, 1], "config": cfg.to_dict(), "carried_over": {}}))
    dead = subprocess.Popen(["true"])
    dead.wait()
    (trial_dir / "seed-1.claim").write_text(str(dead.pid))  # a helper killed at its start
    assert not claims.claimer_alive(trial_dir, 1)
    assert run(trial_dir, parent=os.getppid()) == 0  # its watch: this process's parent
    result = json.loads((trial_dir / "result.json").read_text())
    assert [r["seed"] for r in result["seeds"]] == [0, 1]
    assert (trial_dir / "seed-1" / "summary.json").is_file()
    assert claims.claimer_alive(trial_dir, 1)  # this process's claim now
    assert claims.unclaimed(trial_dir, [0, 1, 2]) == [2]
