"""Data-parallel sweep trials (train.nproc = 2, gloo on CPU): a rank killed or hung fails
its trial in one line, within the collective timeout, and the sweep goes on."""

import os
import time

import optuna
from optuna.trial import TrialState
from sweep_helpers import TINY_CONFIG

from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage

# In every rank of the planted trials, at their third step: rank 1 of arm "killed" is
# SIGKILLed, rank 1 of arm "hung" sleeps for an hour.
PLANTED = """
import json, os, signal, sys, time
from pathlib import Path
if os.environ.get("RANK") == "1":
    import spikebench.train.loop as loop
    _step, _n = loop.train_step, [0]
    def _planted(*a, **k):
        _n[0] += 1
        if _n[0] == 3:
            arm = json.loads((Path(sys.argv[-1]) / "trial.json").read_text())["arm"]
            if arm == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            if arm == "hung":
                time.sleep(3600)
        return _step(*a, **k)
    loop.train_step = _planted
"""

SWEEP = ('[study]\nname = "ddp"\nobjective = "multi"\ntarget_loss = 3.3\nseeds = [0]\n'
         "trials = 0\n" + TINY_CONFIG.format(steps=12)
         + "train.nproc = 2\ntrain.dist_timeout_s = 5\n"
         + '[comparison]\nrecipe = false\nbaseline = {}\n[comparison.arms]\n'
         '"killed" = { "optim.lr" = 0.011 }\n"hung" = { "optim.lr" = 0.012 }\n')


def test_a_killed_or_hung_rank_fails_its_trial_and_the_sweep_goes_on(tmp_path, monkeypatch):
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "sitecustomize.py").write_text(PLANTED)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path / "planted"), os.environ.get("PYTHONPATH", "")]))
    (tmp_path / "ddp.toml").write_text(SWEEP)
    spec = load_sweep(tmp_path / "ddp.toml")
    start = time.monotonic()
    out = run_sweep(spec, results=tmp_path / "r", jobs=1, log=lambda s: None)
    took = time.monotonic() - start
    assert out["done"] == out["total"] == 3
    trials = optuna.load_study(study_name="ddp", storage=default_storage(
        tmp_path / "r" / "ddp")).get_trials()
    by_arm = {t.user_attrs["arm"]: t for t in trials}
    assert by_arm["baseline"].state == TrialState.COMPLETE
    for arm in ("killed", "hung"):
        assert by_arm[arm].state == TrialState.FAIL
        assert by_arm[arm].user_attrs["error"].startswith("data-parallel run failed: rank")
    assert "rank 1" in by_arm["killed"].user_attrs["error"]
    assert "SIGKILL" in by_arm["killed"].user_attrs["error"]
    # The hung rank's peer gave up at the 5 s timeout, far short of the hour it slept.
    assert "rank 0" in by_arm["hung"].user_attrs["error"]
    assert "timed out" in by_arm["hung"].user_attrs["error"].lower()
    assert took < 300
