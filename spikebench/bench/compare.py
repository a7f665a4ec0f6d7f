"""Comparing a benchmark run with its baseline: pure functions over recorded figures.

Two kinds of comparison. On the environment the baseline was recorded on (same device,
CPU, threads, torch, corpus), every per-step training loss must match exactly: a
determinism check, like torchtitan's loss comparison. Elsewhere float results differ, so
each metric is judged by a one-sided exact Mann-Whitney test over the seeds at a stated
level, and only a median shift of at least a minimum effect counts. Performance is judged
on ratios (overhead against a bare loop, MFU, sweep scaling), never on absolute times.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Per-seed training metrics the suite judges, lower is better for all: (label, unit).
METRICS = {
    "n_events": ("spontaneous spike events", "events"),
    "severity": ("spike severity", "nats x steps"),
    "steps_to_target": ("steps to target (a miss: censored)", "steps"),
    "final_val_loss": ("final val loss", "nats"),
}
# Keys of the environment that must all match for the exact loss comparison.
EXACT_KEYS = ("device", "gpu", "cpu_model", "torch_threads", "torch", "python", "corpus")
EXACT_UP_TO = 8  # seeds per side for the exact test (C(16, 8) = 12,870 splits at most)


@dataclass(frozen=True)
class Judged:
    """One metric of one scenario: the verdict and what it rests on."""

    scenario: str
    metric: str
    verdict: str  # "pass" | "regressed" | "improved" | "changed" (exact mismatch)
    baseline: float | None
    current: float | None
    effect: float | None  # current - baseline (medians, or ratios for performance)
    p: float | None
    test: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _value(x: Any) -> float:
    """A seed's value for the test: a miss, a divergence or a missing value is the worst
    (+inf, tied with the others like it), as every run stops at the same budget."""
    return float(x) if isinstance(x, int | float) and not math.isnan(x) else math.inf


def _u(xs: Sequence[float], ys: Sequence[float]) -> float:
    return sum((x > y) + 0.5 * (x == y) for x in xs for y in ys)


def mann_whitney_greater(xs: Sequence[Any], ys: Sequence[Any]) -> float:
    """Exact one-sided p of "xs tend to be larger than ys" (Mann-Whitney U over every split
    of the pooled values; ties count a half). Censored values (+inf) tie with each other
    and exceed every observed one, which is exact when all runs share one budget."""
    x, y = [_value(v) for v in xs], [_value(v) for v in ys]
    if not x or not y or len(x) > EXACT_UP_TO or len(y) > EXACT_UP_TO:
        return 1.0
    pooled, observed, n = x + y, _u(x, y), len(x)
    hits = total = 0
    for idx in itertools.combinations(range(len(pooled)), n):
        chosen = set(idx)
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        hits += _u(a, b) >= observed - 1e-9
        total += 1
    return hits / total


def min_p(n: int, m: int) -> float:
    """The smallest p the exact test can give with n and m seeds: 1 / C(n + m, n)."""
    return 1 / math.comb(n + m, n)


def _median(values: Sequence[Any]) -> float:
    return statistics.median(_value(v) for v in values) if values else math.nan


def _shift(cur: float, base: float) -> float | None:
    if math.isinf(cur) and math.isinf(base):
        return 0.0
    d = cur - base
    return None if math.isnan(d) else d


def judge_metric(scenario: str, metric: str, current: Sequence[Any], baseline: Sequence[Any],
                 *, level: float, min_effect: float) -> Judged:
    """Regressed when the current seeds are larger (worse) at one-sided p <= ``level`` and
    the median grew by at least ``min_effect``; improved the other way round; else pass."""
    cur, base = _median(current), _median(baseline)
    effect = _shift(cur, base)
    worse = mann_whitney_greater(current, baseline)
    better = mann_whitney_greater(baseline, current)
    test = (f"one-sided exact Mann-Whitney over {len(current)} vs {len(baseline)} seeds, "
            f"level {level:g}, min effect {min_effect:g}")
    verdict = "pass"
    if effect is not None and worse <= level and effect >= min_effect:
        verdict = "regressed"
    elif effect is not None and better <= level and -effect >= min_effect:
        verdict = "improved"
    return Judged(scenario, metric, verdict, _finite(base), _finite(cur), _finite(effect),
                  min(worse, better), test)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def same_environment(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The environment keys on which two runs differ (empty: the exact comparison holds)."""
    return [k for k in EXACT_KEYS if a.get(k) != b.get(k)]


def first_mismatch(current: dict[str, list[float]], baseline: dict[str, list[float]]
                   ) -> tuple[str, int, float | None, float | None] | None:
    """The first seed and step whose training loss differs from the baseline's, bit for
    bit (``(seed, step, current, baseline)``; a missing step is None), or None."""
    for seed in sorted(set(current) | set(baseline), key=str):
        a, b = current.get(seed, []), baseline.get(seed, [])
        for step in range(max(len(a), len(b))):
            x = a[step] if step < len(a) else None
            y = b[step] if step < len(b) else None
            if x != y and not (x is not None and y is not None and math.isnan(x)
                               and math.isnan(y)):
                return seed, step + 1, x, y
    return None


@dataclass(frozen=True)
class PerfMetric:
    label: str
    higher_is_better: bool


PERF_METRICS = {
    "tokens_per_s": PerfMetric("training tokens per second of spikebench's loop", True),
    "overhead_ratio": PerfMetric("step time, spikebench / bare PyTorch loop", False),
    "mfu": PerfMetric("model FLOP utilisation against a matmul peak", True),
    "sweep_scaling": PerfMetric("sweep throughput, N workers / 1 worker", True),
    "report_ratio": PerfMetric("report time for N trials / a fixed Python workload", False),
}


def judge_perf(metric: str, current: float | None, baseline: float | None, *,
               tolerance: float | None) -> Judged:
    """A ratio regresses when it is worse than the baseline's by more than ``tolerance``
    (relative), improves when better by as much; with ``tolerance`` None it is shown, not
    judged (a ratio too noisy to decide anything)."""
    spec = PERF_METRICS[metric]
    if tolerance is None:
        rel = current / baseline - 1 if current is not None and baseline else None
        return Judged("performance", metric, "shown", baseline, current, rel, None,
                      "not judged (tolerance off)")
    test = f"ratio against the baseline's, tolerance {tolerance:.0%}"
    if current is None or baseline is None or baseline <= 0:
        return Judged("performance", metric, "pass", baseline, current, None, None,
                      test + " (not measured)")
    rel = current / baseline - 1
    worse = -rel if spec.higher_is_better else rel
    verdict = "regressed" if worse > tolerance else "improved" if -worse > tolerance else "pass"
    return Judged("performance", metric, verdict, baseline, current, rel, None, test)
