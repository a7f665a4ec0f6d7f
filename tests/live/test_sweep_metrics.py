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
