"""The precursor scorecard: how well, how early and how often wrongly a signal warns.

Pure functions over :class:`~spikebench.precursors.labels.Labelled` runs. A signal's rule
(:func:`~spikebench.precursors.signals.rule_for`) gives each of its values a score; a value
whose score reaches the threshold warns.

- **PR-AUC** (average precision) over every scored value after the burn-in: positive when a
  loss event (not the control) starts within the next ``HORIZON`` steps; values from an
  onset to ``AFTER`` steps past it, or before a control event, count for neither side.
- **The threshold** is the lowest at which false alarms stay within ``BUDGET`` per 10,000
  scored steps over all runs. A false alarm: a warning with no onset in the ``HORIZON``
  steps after it and no onset in the ``AFTER`` steps before it; warnings closer together
  than ``REFRACTORY`` steps count once.
- At that threshold: **recall at lead >= L** (a value that warns in [onset - HORIZON,
  onset - L]), the **median lead** (onset minus the first warning in [onset - HORIZON,
  onset], over the events warned), **false alarms per 10k steps** on the runs without an
  event, and the same lead and recall on the **control**.
- **Intervals**: 95% percentile intervals of a bootstrap over seeds (each seed's runs drawn
  together; a run that names no seed is its own), at the threshold fixed on all runs;
  none from a single seed, whose every resample is the same runs (a zero-width interval
  would claim a certainty the one seed does not give).
  A signal **beats the loss** when the paired interval of its PR-AUC minus the loss's lies
  above 0, and is **worse** when it lies below; with fewer than ``MIN_EVENTS`` events or
  ``MIN_SEEDS`` seeds no verdict is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spikebench.precursors.labels import Labelled
from spikebench.precursors.signals import LOSS, WINDOW, rule_for

HORIZON = 100
AFTER = 50
REFRACTORY = 50
LEADS = (10, 25, 50)
BUDGET = 1.0  # false alarms per 10,000 steps
BOOT = 1000
BEATS, WORSE, NOT_SHOWN = "beats the loss", "worse than the loss", "not shown to beat the loss"
# Below these, a bootstrap over seeds says little: the row is shown, its verdict withheld.
MIN_EVENTS, MIN_SEEDS = 10, 5


@dataclass
class _Run:
    """One run's values of one signal, ready to score."""

    seed: Any
    steps: np.ndarray  # the signal's steps after the burn-in
    scores: np.ndarray
    label: np.ndarray  # 1 positive, 0 negative, -1 neither
    onsets: list[int]
    control: list[int]
    scored_steps: int


def _prepare(run: Labelled, signal: str, window: int = WINDOW) -> _Run | None:
    rule = rule_for(signal, window)
    try:
        col = rule.column(run.table)
    except Exception:  # noqa: BLE001 - a run without this signal: not scored for it
        return None
    has = ~np.isnan(col)  # a row without the signal (a probe's off-steps)
    steps, vals = run.steps[has], col[has]
    if len(vals) == 0:
        return None
    with np.errstate(all="ignore"):
        scores = rule.scores(vals)
    keep = steps > run.burn_in
    steps, scores = steps[keep], scores[keep]
    label = np.zeros(len(steps), dtype=np.int8)
    for o in run.onsets:
        label[(steps < o) & (steps >= o - HORIZON)] = 1
    for o in run.onsets + run.control:
        label[(steps >= o) & (steps <= o + AFTER)] = -1
    for o in run.control:
        label[(steps < o) & (steps >= o - HORIZON)] = -1
    seed = run.seed if run.seed is not None else f"run:{run.name}"
    return _Run(seed, steps, scores, label, run.onsets, run.control, run.scored_steps)


def average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
    """Average precision of ``scores`` for binary ``labels`` (ties ranked together); NaN
    without a positive."""
    pos = int(labels.sum())
    if pos == 0:
        return math.nan
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    tp = np.cumsum(y)
    last = np.r_[s[1:] != s[:-1], True]  # the end of each run of tied scores
    tp, n = tp[last], np.flatnonzero(last) + 1
    recall_gain = np.diff(np.r_[0, tp]) / pos
    return float((recall_gain * tp / n).sum())


def _alarms(r: _Run, tau: float) -> np.ndarray:
    """The steps that warn at ``tau``, a warning within REFRACTORY of the last counted once."""
    hot = r.steps[r.scores >= tau]
    out, last = [], -math.inf
    for t in hot.tolist():
        if t - last >= REFRACTORY:
            out.append(t)
            last = t
    return np.asarray(out, dtype=np.int64)


def _false_alarms(r: _Run, tau: float) -> int:
    onsets = np.asarray(sorted(r.onsets + r.control), dtype=np.int64)
    n = 0
    for t in _alarms(r, tau).tolist():
        ahead = ((onsets >= t) & (onsets <= t + HORIZON)).any()
        after = ((onsets < t) & (onsets >= t - AFTER)).any()
        n += not (ahead or after)
    return n


def threshold(runs: list[_Run], budget: float = BUDGET) -> float:
    """The lowest score at which false alarms over ``runs`` stay within ``budget`` per 10k
    scored steps (inf if even the highest finite score breaks it)."""
    steps = sum(r.scored_steps for r in runs)
    allowed = budget * steps / 10_000
    cand = np.unique(np.concatenate([r.scores[np.isfinite(r.scores)] for r in runs]))
    if len(cand) == 0:
        return math.inf
    lo, hi = 0, len(cand) - 1  # search the lowest candidate within budget (near monotone)
    if sum(_false_alarms(r, cand[hi]) for r in runs) > allowed:
        return math.inf
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(_false_alarms(r, cand[mid]) for r in runs) <= allowed:
            hi = mid
        else:
            lo = mid + 1
    return float(cand[lo])


def _leads(r: _Run, tau: float, onsets: list[int]) -> list[float]:
    """Per onset, its lead at ``tau`` (NaN: no warning in [onset - HORIZON, onset])."""
    hot = r.steps[r.scores >= tau]
    out = []
    for o in onsets:
        w = hot[(hot >= o - HORIZON) & (hot <= o)]
        out.append(float(o - w[0]) if len(w) else math.nan)
    return out


@dataclass
class _Parts:
    """Per run: what each figure pools."""

    seeds: list[Any]
    scores: list[np.ndarray]
    labels: list[np.ndarray]
    leads: list[list[float]]
    control_leads: list[list[float]]
    fa: list[int]
    steps: list[int]
    spike_free: list[bool]


def _parts(runs: list[_Run], tau: float) -> _Parts:
    keep = [r.label >= 0 for r in runs]
    return _Parts([r.seed for r in runs], [r.scores[k] for r, k in zip(runs, keep, strict=True)],
                  [r.label[k] for r, k in zip(runs, keep, strict=True)],
                  [_leads(r, tau, r.onsets) for r in runs],
                  [_leads(r, tau, r.control) for r in runs],
                  [_false_alarms(r, tau) for r in runs], [r.scored_steps for r in runs],
                  [not r.onsets and not r.control for r in runs])


def _figures(p: _Parts, idx: list[int]) -> dict[str, float]:
    scores = np.concatenate([p.scores[i] for i in idx]) if idx else np.empty(0)
    labels = np.concatenate([p.labels[i] for i in idx]) if idx else np.empty(0)
    ap = average_precision(np.nan_to_num(scores, posinf=1e300), labels) if len(scores) else math.nan
    leads = [x for i in idx for x in p.leads[i]]
    ctrl = [x for i in idx for x in p.control_leads[i]]
    free = [i for i in idx if p.spike_free[i]]
    steps_free = sum(p.steps[i] for i in free)
    out = {"pr_auc": ap,
           "base_rate": float(labels.mean()) if len(labels) else math.nan,
           "median_lead": float(np.nanmedian(leads)) if any(not math.isnan(x) for x in leads)
           else math.nan,
           "fa_per_10k": 1e4 * sum(p.fa[i] for i in free) / steps_free if steps_free
           else math.nan,
           "control_median_lead": float(np.nanmedian(ctrl))
           if any(not math.isnan(x) for x in ctrl) else math.nan}
    for lead in LEADS:
        out[f"recall_{lead}"] = (sum(1 for x in leads if not math.isnan(x) and x >= lead)
                                 / len(leads)) if leads else math.nan
    out["control_recall_10"] = (sum(1 for x in ctrl if not math.isnan(x) and x >= 10)
                                / len(ctrl)) if ctrl else math.nan
    return out


def _draws(seeds: list[Any], n: int, rng: np.random.Generator
           ) -> tuple[list[list[int]], list[Any]]:
    uniq = sorted(set(seeds), key=str)
    return [list(rng.choice(len(uniq), size=len(uniq), replace=True)) for _ in range(n)], uniq


def _interval(values: list[float]) -> list[float] | None:
    v = np.asarray([x for x in values if not math.isnan(x)])
    if len(v) < 10:
        return None
    return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))]


@dataclass
class SignalScore:
    signal: str
    runs: int
    events: int
    control: int
    threshold: float
    figures: dict[str, float]
    intervals: dict[str, list[float] | None] = field(default_factory=dict)
    vs_loss: dict[str, Any] = field(default_factory=dict)


def seed_units(runs: list[Labelled]) -> list[Any]:
    """Each run's unit of the bootstrap: its seed, or the run itself where it names none."""
    return [r.seed if r.seed is not None else f"run:{r.name}" for r in runs]


def score_signals(runs: list[Labelled], signals: list[str], *, boot: int = BOOT,
                  budget: float = BUDGET, seed: int = 0) -> list[SignalScore]:
    """Every signal's scorecard row over ``runs`` (see the module docstring); the loss's
    bootstrap draws are shared by every signal, so the comparison with it is paired."""
    rng = np.random.default_rng(seed)
    all_seeds = seed_units(runs)
    draws, uniq = _draws(all_seeds, boot, rng)
    if len(uniq) < 2:
        draws = []  # one seed: every draw is the same runs; no interval (module docstring)
    by_seed = {s: [i for i, x in enumerate(all_seeds) if x == s] for s in uniq}
    out, loss_boot = [], None
    order = [LOSS] + [s for s in signals if s != LOSS] if LOSS in signals else signals
    for signal in order:
        prepared = [(i, _prepare(r, signal)) for i, r in enumerate(runs)]
        pairs = [(i, p) for i, p in prepared if p is not None]
        if not pairs:
            continue
        rs = [p for _, p in pairs]
        pos_of = {i: k for k, (i, _) in enumerate(pairs)}
        tau = threshold(rs, budget)
        parts = _parts(rs, tau)
        figs = _figures(parts, list(range(len(rs))))
        boots = []
        for d in draws:
            idx = [pos_of[i] for s in d for i in by_seed[uniq[s]] if i in pos_of]
            boots.append(_figures(parts, idx))
        intervals = {k: _interval([b[k] for b in boots]) for k in figs}
        row = SignalScore(signal, len(rs), sum(len(r.onsets) for r in rs),
                          sum(len(r.control) for r in rs), tau, figs, intervals)
        aps = [b["pr_auc"] for b in boots]
        if signal == LOSS:
            loss_boot = aps
        elif loss_boot is not None:
            diff = _interval([a - b for a, b in zip(aps, loss_boot, strict=True)])
            verdict = (NOT_SHOWN if diff is None or diff[0] <= 0 <= diff[1]
                       else BEATS if diff[0] > 0 else WORSE)
            if row.events < MIN_EVENTS or len(uniq) < MIN_SEEDS:
                verdict = (f"too few to tell ({row.events} events, {len(uniq)} seeds; "
                           f"a verdict needs {MIN_EVENTS} and {MIN_SEEDS})")
            row.vs_loss = {"pr_auc_diff": figs["pr_auc"] - out[0].figures["pr_auc"],
                           "interval": diff, "verdict": verdict,
                           "test": "paired bootstrap over seeds, 95% percentile interval"}
        out.append(row)
    return out


def _counted(r: _Run, tau: float) -> tuple[int, int]:
    """(warnings, false alarms) of one run at ``tau``: a warning in the ``AFTER`` steps past
    an onset is neither right nor wrong, so it is not counted."""
    onsets = np.asarray(sorted(r.onsets + r.control), dtype=np.int64)
    n = fa = 0
    for t in _alarms(r, tau).tolist():
        if ((onsets < t) & (onsets >= t - AFTER)).any():
            continue
        n += 1
        fa += not ((onsets >= t) & (onsets <= t + HORIZON)).any()
    return n, fa


def rule_figures(runs: list[Labelled], signal: str, window: int = WINDOW,
                 tau: float | None = None, budget: float = BUDGET) -> dict[str, Any]:
    """One rule (``signal``, ``window``) on ``runs``: its threshold (``tau``, or the lowest
    within ``budget`` on these runs), precision (the share of its warnings an onset followed
    within ``HORIZON`` steps), recall at each lead, median lead and false alarms per 10k
    steps on the runs without an event: how a rule tuned on some seeds is scored on others."""
    rs = [p for p in (_prepare(r, signal, window) for r in runs) if p is not None]
    if not rs:
        return {"signal": signal, "window": window, "runs": 0}
    tau = threshold(rs, budget) if tau is None else tau
    figs = _figures(_parts(rs, tau), list(range(len(rs))))
    counted = [_counted(r, tau) for r in rs]
    warned = sum(n for n, _ in counted)
    figs["precision"] = (warned - sum(f for _, f in counted)) / warned if warned else math.nan
    figs["warnings"] = warned
    return {"signal": signal, "window": window, "runs": len(rs), "threshold": tau,
            "events": sum(len(r.onsets) for r in rs), **figs}
