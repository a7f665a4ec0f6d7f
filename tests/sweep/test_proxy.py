"""Workers behind Optuna's gRPC storage proxy (spikebench.sweep.proxy): four workers on
`--storage grpc://...`, one killed in the middle of a trial (its heartbeat, kept in a trial
attribute through the proxy, goes stale and the trial is retried) and the database behind
the proxy restarted; every arm COMPLETE exactly once. And the proxy's refusals."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from chaos import create, run_chaos, write_study
from pgserver import free_port, postgres_server

from spikebench.errors import UserError
from spikebench.sweep.proxy import main as proxy_main
from spikebench.sweep.proxy import open_proxy
from spikebench.sweep.storage import make_storage


def _proxy(url: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "spikebench.sweep.proxy", "--storage", url,
                             "--host", "127.0.0.1", "--port", str(port)],
                            stderr=subprocess.PIPE, text=True)
    try:  # a loaded machine may take a while to import it
        open_proxy(f"grpc://127.0.0.1:{port}", timeout_s=120)
    except UserError:
        proc.kill()
        raise AssertionError(proc.communicate()[1]) from None
    return proc


@pytest.mark.serial  # paced by progress, but a loaded machine stretches the grace periods
def test_workers_behind_the_proxy_run_each_arm_exactly_once(tmp_path):
    with postgres_server() as url:
        sweep = write_study(tmp_path, name="proxied", arms=6, rows=100, sleep_s=1.0,
                            heartbeat_s=1, grace_s=4)
        create(sweep, url, tmp_path)
        port = free_port()
        proxy = _proxy(url, port)
        try:
            out = run_chaos(url, tmp_path, "proxied", workers=4, kill_at=(0,), restart_at=0.5,
                            limit_s=240, worker_url=f"grpc://127.0.0.1:{port}",
                            log=lambda s: None)
        finally:
            proxy.terminate()
            proxy.wait(30)
    assert out.problems == [], out
    assert out.kills == 1 and out.trials > 6  # the killed worker's trial was retried
    # Only the proxy talks to the database (pooled); the workers hold no connection.
    assert out.peak_connections <= 12


def test_the_proxy_refuses_bad_input_in_one_line(capsys):
    with pytest.raises(UserError, match=r"grpc://nohost: not a proxy URL; give grpc://host:port"):
        make_storage("grpc://nohost")
    started = time.monotonic()
    with pytest.raises(UserError, match=r"no storage proxy answers there within 10 s"):
        make_storage(f"grpc://127.0.0.1:{free_port()}")
    assert time.monotonic() - started < 30
    assert proxy_main(["--storage", "grpc://127.0.0.1:1", "--port", "1"]) == 2
    assert "not another proxy" in capsys.readouterr().err
    assert proxy_main(["--storage", "postgresql://u:secret@127.0.0.1:1/db", "--port", "5"]) == 2
    err = capsys.readouterr().err
    assert "cannot open" in err and "secret" not in err and len(err.strip().splitlines()) == 1
