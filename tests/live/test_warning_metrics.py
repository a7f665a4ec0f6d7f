"""The early-warning counter: a live run's warnings reach spikebench_spike_warnings_total
(its alert, SpikebenchSpikeWarning, is tested by promtool in test_prometheus.py)."""

import torch
from prometheus_client import generate_latest

import spikebench
from spikebench.live.exporter import Exporter
from spikebench.live.sink import PrometheusSink


def test_a_runs_warnings_are_counted_once_each(tmp_path):
    ex = Exporter()
    rule = {"signal": "grad_norm", "window": 8, "threshold": 8.0}
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with spikebench.init(run_dir=tmp_path / "r", sync_every=5, warning=rule,
                         sinks=[PrometheusSink(ex)]) as run:
        for step in range(1, 61):
            x = torch.randn(64, 4, generator=torch.Generator().manual_seed(step))
            loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
            opt.zero_grad()
            (loss * (1000.0 if step in (30, 45) else 1.0)).backward()  # two gradient jumps
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            run.log(step, loss=loss.detach(), grad_norm=norm)
            if step == 40:
                seen = ex.registry.get_sample_value("spikebench_spike_warnings_total",
                                                    {"trial": "", "arm": ""})
                assert seen == 1  # live, at the read-back of step 30 (rows to 40 now)
    assert run.warnings == 2
    text = generate_latest(ex.registry).decode()
    assert 'spikebench_spike_warnings_total{arm="",trial=""} 2.0' in text
