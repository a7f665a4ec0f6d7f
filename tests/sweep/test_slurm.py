"""`spikebench slurm` on a real one-node Slurm (tests/sweep/slurmserver.py) and a real
PostgreSQL: a job array of workers runs a study of a light command trainer to its end, each
task with its fake GPU; a task told to stop (USR1 before its time limit, then SIGTERM as
`scancel` and preemption send it) gives its trial back, and its requeue finishes the study,
no trial counted twice; refusals are one line, exit 2, nothing submitted."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from pgserver import free_port, postgres_server
from slurmserver import slurm_cluster

from spikebench.cli import main
from spikebench.study import layout as L
from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import make_storage
from spikebench.sweep.studies import count_done

optuna.logging.set_verbosity(optuna.logging.WARNING)

# Each seed: `rows` rows of a CSV log, its parameter the arm's lr; seed 1 takes `seconds`
# (a trial can be stopped in it once seed 0 is done), any other seed 0.2 s.
TRAINER = '''\
import csv, json, sys, time
lr, rows = json.load(open(sys.argv[1]))["lr"], int(sys.argv[2])
seconds = float(sys.argv[3]) if sys.argv[4] == "1" else 0.2
with open("log.csv", "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["step", "loss", "val_loss"])
    for step in range(1, rows + 1):
        out.writerow([step, 2.0 / (1 + step * lr) + 0.5, 1.0 if step % 10 == 0 else ""])
        f.flush()
        time.sleep(seconds / rows)
'''


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="module")
def cluster():
    with slurm_cluster(gpus=4) as c:
        yield c


def make_study(folder: Path, url: str, name: str, *, arms: int, seeds: list[int],
               seconds: float = 0.2) -> int:
    """A [trainer] study of ``arms`` arms (a grid over lr) on ``url``; its target."""
    (folder / "trainer.py").write_text(TRAINER)
    lrs = [0.01 * (k + 1) for k in range(arms)]
    sweep = folder / f"{name}.toml"
    sweep.write_text(f"""
[study]
name = "{name}"
target_loss = 0.9
seeds = {json.dumps(seeds)}
objective = "single"
pruner = "none"
[trainer]
command = [{json.dumps(sys.executable)}, "{folder / 'trainer.py'}", "{{params_file}}", "20",
           "{seconds}", "{{seed}}"]
log = "log.csv"
steps = 20
eval_every = 10
[config]
lr = {lrs[0]}
[comparison]
baseline = {{}}
recipe = false
grid = {{ lr = {json.dumps(lrs)} }}
""")
    run_sweep(load_sweep(sweep), results=folder / "creator", jobs=0, storage=url,
              log=lambda s: None)
    return arms


def slurm(cluster, url: str, *args: str) -> subprocess.CompletedProcess:
    """`spikebench slurm` as a user runs it, the URL in SPIKEBENCH_STORAGE."""
    env = {**cluster.env, "SPIKEBENCH_STORAGE": url, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "spikebench", "slurm", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def submitted(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    return re.search(r"submitted job (\d+)", done.stdout).group(1)


storage = functools.cache(make_storage)  # one engine per server for the test's many looks


def trials(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=storage(url)).get_trials()


def assert_exactly_once(url: str, name: str, arms: int) -> list[optuna.trial.FrozenTrial]:
    """Every arm COMPLETE once, nothing left running or waiting, the target counted."""
    ts = trials(url, name)
    per_arm = Counter(t.user_attrs["arm"] for t in ts if t.state == TrialState.COMPLETE)
    assert len(per_arm) == arms and set(per_arm.values()) == {1}, per_arm
    assert not [t for t in ts if not t.state.is_finished()]
    study = optuna.load_study(study_name=name, storage=storage(url))
    assert count_done(study) == study.user_attrs["target_trials"] == arms
    return ts


def test_a_job_array_runs_the_study_to_its_end_one_gpu_each(cluster, pg_url, tmp_path):
    arms = make_study(tmp_path, pg_url, "array", arms=3, seeds=[0])
    results = tmp_path / "results"
    done = slurm(cluster, pg_url, "--study", "array", "--workers", "3", "--gpus", "1",
                 "--results", str(results), "--time", "10", "--grace", "30")
    job = submitted(done)
    password = pg_url.split(":")[2].split("@")[0]
    script = results / "array" / "slurm" / "worker.sbatch"
    assert password not in done.stdout + done.stderr + script.read_text()
    states = cluster.wait(job, lambda s: len(s) == 3 and all(
        v in ("COMPLETED", "FAILED", "CANCELLED") for v in s.values()), 90, "3 tasks ended")
    logs = sorted(script.parent.glob("spikebench-array-*.out"))
    assert set(states.values()) == {"COMPLETED"}, "\n".join(p.read_text() for p in logs)
    assert_exactly_once(pg_url, "array", arms)
    # Each task saw one GPU of its own through --gres (the node has four fake ones, and
    # the three tasks run at once).
    seen = [re.search(r"CUDA_VISIBLE_DEVICES=(\S*),", p.read_text()).group(1) for p in logs]
    assert len(logs) == 3 and len(set(seen)) == 3 and set(seen) <= {"0", "1", "2", "3"}, seen
    assert all("worker done" in p.read_text() for p in logs)


def _running_trial(url: str, name: str, results: Path, timeout: float = 60,
                   not_in: tuple[Path, ...] = ()) -> Path:
    """The folder of the trial running now, once its seed 0 is done and seed 1 under way
    (looked for on disk, then asked of the storage)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for log in (results / name / L.TRIALS).glob(f"*/{L.seed_name(1)}/log.csv"):
            folder = log.parent.parent
            if folder in not_in or not (folder / L.seed_name(0) / L.SUMMARY_JSON).is_file():
                continue
            state = {t.number: t.state for t in trials(url, name)}.get(int(folder.name))
            if state == TrialState.RUNNING:
                return folder
        time.sleep(0.2)
    raise TimeoutError(f"no trial of {name!r} reached its second seed in {timeout:.0f} s")


def _processes_in(folder: Path) -> list[int]:
    """Processes whose working directory is inside ``folder`` (the trial's trainer)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(proc.joinpath("cwd").readlink()).startswith(
                    str(folder)):
                out.append(int(proc.name))
        except OSError:
            pass
    return out


def _given_back(url: str, name: str, folder: Path) -> optuna.trial.FrozenTrial:
    number = int(folder.name)
    ts = {t.number: t for t in trials(url, name)}
    t = ts[number]
    assert t.state == TrialState.FAIL and t.user_attrs.get("given_back"), t.user_attrs
    retry = [r for r in ts.values() if r.user_attrs.get("retry_of") == number]
    assert len(retry) == 1 and retry[0].user_attrs["retries"] == 0  # not counted as a retry
    return retry[0]


def test_a_stopped_task_gives_its_trial_back_and_its_requeue_finishes(cluster, pg_url,
                                                                       tmp_path):
    arms = make_study(tmp_path, pg_url, "pre", arms=2, seeds=[0, 1], seconds=3.0)
    results = tmp_path / "results"
    job = submitted(slurm(cluster, pg_url, "--study", "pre", "--workers", "1", "--gpus", "0",
                          "--results", str(results)))
    log = results / "pre" / "slurm" / f"spikebench-pre-{job}_0.out"

    # Near its time limit Slurm sends the batch shell USR1 (--signal=B:USR1@grace): the
    # worker gives its trial back, and the task requeues itself.
    first = _running_trial(pg_url, "pre", results)
    cluster.run("scancel", "--batch", "--signal=USR1", job)
    cluster.wait(job, lambda s: "restart 1" in log.read_text() if log.exists() else False,
                 60, "the task requeued itself")
    retry = _given_back(pg_url, "pre", first)
    assert not _processes_in(first)

    # Then SIGTERM, as scancel or a preemption sends it: the trial is given back, the task
    # ends; `scontrol requeue` runs it again and it finishes the study.
    second = _running_trial(pg_url, "pre", results, not_in=(first,))
    cluster.run("scancel", "--batch", "--signal=TERM", job)
    cluster.wait(job, lambda s: set(s.values()) <= {"COMPLETED", "FAILED"}, 30, "task ended")
    _given_back(pg_url, "pre", second)
    assert not _processes_in(second)
    cluster.run("scontrol", "requeue", job)
    states = cluster.wait(job, lambda s: "restart 2" in log.read_text() and set(
        s.values()) <= {"COMPLETED", "FAILED"}, 90, "the requeued task finished")
    assert set(states.values()) == {"COMPLETED"}, log.read_text()

    ts = assert_exactly_once(pg_url, "pre", arms)
    assert len(ts) == arms + 2  # the two given back, each retried once
    # The results folder is shared: the retry took over the seed its first try finished.
    done = {t.number: t for t in ts}[retry.number]
    assert done.state == TrialState.COMPLETE and "0" in done.user_attrs["carried_over"]


def test_a_worker_sent_sigterm_mid_trial_gives_it_back_without_slurm(pg_url, tmp_path):
    # What a task's worker does, seen without Slurm: the same path, the same records.
    make_study(tmp_path, pg_url, "term", arms=1, seeds=[0, 1], seconds=30.0)
    results = tmp_path / "results"
    with open(tmp_path / "stderr.log", "w") as err:
        worker = subprocess.Popen(
            [sys.executable, "-m", "spikebench", "worker", "--study", "term", "--results",
             str(results)], env={**os.environ, "SPIKEBENCH_STORAGE": pg_url,
                                 "OMP_NUM_THREADS": "1"}, stderr=err)
        try:
            folder = _running_trial(pg_url, "term", results)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 130
        finally:
            worker.kill()
    assert "given back to the study: this worker was stopped" in (
        tmp_path / "stderr.log").read_text()
    retry = _given_back(pg_url, "term", folder)
    assert retry.state == TrialState.WAITING and not _processes_in(folder)
    study = optuna.load_study(study_name="term", storage=storage(pg_url))
    assert count_done(study) == 0  # nothing counted: the retry is the trial


# --- refusals: one line, exit 2, nothing submitted -----------------------------------------


def _refused(capsys, *argv: str) -> str:
    code = main(["slurm", *argv])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err


def test_sbatch_missing_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    err = _refused(capsys, "--storage", "postgresql://u:secret@127.0.0.1:1/db", "--study",
                   "s", "--workers", "2")
    assert "sbatch: not found on PATH" in err and "secret" not in err


def test_options_are_checked_before_anything_opens(capsys):
    base = ["--storage", "postgresql://u:secret@127.0.0.1:1/db", "--study", "s"]
    assert "--workers 0: must be >= 1" in _refused(capsys, *base, "--workers", "0")
    assert "--time '1:2:3:4'" in _refused(capsys, *base, "--workers", "1", "--time", "1:2:3:4")
    assert "not more than --grace" in _refused(capsys, *base, "--workers", "1", "--time", "1",
                                               "--grace", "60")
    assert "--sbatch 'account'" in _refused(capsys, *base, "--workers", "1", "--sbatch",
                                            "account")
    spaced = ["--results", "/tmp/with space", "--script-only"]
    assert "may hold no blank" in _refused(capsys, *base, "--workers", "1", *spaced)


def test_bad_storage_study_or_job_is_refused_before_submitting(cluster, pg_url, capsys,
                                                               monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    make_study(tmp_path, pg_url, "refused", arms=1, seeds=[0])
    results = ["--results", str(tmp_path / "r")]
    down = f"postgresql://u:secret@127.0.0.1:{free_port()}/db"
    err = _refused(capsys, "--storage", down, "--study", "refused", "--workers", "1", *results)
    assert "cannot open" in err and "u:***@" in err and "secret" not in err
    err = _refused(capsys, "--storage", pg_url, "--study", "nope", "--workers", "1", *results)
    assert "--study 'nope': no such study" in err
    err = _refused(capsys, "--storage", "sqlite:///x.db", "--study", "s", "--workers", "1")
    assert "cannot share SQLite" in err
    err = _refused(capsys, "--storage", pg_url, "--study", "refused", "--workers", "1",
                   "--partition", "nosuch", *results)
    assert "sbatch refused the job: sbatch: error: invalid partition" in err
    assert not list((tmp_path / "r").rglob("*.sbatch"))  # no script left as if it ran
    assert cluster.run("squeue", "-h", "-t", "all", "-n", "spikebench-refused") == ""


def test_script_only_writes_a_script_bash_reads(pg_url, capsys, tmp_path):
    make_study(tmp_path, pg_url, "written", arms=1, seeds=[0])
    assert main(["slurm", "--storage", pg_url, "--study", "written", "--workers", "3",
                 "--parallel", "2", "--partition", "gpu", "--time", "1-00:00", "--no-requeue",
                 "--sbatch=--account=lm", "--results", str(tmp_path / "r"),
                 "--script-only"]) == 0
    script = tmp_path / "r" / "written" / "slurm" / "worker.sbatch"
    text = script.read_text()
    assert f"wrote {script}" in capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    for want in ("--array=0-2%2", "--gres=gpu:1", "--partition=gpu", "--time=1-00:00",
                 "--no-requeue", "--signal=B:TERM@120", "--account=lm"):
        assert f"#SBATCH {want}" in lines, (want, lines)
    assert "trap 'requeue=1" not in text  # --no-requeue: USR1 is not asked for, nor trapped
    assert pg_url.split("@")[0] not in text and os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
