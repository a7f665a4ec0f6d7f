import math

from spikebench.scoring import trial as o


def summary(status="completed", n_events=1, severity=10.0, reached=True, steps=40,
            final=2.5, initial=5.5, diverged_step=None):
    return {
        "status": status, "diverged_step": diverged_step, "initial_val_loss": initial,
        "final_val_loss": final, "seconds": 3.0,
        "spikes": {"n_events": n_events, "total_severity": severity,
                   "time_to_target": {"reached": reached, "steps": steps if reached else None,
                                      "seconds": 1.5 if reached else None}},
    }


def test_hit_scores_its_steps_and_miss_ranks_behind_every_hit():
    hit = o.seed_values(summary(steps=90), steps=100, target=2.6)
    miss = o.seed_values(summary(reached=False, final=2.7), steps=100, target=2.6)
    worse = o.seed_values(summary(reached=False, final=3.0), steps=100, target=2.6)
    assert hit["convergence"] == 90
    assert 100 < miss["convergence"] < worse["convergence"]
    assert miss["steps_to_target"] is None and miss["seconds_to_target"] is None
    # However far a completed miss ends from the target, it ranks ahead of a divergence.
    awful = o.seed_values(summary(reached=False, final=50.0), steps=100, target=2.6)
    diverged = o.seed_values(summary(status="diverged", diverged_step=90, final=None),
                             steps=100, target=2.6)
    assert awful["convergence"] < 200 < diverged["convergence"]


def test_diverged_seed_gets_finite_worst_values():
    d = o.seed_values(summary(status="diverged", diverged_step=30, final=None, severity=2.0),
                      steps=100, target=2.6)
    assert math.isfinite(d["convergence"]) and d["convergence"] == 300
    # The worst severity a run can score, whenever it diverged: a late divergence is never
    # cheaper than an ordinary detour.
    late = o.seed_values(summary(status="diverged", diverged_step=99, final=None, severity=0.0),
                         steps=100, target=2.6)
    detour = o.seed_values(summary(severity=1500.0), steps=100, target=2.6)
    assert d["severity"] == late["severity"] == o.SEVERITY_CAP_NATS * 100 > detour["severity"]
    # One event for the divergence, not two when its NaN loss was flagged as well.
    nan_event = {"metric": "train/loss", "onset": 30, "end": 30, "injected": False}
    earlier = {"metric": "train/loss", "onset": 10, "end": 12, "injected": False}
    s = summary(status="diverged", diverged_step=30, final=None)
    s["spikes"]["events"] = [earlier, nan_event]
    assert o.seed_values(s, steps=100, target=2.6)["n_events"] == 2


def test_aggregate_medians_and_values():
    # Every column's median differs from its mean, so a mean cannot pass for the median.
    seeds = [o.seed_values(summary(steps=s, severity=v, n_events=n), steps=100, target=2.6)
             for s, v, n in ((40, 1.0, 1), (50, 30.0, 4), (90, 2.0, 1))]
    agg = o.aggregate(seeds, spike_metric="severity", steps=100)
    assert agg["spikes"] == 2.0 and agg["convergence"] == 50
    assert agg["reached_seeds"] == 3 and agg["diverged_seeds"] == 0
    assert o.objective_values(agg, "multi") == [2.0, 50]
    assert o.objective_values(agg, "single") == [50]
    assert o.aggregate(seeds, spike_metric="events", steps=100)["spikes"] == 1
    assert agg["n_events_median"] == 1
    c = o.constraints(agg, spike_limit=0.5)
    assert c == {"spike_events": 0.5, "diverged": 0.0}


def test_injected_events_are_counted_apart():
    s = summary(n_events=1)
    s["spikes"]["n_injected_events"] = 2
    v = o.seed_values(s, steps=100, target=2.6)
    assert (v["n_events"], v["n_injected_events"]) == (1, 2)
