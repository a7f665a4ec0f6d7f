"""A worker that cannot run trials must not use up a shared study (issue 37, item 1).

On a real PostgreSQL study of two trials: a worker whose results folder is unusable exits
with one line before it asks for a trial; a worker whose trials cannot start there, or
fail at once because its server lacks the corpus, gives them back and stops. Each time a
healthy worker then runs the whole study, which it could not if the trials had counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from pgserver import postgres_server
from sweep_helpers import write_sweep

from spikebench.sweep.storage import make_storage
from spikebench.sweep.studies import count_done

TIMEOUT = 300  # s for one worker; normally well under a minute


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spikebench", *args], cwd=cwd,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=TIMEOUT)


def two_trial_study(pg_url: str, tmp_path: Path, name: str, config: str = "") -> None:
    """The baseline and the recipe, 12 steps each, enqueued for workers."""
    sweep = write_sweep(tmp_path, name=name, trials=0,
                        space='"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }\n',
                        comparison='baseline = { "schedule.warmup_ratio" = 0.0 }\n')
    sweep.write_text(sweep.read_text().replace("[config]\n", f"[config]\n{config}"))
    made = run("sweep", str(sweep), "--storage", pg_url, "--jobs", "0", "--results",
               str(tmp_path / "driver"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr


def worker(pg_url: str, name: str, results: Path, cwd: Path):
    return run("worker", "--storage", pg_url, "--study", name, "--results", str(results),
               cwd=cwd)


def trials(pg_url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=make_storage(pg_url)).get_trials()


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("spikebench worker: error:"), lines[0]
    return lines[0]


def healthy_worker_finishes(pg_url: str, name: str, tmp_path: Path) -> None:
    proc = worker(pg_url, name, tmp_path / "healthy", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    done = [t for t in trials(pg_url, name) if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["arm"] for t in done) == ["baseline", "recipe"]
    study = optuna.load_study(study_name=name, storage=make_storage(pg_url))
    assert count_done(study) == 2  # the target: nothing the broken worker did counted


def test_a_worker_with_an_unusable_results_folder_takes_no_trial(pg_url, tmp_path):
    name = "pgunusable"
    two_trial_study(pg_url, tmp_path, name)
    (tmp_path / "file").write_text("not a folder\n")
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / name).write_text("")  # the study's folder is a file
    (tmp_path / "r2" / name).mkdir(parents=True)
    (tmp_path / "r2" / name / "trials").write_text("")  # its trials folder is a file
    # Root may write in a read-only folder, so the causes are ones that stop root too.
    for results, culprit in [(tmp_path / "file", tmp_path / "file"),
                             (tmp_path / "file" / "sub", tmp_path / "file"),
                             (tmp_path / "r1", tmp_path / "r1" / name),
                             (tmp_path / "r2", tmp_path / "r2" / name / "trials")]:
        line = one_line(worker(pg_url, name, results, cwd=tmp_path))
        assert f"{str(culprit)!r} is a file, not a folder" in line, line
    # No trial was asked for: the two arms still wait, untouched.
    assert Counter(t.state for t in trials(pg_url, name)) == {TrialState.WAITING: 2}
    healthy_worker_finishes(pg_url, name, tmp_path)


def test_trials_a_worker_cannot_start_are_given_back(pg_url, tmp_path):
    name = "pggiveback"
    two_trial_study(pg_url, tmp_path, name)
    # The folder is usable, but the first three trials' own folders are files here: each
    # trial fails before its process starts, through no fault of its own.
    folder = tmp_path / "w" / name / "trials"
    folder.mkdir(parents=True)
    for number in range(3):
        (folder / f"{number:05d}").write_text("")
    line = one_line(worker(pg_url, name, tmp_path / "w", cwd=tmp_path))
    assert "3 trials in a row failed at once" in line and "FileExistsError" in line, line
    states = Counter(t.state for t in trials(pg_url, name))
    assert states == {TrialState.FAIL: 3, TrialState.WAITING: 2}, states
    assert all(t.user_attrs.get("given_back") for t in trials(pg_url, name)
               if t.state == TrialState.FAIL)
    healthy_worker_finishes(pg_url, name, tmp_path)


def test_a_worker_whose_server_lacks_the_corpus_gives_its_trials_back(pg_url, tmp_path):
    name = "pgcorpus"
    # The corpus is a path relative to each server's working folder: here it is there,
    # on the broken worker's server it is not, so its every trial dies at once.
    corpus = Path(os.__file__).read_text() * 2
    (tmp_path / "corpus.txt").write_text(corpus)
    two_trial_study(pg_url, tmp_path, name, config='data.corpus = "corpus.txt"\n')
    (tmp_path / "elsewhere").mkdir()
    line = one_line(worker(pg_url, name, tmp_path / "w", cwd=tmp_path / "elsewhere"))
    assert "3 trials in a row failed at once" in line and "corpus.txt" in line, line
    assert not [t for t in trials(pg_url, name) if t.state == TrialState.RUNNING]
    healthy_worker_finishes(pg_url, name, tmp_path)
