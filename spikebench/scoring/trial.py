"""How a sweep trial is scored: pure functions from its per-seed summaries to Optuna values.

A trial is one configuration run over several seeds. Each seed yields

* a spike value: the total spike severity (area between the loss and its pre-spike trend,
  nats x steps) or the number of spike events, from the default detector;
* a convergence value: the steps to reach the target validation loss (AlgoPerf's rule, the
  first evaluation at or below it), or, where the target is missed, the step budget scaled
  by final loss / target, so every miss ranks behind every hit and misses rank by how far
  they ended from the target.

A diverged seed gets finite worst values, because Optuna must never see NaN or inf: its
convergence is ``DIVERGED_FACTOR`` x the step budget, and its spike value adds the area of a
loss stuck at the initial loss for the rest of the budget (severity) or one event (events).
The trial's values are medians over seeds; every per-seed value is kept.
"""

from __future__ import annotations

import statistics
from typing import Any

from spikebench.values import finite

DIVERGED_FACTOR = 3.0
DIVERGED_CAUSE = "non-finite loss or gradient norm"


def _num(x: Any) -> float | None:
    return float(x) if finite(x) else None


def seed_values(summary: dict[str, Any], *, steps: int, target: float) -> dict[str, Any]:
    """The numbers of one seed's ``summary.json`` that scoring and reports use."""
    spikes = summary.get("spikes") or {}
    ttt = spikes.get("time_to_target") or {}
    diverged = summary.get("status") == "diverged"
    initial = _num(summary.get("initial_val_loss")) or 0.0
    severity = _num(spikes.get("total_severity")) or 0.0
    n_events = int(spikes.get("n_events") or 0)
    stt = _num(ttt.get("steps")) if ttt.get("reached") else None
    final = _num(summary.get("final_val_loss"))
    if diverged:
        done = summary.get("diverged_step") or 0
        severity += initial * max(0, steps - done)
        n_events += 1
        convergence = DIVERGED_FACTOR * steps
    elif stt is not None:
        convergence = stt
    else:
        convergence = steps * (final / target if final is not None else DIVERGED_FACTOR)
    return {
        "status": summary.get("status"),
        "diverged_step": summary.get("diverged_step"),
        "n_events": n_events,
        "severity": severity,
        "events_per_1k": 1000.0 * n_events / max(1, steps),
        "steps_to_target": stt,
        "seconds_to_target": _num(ttt.get("seconds")) if stt is not None else None,
        "final_val_loss": final,
        "initial_val_loss": _num(summary.get("initial_val_loss")),
        "seconds": _num(summary.get("seconds")),
        "convergence": float(convergence),
    }


def aggregate(per_seed: list[dict[str, Any]], *, spike_metric: str) -> dict[str, Any]:
    """Medians over seeds of the spike and convergence values, plus counts."""
    spikes = [s["severity" if spike_metric == "severity" else "n_events"] for s in per_seed]
    conv = [s["convergence"] for s in per_seed]
    return {
        "spikes": float(statistics.median(spikes)),
        "convergence": float(statistics.median(conv)),
        "n_events_median": float(statistics.median(s["n_events"] for s in per_seed)),
        "diverged_seeds": sum(s["status"] == "diverged" for s in per_seed),
        "reached_seeds": sum(s["steps_to_target"] is not None for s in per_seed),
        "seeds": len(per_seed),
    }


def objective_values(agg: dict[str, Any], objective: str) -> list[float]:
    """Optuna values: [spikes, convergence] (multi) or [convergence] (single), both minimised."""
    if objective == "multi":
        return [agg["spikes"], agg["convergence"]]
    return [agg["convergence"]]


def constraints(agg: dict[str, Any], spike_limit: float) -> dict[str, float]:
    """Single-objective feasibility (Optuna: feasible when every value is <= 0)."""
    return {
        "spike_events": agg["n_events_median"] - spike_limit,
        "diverged": float(agg["diverged_seeds"]),
    }


def score_trial(seeds: list[dict[str, Any]], *, steps: int, target: float, spike_metric: str,
                objective: str, spike_limit: float) -> tuple[list[float], dict[str, Any],
                                                             dict[str, float]]:
    """A trial's Optuna values, user attributes and constraints from its seeds' results
    (``[{"seed": s, "summary": summary.json}, ...]``). Constraints are for ``objective =
    "single"`` only (Optuna: feasible when every value is <= 0)."""
    per_seed = [{"seed": r["seed"], **seed_values(r["summary"], steps=steps, target=target)}
                for r in seeds]
    agg = aggregate(per_seed, spike_metric=spike_metric)
    attrs = {"per_seed": per_seed, **agg}
    diverged = [s for s in per_seed if s["status"] == "diverged"]
    if diverged:
        attrs["cause"] = DIVERGED_CAUSE
        attrs["diverged_step"] = min(s["diverged_step"] or 0 for s in diverged)
    limits = constraints(agg, spike_limit) if objective == "single" else {}
    return objective_values(agg, objective), attrs, limits

