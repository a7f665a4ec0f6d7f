"""The whole-log scoring of ``spikebench spikes`` (spikebench.spikes.offline) gives exactly the
online monitor's events, on every rule: on the repo's synthetic logs, on damaged and
degenerate logs, and on random logs with planted spikes. The monitor fed row by row is the
reference; events are compared field by field, floats bit for bit."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spikebench import metrics as M
from spikebench.scoring.run import score_log as reference_score_log
from spikebench.spikes import offline
from spikebench.spikes.default_rule import DefaultStats
from spikebench.spikes.logs import Log
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.rolling import RollingMoments
from spikebench.spikes.rules import RULES, DefaultRule
from spikebench.spikes.synthetic import generate

NAN, INF = math.nan, math.inf


def make_log(loss, grad=None, steps=None, injected=None) -> Log:
    """A Log as read_log builds it; NaN in ``grad`` where ``grad_missing``: pass None cells."""
    n = len(loss)
    f = pd.DataFrame({"step": np.arange(n) if steps is None else np.asarray(steps),
                      "loss": np.asarray(loss, dtype=float)})
    f["step"] = f["step"].astype("int64")
    if grad is not None:
        f["grad_norm"] = [NAN if g is None else float(g) for g in grad]
        f["grad_norm_missing"] = [g is None for g in grad]
    if injected is not None:
        f["injected"] = np.asarray(injected, dtype=bool)
    return Log("test", f, "step", "loss", "grad_norm" if grad is not None else None)


def online(log: Log, rule: str, gap: int):
    """The reference: the monitor over the log's records, as scoring.run.score_log feeds it."""
    mon = SpikeMonitor(rule, ("loss", "grad_norm"), gap=gap)
    f = log.frame
    for i in range(len(f)):
        rec = {"loss": float(f["loss"].iloc[i])}
        if log.has_grad_norm and not f["grad_norm_missing"].iloc[i]:
            rec["grad_norm"] = float(f["grad_norm"].iloc[i])
        if "injected" in f and f["injected"].iloc[i]:
            rec[M.INJECTED] = 1
        mon.update(int(f["step"].iloc[i]), rec)
    mon.finish()
    return mon.events


def assert_same_events(log: Log, rule: str, gap: int = 5) -> int:
    want = [e.state() for e in online(log, rule, gap)]
    got = [e.state() for e in offline.detect(offline.log_series(log), rule, gap)]
    assert got == want
    return len(want)


# ------------------------------------------------------------------ the synthetic logs


@pytest.mark.parametrize("seed,early", [(0, True), (1, False), (2, None)])
def test_synthetic_logs_give_the_monitors_events_on_every_rule(seed, early):
    lg = generate(seed, 5000, early_jump=early, spike_every=600)
    log = make_log(lg.loss, lg.grad_norm, lg.steps)
    counts = {rule: assert_same_events(log, rule) for rule in RULES}
    assert counts["default"] > 3 and counts["zscore"] > counts["default"]  # not vacuous


def test_the_cli_dict_equals_the_reference_score_log():
    lg = generate(4, 3000, early_jump=True)
    log = make_log(lg.loss, lg.grad_norm, lg.steps)
    for rule in ("default", "zscore"):
        ref, fast = reference_score_log(log, rule=rule), offline.score_log(log, rule=rule)
        assert {k: ref[k] for k in fast} == fast
        assert fast["events"] and set(fast) == {"rule", "steps", "events", "spike_score"}
        assert fast["spike_score"]["loss"] is not None


# ------------------------------------------------------ damaged and degenerate logs


def noise(n, seed=0, sd=0.02, level=3.0):
    t = np.arange(n)
    return level + 2.0 / (1 + t / 50) + sd * np.random.default_rng(seed).standard_normal(n)


def _nonfinite():
    y = noise(1500)
    y[[0, 1, 17, 300, 650, 1499]] = [NAN, INF, NAN, -INF, INF, NAN]
    y[296:300] += 0.08  # a moderate rise that a NaN ends (the evidence judges it at once)
    y[400:404] = NAN
    y[900:903] += [0.5, 0.3, 0.1]
    g = np.exp(0.1 * np.random.default_rng(1).standard_normal(1500))
    g[[5, 700, 701, 1200]] = [NAN, INF, 0.0, -1.0]
    return make_log(y, list(g))


def _plateaus():
    y = noise(2000, seed=2)
    y[100:520] = y[100]  # a constant stretch past the sigma window: sigma 0, recomputed
    y[800:1300] = np.round(y[800:1300], 2)  # quantized: many equal differences
    y[1500:1510] += 1.0
    g = np.where(np.arange(2000) % 3 == 0, 1.0, 1.25)  # two values: a MAD of zero
    return make_log(y, list(g))


def _constant():
    return make_log(np.full(700, 2.0), [1.0] * 700)


def _gaps_missing_injected():
    rng = np.random.default_rng(3)
    n = 1800
    steps = np.cumsum(rng.integers(1, 5, n)) + 10
    y = noise(n, seed=3)
    y[[200, 201, 1000]] += [0.6, 0.4, 1.0]
    g = [None if rng.random() < 0.2 else float(np.exp(0.1 * rng.standard_normal()))
         for _ in range(n)]
    g[600] = 50.0
    inj = np.zeros(n, dtype=bool)
    inj[[199, 200, 1000, 1001]] = True
    return make_log(y, g, steps, inj)


def _staircase():
    # Forty lasting steps up, each flagged and never back at its level: more events wait
    # for recovery than the tracker keeps (MAX_PENDING), so the oldest are dropped.
    y = noise(8000, seed=4, sd=0.01) - 2.0 / (1 + np.arange(8000) / 50)
    for k in range(40):
        y[150 + 190 * k:] += 0.5
    return make_log(y, list(np.exp(np.random.default_rng(5).normal(0, 0.1, 8000))))


def _ends_in_a_spike():
    y = noise(700, seed=6, sd=0.01)
    y[690:700] += 0.05  # an evidence run still open at the end of the data
    y[650:656] += 0.04
    return make_log(y)


def _huge_and_signed():
    y = noise(600, seed=7) - 3.5  # crosses zero: the ratio rule's minimum goes <= 0
    y[300] = 1e308
    y[301] = -1e308  # differences past the float range
    return make_log(y, list(np.abs(y) + 1e-300))


EDGE = {"nonfinite": _nonfinite, "plateaus": _plateaus, "constant": _constant,
        "gaps_missing_injected": _gaps_missing_injected, "staircase": _staircase,
        "ends_in_a_spike": _ends_in_a_spike, "huge_and_signed": _huge_and_signed}


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("name", list(EDGE))
def test_damaged_and_degenerate_logs_give_the_monitors_events(name, rule):
    log = EDGE[name]()
    for gap in (0, 5):
        assert_same_events(log, rule, gap)


def test_the_staircase_drops_the_oldest_pending_events():
    evs = offline.detect(offline.log_series(_staircase()), "zscore")
    assert sum(not e.recovered for e in evs if e.metric == "loss") > 32


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("n", [0, 1, 2, 3, 15, 16, 17, 65, 257, 1001])
def test_very_short_logs(rule, n):
    y = noise(n, seed=n)
    if n > 2:
        y[n // 2] += 1.5
    assert_same_events(make_log(y, list(np.exp(y - 3))), rule)


# ------------------------------------------------------------- random planted spikes


@st.composite
def planted(draw):
    """A random loss/grad-norm log: a noisy curve (maybe flat, quantized or with plateaus),
    planted spikes of random shape, non-finite values, gaps in the steps, missing grad-norm
    cells and injected steps."""
    n = draw(st.one_of(st.integers(0, 40), st.integers(40, 400), st.integers(980, 1150)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sd = draw(st.sampled_from([0.0, 1e-3, 0.02, 0.3]))
    y = noise(n, seed=int(rng.integers(1 << 30)), sd=sd) * draw(st.sampled_from([1, -1]))
    shape = draw(st.sampled_from(["plain", "quantized", "plateaus"]))
    if shape == "quantized":
        y = np.round(y, 2)
    elif shape == "plateaus" and n > 10:
        for _ in range(3):
            a = int(rng.integers(n))
            y[a:a + int(rng.integers(1, 300))] = y[a]
    for _ in range(draw(st.integers(0, 6))):
        if n:
            a, w = int(rng.integers(n)), draw(st.integers(1, 12))
            h = max(sd, 0.01) * draw(st.floats(2.0, 60.0))
            y[a:a + w] += h * np.exp(-np.arange(len(y[a:a + w])) / draw(st.floats(0.5, 30)))
    for _ in range(draw(st.integers(0, 3))):
        if n:
            y[int(rng.integers(n))] = draw(st.sampled_from([NAN, INF, -INF]))
    steps = np.cumsum(rng.integers(1, draw(st.sampled_from([2, 4, 100])), n))
    g = np.exp(0.1 * rng.standard_normal(n) + np.where(rng.random(n) < 0.01, 3.0, 0.0))
    missing = rng.random(n) < draw(st.sampled_from([0.0, 0.3, 1.0]))
    grad = [None if m else float(v) for m, v in zip(missing, g, strict=True)]
    injected = rng.random(n) < draw(st.sampled_from([0.0, 0.05]))
    return make_log(y, grad, steps, injected), draw(st.integers(0, 8))


@pytest.mark.parametrize("rule", list(RULES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=planted())
def test_random_logs_with_planted_spikes(rule, case):
    log, gap = case
    assert_same_events(log, rule, gap)


# ------------------------------------------------------------------- the statistics


@pytest.mark.parametrize("size", [3, 100, 1000])
@pytest.mark.parametrize("offset", [0.0, 1e6, -7.5])
def test_rolling_moments_bit_for_bit(size, offset):
    x = offset + np.random.default_rng(size).standard_normal(2 * size + 37) * 0.1
    x[size // 2] = x[size // 2 + 1]  # repeats, and a run of equal values
    mean, sd = RollingMoments.series(x, size)
    mom = RollingMoments(size)
    for i, v in enumerate(x.tolist()):
        mom.push(v)
        assert (mean[i], sd[i]) == (mom.mean(), mom.std())


@pytest.mark.parametrize("block_elems", [1, 250])
def test_rolling_moments_in_pieces_bit_for_bit(monkeypatch, block_elems):
    """Running sums a few blocks at a time (pieces of 1 and of 2 blocks here) are those of
    the pushes."""
    import spikebench.spikes.rolling as rolling

    monkeypatch.setattr(rolling, "BLOCK_ELEMS", block_elems)
    x = 3.0 + np.random.default_rng(5).standard_normal(1037) * 0.1
    mean, sd = RollingMoments.series(x, 100)
    mom = RollingMoments(100)
    for i, v in enumerate(x.tolist()):
        mom.push(v)
        assert (mean[i], sd[i]) == (mom.mean(), mom.std())


def test_default_rule_scores_bit_for_bit(monkeypatch):
    import spikebench.spikes.default_rule as default_rule

    monkeypatch.setattr(default_rule, "LOG_PIECE", 7)  # logarithms taken in many pieces
    y = noise(3000, seed=9)
    y[1000:1400] = y[1000]  # sigma 0 over a full window, then growing row by row
    y[1600:1620] = y[1600]
    y[2000:2100] = np.round(y[2000:2100], 1)
    for kind in ("loss", "grad_norm"):
        rule = DefaultRule(kind, multi=False)
        x = np.abs(y) if kind == "grad_norm" else y
        stats = DefaultStats(rule, x)
        ref = DefaultRule(kind, multi=False)
        for i, v in enumerate(x.tolist()):
            spike, score = ref.update(v)
            assert (stats.spike[i], stats.score[i]) == (spike, score), i
            if i >= ref.min_periods:  # the level and the (floored) sigma it divides by
                assert (stats.level[i], stats.sig[i]) == (ref._level, ref._sig), i
