"""The integration tests train real models on the CPU: one thread each (two threads per
process on a shared two-core machine is many times slower), no sweep context leaking in."""

import pytest
import torch

from spikebench.api import context


@pytest.fixture(autouse=True)
def _one_thread_no_sweep(monkeypatch):
    for name in (context.RUN_DIR, context.SEED, context.PARAMS_FILE, context.PRUNE_FILE,
                 context.DETECTOR, context.GAP, context.TARGET_LOSS, context.METRICS_PORT,
                 "RANK"):
        monkeypatch.delenv(name, raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
