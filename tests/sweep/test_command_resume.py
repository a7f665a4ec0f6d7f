"""A sweep of command trials killed with -9 while a command runs: the command dies with
it, and the same command resumes the sweep, keeping every finished trial and retrying the
interrupted one."""

import json
import os
import signal
import subprocess
import sys
import time

import optuna
from optuna.trial import TrialState
from procs import processes_with

from spikebench.sweep.studies import default_storage

# A trainer that knows nothing of spikebench: one CSV row per step, slowly enough to be
# caught running.
SCRIPT = """
import json, math, sys, time
params = json.load(open(sys.argv[1]))
with open("log.csv", "w") as f:
    f.write("step,loss,grad_norm\\n")
    for step in range(1, 41):
        f.write(f"{step},{3 + math.exp(-step * params['lr']):.6f},1.0\\n")
        f.flush()
        time.sleep(0.05)
"""


def test_a_killed_sweep_of_command_trials_resumes(tmp_path):
    script = tmp_path / "slow_train.py"
    script.write_text(SCRIPT)
    sweep = tmp_path / "slow.toml"
    sweep.write_text(f"""
[study]
name = "slow"
target_loss = 3.5
seeds = [0]
[trainer]
command = [{json.dumps(sys.executable)}, "{script}", "{{params_file}}"]
log = "log.csv"
steps = 40
[config]
lr = 0.1
[comparison]
baseline = {{}}
recipe = false
[comparison.arms]
fast = {{ lr = 0.5 }}
slower = {{ lr = 0.05 }}
""")
    results = tmp_path / "r"
    cmd = [sys.executable, "-m", "spikebench", "sweep", str(sweep), "--results", str(results),
           "--jobs", "1"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    trials = results / "slow" / "trials"
    deadline = time.time() + 120
    # One trial finished and the next one's command is writing its log: kill the driver.
    while time.time() < deadline:
        done = list(trials.glob("*/result.json")) if trials.exists() else []
        if done and list(trials.glob("*/seed-0/log.csv")) and len(
                list(trials.glob("*/seed-0/log.csv"))) > len(done):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        raise AssertionError("the sweep did not get going: " + proc.stderr.read())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    storage = default_storage(results / "slow")
    before = {t.number: t.values for t in optuna.load_study(
        study_name="slow", storage=storage).get_trials() if t.state == TrialState.COMPLETE}
    assert before
    # The trainer's process dies with the sweep (nothing keeps writing its log).
    deadline = time.time() + 10
    while processes_with(str(script)) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_with(str(script))

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert rerun.returncode == 0, rerun.stderr
    study = optuna.load_study(study_name="slow", storage=storage)
    after = {t.number: t for t in study.get_trials()}
    for number, values in before.items():
        assert after[number].state == TrialState.COMPLETE and after[number].values == values
    complete = [t for t in after.values() if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["arm"] for t in complete) == ["baseline", "fast", "slower"]
    retried = {t.user_attrs.get("retry_of") for t in complete} - {None}
    assert retried and all(after[n].state == TrialState.FAIL for n in retried)
