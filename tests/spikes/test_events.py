import json
import math

import numpy as np

from spikebench.spikes.events import EventTracker, local_baseline, total_severity
from spikebench.spikes.robust import robust_sigma_from_diffs
from spikebench.values import json_safe


def events_from_flags(steps, values, flags, gap=5, window=64, level_window=16):
    """Group a precomputed flag array into events with the monitor's tracker and baseline
    (the level: median of the last 16 finite values; sigma and trend from the last 64)."""
    tracker = EventTracker("loss", gap)
    hist: list[float] = []
    for s, v, f in zip(steps, values, flags, strict=True):
        v = float(v)
        tracker.observe(int(s), v, bool(f) or not math.isfinite(v),
                        lambda v=v: local_baseline(hist[-window:], level_window, fallback=v))
        if math.isfinite(v):
            hist.append(v)
            del hist[:-window]
    tracker.finish()
    return tracker.events

def flat(n, sd=0.1, seed=0):
    return 2.0 + sd * np.random.default_rng(seed).standard_normal(n)


def test_gap_merges_bursts_and_splits_beyond():
    v = flat(200)
    flags = np.zeros(200, bool)
    for i in (100, 103, 108):  # gaps of 2 and 4 unflagged rows -> one event
        v[i] += 3.0
        flags[i] = True
    v[150] += 3.0
    flags[150] = True
    evs = events_from_flags(range(200), v, flags, gap=5)
    assert [(e.onset, e.end, e.n_spike_steps) for e in evs] == [(100, 108, 3), (150, 150, 1)]
    assert [len(events_from_flags(range(200), v, flags, gap=g)) for g in (1, 3, 4)] == [4, 3, 2]


def test_height_recovery_and_area():
    v = flat(300, sd=0.1)
    v[100:110] += 2.0 * np.exp(-np.arange(10) / 2)
    flags = np.zeros(300, bool)
    flags[100] = True
    (e,) = events_from_flags(range(300), v, flags)
    assert e.onset == e.peak == 100 and e.recovered
    assert 10 < e.height_sigma < 40  # ~2 / 0.1
    assert 1 <= e.recovery_steps <= 10
    assert 2.0 < e.area < 6.0  # ~ sum 2 exp(-k/2) = 5.1 minus noise
    assert total_severity([e]) == e.area


def test_area_is_measured_from_the_pre_spike_trend():
    t = np.arange(400)
    bump = np.zeros(400)
    bump[200:260] = np.exp(-np.arange(60) / 5)
    v = 5 - 0.01 * t + 0.02 * np.random.default_rng(0).standard_normal(400) + bump
    flags = t == 200
    (e,) = events_from_flags(t, v, flags)
    assert math.isclose(e.trend, -0.01, rel_tol=0.1)
    # The area is the bump itself over the event, not the bump minus the lost progress.
    truth = bump[200:200 + e.recovery_steps + 1].sum()
    assert math.isclose(e.area, truth, rel_tol=0.1)
    flat_ref = EventTracker("loss")
    for s, x, f in zip(t, v, flags, strict=True):
        flat_ref.observe(int(s), float(x), bool(f), lambda: (e.level, e.sigma))
    assert flat_ref.events[0].area < 0.8 * e.area
    # A rising curve before the onset is no trend to excuse: the reference stays flat.
    (up,) = events_from_flags(t, 5 + 0.01 * t + bump, flags)
    assert up.trend == 0.0 and up.trend_start == up.level


def test_unrecovered_at_end_counts_remaining_steps():
    v = flat(100)
    v[80:] += 5.0
    flags = np.zeros(100, bool)
    flags[80] = True
    (e,) = events_from_flags(np.arange(100) * 10, v, flags)  # steps 0, 10, ...
    assert not e.recovered and e.recovery_steps == 990 - 800


def test_non_finite_peak_is_json_safe():
    v = list(flat(50))
    v[30] = float("nan")
    (e,) = events_from_flags(range(50), v, [False] * 50)  # NaN flags itself
    assert e.peak == 30 and math.isinf(e.height_sigma)
    assert e.to_dict()["height_sigma"] is None
    json.dumps(e.to_dict(), allow_nan=False)


def test_early_event_has_no_sigma():
    (e,) = events_from_flags([0, 1, 2], [5.0, 9.0, 5.0], [False, True, False])
    assert e.height_sigma is None and e.height == 4.0 and e.recovered


def test_robust_sigma_ignores_trend_and_outliers():
    rng = np.random.default_rng(0)
    x = list(10 - 0.05 * np.arange(500) + 0.1 * rng.standard_normal(500))
    x[100] += 50
    assert 0.08 < robust_sigma_from_diffs(x) < 0.12
    assert robust_sigma_from_diffs([1.0, 2.0]) is None
    assert robust_sigma_from_diffs([1.0] * 10) == 0.0


def test_tracker_pending_bounded():
    t = EventTracker("loss", gap=0)
    for i in range(0, 400, 2):  # never recovers: each spike sits above the last level
        t.observe(i, 100.0 + i, True, lambda i=i: (float(i), 0.1))
        t.observe(i + 1, 100.0 + i, False, lambda: (0.0, 0.1))
    assert len(t._pending) <= 32
    t.finish()
    assert not any(e.recovered for e in t.events)


def test_json_safe():
    assert json_safe({"a": [math.inf, 1.0, math.nan], "b": (2,)}) == {"a": [None, 1.0, None], "b": [2]}


def test_injected_steps_flag_but_add_no_area():
    from spikebench.spikes.monitor import SpikeMonitor

    def run(mark):
        mon = SpikeMonitor("default", ("train/loss",))
        for step in range(1, 200):
            loss = 3.0 + 0.01 * ((step * 7919) % 13 - 6) / 6
            burst = 100 <= step < 105
            if burst:
                loss = 6.0
            elif 105 <= step < 110:
                loss = 3.5  # damage that outlasts the burst, on clean batches
            mon.update(step, {"train/loss": loss, "data/injected": int(burst and mark)})
        mon.finish()
        return [e for e in mon.events if e.onset == 100][0]

    plain, marked = run(False), run(True)
    assert marked.injected and not plain.injected
    # Marked: only the five clean damaged steps count (~0.5 nats each).
    assert 2.0 < marked.area < 3.0
    assert plain.area > marked.area + 10
