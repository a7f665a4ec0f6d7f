"""Comparing a benchmark run with its baseline: pure functions over recorded figures.

Two kinds of comparison. On the environment the baseline was recorded on (same device,
CPU, threads, torch, corpus), every per-step training loss must match exactly: a
determinism check, like torchtitan's loss comparison. Elsewhere float results differ, so
each metric is judged by a one-sided exact Mann-Whitney test over the seeds, and only a
median shift of at least a minimum effect counts. A run makes one such test per scenario and
metric, so its tests are one family per direction, corrected by Holm's step-down procedure
at the suite's level: on unchanged code the chance that any of them calls a regression is at
most that level. Performance is judged on ratios (overhead against a bare loop, MFU, sweep
scaling), never on absolute times.
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
    p: float | None  # the raw one-sided p (the direction of the verdict, else the smaller)
    test: str
    # p Holm-adjusted over the run's family, same direction as ``p``: the p that decides
    # (a verdict needs p_holm <= the family level).
    p_holm: float | None = None

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


def holm(ps: Sequence[float], level: float) -> list[bool]:
    """Holm's step-down procedure: which of the hypotheses are rejected, with a family-wise
    error rate of at most ``level`` whatever the dependence between the tests. The k-th
    smallest of the m p's (k = 1..m) is compared with level / (m - k + 1); every p before
    the first that misses its threshold is rejected, none from it on."""
    out = [False] * len(ps)
    for k, i in enumerate(sorted(range(len(ps)), key=lambda i: ps[i])):
        if ps[i] > level / (len(ps) - k):
            break
        out[i] = True
    return out


def holm_adjusted(ps: Sequence[float]) -> list[float]:
    """Holm-adjusted p's: the smallest family level at which Holm rejects each hypothesis,
    max over j <= k of min(1, (m - j + 1) p_(j)); ``holm(ps, level)`` rejects exactly those
    with an adjusted p <= ``level`` (up to float rounding at equality)."""
    out, running = [1.0] * len(ps), 0.0
    for k, i in enumerate(sorted(range(len(ps)), key=lambda i: ps[i])):
        running = max(running, min(1.0, (len(ps) - k) * ps[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class MetricCase:
    """One Mann-Whitney test of a bench run: a metric of a scenario, both sides' seeds."""

    scenario: str
    metric: str
    current: Sequence[Any]
    baseline: Sequence[Any]
    min_effect: float


def _verdict(effect: float | None, worse: float, better: float, *, level: float,
             min_effect: float) -> str:
    """From the Holm-adjusted p of each direction and the median shift."""
    if effect is not None and worse <= level and effect >= min_effect:
        return "regressed"
    if effect is not None and better <= level and -effect >= min_effect:
        return "improved"
    return "pass"


def judge_metrics(cases: Sequence[MetricCase], *, level: float) -> list[Judged]:
    """Every test of a run, with Holm's procedure at family level ``level`` over all of them.

    The one-sided p's that the current seeds are larger (worse) are one family, those that
    they are smaller (better) another: a run fails on a regression only, so the false-alarm
    bound is the regression family's, and improvements, reported beside them, get the same
    guarantee from their own family without spending the regressions' level (so any
    verdict other than pass, either way, has a chance of at most 2 x level). A case
    regresses when Holm rejects its "worse" hypothesis and its median grew by at least its
    minimum effect (the minimum effect only removes verdicts, so the bound holds); improved
    the other way round; else pass."""
    worse = [mann_whitney_greater(c.current, c.baseline) for c in cases]
    better = [mann_whitney_greater(c.baseline, c.current) for c in cases]
    adj_worse, adj_better = holm_adjusted(worse), holm_adjusted(better)
    m, out = len(cases), []
    for c, w, b, aw, ab in zip(cases, worse, better, adj_worse, adj_better, strict=True):
        cur, base = _median(c.current), _median(c.baseline)
        effect = _shift(cur, base)
        verdict = _verdict(effect, aw, ab, level=level, min_effect=c.min_effect)
        p, p_holm = (w, aw) if verdict == "regressed" or (verdict == "pass" and w <= b) \
            else (b, ab)
        test = (f"one-sided exact Mann-Whitney over {len(c.current)} vs {len(c.baseline)} "
                f"seeds, Holm over {m} test{'s' if m != 1 else ''} at family level {level:g}, "
                f"min effect {c.min_effect:g}")
        out.append(Judged(c.scenario, c.metric, verdict, _finite(base), _finite(cur),
                          _finite(effect), p, test, p_holm))
    return out


def judge_metric(scenario: str, metric: str, current: Sequence[Any], baseline: Sequence[Any],
                 *, level: float, min_effect: float) -> Judged:
    """One test alone (a family of one, where Holm is the plain test at ``level``):
    regressed when the current seeds are larger (worse) at one-sided p <= ``level`` and the
    median grew by at least ``min_effect``; improved the other way round; else pass."""
    return judge_metrics([MetricCase(scenario, metric, current, baseline, min_effect)],
                         level=level)[0]


def _reachable_p(n: int, m: int) -> float:
    return min_p(n, m) if 0 < n <= EXACT_UP_TO and 0 < m <= EXACT_UP_TO else 1.0


def out_of_order_allowed(n: int, m: int, threshold: float) -> int | None:
    """The most pairs (of the n x m, no ties) that may be out of order, current below
    baseline, for the exact test still to give p <= ``threshold``; None if even a complete
    separation does not."""
    # table[i, j][u]: how many splits of i current and j baseline values, all distinct, have
    # u pairs out of order (the Gaussian binomial's coefficients). The largest value is
    # current's (no new pair) or baseline's (out of order with every current value).
    table = {(0, j): [1] for j in range(m + 1)} | {(i, 0): [1] for i in range(n + 1)}
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            a, b = table[i - 1, j], [0] * i + table[i, j - 1]
            table[i, j] = [(a[u] if u < len(a) else 0) + (b[u] if u < len(b) else 0)
                           for u in range(max(len(a), len(b)))]
    total, seen, best = math.comb(n + m, n), 0, None
    for u, count in enumerate(table[n, m]):
        seen += count
        if seen / total > threshold:
            break
        best = u
    return best


@dataclass(frozen=True)
class Family:
    """The Holm family of a run's Mann-Whitney tests (one per direction), and its level."""

    tests: int
    level: float
    seeds: tuple[int, int]  # (current, baseline) seeds of the test whose smallest p is least

    @property
    def smallest_p(self) -> float:
        """The smallest p any test of the family can give: 1 / C(n + m, n)."""
        return _reachable_p(*self.seeds) if self.tests else 1.0

    @property
    def first_threshold(self) -> float:
        """Holm's first (strictest) threshold, level / tests: no test can be rejected unless
        some p reaches it."""
        return self.level / self.tests if self.tests else 0.0

    @property
    def can_reject(self) -> bool:
        return self.tests > 0 and self.smallest_p <= self.first_threshold


def family_of(cases: Sequence[MetricCase], level: float) -> Family:
    seeds = min(((len(c.current), len(c.baseline)) for c in cases),
                key=lambda s: _reachable_p(*s), default=(0, 0))
    return Family(len(cases), level, seeds)


def false_alarm_note(f: Family) -> str:
    """What the family's verdicts mean: the chance of a false alarm on unchanged code, and
    whether its tests can reject at all (the smallest p against Holm's first threshold)."""
    if not f.tests:
        return ("False alarms: this run makes no Mann-Whitney test (no scenario is in both "
                "the run and the baseline), so none can call a regression.")
    n, m = f.seeds
    tests = f"{f.tests} Mann-Whitney tests of this run are" if f.tests != 1 else \
        "1 Mann-Whitney test of this run is"
    note = (f"False alarms: the {tests} corrected by "
            f"Holm's procedure at family level {f.level:g} (regressions one family, "
            "improvements another), so on unchanged code the chance that any of them calls "
            f"a regression is at most {f.level:g} ({100 * f.level:g}%).")
    first = f"Holm's first threshold {f.level:g}/{f.tests} = {f.first_threshold:.3g}"
    reach = (f"the smallest p a test can give is 1/{math.comb(n + m, n)} = "
             f"{f.smallest_p:.3g}, " + ("within " if f.can_reject else "above ") + first
             if f.smallest_p < 1 else
             f"the exact test cannot run (it takes 1 to {EXACT_UP_TO} seeds per side)")
    if f.can_reject:
        k = out_of_order_allowed(n, m, f.first_threshold)
        how = ("its seeds separate completely" if not k else
               f"at most {k} of its {n * m} seed pairs {'is' if k == 1 else 'are'} out "
               "of order")
        return (f"{note} With {n} vs {m} seeds {reach}: the most "
                f"significant test can call a regression when {how} and its median moves by "
                "at least the minimum effect (each later step's threshold is larger).")
    need = next((k for k in range(1, EXACT_UP_TO + 1)
                 if min_p(k, k) <= f.first_threshold), None)
    enough = (f"at least {need} seeds per side (smallest p 1/{math.comb(2 * need, need)})"
              if need else f"more seeds than the exact test takes ({EXACT_UP_TO} per side)")
    most = math.floor(f.level / f.smallest_p + 1e-9)
    fewer = (f" or at most {most} test{'s' if most != 1 else ''} per family" if most else "")
    return (f"{note} But with {n} vs {m} seeds {reach}: no test of this "
            "family can call a regression or an improvement, whatever the data, so only the "
            "exact loss check (same environment) and the performance ratios can fail this "
            f"run. For the tests to be able to reject, use {enough}{fewer}.")


def judged_gates(verdicts: Sequence[Judged], tolerance: dict[str, float | None]
                 ) -> list[tuple[str, float]]:
    """The performance gates a run applied: (metric, tolerance) of each ratio judged."""
    return [(v.metric, float(tolerance[v.metric])) for v in verdicts
            if v.scenario == "performance" and v.verdict != "shown" and v.effect is not None
            and tolerance.get(v.metric) is not None]


def gates_note(f: Family, gates: Sequence[tuple[str, float]], exact: bool) -> str:
    """The bound over every gate a run applies, not the tests alone: each performance gate
    (metric, tolerance) fails the run on one measured ratio past its tolerance, a threshold
    that no level bounds, so its chance on unchanged code adds to the tests' level."""
    level = f"{f.level:g}" if f.tests else "0"
    loss = (" The exact loss check cannot fail unchanged code: its training is deterministic "
            "on this environment." if exact else "")
    if not gates:
        return ("Every gate of this run is counted in that bound: no performance ratio is "
                f"judged (each is shown only, or not measured).{loss}")
    named = ", ".join(f"{m} ({t:.0%})" for m, t in gates)
    return (f"This run also applies {len(gates)} performance gate"
            f"{'s' if len(gates) != 1 else ''} ({named}): each fails the run when its ratio is "
            "worse than the baseline's by more than its tolerance. A gate is a threshold on "
            "one measurement, not a test, so no level bounds it: on unchanged code the chance "
            f"that this run fails is at most {level} plus the chance that noise alone moves a "
            "gated ratio past its tolerance, which one run cannot measure (docs/bench.md gives "
            f"the overhead ratio's spread between unchanged runs).{loss}")


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
    # A [trainer] suite's: what the trainer's own log says, the median over each seed's
    # steps, then over every seed of every scenario (judged against the baseline's).
    "trainer_tokens_per_s": PerfMetric("tokens per second your trainer logged", True),
    "trainer_step_s": PerfMetric("seconds per step your trainer logged", False),
}
# The figures spikebench measures of its own engine, and those read from a trainer's log.
TRAINER_PERF = ("trainer_tokens_per_s", "trainer_step_s")
BUILTIN_PERF = tuple(k for k in PERF_METRICS if k not in TRAINER_PERF)


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
