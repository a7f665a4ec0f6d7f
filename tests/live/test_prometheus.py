"""A real Prometheus server scrapes a running trial on loopback, and promtool tests the
alert rules. Debian's `prometheus` package provides both (`.ci/setup-services` installs it
where missing); with CI set, a missing binary fails these tests instead of skipping them."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _binary(name):
    path = shutil.which(name)
    if path is None:
        msg = f"{name} not found (apt-get install prometheus)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())["data"]["result"]


def test_prometheus_scrapes_a_running_trial(tmp_path):
    prom = _binary("prometheus")
    cmd = [sys.executable, "-m", "spikebench", "train", "--metrics-port", "0",
           "--set", "train.steps=3000", "--set", "train.eval_every=3000",
           "--set", "data.max_bytes=200000", "--set", "train.progress=false",
           "--set", f"run.out_dir={tmp_path / 'runs'}"]
    train = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    procs = [train]
    try:
        line = ""
        for line in train.stderr:
            if line.startswith("metrics: http://"):
                break
        assert line.startswith("metrics: http://127.0.0.1:"), line
        target = line.split("http://", 1)[1].split("/", 1)[0]
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: spikebench\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        port = _free_port()
        procs.append(subprocess.Popen(
            [prom, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        result = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not result:
            time.sleep(1)
            try:
                result = _query(port, "spikebench_train_loss")
            except OSError:
                continue  # not listening yet
        assert result, "Prometheus never scraped a loss"
        loss = float(result[0]["value"][1])
        assert 0 < loss < 10 and result[0]["metric"]["job"] == "spikebench"
        # A range of the series, as a dashboard panel reads it.
        time.sleep(2)
        assert len(_query(port, "spikebench_train_loss[30s]")[0]["values"]) >= 2
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_promtool_alerts_fire_on_a_spike_and_stay_silent_on_a_clean_series():
    promtool = _binary("promtool")
    out = subprocess.run([promtool, "test", "rules", "alerts-test.yml"],
                         cwd=ROOT / "monitoring", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr
    check = subprocess.run([promtool, "check", "rules", "alerts.yml"],
                           cwd=ROOT / "monitoring", capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
