"""Timely online detection: a spike is told at its first sure row (provisional), then
confirmed or withdrawn when the default rule's delayed verdict reaches it; events, and so
every offline score, stay as they were."""

import math
import random

import numpy as np

from spikebench import metrics as M
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.offline import Series, detect

DELAY = 73  # the default rule's verdict delay in rows (DefaultRule.delay)


def _falling(step: int, rng: random.Random, spike_at: int = 25) -> float:
    loss = 2.0 + 2.0 * math.exp(-0.2 * step) + 0.01 * rng.random()
    return loss * 2 if spike_at <= step < spike_at + 2 else loss


def _feed(values, stop=None):
    m = SpikeMonitor("default", (M.TRAIN_LOSS,))
    told = {}
    for step, v in enumerate(values, 1):
        m.update(step, {M.TRAIN_LOSS: v})
        for r in m.reports(M.TRAIN_LOSS):
            told.setdefault(r.onset, step)
        if stop == step:
            return m, told
    m.finish()
    return m, told


def test_a_spike_is_told_at_its_first_row_and_confirmed_when_the_verdict_comes():
    rng = random.Random(0)
    values = [_falling(s, rng) for s in range(1, 200)]
    m, told = _feed(values, stop=DELAY + 24)  # the verdict for row 25 not yet given
    [rep] = m.reports(M.TRAIN_LOSS)
    assert (rep.onset, rep.reported, rep.state) == (25, 25, "provisional")
    assert m.n_events(M.TRAIN_LOSS) == 0 and m.n_reported(M.TRAIN_LOSS) == 1
    m, told = _feed(values)
    [rep] = m.reports(M.TRAIN_LOSS)
    assert told == {25: 25}
    assert (rep.state, rep.decided, rep.late) == ("confirmed", 25 + DELAY, False)
    assert [(e.onset, e.end) for e in m.events] == [(25, 26)]
    assert m.n_withdrawn(M.TRAIN_LOSS) == 0


def test_a_level_shift_is_told_then_withdrawn_and_never_an_event():
    # A persistent rise of 7 sigma: sure at one scale on its first row, but it never comes
    # back, so the multi-step rule does not call it a spike.
    rng = random.Random(1)
    values = [3.0 + 0.01 * rng.gauss(0, 1) + (0.07 if s >= 150 else 0) for s in range(1, 300)]
    m, _ = _feed(values)
    [rep] = m.reports(M.TRAIN_LOSS)
    assert (rep.onset, rep.state) == (150, "withdrawn") and 150 < rep.decided <= 150 + DELAY + 10
    assert m.events == [] and m.n_withdrawn(M.TRAIN_LOSS) == 1


def test_reports_leave_the_events_of_the_offline_pass_unchanged():
    rng = random.Random(2)
    values = [_falling(s, rng, spike_at=60) + (0.03 if s >= 140 else 0) for s in range(1, 260)]
    m, _ = _feed(values)
    offline = detect([Series(M.TRAIN_LOSS, np.arange(1, 260), np.array(values),
                             np.zeros(259, dtype=bool))])
    assert [e.onset for e in m.events] == [e.onset for e in offline] == [60]
    assert [(r.onset, r.state) for r in m.reports(M.TRAIN_LOSS)] == [
        (60, "confirmed"), (140, "withdrawn")]


def test_reports_survive_a_checkpoint_mid_verdict():
    rng = random.Random(0)
    values = [_falling(s, rng) for s in range(1, 200)]
    half, _ = _feed(values, stop=50)
    resumed = SpikeMonitor()
    resumed.load_state_dict(half.state_dict())
    for step, v in enumerate(values[50:], 51):
        resumed.update(step, {M.TRAIN_LOSS: v})
    resumed.finish()
    whole, _ = _feed(values)
    assert resumed.reports(M.TRAIN_LOSS) == whole.reports(M.TRAIN_LOSS)


def test_a_rule_without_delay_reports_each_event_as_it_opens():
    m = SpikeMonitor("loss_ratio", (M.TRAIN_LOSS,))
    for step, v in enumerate([3.0, 2.9, 2.8, 4.0, 2.7], 1):
        m.update(step, {M.TRAIN_LOSS: v})
    assert [(r.onset, r.state) for r in m.reports(M.TRAIN_LOSS)] == [(4, "confirmed")]
    assert m.n_reported(M.TRAIN_LOSS) == 1 and m.n_withdrawn(M.TRAIN_LOSS) == 0
