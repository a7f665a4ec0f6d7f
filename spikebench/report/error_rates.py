"""How often the verdicts err, by simulation: arms drawn with a known true effect, judged
by the report's own code (:mod:`spikebench.report.verdicts`), and the share of each verdict
counted. ``benchmarks/verdict_errors.py`` prints the rates; the tests check the bounds.

Times: per seed, a shared seed factor S and each arm's own noise U, both log-normal, so
baseline = m S U_b and recipe = (1 + effect) m S U_r; under the model each recipe - (1 +
effect) x baseline is symmetric, as the sign-flip test assumes. Success: each arm's seeds
succeed independently, the recipe at (1 + effect) x the baseline's rate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from spikebench.report import verdicts

REAL = (verdicts.SUPPORTED, verdicts.CONSISTENT, verdicts.SMALLER, verdicts.OPPOSITE)


@dataclass(frozen=True)
class TimeModel:
    median: float = 200.0  # the baseline's median steps to target
    seed_sd: float = 0.15  # log-sd of the factor a seed shares between arms
    noise_sd: float = 0.20  # log-sd of each arm's own noise


def time_arms(rng: np.random.Generator, n: int, effect: float,
              model: TimeModel = TimeModel()) -> tuple[list[float], list[float]]:
    """(recipe, baseline) times on n matched seeds."""
    seed = np.exp(rng.normal(0.0, model.seed_sd, n))
    base = model.median * seed * np.exp(rng.normal(0.0, model.noise_sd, n))
    recipe = (1 + effect) * model.median * seed * np.exp(rng.normal(0.0, model.noise_sd, n))
    return recipe.tolist(), base.tolist()


def success_arms(rng: np.random.Generator, n: int, effect: float,
                 base_rate: float = 0.5) -> tuple[list[float], list[float]]:
    """(recipe, baseline) 0/1 outcomes on n seeds."""
    rate = min(1.0, base_rate * (1 + effect))
    return ((rng.random(n) < rate).astype(float).tolist(),
            (rng.random(n) < base_rate).astype(float).tolist())


def rates(measure: str, n: int, effect: float, claimed: float, reps: int, *,
          seed: int = 0, family: int = 1) -> dict[str, float]:
    """The share of ``reps`` simulated comparisons given each verdict, and ``real`` (any
    verdict that excludes no change), for a true relative ``effect`` on ``measure``
    ("time" or "success") against the ``claimed`` change."""
    rng = np.random.default_rng(seed)
    counts: Counter[str] = Counter()
    for _ in range(reps):
        if measure == "time":
            v = verdicts.judge(time_arms(rng, n, effect), claimed, family=family)
        else:
            v = verdicts.judge_success(success_arms(rng, n, effect), claimed, family=family,
                                       settle=False)
        counts[v.verdict] += 1
    out = {k: counts[k] / reps for k in verdicts.VERDICTS}
    out["real"] = sum(counts[k] for k in REAL) / reps
    return out
