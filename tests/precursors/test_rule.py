import math

import numpy as np
import pytest

from spikebench.errors import UserError
from spikebench.precursors.rule import WarningRule


def _series(seed, n=600):
    rng = np.random.default_rng(seed)
    x = np.exp(rng.normal(0, 0.05, n)) * np.linspace(1, 2, n)
    x[300:310] *= np.linspace(1.5, 20, 10)  # a precursor's climb
    x[[50, 400]] = [math.nan, math.inf]
    x[[100, 101]] = [0.0, -1.0]  # at or below zero: log at the floor
    return x


RULES = [WarningRule("s"), WarningRule("s", window=5, threshold=2.0, scale="spread"),
         WarningRule("s", window=16, warmup=7, two_sided=True, transform="none",
                     min_sigma=1e-3)]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("seed", [0, 1])
def test_online_gives_the_array_forms_verdicts_and_scores(rule, seed):
    x = _series(seed)
    on = rule.online()
    got = [on.update(v) for v in x.tolist()]
    assert np.array_equal(np.array([w for w, _ in got]), rule.warns(x))
    assert np.array_equal(np.array([s for _, s in got]), rule.scores(x))


def test_a_climb_warns_and_a_steady_series_does_not():
    rule = WarningRule("s", window=32, threshold=6.0)
    x = _series(0)
    w = rule.warns(x)
    assert w[302:310].all()
    assert w[50] and w[400]  # non-finite values always warn
    assert not w[:32].any()  # before a full window nothing can
    steady = np.exp(np.random.default_rng(3).normal(0, 0.05, 2000))
    assert rule.warns(steady).mean() < 0.01


def test_state_round_trip_continues_identically():
    rule = WarningRule("s", window=8)
    x = _series(1)
    a = rule.online()
    for v in x[:200]:
        a.update(v)
    b = rule.online()
    b.load_state_dict(a.state_dict())
    assert [a.update(v) for v in x[200:].tolist()] == [b.update(v) for v in x[200:].tolist()]
    with pytest.raises(UserError, match="saved for rule"):
        WarningRule("s", window=9).online().load_state_dict(a.state_dict())


def test_layer_max_reads_the_largest_layer():
    rule = WarningRule("probe/attn_logit_max/*")
    assert rule.value({"probe/attn_logit_max/0": 3.0, "probe/attn_logit_max/1": 5.0,
                       "train/loss": 9.0}) == 5.0
    assert rule.value({"train/loss": 1.0}) is None
    col = rule.column({"probe/attn_logit_max/0": np.array([1.0, np.nan, np.nan]),
                       "probe/attn_logit_max/1": np.array([2.0, 0.5, np.nan])})
    assert col[:2].tolist() == [2.0, 0.5] and math.isnan(col[2])
    with pytest.raises(UserError, match="no column matches"):
        rule.column({"train/loss": np.ones(3)})


def test_mapping_round_trip_and_one_line_refusals():
    r = WarningRule("probe/update_norm", window=20, threshold=4.5)
    assert WarningRule.from_mapping(r.to_mapping()) == r
    for d, msg in [({"window": 8}, "signal is missing"),
                   ({"signal": "x", "windo": 8}, "unknown field 'windo'"),
                   ({"signal": "x", "window": 2}, r"window = 2: must be an integer >= 4"),
                   ({"signal": "x", "window": True}, "window = True"),
                   ({"signal": "x", "threshold": math.nan}, "threshold = nan"),
                   ({"signal": "x", "min_sigma": 0}, "min_sigma = 0: must be a finite number > 0"),
                   ({"signal": "x", "scale": "mad"}, "scale = 'mad': must be one of noise, spread"),
                   ({"signal": "", }, "signal = ''"),
                   ([1], "must be a table")]:
        with pytest.raises(UserError, match=msg) as e:
            WarningRule.from_mapping(d)
        assert "\n" not in str(e.value)
