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


def test_diverged_seed_gets_finite_worst_values():
    d = o.seed_values(summary(status="diverged", diverged_step=30, final=None, severity=2.0),
                      steps=100, target=2.6)
    assert math.isfinite(d["convergence"]) and d["convergence"] == 300
    assert d["severity"] == 2.0 + 5.5 * 70
    assert d["n_events"] == 2


def test_aggregate_medians_and_values():
    # Every column's median differs from its mean, so a mean cannot pass for the median.
    seeds = [o.seed_values(summary(steps=s, severity=v, n_events=n), steps=100, target=2.6)
             for s, v, n in ((40, 1.0, 1), (50, 30.0, 4), (90, 2.0, 1))]
    agg = o.aggregate(seeds, spike_metric="severity")
    assert agg["spikes"] == 2.0 and agg["convergence"] == 50
    assert agg["reached_seeds"] == 3 and agg["diverged_seeds"] == 0
    assert o.objective_values(agg, "multi") == [2.0, 50]
    assert o.objective_values(agg, "single") == [50]
    assert o.aggregate(seeds, spike_metric="events")["spikes"] == 1
    assert agg["n_events_median"] == 1
    c = o.constraints(agg, spike_limit=0.5)
    assert c == {"spike_events": 0.5, "diverged": 0.0}
