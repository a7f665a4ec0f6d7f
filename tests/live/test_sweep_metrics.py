"""A sweep exports from the driver's one registry: its trials' logs and its progress."""

from spikebench.live.exporter import Exporter
from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep

SWEEP = """
[study]
name = "live"
target_loss = 4.5
seeds = [0]
[config]
train.steps = 20
train.eval_every = 10
train.eval_batches = 2
data.max_bytes = 200000
[comparison]
recipe = false
[comparison.arms]
"clip 1.0" = { "optim.clip" = 1.0 }
"""


def test_the_driver_exports_each_trials_loss_and_the_sweep_progress(tmp_path):
    (tmp_path / "live.toml").write_text(SWEEP)
    ex = Exporter()
    run_sweep(load_sweep(tmp_path / "live.toml"), results=tmp_path / "r", jobs=2,
              metrics=ex, log=lambda s: None)
    get = ex.registry.get_sample_value
    assert get("spikebench_sweep_trials", {"state": "done"}) == 2
    assert get("spikebench_sweep_trials", {"state": "running"}) == 0
    for trial, arm in (("0", "baseline"), ("1", "clip 1.0")):
        assert get("spikebench_step", {"trial": trial, "arm": arm}) == 20
        assert 0 < get("spikebench_train_loss", {"trial": trial, "arm": arm}) < 10
        assert get("spikebench_resident_memory_bytes", {"trial": trial, "arm": arm}) > 1e6


def test_a_running_trials_loss_is_exported_before_it_ends(tmp_path):
    import threading
    import time

    (tmp_path / "long.toml").write_text(
        SWEEP.replace('name = "live"', 'name = "long"').replace("train.steps = 20",
                                                              "train.steps = 200")
        .replace('"clip 1.0" = { "optim.clip" = 1.0 }\n', ""))
    ex = Exporter()
    result = tmp_path / "r" / "long" / "trials" / "00000" / "result.json"
    seen_live: list[float] = []
    done = threading.Event()

    def watch():  # the sweep runs in the main thread (it installs a SIGTERM handler)
        while not done.is_set():
            step = ex.registry.get_sample_value("spikebench_step",
                                                {"trial": "0", "arm": "baseline"})
            if step and not result.exists():
                seen_live.append(step)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run_sweep(load_sweep(tmp_path / "long.toml"), results=tmp_path / "r", jobs=1,
                  metrics=ex, log=lambda s: None)
    finally:
        done.set()
        watcher.join()
    assert seen_live and 0 < min(seen_live) < 200  # read while the trial ran


# A script of the test's own that writes only a CSV log: a falling loss with a spike at
# step 120, then it waits for the test's go-ahead, so what the sweep exports while it runs
# can be read.
CSV_SCRIPT = """
import math, pathlib, sys, time
gate = pathlib.Path(sys.argv[1])
with open("log.csv", "w") as f:
    f.write("step,loss,grad_norm\\n")
    for step in range(1, 201):
        loss = 2 + 2 * math.exp(-step / 50) + 0.01 * math.sin(step * 1.7)
        if 120 <= step < 123:
            loss *= 3
        f.write(f"{step},{loss},{1 + 0.01 * math.cos(step)}\\n")
        f.flush()
    deadline = time.time() + 60
    while not gate.exists() and time.time() < deadline:
        time.sleep(0.05)
"""


def test_a_command_trials_own_log_is_exported_while_it_runs(tmp_path):
    import json
    import sys
    import threading
    import time

    script, gate = tmp_path / "train.py", tmp_path / "go"
    script.write_text(CSV_SCRIPT)
    (tmp_path / "cmd.toml").write_text(f"""
[study]
name = "cmd"
target_loss = 2.5
[trainer]
command = [{json.dumps(sys.executable)}, "{script}", "{gate}"]
log = "log.csv"
steps = 200
eval_every = 200
[config]
[comparison]
recipe = false
""")
    ex = Exporter()
    labels = {"trial": "0", "arm": "baseline"}
    seen: dict[str, float] = {}

    def watch():  # the sweep runs in the main thread (it installs a SIGTERM handler)
        deadline = time.time() + 60
        while time.time() < deadline and not gate.exists():
            get = ex.registry.get_sample_value
            step, events = get("spikebench_step", labels), get(
                "spikebench_spike_events_total", labels)
            if step == 199 and events:  # the last step waits for a later one
                seen.update(step=step, events=events)
                gate.touch()
            time.sleep(0.1)
        gate.touch()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run_sweep(load_sweep(tmp_path / "cmd.toml"), results=tmp_path / "r", jobs=1,
                  metrics=ex, log=lambda s: None)
    finally:
        gate.touch()
        watcher.join()
    assert seen == {"step": 199, "events": 1}  # exported before the script ended
    get = ex.registry.get_sample_value
    assert get("spikebench_step", labels) == 200  # the whole log, scored at the end
    assert get("spikebench_spike_events_total", labels) == 1  # counted once, not twice
    summary = json.loads((tmp_path / "r" / "cmd" / "trials" / "00000" / "seed-0" /
                          "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 200
