import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState
from procs import processes_with
from sweep_helpers import write_sweep

from spikebench.errors import UserError
from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)


def load(results: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=default_storage(results / name))


def test_a_crashing_trial_is_recorded_as_failed_and_not_retried_forever(tmp_path):
    # An arm whose corpus vanished: its process exits non-zero. The trial is FAIL with the
    # error's last line, the other trials run, and running the command again retries
    # nothing (a crash counts as finished; only interrupted trials are retried).
    comparison = ('baseline = { "optim.clip" = "off" }\n[comparison.arms]\n'
                  '"broken" = { "data.corpus" = "' + str(tmp_path / "gone.txt") + '" }\n')
    spec = load_sweep(write_sweep(tmp_path, trials=0, comparison=comparison))
    out = run_sweep(spec, results=tmp_path / "r", jobs=2, log=lambda s: None)
    assert out["done"] == out["total"] == 3
    trials = load(tmp_path / "r", "tiny").get_trials()
    states = {t.user_attrs["arm"]: t.state for t in trials}
    assert states == {"baseline": TrialState.COMPLETE, "broken": TrialState.FAIL,
                      "recipe": TrialState.COMPLETE}
    broken = next(t for t in trials if t.user_attrs["arm"] == "broken")
    assert "data.corpus" in broken.user_attrs["error"] and "gone.txt" in broken.user_attrs["error"]
    again = run_sweep(spec, results=tmp_path / "r", jobs=2, log=lambda s: None)
    assert again["done"] == 3 and len(load(tmp_path / "r", "tiny").get_trials()) == 3


def test_four_trial_sweep(tmp_path):
    # baseline, "clip 1.0", the article's recipe (the file declares none), one search trial
    spec = load_sweep(write_sweep(tmp_path, trials=1, seeds="[0, 1]"))
    out = run_sweep(spec, results=tmp_path / "r", jobs=2, log=lambda s: None)
    assert out["done"] == out["total"] == 4
    study = load(tmp_path / "r", "tiny")
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    arms = sorted(t.user_attrs["arm"] for t in trials)
    assert arms == ["baseline", "clip 1.0", "recipe", "search"]
    base = next(t for t in trials if t.user_attrs["arm"] == "baseline")
    assert base.params == {"schedule.warmup_ratio": 0.0, "optim.clip/on": False}
    for t in trials:
        assert len(t.values) == 2 and all(math.isfinite(v) for v in t.values)
        assert [s["seed"] for s in t.user_attrs["per_seed"]] == [0, 1]
        d = Path(t.user_attrs["dir"])
        assert (d / "result.json").exists()
        for seed in (0, 1):
            cfg = json.loads((d / f"seed-{seed}" / "config.json").read_text())
            assert cfg["train"]["seed"] == seed and cfg["spikes"]["target_loss"] == 3.3
            assert cfg["train"]["threads"] == 1
    clip = next(t for t in trials if t.user_attrs["arm"] == "clip 1.0")
    cfg = json.loads((Path(clip.user_attrs["dir"]) / "seed-0" / "config.json").read_text())
    assert cfg["optim"]["clip"] == 1.0
    # The recipe's keys outside the space (precision, curriculum) reach its config too.
    recipe = next(t for t in trials if t.user_attrs["arm"] == "recipe")
    assert recipe.params == {"schedule.warmup_ratio": 0.025, "optim.clip/on": True,
                             "optim.clip": 1.0}
    cfg = json.loads((Path(recipe.user_attrs["dir"]) / "seed-1" / "config.json").read_text())
    assert (cfg["precision"]["mode"], cfg["curriculum"]["kind"]) == ("bf16", "seqlen")
    table = pd.read_csv(tmp_path / "r" / "tiny" / "trials.csv")
    assert len(table) == 4 and "user_attrs_arm" in table.columns
    # Utilisation: the seeds' training clocks over 2 workers x the sweep's wall time.
    used = out["utilisation"]
    clocks = [json.loads(p.read_text())["seconds"]
              for p in (tmp_path / "r" / "tiny" / "trials").glob("*/seed-*/summary.json")]
    assert len(clocks) == 8 and used.workers == 2
    assert used.train_s == pytest.approx(sum(clocks)) and 0 < used.share < 1
    assert used.share == pytest.approx(used.train_s / (2 * used.wall_s))
    # Each slot's first trial started a process; while both slots had a trial to come, a
    # process was warmed for it, torch imported (spikebench.sweep.spares).
    warm = {t.number: json.loads((Path(t.user_attrs["dir"]) / "result.json").read_text())[
        "warm"] for t in trials}
    assert not warm[0] and not warm[1] and sum(warm.values()) >= 1
    # Running the same command again finds the work done and runs nothing.
    again = run_sweep(spec, results=tmp_path / "r", jobs=2, log=lambda s: None)
    assert again["done"] == 4 and len(load(tmp_path / "r", "tiny").trials) == 4


def test_diverging_trial_recorded_and_sweep_goes_on(tmp_path):
    f = write_sweep(tmp_path, name="div", trials=0, comparison=(
        'baseline = { "optim.clip" = "off" }\n'
        '[comparison.arms]\n"huge lr" = { "optim.lr" = 1e6 }\n'))
    spec = load_sweep(f)
    run_sweep(spec, results=tmp_path / "r", jobs=1, log=lambda s: None)
    trials = {t.user_attrs["arm"]: t for t in load(tmp_path / "r", "div").trials}
    assert {t.state for t in trials.values()} == {TrialState.COMPLETE}
    bad, ok = trials["huge lr"], trials["baseline"]
    assert bad.user_attrs["diverged_seeds"] == 1 and bad.user_attrs["diverged_step"] >= 1
    assert "non-finite" in bad.user_attrs["cause"]
    assert all(math.isfinite(v) for v in bad.values)
    assert bad.values[1] > ok.values[1]  # worst convergence


def test_single_objective_sets_constraints(tmp_path):
    f = write_sweep(tmp_path, name="single", objective="single", trials=0,
                    extra_study='spike_limit = 0\npruner = "patient_hyperband"\n')
    run_sweep(load_sweep(f), results=tmp_path / "r", jobs=2, log=lambda s: None)
    trials = load(tmp_path / "r", "single").trials
    assert len(trials) == 3
    for t in trials:
        assert t.state in (TrialState.COMPLETE, TrialState.PRUNED)
        if t.state == TrialState.COMPLETE:
            assert len(t.values) == 1 and set(t.constraints) == {"spike_events", "diverged"}
        assert t.intermediate_values  # validation losses reported for pruning


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_killed_sweep_resumes_without_losing_finished_trials(tmp_path, sig):
    # A choices dimension too: its stored definition must compare equal on resume.
    f = write_sweep(tmp_path, name="resume", trials=1, steps=30, space=(
        '"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }\n'
        '"optim.clip" = { low = 0.1, high = 10.0, log = true, off = true }\n'
        '"precision.mode" = { choices = ["fp32", "bf16"] }\n'))
    results = tmp_path / "r"
    cmd = [sys.executable, "-m", "spikebench", "sweep", str(f), "--results", str(results),
           "--jobs", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    trials_dir = results / "resume" / "trials"
    deadline = time.time() + 120
    # Wait until one trial finished and the next one has started, then signal the driver.
    # The driver writes trial.json before it spawns the trial process, so the window is the
    # whole trial (process start included), not just its sub-second training.
    while time.time() < deadline:
        done = list(trials_dir.glob("*/result.json")) if trials_dir.exists() else []
        if done and len(list(trials_dir.glob("*/trial.json"))) > len(done):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("the sweep did not get going: " + proc.stderr.read())
    proc.send_signal(sig)
    proc.wait(timeout=60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 130
        assert "run the same command to resume" in proc.stderr.read()
    before = {t.number: t.values for t in load(results, "resume").trials
              if t.state == TrialState.COMPLETE}
    assert before
    # The orphaned trial process dies with its driver.
    deadline = time.time() + 10
    while processes_with("spikebench.sweep.runner", str(trials_dir)) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_with("spikebench.sweep.runner", str(trials_dir))

    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "interrupted trial(s) to retry" in rerun.stderr
    study = load(results, "resume")
    after = {t.number: t for t in study.trials}
    for number, values in before.items():
        assert after[number].state == TrialState.COMPLETE and after[number].values == values
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 4
    failed = [t for t in study.trials if t.state == TrialState.FAIL]
    assert [t.number for t in failed] == study.user_attrs["interrupted"]
    retried = {t.user_attrs.get("retry_of") for t in complete} - {None}
    assert retried == {t.number for t in failed}
    assert sorted(t.user_attrs["arm"] for t in complete).count("baseline") == 1


def test_second_driver_on_same_study_refused(tmp_path):
    from spikebench.errors import UserError
    from spikebench.sweep.driver import _exclusive

    with _exclusive(tmp_path / "s"):
        try:
            with _exclusive(tmp_path / "s"):
                raise AssertionError("second lock taken")
        except UserError as e:
            assert "another sweep is running" in str(e)


def test_worker_slots_one_per_gpu_else_cores_split():
    from spikebench.sweep.slots import plan_slots

    gpu = plan_slots(None, 16, ["2", "3"])
    assert [(s.name, s.env, s.threads) for s in gpu] == [
        ("cuda:2", {"CUDA_VISIBLE_DEVICES": "2"}, 8), ("cuda:3", {"CUDA_VISIBLE_DEVICES": "3"}, 8)]
    # --jobs N means CPU workers, also on a GPU machine; the cores are split, at least 1 each.
    cpu = plan_slots(3, 8, ["0"])
    assert [s.threads for s in cpu] == [2, 2, 2]
    assert all(s.env == {"CUDA_VISIBLE_DEVICES": ""} for s in cpu)
    assert [s.threads for s in plan_slots(None, 2, [])] == [1, 1]
    assert [s.threads for s in plan_slots(4, 2, [])] == [1, 1, 1, 1]


def test_data_parallel_slots_take_n_gpus_or_n_cores_each():
    from spikebench.sweep.slots import plan_slots

    gpu = plan_slots(None, 16, ["0", "1", "2", "3", "4"], nproc=2)  # the fifth GPU idles
    assert [(s.name, s.env["CUDA_VISIBLE_DEVICES"], s.threads) for s in gpu] == [
        ("cuda:0,1", "0,1", 8), ("cuda:2,3", "2,3", 8)]
    assert [s.threads for s in plan_slots(None, 8, [], nproc=2)] == [2, 2, 2, 2]
    assert len(plan_slots(None, 2, [], nproc=4)) == 1
    with pytest.raises(UserError, match="train.nproc = 4: a trial needs 4 GPUs, this machine "
                                        "shows 2"):
        plan_slots(None, 16, ["0", "1"], nproc=4)


def _same(per_seed):
    return [{k: v for k, v in s.items() if "seconds" not in k} for s in per_seed]


def test_a_retried_trial_continues_from_its_checkpoints(tmp_path):
    # Two seeds, checkpoints every 50 steps: the driver dies while seed 1 of the first
    # trial trains; its retry takes seed 0 as finished and resumes seed 1.
    extra = "\ntrain.checkpoint_every = 50\n"
    f = write_sweep(tmp_path, name="ck", trials=0, steps=100, seeds="[0, 1]", space="",
                    comparison="recipe = false\n")
    f.write_text(f.read_text().replace("optim.lr = 1e-2\n", "optim.lr = 1e-2" + extra))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    results = tmp_path / "r"
    cmd = [sys.executable, "-m", "spikebench", "sweep", str(f), "--results", str(results),
           "--jobs", "1"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    marker = results / "ck" / "trials" / "00000" / "seed-1" / "checkpoints"
    deadline = time.time() + 120
    while not (marker / "step-00000050.sha256").exists():
        assert proc.poll() is None and time.time() < deadline, "no checkpoint in time"
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    study = load(results, "ck")
    (retry,) = [t for t in study.trials if t.user_attrs.get("retry_of") == 0]
    assert retry.state == TrialState.COMPLETE
    assert retry.user_attrs["carried_over"] == {"0": "done", "1": "resume"}
    # The same numbers as an uninterrupted sweep's first trial.
    ref = run_sweep(load_sweep(f), results=tmp_path / "ref", jobs=1)
    assert ref["done"] == ref["total"]
    first = load(tmp_path / "ref", "ck").trials[0]
    assert first.user_attrs["arm"] == retry.user_attrs["arm"] == "baseline"
    assert _same(retry.user_attrs["per_seed"]) == _same(first.user_attrs["per_seed"])
    assert retry.values == first.values
