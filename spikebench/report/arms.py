"""Which stabilisation strategy a config value, or a designed comparison arm, stands for.

Strategy effects come only from the study's designed comparison (the baseline, each strategy
alone added to it, and the combined recipe, on the same seeds). Search trials change several
settings at once, chosen by a sampler, so their differences are never attributed to single
strategies; the sections that need a comparison share :func:`has_comparison` and its reason.
"""

from __future__ import annotations

from typing import Any

from spikebench.report.data import Study, TrialRecord, trial_seed_numbers
from spikebench.values import finite

NO_COMPARISON = ("this study has no designed comparison (no [comparison] table in its sweep "
                 "file, so no baseline and single-strategy arms on matched seeds); strategy "
                 "effects are not estimated from search trials, whose settings change "
                 "together and are chosen by the sampler")


def has_comparison(study: Study) -> bool:
    """A baseline arm and at least one other: what the strategy and claim sections need."""
    return study.baseline_arm in study.arms and len(study.arms) >= 2


def table_arms(study: Study) -> dict[str, dict[str, Any]]:
    """The arms the strategy table compares: every arm; for arms crossed with a
    ``[comparison] grid``, those at the baseline's grid values (their plain names), because
    the table compares strategies at one point and the LR sections across the grid."""
    grid = study.spec.grid if study.spec else {}
    base = study.baseline_arm
    if not grid or base not in study.arms:
        return study.arms
    at = {k: study.arms[base].get(k) for k in grid}
    return {a: v for a, v in study.arms.items() if all(v.get(k) == at[k] for k in grid)}


def strategy_of(key: str, value: Any, *, schedule_kind: str = "cosine") -> tuple[str, str] | None:
    """(strategy key, label) of one config value, None where the value means "off", or
    ("unknown", key) for a key no rule knows.

    Keys of strategies later issues add (data cleaning, rollback, adaptive clipping) are
    recognised by name, so their arms get the article's row without a change here.
    """
    k = key.lower()
    off = value is None or value is False or value == 0 or (
        isinstance(value, str) and value.lower() in ("off", "none", ""))
    if (k.startswith("response.") and k != "response.kind") or k.startswith("optim.zclip_"):
        return None  # a setting of the response or of ZClip, not a strategy of its own
    if k == "optim.clip_mode" and value in ("fixed", "zclip"):
        return ("adaptive_clip", "ZClip adaptive clipping") if value == "zclip" else None
    if k == "response.kind":
        return {"rollback": ("rollback", "rollback on a spike (PaLM)"),
                "skip_step": ("skip_step", "skip-step on an outlier (OLMo-core)")}.get(
                    str(value))
    if "adaptive" in k or ("clip" in k and isinstance(value, str) and "adaptive" in value):
        return None if off else ("adaptive_clip", "adaptive clipping")
    if k == "schedule.warmup_ratio":
        return None if off else ("warmup_cosine", f"warmup + {schedule_kind}")
    if k == "optim.clip":
        return None if off else ("clip", f"clipping at {value:g}" if finite(value)
                                 else f"clipping at {value}")
    if k == "precision.mode":
        return {"bf16": ("bf16", "bf16 mixed precision"),
                "fp16": ("fp16_loss_scaling", "fp16 + loss scaling"),
                "fp16_noscale": ("fp16_noscale", "fp16 without loss scaling")}.get(
                    str(value))
    if k == "curriculum.kind":
        return None if off else ("curriculum", f"curriculum ({value})")
    if k == "model.qk_norm":
        return None if off else ("qk_norm", "qk-layernorm")
    if k == "model.z_loss":
        return None if off else ("z_loss", f"z-loss {value:g}" if finite(value)
                                 else f"z-loss {value}")
    if "dedup" in k or "clean" in k:
        return None if off else ("data_cleaning", "data dedup & cleaning")
    if "rollback" in k:
        return None if off else ("rollback", "rollback")
    return ("unknown", key)


def schedule_kind(study: Study, values: dict[str, Any]) -> str:
    """The LR schedule a trial ran: its own value, else the sweep's base config's."""
    return str(values.get("schedule.kind") or study.base.get("schedule.kind") or "cosine")


def known_strategies(study: Study, values: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, label) of every recognised strategy that ``values`` switch on."""
    kind = schedule_kind(study, values)
    found = (strategy_of(k, v, schedule_kind=kind) for k, v in values.items())
    return [f for f in found if f is not None and f[0] != "unknown"]


def trial_values(t: TrialRecord, study: Study) -> dict[str, Any]:
    """A trial's resolved space values: recorded by the sweep as ``overrides``; for a
    comparison arm that failed before recording them, the arm's values in the spec."""
    ov = t.attrs.get("overrides")
    if isinstance(ov, dict):
        return ov
    return study.arms.get(t.arm, {})


def classify_arm(study: Study, arm: str) -> dict[str, Any]:
    """Which strategy a comparison arm tests, from its changes against the baseline.

    Returns ``{"key", "label", "changes": {config key: [baseline value, arm value]}}``.
    ``recipe`` is the combined recipe; an arm whose changes are all known strategies gets
    their key (several: " + ", key "combo"); a change no rule knows, or no change at all,
    makes a row named by the arm (key "other") rather than a guessed strategy.
    """
    arms = study.arms
    base, values = arms.get(study.baseline_arm, {}), arms.get(arm, {})
    changes = {k: [base.get(k), v] for k, v in values.items() if base.get(k) != v}
    changes.update({k: [v, None] for k, v in base.items() if k not in values})
    if arm == study.baseline_arm:
        return {"key": "baseline", "label": "baseline" if study.compare is None
                else f"{arm} (baseline)", "changes": {}}
    if study.compare is not None:
        # Groups of runs read from disk: their parameters are the runs' own, so no strategy
        # is guessed from their names; a group is its name.
        role = " (recipe)" if arm == study.recipe_arm else ""
        return {"key": "group", "label": f"{arm}{role}", "changes": changes}
    kind = schedule_kind(study, values)
    found = [strategy_of(k, v[1], schedule_kind=kind) for k, v in changes.items()]
    known = [f for f in found if f is not None and f[0] != "unknown"]
    if arm == "recipe":
        parts = ", ".join(f[1] for f in known) or "no known strategy"
        return {"key": "recipe", "label": f"combined recipe ({parts})", "changes": changes}
    if not changes:
        return {"key": "other", "label": f"{arm} (identical to the baseline)", "changes": {}}
    if any(f is not None and f[0] == "unknown" for f in found) or not known:
        return {"key": "other", "label": arm, "changes": changes}
    if len({f[0] for f in known}) == 1:
        return {"key": known[0][0], "label": known[0][1], "changes": changes}
    return {"key": "combo", "label": " + ".join(f[1] for f in known), "changes": changes}


def unfinished_status(study: Study, arm: str) -> str:
    """What the strategy table says of a declared arm with no completed trial, so every
    arm the comparison declared has its row: pruned (where, and how many of its seeds
    ran: the pruner stops a trial while its first seed trains), or its trials' states."""
    trials = [t for t in study.trials if t.arm == arm]
    pruned = [t for t in trials if t.state == "PRUNED"]
    if pruned:
        t = pruned[-1]
        step = t.attrs.get("pruned_at_step")
        ran = len(trial_seed_numbers(t)) or 1
        return (f"pruned{f' at step {step}' if isinstance(step, int) else ''}: {ran} of "
                f"{len(study.seeds) or ran} seeds run")
    states = sorted({t.state.lower() for t in trials})
    return "not run yet" if not states else "no completed trial (" + ", ".join(states) + ")"
