"""A pruner that stops hopeless trials but spares one through a spike.

Optuna's ``PatientPruner`` asks its inner pruner only after ``patience`` evaluations without
improvement. A trial at a hopeless LR improves slowly but steadily, so it never trips the
patience and is never pruned (a 32-trial sweep pruned none). Here the inner pruner
(Hyperband) decides at every evaluation, and patience applies only around a rise: while the
latest values sit above the best before them (a spike, or its recovery), the trial gets up
to ``patience`` evaluations to come back before the inner pruner may stop it.
"""

from __future__ import annotations

import math

import optuna
from optuna.pruners import BasePruner


def rising_for(values: list[float]) -> int:
    """How many of the latest values sit above the best value before them (0: the latest
    is a new best, or ties it)."""
    n, best_before = 0, math.inf
    for i in range(len(values) - 1, 0, -1):
        best_before = min(values[:i])
        if values[i] > best_before:
            n += 1
        else:
            break
    return n if values and best_before < math.inf else 0


class SpikeTolerantPruner(BasePruner):
    def __init__(self, inner: BasePruner, patience: int = 2):
        self.inner, self.patience = inner, patience

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        steps = sorted(trial.intermediate_values)
        values = [trial.intermediate_values[s] for s in steps]
        if 0 < rising_for(values) <= self.patience:
            return False  # in or just after a rise: wait for it to come back
        return self.inner.prune(study, trial)
