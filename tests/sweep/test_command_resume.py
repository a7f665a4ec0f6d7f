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

from spikebench.sweep.storage import default_storage

# A trainer that knows nothing of spikebench: one CSV row per step, slowly enough to be
# caught running. Like torchrun, it starts a worker in a session of its own, which stops
# when the trainer ends normally (a "done" file) but outlives a trainer killed with -9.
SCRIPT = """
import json, math, os, subprocess, sys, time
params = json.load(open(sys.argv[1]))
subprocess.Popen([sys.executable, "-c", "import os, time\\nfor _ in range(1200):\\n"
                  "    if os.path.exists('done'): break\\n    time.sleep(0.1)", "stray-rank"],
                 start_new_session=True)
with open("log.csv", "w") as f:
    f.write("step,loss,grad_norm\\n")
    for step in range(1, 41):
        f.write(f"{step},{3 + math.exp(-step * params['lr']):.6f},1.0\\n")
        f.flush()
        time.sleep(0.05)
open("done", "w").close()
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
    # Its worker, in a session of its own, is left running by the -9 ...
    strays = [p for p in processes_with("stray-rank") if str(tmp_path) in (cwd := _cwd(p))
              and not os.path.exists(os.path.join(cwd, "done"))]
    assert strays

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert rerun.returncode == 0, rerun.stderr
    # ... until the trial's retry stops what is still working in the interrupted folder.
    assert not [p for p in strays if _alive(p)]
    study = optuna.load_study(study_name="slow", storage=storage)
    after = {t.number: t for t in study.get_trials()}
    for number, values in before.items():
        assert after[number].state == TrialState.COMPLETE and after[number].values == values
    complete = [t for t in after.values() if t.state == TrialState.COMPLETE]
    assert sorted(t.user_attrs["arm"] for t in complete) == ["baseline", "fast", "slower"]
    retried = {t.user_attrs.get("retry_of") for t in complete} - {None}
    assert retried and all(after[n].state == TrialState.FAIL for n in retried)


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False
