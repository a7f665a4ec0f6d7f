"""Property: a trial with a diverged seed ranks behind every trial without one, on both
objectives and in every spike metric, whatever its other seeds did."""

from hypothesis import given, settings
from hypothesis import strategies as st

from spikebench.scoring import trial as o

STEPS, TARGET = 300, 2.75

seed = st.fixed_dictionaries({
    "status": st.sampled_from(["completed", "diverged"]),
    "reached_at": st.one_of(st.none(), st.integers(1, STEPS)),
    "final": st.floats(TARGET * 1.0001, 1e4, allow_nan=False),
    "severity": st.floats(0, 1e9, allow_nan=False),
    "events": st.integers(0, STEPS),
    "diverged_step": st.integers(1, STEPS),
})


def values(seeds, spike_metric):
    per_seed = []
    for s in seeds:
        diverged = s["status"] == "diverged"
        reached = s["reached_at"] is not None and not diverged
        summary = {"status": s["status"], "diverged_step": s["diverged_step"] if diverged
                   else None, "final_val_loss": None if diverged else
                   (TARGET if reached else s["final"]), "initial_val_loss": 5.5,
                   "spikes": {"n_events": s["events"], "total_severity": s["severity"],
                              "time_to_target": {"reached": reached,
                                                 "steps": s["reached_at"] if reached else None,
                                                 "seconds": 1.0 if reached else None}}}
        per_seed.append(o.seed_values(summary, steps=STEPS, target=TARGET))
    agg = o.aggregate(per_seed, spike_metric=spike_metric, steps=STEPS)
    return agg["diverged_seeds"] > 0, o.objective_values(agg, "multi")


@settings(max_examples=300, deadline=None)
@given(st.lists(seed, min_size=1, max_size=6), st.lists(seed, min_size=1, max_size=6),
       st.sampled_from(["severity", "events"]))
def test_a_divergence_ranks_behind_every_trial_without_one(a, b, spike_metric):
    (div_a, va), (div_b, vb) = values(a, spike_metric), values(b, spike_metric)
    if div_a and not div_b:
        assert va[0] > vb[0] and va[1] > vb[1]  # dominated: off the Pareto front
    if div_b and not div_a:
        assert vb[0] > va[0] and vb[1] > va[1]
