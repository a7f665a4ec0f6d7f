"""How a sweep trial is scored: pure functions from its per-seed summaries to Optuna values.

Each seed gets a spike value (loss-spike severity, or spontaneous events) and a convergence
value whose ranges never overlap: a hit's steps to target < a miss < a divergence. A trial
with any diverged seed ranks behind every trial without one on both objectives, so a
median over seeds can never hide a divergence; every value stays finite for Optuna.
"""

from __future__ import annotations

import statistics
from typing import Any

from spikebench.spikes.rules import LOSS, metric_kind
from spikebench.values import finite

DIVERGED_FACTOR = 3.0  # a diverged seed's convergence, x the step budget
DIVERGED_CAUSE = "non-finite loss or gradient norm"
# A seed's severity is capped at this many nats per step of the budget (a loss 20 nats above
# its trend all run long; no language model's loss comes near it), which is what a
# diverged seed scores: the worst a run can do, whatever step it diverged at.
SEVERITY_CAP_NATS = 20.0


def _num(x: Any) -> float | None:
    return float(x) if finite(x) else None


def convergence(stt: float | None, final: float | None, *, steps: int, target: float,
                diverged: bool) -> float:
    """Steps to target for a hit (<= steps); a miss scores in (steps, 2 x steps), ranked by
    how far its final loss ended above the target; a divergence scores 3 x steps."""
    if diverged:
        return DIVERGED_FACTOR * steps
    if stt is not None:
        return stt
    if final is None or final <= 0:
        return 2.0 * steps
    return steps * (2.0 - min(1.0, target / final))


def _spontaneous_events(spikes: dict[str, Any], diverged_step: int | None) -> int:
    """Loss events that do not overlap an injected fault; with a divergence, the events
    before it plus one for the divergence itself (its non-finite loss is flagged too)."""
    if diverged_step is None:
        return int(spikes.get("n_events") or 0)
    events = [e for e in spikes.get("events") or [] if isinstance(e, dict)
              and metric_kind(str(e.get("metric", ""))) == LOSS and not e.get("injected")
              and finite(e.get("end", e.get("onset"))) and e.get("end", e["onset"]) < diverged_step]
    return len(events) + 1


def seed_values(summary: dict[str, Any], *, steps: int, target: float) -> dict[str, Any]:
    """The numbers of one seed's ``summary.json`` that scoring and reports use."""
    spikes = summary.get("spikes") or {}
    ttt = spikes.get("time_to_target") or {}
    diverged = summary.get("status") == "diverged"
    cap = SEVERITY_CAP_NATS * steps
    severity = cap if diverged else min(cap, _num(spikes.get("total_severity")) or 0.0)
    diverged_step = summary.get("diverged_step") if diverged else None
    n_events = _spontaneous_events(spikes, (diverged_step or 0) if diverged else None)
    stt = _num(ttt.get("steps")) if ttt.get("reached") and not diverged else None
    final = _num(summary.get("final_val_loss"))
    return {
        "status": summary.get("status"),
        "diverged_step": summary.get("diverged_step"),
        "n_events": n_events,
        "n_injected_events": int(spikes.get("n_injected_events") or 0),
        "severity": severity,
        "events_per_1k": 1000.0 * n_events / max(1, steps),
        "steps_to_target": stt,
        "seconds_to_target": _num(ttt.get("seconds")) if stt is not None else None,
        "final_val_loss": final,
        "initial_val_loss": _num(summary.get("initial_val_loss")),
        "max_attn_logit": _num(summary.get("max_attn_logit")),
        # What the run's spike response did and cost (0 without one).
        "rollbacks": len((summary.get("response") or {}).get("rollbacks") or []),
        "redone_steps": int((summary.get("response") or {}).get("redone_steps") or 0),
        "skipped_batches": int((summary.get("response") or {}).get("skipped_batches") or 0),
        "skipped_updates": int((summary.get("response") or {}).get("skipped_updates") or 0),
        "seconds": _num(summary.get("seconds")),
        "convergence": float(convergence(stt, final, steps=steps, target=target,
                                         diverged=diverged)),
    }


def aggregate(per_seed: list[dict[str, Any]], *, spike_metric: str, steps: int) -> dict[str, Any]:
    """A trial's values: medians over seeds when no seed diverged; otherwise values above
    every such median, growing with the share of diverged seeds (so trials with divergences
    still rank among themselves)."""
    spikes = [s["severity" if spike_metric == "severity" else "n_events"] for s in per_seed]
    conv = [s["convergence"] for s in per_seed]
    n_div = sum(s["status"] == "diverged" for s in per_seed)
    share = n_div / len(per_seed)
    worst = SEVERITY_CAP_NATS * steps if spike_metric == "severity" else float(steps)
    return {
        "spikes": float((1 + share) * worst if n_div else statistics.median(spikes)),
        "convergence": float((2 + share) * steps if n_div else statistics.median(conv)),
        "n_events_median": float(statistics.median(s["n_events"] for s in per_seed)),
        "diverged_seeds": n_div,
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
    agg = aggregate(per_seed, spike_metric=spike_metric, steps=steps)
    attrs = {"per_seed": per_seed, **agg}
    diverged = [s for s in per_seed if s["status"] == "diverged"]
    if diverged:
        attrs["cause"] = DIVERGED_CAUSE
        attrs["diverged_step"] = min(s["diverged_step"] or 0 for s in diverged)
    limits = constraints(agg, spike_limit) if objective == "single" else {}
    return objective_values(agg, objective), attrs, limits

