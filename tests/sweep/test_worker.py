"""Shared sweeps on a real PostgreSQL server: `spikebench sweep --jobs 0` creates the study,
two `spikebench worker` processes share it, and together they run exactly its plan."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from pgserver import postgres_server
from sweep_helpers import write_sweep

from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import make_storage
from spikebench.sweep.studies import count_done

STUDY = "pgtest"
# 3 comparison arms + 1 search trial = 4, each a 12-step run of a 1-layer model: two rounds
# of two workers, the least that has them race for the enqueued arms and for the last trials.
ARMS = {"baseline", "warmup", "recipe"}
TARGET = 4
WORKER_TIMEOUT = 300  # s; normally under a minute, but the machine may be shared


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


def spikebench(*args: str) -> list[str]:
    # This interpreter's package, not whichever `spikebench` is first on PATH.
    return [sys.executable, "-m", "spikebench", *args]


def password_of(url: str) -> str:
    return url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]


def create_study(sweep: Path, pg_url: str, tmp_path: Path) -> dict[str, str]:
    """`spikebench sweep --jobs 0`: the study and its plan, for workers; their env."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    created = subprocess.run(spikebench("sweep", str(sweep), "--storage", pg_url, "--jobs", "0",
                                        "--results", str(tmp_path / "a")),
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    return env


def trial_numbers(results: Path, marker: str) -> set[int]:
    """Trial numbers with a folder holding ``marker`` in one worker's results."""
    return {int(p.parent.name) for p in (results / STUDY / "trials").glob(f"*/{marker}")}


def test_two_workers_share_a_postgres_study(pg_url, tmp_path):
    sweep = write_sweep(
        tmp_path, name=STUDY, trials=1, seeds="[0]",
        space='"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }\n',
        comparison=('baseline = { "schedule.warmup_ratio" = 0.0 }\n'
                    '[comparison.arms]\n"warmup" = { "schedule.warmup_ratio" = 0.05 }\n'))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    secret = password_of(pg_url)

    created = subprocess.run(spikebench("sweep", str(sweep), "--storage", pg_url, "--jobs", "0",
                                        "--results", str(tmp_path / "a")),
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    assert f"0/{TARGET} trials done" in created.stderr
    assert "***" in created.stderr  # the driver logs the masked URL

    # Both workers start together, so they race for the enqueued arms and for the last trials.
    workers, logs = [], []
    for k in range(2):
        out = open(tmp_path / f"w{k}.log", "w")  # noqa: SIM115 - closed below
        err = open(tmp_path / f"w{k}.err", "w")  # noqa: SIM115
        logs += [out, err]
        workers.append(subprocess.Popen(
            spikebench("worker", "--storage", pg_url, "--study", STUDY,
                       "--results", str(tmp_path / f"w{k}")),
            cwd=tmp_path, env=env, stdout=out, stderr=err))
    try:
        codes = [w.wait(timeout=WORKER_TIMEOUT) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        for f in logs:
            f.close()
    stderr = [(tmp_path / f"w{k}.err").read_text() for k in range(2)]
    stdout = [(tmp_path / f"w{k}.log").read_text() for k in range(2)]
    report = "\n".join(f"--- worker {k} stderr:\n{e}" for k, e in enumerate(stderr))
    assert codes == [0, 0], report

    # A plain postgresql:// URL: spikebench picks the installed driver.
    assert pg_url.startswith("postgresql://")
    study = optuna.load_study(study_name=STUDY, storage=make_storage(pg_url))
    trials = study.get_trials(deepcopy=False)
    summary = report + "\n--- trials:\n" + "\n".join(
        f"#{t.number} {t.state.name} arm={t.user_attrs.get('arm')} {t.user_attrs.get('error', '')}"
        for t in trials)
    assert study.user_attrs["target_trials"] == TARGET
    # Exactly the plan: no overshoot, nothing failed, nothing left running or waiting.
    assert Counter(t.state for t in trials) == {TrialState.COMPLETE: TARGET}, summary
    assert len({t.number for t in trials}) == len(trials), summary
    arms = Counter(t.user_attrs.get("arm") for t in trials)
    assert arms == {**dict.fromkeys(ARMS, 1), "search": TARGET - len(ARMS)}, summary

    # Both workers did some of the work, and no trial was run by both.
    ran = [trial_numbers(tmp_path / f"w{k}", "result.json") for k in range(2)]
    started = [trial_numbers(tmp_path / f"w{k}", "trial.json") for k in range(2)]
    assert ran[0] and ran[1], summary
    assert not started[0] & started[1], summary
    assert ran[0] | ran[1] == {t.number for t in trials}, summary

    # The storage URL is printed masked only, and stored nowhere in the results.
    for text in stderr + stdout + [created.stderr, created.stdout]:
        assert secret not in text
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".csv", ".log", ".err"):
            assert secret not in path.read_text(errors="replace"), path


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used")
def test_a_dead_workers_trial_is_retried_with_its_arm(pg_url, tmp_path):
    import sqlalchemy

    name = "pgstale"
    sweep = write_sweep(tmp_path, name=name, trials=0, seeds="[0]",
                        space='"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }\n',
                        comparison='baseline = { "schedule.warmup_ratio" = 0.0 }\n')
    env = create_study(sweep, pg_url, tmp_path)
    # A worker took the first arm, the recipe (bf16 goes first on a CPU: the costliest), and
    # died before suggesting anything: its trial stays RUNNING, its last heartbeat an hour old.
    storage = make_storage(pg_url, heartbeat=True)
    study = optuna.load_study(study_name=name, storage=storage)
    dead = study.ask()
    assert dead.user_attrs["arm"] == "recipe"
    storage.record_heartbeat(dead._trial_id)
    with storage.engine.begin() as conn:
        conn.execute(sqlalchemy.text("UPDATE trial_heartbeats SET heartbeat = heartbeat - "
                                     "interval '1 hour' WHERE trial_id = :id"),
                     {"id": dead._trial_id})

    proc = subprocess.run(spikebench("worker", "--storage", pg_url, "--study", name,
                                     "--results", str(tmp_path / "w")),
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=WORKER_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    trials = optuna.load_study(study_name=name, storage=make_storage(pg_url)).get_trials()
    assert trials[dead.number].state == TrialState.FAIL
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["arm"] for t in complete) == ["baseline", "recipe"]
    retry = next(t for t in complete if t.user_attrs.get("retry_of") == dead.number)
    # The retry is the recipe's own values, not a sampler's pick.
    recipe = load_sweep(sweep).arms["recipe"]["schedule.warmup_ratio"]
    assert recipe != 0.0 and retry.params == {"schedule.warmup_ratio": recipe}
    assert count_done(study) == 2


def test_worker_refuses_sqlite(tmp_path):
    proc = subprocess.run(spikebench("worker", "--storage", "sqlite:///x.db", "--study", "s"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spikebench worker: error:")
    assert "SQLite cannot be shared" in lines[0]
    assert not (tmp_path / "x.db").exists()  # refused before the file is created


def test_a_killed_local_sweep_on_postgres_resumes_its_own_trial(pg_url, tmp_path):
    # `spikebench sweep --storage postgresql://...` on one machine, killed by kill -9 while a
    # trial runs: the next run of the same command retries that trial (it carries this
    # results folder's driver tag), and leaves other servers' running trials alone.
    name = "pgresume"
    sweep = write_sweep(tmp_path, name=name, trials=0, seeds="[0]", steps=30)
    results = tmp_path / "r"
    cmd = spikebench("sweep", str(sweep), "--storage", pg_url, "--jobs", "1",
                     "--results", str(results))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    storage = make_storage(pg_url)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
    trials_dir = results / name / "trials"
    deadline = time.time() + 120
    while not list(trials_dir.glob("*/trial.json")):
        assert time.time() < deadline and proc.poll() is None, "the sweep did not start"
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    study = optuna.load_study(study_name=name, storage=storage)
    running = [t for t in study.get_trials() if t.state == TrialState.RUNNING]
    assert len(running) == 1
    assert running[0].user_attrs["driver"].endswith(str((results / name).resolve()))
    # It beats like a worker's trial, so if this driver never came back, workers would
    # retry it once it went stale.
    import sqlalchemy

    with storage.engine.connect() as conn:
        beats = conn.execute(sqlalchemy.text("SELECT count(*) FROM trial_heartbeats WHERE "
                                             "trial_id = :id"), {"id": running[0]._trial_id})
        assert beats.scalar() == 1
    # A worker joining now runs the two waiting arms and then leaves: the driver's running
    # trial is the driver's to retry, and waiting for it could be forever.
    joined = subprocess.run(spikebench("worker", "--storage", pg_url, "--study", name,
                                       "--results", str(tmp_path / "w")),
                            cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=WORKER_TIMEOUT)
    assert joined.returncode == 0, joined.stderr
    assert "has 2/3 finished trials; this worker ran 2" in joined.stderr
    # Another server's trial, running on the same study, must not be touched.
    other = study.ask()
    other.set_user_attr("driver", "elsewhere:/results")

    rerun = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=WORKER_TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr
    assert "1 interrupted trial(s) to retry" in rerun.stderr
    trials = optuna.load_study(study_name=name, storage=storage).get_trials()
    assert trials[running[0].number].state == TrialState.FAIL
    assert trials[other.number].state == TrialState.RUNNING
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert any(t.user_attrs.get("retry_of") == running[0].number for t in done)


def test_two_workers_draw_distinct_search_trials(pg_url, tmp_path):
    # Random sampler, 6 search trials: two workers seeded alike would draw the same
    # parameters in the same order; each must draw its own.
    name = "pgdistinct"
    sweep = write_sweep(tmp_path, name=name, trials=6, seeds="[0]", steps=6,
                        extra_study='sampler = "random"')
    env = create_study(sweep, pg_url, tmp_path)
    workers = [subprocess.Popen(spikebench("worker", "--storage", pg_url, "--study", name,
                                           "--results", str(tmp_path / f"w{k}")),
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True) for k in range(2)]
    try:
        errs = [w.communicate(timeout=WORKER_TIMEOUT)[1] for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    assert [w.returncode for w in workers] == [0, 0], errs
    study = optuna.load_study(study_name=name, storage=make_storage(pg_url))
    search = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("arm") == "search"]
    assert len(search) == 6
    drawn = [tuple(sorted(t.params.items())) for t in search]
    assert len(set(drawn)) == len(drawn), drawn


def test_a_worker_exports_its_trials_and_the_study_progress(pg_url, tmp_path):
    from spikebench.live.exporter import Exporter
    from spikebench.sweep.worker import run_worker

    name = "pglive"
    sweep = write_sweep(tmp_path, name=name, trials=0, seeds="[0]",
                        space='"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }\n',
                        comparison='baseline = { "schedule.warmup_ratio" = 0.0 }\n')
    create_study(sweep, pg_url, tmp_path)
    ex = Exporter()
    assert run_worker(pg_url, name, results=tmp_path / "w", metrics=ex, log=lambda s: None) == 0
    get = ex.registry.get_sample_value
    assert get("spikebench_sweep_trials", {"state": "running"}) == 0
    arms = {t.user_attrs["arm"]: str(t.number) for t in optuna.load_study(
        study_name=name, storage=make_storage(pg_url)).get_trials()}
    assert set(arms) == {"baseline", "recipe"}
    for arm, number in arms.items():
        assert get("spikebench_step", {"trial": number, "arm": arm}) > 0
        assert get("spikebench_train_loss", {"trial": number, "arm": arm}) > 0
