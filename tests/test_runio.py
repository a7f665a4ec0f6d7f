"""Run folders: a new run claims its folder, so runs started together never share one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from spikebench.config.load import resolve
from spikebench.runio import new_run_dir


def test_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path):
    # Two `spikebench train` in one folder in the same second once took one name (an
    # exists() check, then a later mkdir) and one run's rename failed.
    cfg = resolve(overrides=[f"run.out_dir={tmp_path / 'runs'}", "run.name=same"])
    with ThreadPoolExecutor(8) as pool:
        dirs = list(pool.map(lambda _: new_run_dir(cfg), range(16)))
    assert len(set(dirs)) == 16 and all(d.is_dir() for d in dirs)
    assert sorted(d.name for d in dirs) == sorted(["same"] + [f"same-{n}" for n in range(2, 17)])
