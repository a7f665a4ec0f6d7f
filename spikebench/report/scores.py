"""The sweep's scores as the report reads and names them: per-seed success, the trials that
have both objective scores, and the axis labels of spikes and convergence.

Several sections plot or rank the same two scores; one definition of which trials count and
what the axes say keeps the Pareto front, the curves' best and worst trials and the LR plot
talking about the same numbers.
"""

from __future__ import annotations

from typing import Any

from spikebench.report.data import Study, TrialRecord
from spikebench.values import finite

# As spikebench.scoring.trial.convergence and aggregate compute it.
CONVERGENCE_LABEL = ("convergence (median over seeds of the steps to target; a miss: steps x "
                     "(2 - target / final loss), between 1 and 2 x steps; a trial with a "
                     "diverged seed: (2 + the diverged share) x steps)")
CONVERGENCE_SHORT = "convergence (steps; lower is better)"


def success(per_seed: dict[int, dict[str, Any]]) -> dict[int, float]:
    """1.0 where the seed completed (no divergence) and reached the target, else 0.0."""
    return {s: float(v.get("status") == "completed" and v.get("steps_to_target") is not None)
            for s, v in per_seed.items()}


def scored_trials(study: Study) -> list[TrialRecord]:
    """Completed trials with finite spike and convergence scores, in trial order."""
    return [t for t in study.trials if t.complete and finite(t.attrs.get("spikes"))
            and finite(t.attrs.get("convergence"))]


def spike_axis_label(study: Study) -> str:
    if study.spike_metric == "events":
        return "spike events (median over seeds)"
    return "spike severity (median total loss-spike area, nats x steps)"
