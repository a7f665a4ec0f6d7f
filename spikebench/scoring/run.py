"""Pure scoring functions over a trial's metrics: convergence speed, final quality, spikes.

No I/O and no runner state: every function takes plain sequences / records and returns
numbers, so the runner, the tuner and the analysis notebooks all score a trial the same way.
Conventions: a missed target scores ``math.inf``; :func:`summarize` returns a JSON-safe dict
(non-finite numbers become None there, so ``null`` means "missed" / "not available").
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spikebench import metrics as M
from spikebench.spikes.events import Event, total_severity
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.reports import Report, settled
from spikebench.spikes.rules import LOSS, OlmoRule, metric_kind
from spikebench.values import finite, json_safe


def time_to_target(
    evals: Iterable[Mapping[str, Any]],
    target: float,
    *,
    loss_key: str = M.VAL_LOSS,
    step_key: str = M.STEP,
    tokens_key: str = "tokens",
    seconds_key: str = "time",
) -> dict[str, float]:
    """Steps, tokens and seconds at the FIRST evaluation with loss <= ``target`` (AlgoPerf).

    ``evals`` are records in step order; records without ``loss_key`` are skipped. A miss
    (never reached, or NaN losses only) gives ``math.inf`` for all three. When the reaching
    record lacks the tokens/seconds key that entry is None (known to be reached, unknown cost).
    """
    for r in evals:
        v = r.get(loss_key)
        if v is None or not finite(float(v)):
            continue
        if float(v) <= target:
            tok, sec = r.get(tokens_key), r.get(seconds_key)
            return {
                "steps": float(r[step_key]),
                "tokens": None if tok is None else float(tok),
                "seconds": None if sec is None else float(sec),
            }
    return {"steps": math.inf, "tokens": math.inf, "seconds": math.inf}


def final_loss(values: Sequence[float], tail: int = 1) -> float:
    """Mean of the last ``tail`` values; ``inf`` if any of them is non-finite or there are none."""
    if not len(values):
        return math.inf
    last = [float(v) for v in values[-tail:]]
    return sum(last) / len(last) if all(math.isfinite(v) for v in last) else math.inf


def loss_auc(steps: Sequence[float], values: Sequence[float]) -> float:
    """Trapezoid area under the loss curve over steps, divided by the step span.

    The result is a mean loss over the run (comparable across run lengths). Non-finite
    values are replaced by the first finite value (a diverged stretch counts as "no better
    than the start"). A single point returns its
    value; no finite values at all return inf.
    """
    s = [float(x) for x in steps]
    v = [float(x) for x in values]
    first = next((x for x in v if math.isfinite(x)), None)
    if first is None:
        return math.inf
    v = [x if math.isfinite(x) else first for x in v]
    if len(v) == 1 or s[-1] == s[0]:
        return v[-1]
    area = sum(0.5 * (v[i] + v[i + 1]) * (s[i + 1] - s[i]) for i in range(len(v) - 1))
    return area / (s[-1] - s[0])


def spike_score(values: Sequence[float], k: float = 7.0, window: int = 1000) -> float | None:
    """OLMo 2 spike score: share of values >= k sd from the mean of the previous ``window``.

    Uses :class:`~spikebench.spikes.rules.OlmoRule` (same code as the online monitor).
    Denominator: all finite values. Values before a full window cannot be scored, so a
    series of at most ``window`` values returns None rather than a misleading 0.
    Non-finite values are skipped (they are counted by the divergence/events fields).
    """
    rule = OlmoRule(window=window, k=k)
    n = hits = 0
    for v in values:
        v = float(v)
        if not math.isfinite(v):
            continue
        n += 1
        hits += rule.update(v)[0]
    return hits / n if n > window else None


def max_loss_ratio(values: Sequence[float]) -> float | None:
    """max over t >= 1 of L_t / min_{s<t} L_s (Li et al. 2022); None with < 2 positive values."""
    best, runmin = None, math.inf
    for v in map(float, values):
        if not math.isfinite(v):
            continue
        if 0 < runmin < math.inf:
            r = v / runmin
            best = r if best is None else max(best, r)
        runmin = min(runmin, v)
    return best


def event_severity(events: Iterable[Event]) -> dict[str, float]:
    """Severity totals: summed area, summed and max recovery steps, max height (sigma)."""
    evs = list(events)
    heights = [e.height_sigma for e in evs if e.height_sigma is not None]
    rec = [e.recovery_steps for e in evs]
    return {
        "total_severity": total_severity(evs),
        "recovery_steps_sum": float(sum(rec)),
        "recovery_steps_max": float(max(rec)) if rec else 0.0,
        "max_height_sigma": max(heights) if heights else None,
    }


def spike_step_share(events: Iterable[Event], steps: Sequence[int]) -> float:
    """Share of logged steps inside an event, from onset up to (not incl.) its recovery step.

    ``steps`` must be sorted. Overlapping events are counted once.
    """
    s = sorted(int(x) for x in steps)
    if not s:
        return 0.0
    mark = [0] * (len(s) + 1)  # difference array over step indices
    for e in events:
        lo = bisect.bisect_left(s, e.onset)
        hi = max(bisect.bisect_left(s, e.onset + e.recovery_steps), lo + 1)
        mark[lo] += 1
        mark[min(hi, len(s))] -= 1
    inside, depth = 0, 0
    for m in mark[:-1]:
        depth += m
        inside += depth > 0
    return inside / len(s)


def summarize(
    records: Iterable[Mapping[str, Any]],
    *,
    rule: str = "default",
    loss_key: str = M.TRAIN_LOSS,
    grad_key: str = M.GRAD_NORM,
    eval_key: str = M.VAL_LOSS,
    step_key: str = M.STEP,
    tokens_key: str = "tokens",
    seconds_key: str = "time",
    target: float | None = None,
    diverged_step: int | None = None,
    events: Sequence[Event] | None = None,
    gap: int = 5,
    reports: Sequence[Report] | None = None,
) -> dict[str, Any]:
    """The spike/convergence part of a trial's ``summary.json``, JSON-safe.

    ``records`` are the trial's flat metric dicts (``metrics.jsonl`` rows) in step order;
    rows without ``loss_key`` are not training rows for the loss statistics. Events come
    from ``events`` if given (e.g. the online monitor's), else from running
    :class:`SpikeMonitor` with ``rule`` over the records. ``diverged_step`` defaults to the
    first step whose training loss is non-finite. Time-to-target needs ``target`` (else
    None); its evaluations are the rows carrying ``eval_key``. ``reports``: the online
    monitor's loss reports at the end of a run, each confirmed or withdrawn (recorded as
    ``reports``, :func:`spikebench.spikes.reports.settled`).
    """
    rows = list(records)
    train = [r for r in rows if r.get(loss_key) is not None]
    steps = [int(r[step_key]) for r in train]
    loss = [float(r[loss_key]) for r in train]
    grads = [float(r[grad_key]) for r in rows if r.get(grad_key) is not None]

    if events is None:
        mon = SpikeMonitor(rule, (loss_key, grad_key), gap=gap)
        for r in rows:
            mon.update(int(r[step_key]), r)
        mon.finish()
        events = mon.events
    events = list(events)

    if diverged_step is None:
        diverged_step = next((s for s, v in zip(steps, loss, strict=True) if not math.isfinite(v)), None)

    # Severity and counts are of loss events: grad-norm events are precursors, and their
    # areas are in other units. All events are listed.
    loss_events = [e for e in events if metric_kind(e.metric) == LOSS]
    sev = event_severity(loss_events)
    out: dict[str, Any] = {
        "rule": rule,
        "steps": len(train),
        "events": [e.to_dict() for e in events],
        # Spontaneous loss events: the count every score and report uses. Events that
        # overlap an injected fault are the fault's, not a finding, and are counted apart.
        "n_events": sum(not e.injected for e in loss_events),
        "n_injected_events": sum(e.injected for e in loss_events),
        "n_grad_norm_events": len(events) - len(loss_events),
        "n_unrecovered": sum(not e.recovered for e in loss_events),
        "total_severity": sev["total_severity"],
        "spike_score": {
            "loss": spike_score(loss),
            "grad_norm": spike_score(grads) if grads else None,
        },
        "max_loss_ratio": max_loss_ratio(loss),
        "spike_step_share": spike_step_share(events, steps),
        "recovery_steps": {"sum": sev["recovery_steps_sum"], "max": sev["recovery_steps_max"]},
        "max_height_sigma": sev["max_height_sigma"],
        "diverged_step": diverged_step,
        "final_loss": final_loss(loss) if loss else None,
        "loss_auc": loss_auc(steps, loss) if loss else None,
        "time_to_target": None,
    }
    if target is not None:
        ttt = time_to_target(
            (r for r in rows if r.get(eval_key) is not None), target, loss_key=eval_key,
            step_key=step_key, tokens_key=tokens_key, seconds_key=seconds_key,
        )
        out["time_to_target"] = {"target": target, "reached": math.isfinite(ttt["steps"]), **ttt}
    if reports is not None:
        out["reports"] = settled(reports)
    return json_safe(out)


def score_log(log, *, rule: str = "default", gap: int = 5) -> dict[str, Any]:
    """:func:`summarize` over a log read by :func:`spikebench.runs.text.read_log` (its
    ``loss``/``grad_norm`` columns): what ``spikebench spikes`` prints, by the code the
    trainer scores its own records with."""
    f, n = log.frame, len(log.frame)
    grad = f["grad_norm"].tolist() if log.has_grad_norm else [None] * n
    missing = f["grad_norm_missing"].tolist() if log.has_grad_norm else [True] * n
    injected = f["injected"].tolist() if "injected" in f else [False] * n
    records = []
    for step, loss, g, gap_cell, inj in zip(f["step"].tolist(), f["loss"].tolist(), grad,
                                            missing, injected, strict=True):
        rec: dict[str, Any] = {M.STEP: int(step), "loss": loss}
        if not gap_cell:  # an empty cell is no value; a logged NaN is a divergence
            rec["grad_norm"] = g
        if inj:
            rec[M.INJECTED] = 1
        records.append(rec)
    return summarize(records, rule=rule, loss_key="loss", grad_key="grad_norm", gap=gap)
