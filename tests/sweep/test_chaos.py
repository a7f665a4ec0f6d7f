"""Exactly once under chaos, in seconds: six `spikebench worker` processes on one study of a
real PostgreSQL server, three workers killed with SIGKILL in the middle of a trial (each
replaced), the server restarted once mid-study, a heartbeat grace of 4 s
(``[study] heartbeat_grace_s``). Every arm must end COMPLETE exactly once, the storage's
count must be the target, the report made from the storage must count the same trials, and
no worker may die of the restart."""

from __future__ import annotations

import pytest
from chaos import create, run_chaos, write_study
from pgserver import postgres_server


@pytest.mark.serial  # paced by progress, but a loaded machine stretches the grace periods
def test_workers_survive_kills_and_a_database_restart(tmp_path):
    with postgres_server() as url:
        sweep = write_study(tmp_path, name="chaos", arms=8, rows=100, sleep_s=1.0,
                            heartbeat_s=1, grace_s=4)
        create(sweep, url, tmp_path)
        out = run_chaos(url, tmp_path, "chaos", workers=6, kill_at=(0, 2, 4), restart_at=0.5,
                        limit_s=240, report=True, log=lambda s: None)
    assert out.problems == [], out
    assert out.kills == 3 and out.trials > 8  # the chaos happened: killed trials were retried
