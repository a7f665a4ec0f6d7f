"""A sweep's study opens unchanged in optuna-dashboard: its real server, read over HTTP."""

import json
import math
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sweep_helpers import write_sweep

from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def test_study_opens_in_optuna_dashboard(tmp_path):
    f = write_sweep(tmp_path, name="dash", trials=0)  # baseline, "clip 1.0", recipe
    run_sweep(load_sweep(f), results=tmp_path / "r", jobs=2, log=lambda s: None)
    exe = Path(sys.executable).with_name("optuna-dashboard")
    assert exe.exists(), "optuna-dashboard is in the dev extra: make install"
    port = _free_port()
    proc = subprocess.Popen([str(exe), default_storage(tmp_path / "r" / "dash"),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                studies = _get(base + "/api/studies")["study_summaries"]
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "optuna-dashboard did not start"
                time.sleep(0.3)
        (study,) = studies
        assert study["study_name"] == "dash"
        assert study["directions"] == ["minimize", "minimize"]
        detail = _get(f"{base}/api/studies/{study['study_id']}")
        trials = {t["number"]: t for t in detail["trials"]}
        assert len(trials) == 3 and {t["state"] for t in trials.values()} == {"Complete"}
        attrs = {n: {a["key"]: a["value"] for a in t["user_attrs"]} for n, t in trials.items()}
        assert sorted(a["arm"] for a in attrs.values()) == ["baseline", "clip 1.0", "recipe"]
        for n, t in trials.items():
            assert len(t["values"]) == 2 and all(math.isfinite(float(v)) for v in t["values"])
            assert {"per_seed", "dir", "overrides"} <= set(attrs[n])
        recipe = next(t for n, t in trials.items() if attrs[n]["arm"] == "recipe")
        params = {p["name"]: p["param_external_value"] for p in recipe["params"]}
        assert params == {"schedule.warmup_ratio": "0.025", "optim.clip/on": "True",
                          "optim.clip": "1.0"}
        assert detail["best_trials"]  # the Pareto front is computed from our values
    finally:
        proc.terminate()
        proc.wait(timeout=10)
