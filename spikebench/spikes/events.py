"""Grouping flagged steps into spike events, and each event's severity.

A detector flags single observations; people reason about *events*. Flagged observations of
one metric that are close together (at most ``gap`` unflagged observations between two
flags) form one :class:`Event`. For each event we freeze, at its onset, the pre-spike level
(median of the recent values) and the local noise scale sigma (robust, from step-to-step
differences), and from those derive:

- ``height_sigma``: (peak value - pre-onset level) / sigma;
- ``recovery_steps``: steps from onset until the metric is back at or below
  ``level + sigma``; an event still above that at the end of the data is unrecovered and
  counts the steps remaining (``recovered=False``);
- ``area``: the area between the curve and its pre-spike trend, over the event and its
  recovery (units: metric x steps), a severity measure that, unlike a count, tells a
  one-step blip from a thousand-step detour. The trend is the line through the pre-onset
  level with the slope of the recent values (median of the newer half minus median of the
  older half, per observation), never rising (a rising pre-onset curve is a precursor, not
  a trend to excuse) and extrapolated no further than the window it was fitted on
  (``TREND_HORIZON`` observations), after which it stays flat. A loss that was still
  falling when it spiked owes the progress it lost, not just its climb above the old level.

All of this is incremental (:class:`EventTracker`); the whole-series pass
(:mod:`.offline_events`) groups flags with numpy but opens, raises and tracks each event by
the same :class:`Event` methods, so both produce identical events.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields

from spikebench.spikes.robust import median, robust_sigma_from_diffs, trend_slope
from spikebench.values import dec_float, enc_float, json_safe

# Bound on events awaiting recovery: keeps every observation O(1) even when a rule flags
# something that never comes back (a level shift); the oldest is then closed unrecovered.
MAX_PENDING = 32
# Observations over which a pre-spike trend is extrapolated (its fitting window's length).
TREND_HORIZON = 64


@dataclass
class Event:
    """One spike event of one metric.

    ``onset``/``peak``/``end`` are step values (first flagged, highest flagged, last flagged).
    ``height_sigma`` is None when the onset came before 4 values existed (no noise scale
    yet; ``height`` in metric units is still given) and inf for a non-finite peak.
    ``recovery_steps`` is provisional (steps so far) while ``recovered`` is False.
    ``trend`` (per observation, <= 0) and ``trend_start`` (the trend at the onset) define
    the line the ``area`` is measured from; ``n_obs`` counts observations since the onset.
    """

    onset: int
    peak: int
    metric: str
    height_sigma: float | None
    recovery_steps: int
    area: float
    recovered: bool
    end: int
    level: float
    sigma: float | None
    peak_value: float
    height: float
    n_spike_steps: int = 1
    trend: float = 0.0
    trend_start: float = math.nan
    n_obs: int = 0
    # One of its flagged steps trained on an injected fault: the event overlaps the fault, so
    # it is counted apart from the spontaneous ones (its damage still counts as severity).
    injected: bool = False

    def to_dict(self, *, json: bool = True) -> dict:
        d = asdict(self)
        return json_safe(d) if json else d

    def state(self) -> dict:
        return {k: enc_float(v) if isinstance(v, float) else v for k, v in asdict(self).items()}

    @classmethod
    def from_state(cls, d: dict) -> Event:
        names = {f.name for f in fields(cls)}
        return cls(**{k: dec_float(v) for k, v in d.items() if k in names})

    # What an event is, one definition for the tracker's row-by-row pass and the
    # whole-series one (:mod:`.offline_events`): how it opens, how its peak rises, and what
    # each row it tracks adds to it.

    @classmethod
    def open(cls, metric: str, step: int, value: float, base: tuple, injected: bool) -> Event:
        """An event whose first flagged row is ``step`` (``value``; a non-finite one is a
        peak of height inf); ``base`` is the pre-onset ``(level, sigma)`` or ``(level,
        sigma, trend, lag)`` (see :class:`EventTracker`)."""
        level, sigma = base[0], base[1]
        trend, lag = (base[2], base[3]) if len(base) > 2 else (0.0, 0.0)
        peak = value if math.isfinite(value) else math.inf
        h, hs = height(peak, level, sigma)
        return cls(onset=step, peak=step, metric=metric, height_sigma=hs, recovery_steps=0,
                   area=0.0, recovered=False, end=step, level=level, sigma=sigma,
                   peak_value=peak, height=h, injected=injected, trend=trend,
                   trend_start=level + trend * lag)

    def raise_peak(self, step: int, value: float) -> None:
        """A flagged row of this event: it is the peak if it is higher than the peak so far."""
        if value > self.peak_value or math.isnan(self.peak_value):
            self.peak, self.peak_value = step, value
            self.height, self.height_sigma = height(value, self.level, self.sigma)

    def track(self, step: int, value: float, flagged: bool, finite: bool, injected: bool,
              dstep: float) -> None:
        """One row while the event awaits recovery: its area above the pre-spike trend
        (not on an injected row), the steps so far, and whether it is back at
        ``level + sigma`` (on an unflagged finite row)."""
        ref = self.trend_start + self.trend * min(self.n_obs, TREND_HORIZON)
        self.n_obs += 1
        if finite and value > ref and not injected:
            self.area += (value - ref) * dstep
        self.recovery_steps = step - self.onset
        if not flagged and finite and value <= self.level + (self.sigma or 0.0):
            self.recovered = True


def height(peak_value: float, level: float, sigma: float | None) -> tuple[float, float | None]:
    """The ``height`` and ``height_sigma`` of a peak over a pre-onset level and sigma."""
    if not math.isfinite(peak_value):
        return math.inf, math.inf
    h = peak_value - level
    if sigma is None:
        return h, None
    # A flat pre-onset series has sigma 0; a tiny floor keeps the height finite.
    return h, h / max(sigma, 1e-12 * max(1.0, abs(level)))


class EventTracker:
    """Incrementally groups one metric's flagged observations into :class:`Event` s.

    Call :meth:`observe` once per observation, in step order, with the rule's verdict.
    ``baseline`` is called only when an event opens and must return the pre-onset
    ``(level, sigma)`` or ``(level, sigma, trend, lag)`` computed from values *before* this
    observation (``trend``: slope per observation; ``lag``: how many observations before
    the onset the level stands, e.g. the centre of the values it is a median of); calling it
    lazily keeps the per-step cost at a few comparisons.

    Edge cases: a flagged observation within ``gap`` unflagged observations of the previous
    flag extends the latest event, even if it had already dipped back to its level (bursts
    stay one event). A non-finite value is a peak of height inf and never counts as
    recovered. Recovery and area are tracked for every pending event, also while a later
    event is open.
    """

    def __init__(self, metric: str, gap: int = 5):
        if gap < 0:
            raise ValueError(f"gap must be >= 0, got {gap}")
        self.metric = metric
        self.gap = gap
        self.events: list[Event] = []
        self._pending: list[int] = []  # indices of events whose recovery is not final
        self._row = -1
        self._last_flag_row: int | None = None
        self._last_step: int | None = None

    def observe(
        self,
        step: int,
        value: float,
        is_spike: bool,
        baseline: Callable[[], tuple[float, float | None, float, float]],
        injected: bool = False,
    ) -> None:
        """Feed one observation. ``injected`` marks a step whose batch was an injected fault:
        it can still flag and extend an event, but adds nothing to any event's area, because
        its loss measures the injected data rather than the model (so severity is the damage
        the model shows on clean batches)."""
        self._row += 1
        dstep = 1 if self._last_step is None else max(step - self._last_step, 1)
        self._last_step = step
        finite = math.isfinite(value)
        peak_cmp = value if finite else math.inf

        if is_spike:
            extend = (
                self.events
                and self._last_flag_row is not None
                and self._row - self._last_flag_row <= self.gap + 1
            )
            if extend:
                ev = self.events[-1]
                ev.end = step
                ev.n_spike_steps += 1
                ev.injected = ev.injected or injected
                ev.raise_peak(step, peak_cmp)
                if ev.recovered:
                    ev.recovered = False
                    if len(self.events) - 1 not in self._pending:
                        self._pending.append(len(self.events) - 1)
            else:
                self.events.append(Event.open(self.metric, step, value, baseline(), injected))
                self._pending.append(len(self.events) - 1)
                if len(self._pending) > MAX_PENDING:
                    self._pending.pop(0)  # oldest stays unrecovered, provisional count frozen
            self._last_flag_row = self._row

        newest = len(self.events) - 1
        keep = []
        for idx in self._pending:
            ev = self.events[idx]
            if not ev.recovered:
                ev.track(step, value, is_spike, finite, injected, dstep)
            # The newest event may still be extended by a flag within the gap.
            extendable = idx == newest and self._row - self._last_flag_row <= self.gap
            if not (ev.recovered and not extendable):
                keep.append(idx)
        self._pending = keep

    def finish(self) -> None:
        """End of data: pending events are final; unrecovered ones keep steps-remaining."""
        for idx in self._pending:
            ev = self.events[idx]
            if not ev.recovered and self._last_step is not None:
                ev.recovery_steps = self._last_step - ev.onset
        self._pending = []
        self._last_flag_row = None

    def state_dict(self) -> dict:
        return {
            "metric": self.metric,
            "gap": self.gap,
            "events": [e.state() for e in self.events],
            "pending": list(self._pending),
            "row": self._row,
            "last_flag_row": self._last_flag_row,
            "last_step": self._last_step,
        }

    def load_state_dict(self, d: dict) -> None:
        self.metric = d["metric"]
        self.gap = d["gap"]
        self.events = [Event.from_state(e) for e in d["events"]]
        self._pending = list(d["pending"])
        self._row = d["row"]
        self._last_flag_row = d["last_flag_row"]
        self._last_step = d["last_step"]


def local_baseline(
    recent: Sequence[float], level_window: int = 16, fallback: float = math.nan
) -> tuple[float, float | None, float, float]:
    """(level, sigma, trend, lag) from recent finite values, oldest first.

    The level is the median of the last ``level_window`` values, so it stands ``lag`` =
    (n + 1) / 2 observations before the next one; ``trend`` is :func:`trend_slope`.
    With no history at all (a spike at the very first value) the level is ``fallback``.
    """
    if not recent:
        return fallback, None, 0.0, 0.0
    last = recent[-level_window:]
    return (median(last), robust_sigma_from_diffs(recent), trend_slope(recent),
            (len(last) + 1) / 2)


def total_severity(events: Iterable[Event]) -> float:
    """Sum of event areas (metric x steps above the pre-spike trend)."""
    return float(sum(e.area for e in events if math.isfinite(e.area)))
