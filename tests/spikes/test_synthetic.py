import numpy as np
import pytest

from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.synthetic import InjectedSpike, Match, SyntheticLog, evaluate, generate


def test_seeded_and_labelled():
    a, b = generate(7, 4000), generate(7, 4000)
    assert np.array_equal(a.loss, b.loss) and np.array_equal(a.grad_norm, b.grad_norm)
    assert a.spikes == b.spikes and a.spikes
    assert not np.array_equal(a.loss, generate(8, 4000).loss)
    assert np.all(np.isfinite(a.loss)) and np.all(a.grad_norm > 0)
    for sp in a.spikes:
        assert sp.metric in ("loss", "grad_norm") and sp.onset <= sp.end < 4000
        assert sp.height_sigma >= 6.0 - 1e-9


def test_shapes_and_options():
    shapes = {sp.shape for s in range(6) for sp in generate(s, 10_000).spikes}
    assert {"single", "burst", "slow", "grad_only", "co", "early"} <= shapes
    quiet = generate(1, 3000, spike_every=0, early_jump=False)
    assert quiet.spikes == [] and quiet.shifts
    early = generate(1, 3000, early_jump=True).spikes[0]
    assert early.shape == "early" and 1 <= early.onset <= 15


def test_default_detector_precision_recall_false_alarms():
    """The acceptance test: event-level P and R >= 0.95, < 1 false alarm (any metric) per
    10k spike-free training steps (log rows, each counted once)."""
    total = Match()
    for seed in range(20):
        lg = generate(seed, 10_000)
        mon = SpikeMonitor("default", ("loss", "grad_norm"))
        for r in lg.records("loss", "grad_norm"):
            mon.update(r["step"], r)
        mon.finish()
        total += evaluate(mon.events, lg)
    assert total.n_true > 100
    assert 0 < total.spike_free_steps <= 20 * 10_000  # rows, not metric-steps
    assert total.precision >= 0.95, total
    assert total.recall >= 0.95, total
    assert total.fa_per_10k < 1.0, total


def test_evaluate_matching():
    lg = generate(2, 3000, early_jump=False)
    sp = lg.spikes[0]

    class E:  # minimal event stand-in
        def __init__(self, onset, end, metric):
            self.onset, self.end, self.metric = onset, end, metric

    m = evaluate([E(sp.onset, sp.onset, sp.metric), E(10, 10, "loss")], lg)
    assert m.detected_matched == 1 and m.false_alarms == 1 and m.true_found == 1
    assert m.precision == 0.5 and m.fa_per_10k > 0


class _Ev:  # minimal event stand-in
    def __init__(self, onset, end, metric):
        self.onset, self.end, self.metric = onset, end, metric


def test_false_alarm_rate_is_per_spike_free_training_step():
    n = 100
    lg = SyntheticLog(0, np.arange(n), np.ones(n), np.ones(n), spikes=[
        InjectedSpike("loss", "single", 10, 14, 8.0),
        InjectedSpike("grad_norm", "co", 12, 19, 8.0),  # overlaps the loss spike's rows
    ])
    # Rows 10..19 are inside a labelled spike; the other 90 rows are spike-free, counted
    # once each although two metrics are logged on them.
    m = evaluate([_Ev(50, 50, "loss"), _Ev(70, 71, "grad_norm"), _Ev(11, 11, "loss")], lg)
    assert m.spike_free_steps == 90
    assert m.false_alarms == 2 and m.detected_matched == 1
    assert m.fa_per_10k == pytest.approx(1e4 * 2 / 90)
    # A loss-only rule over the same rows has the same denominator.
    assert evaluate([_Ev(50, 50, "loss")], lg).spike_free_steps == 90
    total = Match()
    total += m
    total += m
    assert total.fa_per_10k == pytest.approx(m.fa_per_10k)
