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
