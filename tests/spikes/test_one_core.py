"""One detector core: every rule's online form (``update``, fed by the monitor row by row)
and its array form (``flags``/``verdicts``, run by ``spikebench spikes`` over a whole log)
give identical events, on synthetic logs and on labelled logs planted into a clean trace,
every row and every 10th row kept."""

import numpy as np
import pytest

from spikebench import metrics as M
from spikebench.spikes import offline
from spikebench.spikes.labelled import plant
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.rule_base import Rule
from spikebench.spikes.rules import RULES, make_rule, metric_kind
from spikebench.spikes.synthetic import generate


def _logs():
    """(name, steps, loss, grad norm) of the logs both paths are run over."""
    out = []
    for seed in (0, 1):
        lg = generate(seed, 3000, early_jump=bool(seed == 0), spike_every=400)
        out.append((f"synthetic-{seed}", lg.steps, lg.loss, lg.grad_norm))
    clean = generate(7, 4000, spike_every=0, shifts=False).loss  # a trace with no spike
    for every in (1, 10):
        lg = plant(clean, seed=every, n_spikes=8, n_negatives=4, every=every)
        assert lg.spikes  # labels the kept rows still see
        out.append((f"labelled-every-{every}", lg.steps, lg.loss, lg.grad_norm))
    return out


LOGS = _logs()


def _online(rule: str, steps, loss, grad) -> list:
    mon = SpikeMonitor(rule, (M.TRAIN_LOSS, M.GRAD_NORM))
    for step, a, b in zip(steps.tolist(), loss.tolist(), grad.tolist(), strict=True):
        mon.update(step, {M.TRAIN_LOSS: a, M.GRAD_NORM: b})
    mon.finish()
    return mon.events


def _offline(rule: str, steps, loss, grad) -> list:
    none = np.zeros(len(steps), dtype=bool)
    steps = np.asarray(steps, dtype=np.int64)
    return offline.detect([offline.Series(M.TRAIN_LOSS, steps, loss, none),
                           offline.Series(M.GRAD_NORM, steps, grad, none)], rule)


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("log", LOGS, ids=[lg[0] for lg in LOGS])
def test_online_and_offline_give_identical_events(rule, log):
    _, steps, loss, grad = log
    online = [e.state() for e in _online(rule, steps, loss, grad)]
    assert [e.state() for e in _offline(rule, steps, loss, grad)] == online
    if rule == "default":
        assert any(e["metric"] == M.TRAIN_LOSS for e in online)  # not vacuous


@pytest.mark.parametrize("rule", list(RULES))
def test_every_rule_has_its_array_form_and_it_matches_update(rule):
    _, _, loss, grad = LOGS[1]
    for key, x in ((M.TRAIN_LOSS, loss.copy()), (M.GRAD_NORM, grad.copy())):
        x[2500:2506] *= 4.0  # six rows far up: every rule that applies flags some
        r = make_rule(rule, metric_kind(key), **({"multi": False} if rule == "default" else {}))
        assert type(r).flags is not Rule.flags  # vectorised, not the fallback loop
        ref = make_rule(rule, metric_kind(key), **({"multi": False} if rule == "default"
                                                    else {}))
        want = [ref.update(v)[0] for v in x.tolist()]
        assert r.flags(x).tolist() == want
        assert type(r).__name__ == "NeverRule" or any(want)  # not vacuous
