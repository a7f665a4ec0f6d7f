"""Timely online detection: a spike is told at its first sure row (provisional), then
confirmed or withdrawn when the default rule's delayed verdict reaches it; events, and so
every offline score, stay as they were. By the end of a run every report is confirmed or
withdrawn, and summary.json records which."""

import json
import math
import random

import numpy as np
import pytest

from spikebench import metrics as M
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.offline import Series, detect
from spikebench.spikes.reports import settled
from spikebench.spikes.synthetic import generate

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


def _run(tmp_path, values, sync_every=10):
    """The run API over ``values`` (steps 1..n), exporting to Prometheus: its decisions,
    summary.json, the last row of metrics.jsonl and the spike counters at the end."""
    from spikebench.api.run import Run
    from spikebench.live.exporter import Exporter
    from spikebench.live.sink import PrometheusSink

    ex = Exporter()
    run = Run(run_dir=tmp_path / "run", sync_every=sync_every, sinks=[PrometheusSink(ex)])
    told = [s for s, v in enumerate(values, 1) if run.log(s, loss=v).name == "SPIKE"]
    run.finish()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    counters = tuple(int(ex.registry.get_sample_value(f"spikebench_spike_{n}_total",
                                                      {"trial": "", "arm": ""}))
                     for n in ("reports", "events", "withdrawn"))
    return run, told, summary, last, counters


def test_a_report_still_provisional_at_the_end_is_confirmed_and_recorded(tmp_path):
    # A loop of 99 steps whose spike (onset 93) is told at the read-back of step 99 (SPIKE),
    # long before the 73-row verdict: the run's end gives the held verdicts.
    rng = random.Random(3)
    values = [2.0 + 2.0 * math.exp(-0.05 * s) + 0.01 * rng.random() + (1.0 if 93 <= s <= 95
              else 0.0) for s in range(1, 100)]
    run, told, summary, last, counters = _run(tmp_path, values, sync_every=33)
    assert told == [99] and run.last_report.onset == 93
    # The last row was logged before the verdict: the counters there still say "told";
    # the exported ones take the end's.
    assert (last[M.SPIKE_REPORTED], last[M.SPIKE_EVENTS], last[M.SPIKE_WITHDRAWN]) == (1, 0, 0)
    assert counters == (1, 1, 0)
    rec = summary["spikes"]["reports"]
    assert (rec["reported"], rec["confirmed"], rec["withdrawn"], rec["late"]) == (1, 1, 0, 0)
    assert rec["list"] == [{"onset": 93, "reported": 93, "decided": 99, "state": "confirmed",
                            "late": False}]
    assert [e["onset"] for e in summary["spikes"]["events"]] == [93]


def test_a_report_still_provisional_at_the_end_is_withdrawn_and_recorded(tmp_path):
    # A lasting rise near the end: told at once, never back, so never an event.
    rng = random.Random(1)
    values = [3.0 + 0.01 * rng.gauss(0, 1) + (0.07 if s >= 280 else 0) for s in range(1, 300)]
    run, told, summary, last, counters = _run(tmp_path, values, sync_every=1)
    assert told == [280]
    assert (last[M.SPIKE_REPORTED], last[M.SPIKE_WITHDRAWN]) == (1, 0)
    assert counters == (1, 0, 1)
    rec = summary["spikes"]["reports"]
    assert (rec["reported"], rec["confirmed"], rec["withdrawn"]) == (1, 0, 1)
    assert rec["list"][0]["state"] == "withdrawn" and rec["list"][0]["decided"] == 299
    assert summary["spikes"]["events"] == []


@pytest.mark.parametrize("seed", range(4))
def test_no_report_is_provisional_after_finish(seed):
    # Spikes, shifts and non-finite values anywhere, the end included.
    rng = np.random.default_rng(seed)
    lg = generate(seed, 900, spike_every=120)
    loss = lg.loss.copy()
    loss[rng.integers(0, 900, 3)] = np.nan
    loss[-20:] += 0.5
    m = SpikeMonitor()
    for step, a, b in zip(lg.steps.tolist(), loss.tolist(), lg.grad_norm.tolist(), strict=True):
        m.update(step, {M.TRAIN_LOSS: a, M.GRAD_NORM: b})
    m.finish()
    reps = m.reports(M.TRAIN_LOSS)
    assert reps and all(r.state in ("confirmed", "withdrawn") for r in reps)
    assert settled(reps)["withdrawn"] == m.n_withdrawn(M.TRAIN_LOSS)
