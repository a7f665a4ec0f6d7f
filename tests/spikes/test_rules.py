import json
import math

import numpy as np
import pytest

from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.rules import RULES, DefaultRule, make_rule, metric_kind
from spikebench.spikes.synthetic import generate


def feed(mon, values, key="loss", start=0):
    for i, v in enumerate(values):
        mon.update(start + i, {key: v})
    mon.finish()
    return mon.events


def noise(n, seed=0, level=3.0, sd=0.02):
    return level + sd * np.random.default_rng(seed).standard_normal(n)


def test_unknown_rule_lists_rules():
    with pytest.raises(ValueError) as e:
        SpikeMonitor(rule="nope")
    for name in RULES:
        assert name in str(e.value)


def test_metric_kind():
    assert metric_kind("optim/grad_norm") == "grad_norm"
    assert metric_kind("train/loss") == "loss"


@pytest.mark.parametrize("name", sorted(RULES))
def test_first_step_is_honest(name):
    """No flag before first_step; a huge jump exactly at first_step is flagged (the default
    rule at one scale: its multi-step verdicts come late, tests/spikes/test_rules_multi.py)."""
    rule = make_rule(name, "loss", **({"multi": False} if name == "default" else {}))
    fs = rule.first_step
    base = list(noise(fs + 20, seed=1))
    for v in base[:fs]:
        assert rule.update(v)[0] is False
    hits = [rule.update(v * 3)[0] for v in base[fs : fs + 6]]
    # persistent confirms on the (patience+1)-th consecutive outlier, i.e. at first_step.
    assert hits[0] if name != "persistent" else any(hits)


def test_persistent_needs_more_than_patience_outliers():
    rule = make_rule("persistent", "loss")
    for v in noise(100):
        rule.update(v)
    assert [rule.update(7.0)[0] for _ in range(6)] == [False] * 4 + [True, True]


def test_zscore_false_alarms_on_plain_noise():
    # k=3 on Gaussian noise: ~0.13% of steps fire by construction -> many events.
    evs = feed(SpikeMonitor("zscore", ("loss",)), noise(20_000))
    assert 10 < len(evs) < 80
    assert feed(SpikeMonitor("default", ("loss",)), noise(20_000)) == []


def test_default_sees_early_jumps_windowed_rules_do_not():
    loss = list(10.8 - 3 * (1 - np.exp(-np.arange(40) / 5)))
    for i in range(3, 8):
        loss[i] += 4.0 * math.exp(-(i - 3) / 2)  # +4 nats at step 3
    evs = feed(SpikeMonitor("default", ("loss",)), loss)
    assert [e.onset for e in evs] == [3]
    assert DefaultRule("loss").first_step == 1
    for name in ("zscore", "olmo", "olmo_online", "persistent"):
        assert feed(SpikeMonitor(name, ("loss",)), loss) == []


def test_default_quiet_on_drop_warmup_and_level_shifts():
    for seed in range(4):
        lg = generate(seed, 6000, spike_every=0, early_jump=False)
        mon = SpikeMonitor("default", ("loss", "grad_norm"))
        for r in lg.records("loss", "grad_norm"):
            mon.update(r["step"], r)
        mon.finish()
        assert len(mon.events) <= 1, (seed, mon.events)


@pytest.mark.parametrize("name", sorted(RULES))
def test_non_finite_is_spike_for_every_rule(name):
    mon = SpikeMonitor(name, ("train/loss", "optim/grad_norm"))
    for i in range(10):
        mon.update(i, {"train/loss": 3.0 - 0.01 * i, "optim/grad_norm": 1.0})
    mon.update(10, {"train/loss": float("nan"), "optim/grad_norm": float("inf")})
    mon.finish()
    evs = mon.events
    assert {(e.onset, e.metric) for e in evs} == {(10, "train/loss"), (10, "optim/grad_norm")}
    assert all(not e.recovered for e in evs)
    json.dumps([e.to_dict() for e in evs], allow_nan=False)


def test_missing_keys_and_replayed_steps_are_ignored():
    mon = SpikeMonitor("default", ("train/loss", "optim/grad_norm"))
    mon.update(0, {"train/loss": 3.0})
    mon.update(1, {"val/loss": 2.0})
    mon.update(2, {"train/loss": None, "optim/grad_norm": 1.0})
    mon.update(2, {"train/loss": 3.0})
    mon.update(1, {"train/loss": 99.0})  # replayed after resume: ignored
    assert mon.n_updates("train/loss") == 2 and mon.n_updates("optim/grad_norm") == 1
    assert mon.events == []


@pytest.mark.parametrize("name", sorted(RULES))
def test_state_dict_roundtrip_resumes_identically(name):
    lg = generate(5, 3000)
    recs = lg.records()
    full = SpikeMonitor(name)
    for r in recs:
        full.update(r["step"], r)
    full.finish()

    first = SpikeMonitor(name)
    for r in recs[:1700]:
        first.update(r["step"], r)
    state = json.loads(json.dumps(first.state_dict(), allow_nan=False))
    resumed = SpikeMonitor("default", ("x",))
    resumed.load_state_dict(state)
    for r in recs[1700:]:
        resumed.update(r["step"], r)
    resumed.finish()
    assert [e.to_dict() for e in resumed.events] == [e.to_dict() for e in full.events]


def test_state_does_not_grow_with_steps():
    sizes = []
    mon = SpikeMonitor("default", ("loss",))
    vals = noise(6000)
    for i, v in enumerate(vals):
        mon.update(i, {"loss": v})
        if i in (2000, 5999):
            sizes.append(len(json.dumps(mon.state_dict())))
    assert abs(sizes[1] - sizes[0]) < 200  # digits only, no per-step growth


def test_grad_norm_spike_in_log_space():
    rng = np.random.default_rng(3)
    g = np.exp(0.1 * rng.standard_normal(500))
    g[300] *= math.exp(1.0)  # 10 sigma in log space
    evs = feed(SpikeMonitor("default", ("optim/grad_norm",)), g, key="optim/grad_norm")
    assert [e.onset for e in evs] == [300]
    assert evs[0].metric == "optim/grad_norm" and evs[0].recovered


def test_loss_only_rules_ignore_grad_norm():
    g = np.ones(300)
    g[200] = 100.0
    for name in ("loss_ratio", "persistent"):
        assert feed(SpikeMonitor(name, ("grad_norm",)), g, key="grad_norm") == []
