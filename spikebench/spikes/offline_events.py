"""Events from a whole series' verdicts at once: what :class:`.events.EventTracker` builds
when fed every row, without a Python step per row.

The tracker's per-row work is bookkeeping that only matters near flags: grouping flags
that lie within ``gap`` rows, and, for each event still awaiting recovery, the area and
the recovery count. Here flags are grouped with numpy; each event's tracked rows (from its
onset until it is back at ``level + sigma`` after its last flag, or is dropped as the
oldest of more than ``MAX_PENDING``, or the data ends) are found by vectorised searches,
and its area is a sequential cumsum over them in row order, so every rounding matches.
The Python loop runs once per event, not once per row. Each event is opened, raised to
its peak and (when short) tracked row by row by the :class:`~.events.Event` methods the
online tracker calls.
"""

from __future__ import annotations

import math

import numpy as np

from spikebench.spikes.events import MAX_PENDING, TREND_HORIZON, Event, local_baseline
from spikebench.spikes.monitor import SpikeMonitor

# The monitor's pre-onset windows, whose events these must equal.
BASELINE_WINDOW, LEVEL_WINDOW = SpikeMonitor.BASELINE_WINDOW, SpikeMonitor.LEVEL_WINDOW
# Events tracked over fewer rows are finished by a Python loop (numpy costs more there).
SHORT = 48


class _Open:
    """An event still tracked: its first and last flagged rows, threshold, and how far
    the search for its recovery has looked."""

    def __init__(self, ev: Event, onset: int, last_flag: int):
        self.ev, self.onset, self.last_flag = ev, onset, last_flag
        self.thr = ev.level + (ev.sigma or 0.0)
        self.searched = last_flag + 1


def series_events(
    metric: str,
    steps: np.ndarray,
    values: np.ndarray,
    injected: np.ndarray,
    flags: np.ndarray,
    gap: int,
) -> list[Event]:
    """The events of one metric: ``steps`` (strictly increasing), ``values``, ``injected``
    and the rule's final verdicts ``flags`` per row, as ``SpikeMonitor`` would build them."""
    fr = np.flatnonzero(flags)
    if not len(fr):
        return []
    t = _Tracks(steps, values, injected, flags)
    starts = np.flatnonzero(np.diff(fr) > gap + 1) + 1
    bounds = np.concatenate(([0], starts, [len(fr)]))
    events: list[Event] = []
    pending: list[_Open] = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        rows = fr[a:b]
        onset = int(rows[0])
        # Events that came back before this onset are final; the rest stay pending.
        pending = [o for o in pending if not t.recovered_before(o, onset)]
        o = _Open(t.open_event(metric, rows), onset, int(rows[-1]))
        events.append(o.ev)
        pending.append(o)
        if len(pending) > MAX_PENDING:  # the oldest is dropped, unrecovered, untracked
            t.finish(pending.pop(0), onset - 1, recovered=False)
    for o in pending:
        if not t.recovered_before(o, len(values)):  # not back by the end of the data
            t.finish(o, len(values) - 1, recovered=False)
    return events


class _Tracks:
    """One series' rows, and the per-event bookkeeping over them."""

    def __init__(self, steps, values, injected, flags):
        self.steps, self.values, self.injected, self.flags = steps, values, injected, flags
        self.finite = np.isfinite(values)
        self.dstep = np.ones(len(steps), dtype=float)
        if len(steps) > 1:
            self.dstep[1:] = np.maximum(np.diff(steps), 1)
        fin = self.finite
        self.fin_count = np.concatenate(([0], np.cumsum(fin)))  # finite rows before a row
        self.fin_values = values[fin]
        # Rows that count toward a recovery (before the per-event threshold).
        self.calm = ~flags & fin

    def open_event(self, metric: str, rows: np.ndarray) -> Event:
        """The event of flagged ``rows`` (one group), as the tracker opens and extends it."""
        v, steps = self.values, self.steps
        onset = int(rows[0])
        c = int(self.fin_count[onset])
        recent = self.fin_values[max(0, c - BASELINE_WINDOW):c].tolist()
        first = float(v[onset])
        ev = Event.open(metric, int(steps[onset]), first,
                        local_baseline(recent, LEVEL_WINDOW, first),
                        bool(self.injected[rows].any()))
        peak_cmp = np.where(self.finite[rows], v[rows], math.inf)
        peak = int(np.argmax(peak_cmp))  # the first highest, as `>` keeps it
        ev.raise_peak(int(steps[rows[peak]]), float(peak_cmp[peak]))
        ev.end, ev.n_spike_steps = int(steps[rows[-1]]), len(rows)
        return ev

    def recovered_before(self, o: _Open, limit: int) -> bool:
        """Whether ``o`` is back at its level on a row before ``limit`` (after its last
        flag); if so it is finished there. Looks only at rows not looked at before."""
        lo, size = o.searched, 256
        while lo < limit:
            hi = min(limit, lo + size)
            with np.errstate(invalid="ignore"):
                hit = np.flatnonzero(self.calm[lo:hi] & (self.values[lo:hi] <= o.thr))
            if len(hit):
                self.finish(o, lo + int(hit[0]), recovered=True)
                return True
            lo, size = hi, size * 4
        o.searched = max(o.searched, limit)
        return False

    def finish(self, o: _Open, stop: int, *, recovered: bool) -> None:
        """Fill in ``o``'s area, observation count and recovery from its tracked rows,
        onset..``stop``: within its flags, each flag row and the rows after it up to the
        first one back at the threshold; after its last flag, every row up to ``stop``."""
        ev, a, last = o.ev, o.onset, o.last_flag
        if stop - a < SHORT:
            self._finish_short(o, stop, recovered)
            return
        span = np.arange(a, last + 1)
        flag = self.flags[a:last + 1]
        with np.errstate(invalid="ignore"):
            back = self.calm[a:last + 1] & (self.values[a:last + 1] <= o.thr)
        lastflag = np.maximum.accumulate(np.where(flag, span - a, -1))
        cum = np.cumsum(back)
        # Rows since the last flag that came back, before this row.
        before = np.concatenate(([0], cum[:-1])) - cum[lastflag]
        tracked = np.concatenate((span[flag | (before == 0)], np.arange(last + 1, stop + 1)))
        k = np.minimum(np.arange(len(tracked)), TREND_HORIZON).astype(float)
        ref = ev.trend_start + ev.trend * k
        v = self.values[tracked]
        with np.errstate(invalid="ignore", over="ignore"):
            adds = self.finite[tracked] & (v > ref) & ~self.injected[tracked]
            terms = np.where(adds, (v - ref) * self.dstep[tracked], 0.0)
        # Sequential, in row order, as `area +=` sums (adding 0.0 changes nothing).
        ev.area = float(np.cumsum(np.concatenate(([0.0], terms)))[-1])
        ev.n_obs = len(tracked)
        ev.recovery_steps = int(self.steps[tracked[-1]]) - ev.onset
        ev.recovered = recovered

    def _finish_short(self, o: _Open, stop: int, recovered: bool) -> None:
        """:meth:`finish` for a short event (most are): the tracker's own step
        (:meth:`.Event.track`) over its rows, cheaper than numpy's per-call cost here."""
        ev, sl = o.ev, slice(o.onset, stop + 1)
        for step, v, flag, fin, inj, ds in zip(
                self.steps[sl].tolist(), self.values[sl].tolist(), self.flags[sl].tolist(),
                self.finite[sl].tolist(), self.injected[sl].tolist(), self.dstep[sl].tolist(),
                strict=True):
            ev.recovered = ev.recovered and not flag  # a flag within the gap reopens it
            if not ev.recovered:
                ev.track(step, v, flag, fin, inj, ds)
        ev.recovered = recovered
