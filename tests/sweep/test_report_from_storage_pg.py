"""Many servers, one study: workers with results folders of their own (no shared disk) run a
PostgreSQL study, and the report is made from the storage URL alone, after every worker's
folder is gone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pgserver import postgres_server
from sweep_helpers import write_sweep

STUDY = "cluster"


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


def spikebench(*args: str, cwd: Path, **kw) -> list[str] | subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "spikebench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, **kw)


def test_a_study_on_separate_disks_is_reported_from_its_url(pg_url, tmp_path):
    sweep = write_sweep(tmp_path, name=STUDY, trials=1, seeds="[0, 1]", objective="multi")
    made = spikebench("sweep", str(sweep), "--storage", pg_url, "--jobs", "0",
                      "--results", str(tmp_path / "creator"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    workers = [subprocess.Popen(
        [sys.executable, "-m", "spikebench", "worker", "--storage", pg_url, "--study", STUDY,
         "--results", str(tmp_path / f"server{k}")], cwd=tmp_path, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for k in range(2)]
    errs = [w.communicate(timeout=300)[1] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], errs
    ran = {k: sorted(p.name for p in (tmp_path / f"server{k}" / STUDY / "trials").iterdir())
           for k in range(2)}

    # Another machine: no worker's folder exists any more, only the database.
    for k in range(2):
        shutil.rmtree(tmp_path / f"server{k}")
    shutil.rmtree(tmp_path / "creator", ignore_errors=True)
    elsewhere = tmp_path / "laptop"
    elsewhere.mkdir()
    done = spikebench("report", "--storage", pg_url, "--study", STUDY, cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    secret = pg_url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    assert secret not in done.stdout + done.stderr
    md = (elsewhere / "reports" / STUDY / "report.md").read_text()
    assert secret not in md and "@127.0.0.1" in md  # the URL, its password masked
    trials = sum(len(v) for v in ran.values())
    assert f"; {trials} trials (" in md
    # Each server's share of the trials is named with the folder its full logs stayed in.
    for k in range(2):
        if ran[k]:
            n = len(ran[k])
            assert f"{n} trial{'s' * (n > 1)} under {tmp_path / f'server{k}' / STUDY / 'trials'}" in md
    # The sections that read the seeds' summaries and curves have them.
    assert "no seed has logs" not in md
    assert (elsewhere / "reports" / STUDY / "curves.png").is_file()
    assert (elsewhere / "reports" / STUDY / "report.html").is_file()
