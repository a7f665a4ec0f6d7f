"""Each report section's data, computed from a loaded study by a pure ``*_info`` function.

Every function takes a :class:`~spikebench.report.data.Study` and returns plain dicts and
lists (JSON-friendly; numbers as floats or None), never text layout: the markdown and HTML
renderers and the plots turn them into pages. A section that cannot be computed returns
``{"available": False, "reason": "..."}`` so the report says why instead of guessing.

Strategy effects come only from the study's designed comparison (the baseline, each
strategy alone added to it, and the combined recipe, on the same seeds). Search trials
change several settings at once, chosen by a sampler, so their differences are not
attributed to single strategies here.
"""

from __future__ import annotations

import math
import statistics
import warnings
from typing import Any

import numpy as np

from spikebench.report import claims as claimsmod
from spikebench.report import stats
from spikebench.report.data import Study, TrialRecord, read_json, seed_dirs, seed_log

# The spike rules of spikebench.detectors, in one line each (for the header).
RULE_TEXT = {
    "default": "robust residual above a local median level > 5.5 sigma (MAD of step "
               "differences), plus a loss jump > 1 nat above the running minimum in the "
               "first 16 steps",
    "zscore": "value > mean + 3 sd of the previous 100 values",
    "olmo": "|value - mean| >= 7 sd of the previous 1000 values (OLMo 2 spike score)",
    "olmo_online": "value > mean + 6 sd of the previous 128 values (OLMo-core)",
    "loss_ratio": "loss / min(previous losses) > 1.1 (Li et al. 2022)",
    "persistent": "> 2x the mean of the previous 100 values for more than 4 steps",
}


def _unavailable(reason: str, **extra: Any) -> dict[str, Any]:
    return {"available": False, "reason": reason, **extra}


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


# --------------------------------------------------------------------------- strategies


def strategy_of(key: str, value: Any, *, schedule_kind: str = "cosine") -> tuple[str, str] | None:
    """(strategy key, label) of one config value, None where the value means "off", or
    ("unknown", key) for a key no rule knows.

    Keys of strategies later issues add (data cleaning, rollback, adaptive clipping) are
    recognised by name, so their arms get the article's row without a change here.
    """
    k = key.lower()
    off = value is None or value is False or value == 0 or (
        isinstance(value, str) and value.lower() in ("off", "none", ""))
    if "adaptive" in k or ("clip" in k and isinstance(value, str) and "adaptive" in value):
        return None if off else ("adaptive_clip", "adaptive clipping")
    if k == "schedule.warmup_ratio":
        return None if off else ("warmup_cosine", f"warmup + {schedule_kind}")
    if k == "optim.clip":
        return None if off else ("clip", f"clipping at {value:g}" if _finite(value)
                                 else f"clipping at {value}")
    if k == "precision.mode":
        return {"bf16": ("bf16", "bf16 mixed precision"),
                "fp16": ("fp16_loss_scaling", "fp16 + loss scaling"),
                "fp16_noscale": ("fp16_noscale", "fp16 without loss scaling")}.get(
                    str(value))
    if k == "curriculum.kind":
        return None if off else ("curriculum", f"curriculum ({value})")
    if "dedup" in k or "clean" in k:
        return None if off else ("data_cleaning", "data dedup & cleaning")
    if "rollback" in k:
        return None if off else ("rollback", "rollback")
    return ("unknown", key)


def _schedule_kind(study: Study, values: dict[str, Any]) -> str:
    return str(values.get("schedule.kind") or study.spec.get("base", {}).get("schedule.kind")
               or "cosine")


def classify_arm(study: Study, arm: str) -> dict[str, Any]:
    """Which strategy a comparison arm tests, from its changes against the baseline.

    Returns ``{"key", "label", "changes": {config key: [baseline value, arm value]}}``.
    The baseline is itself; an arm named ``recipe`` is the combined recipe; an arm whose
    changes are all known strategies gets their key (several: joined with " + ", key
    "combo"); a change no rule knows makes a generic row named by the arm (key
    ``other``); an arm identical to the baseline says so.
    """
    arms = study.arms
    base, values = arms.get("baseline", {}), arms.get(arm, {})
    changes = {k: [base.get(k), v] for k, v in values.items() if base.get(k) != v}
    changes.update({k: [v, None] for k, v in base.items() if k not in values})
    if arm == "baseline":
        return {"key": "baseline", "label": "baseline", "changes": {}}
    kind = _schedule_kind(study, values)
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


def _success(per_seed: dict[int, dict[str, Any]]) -> dict[int, float]:
    """1.0 where the seed completed (no divergence) and reached the target, else 0.0."""
    return {s: float(v.get("status") == "completed" and v.get("steps_to_target") is not None)
            for s, v in per_seed.items()}


def _whole_run_seconds(v: dict, budget: int | None) -> float | None:
    """A seed's wall time for the whole step budget: a diverged run stopped early, so its
    time is scaled to the budget at the pace it ran (else an early divergence would look
    faster than a run that reached the target)."""
    sec, done = v.get("seconds"), v.get("diverged_step")
    if v.get("status") == "diverged" and _finite(sec) and budget and done:
        return sec * budget / done
    return sec


def _capped_pairs(rs, bs, key, budget_of) -> tuple[dict, dict]:
    """Per-seed times to target for the time claims, recipe (``rs``) and baseline (``bs``).

    A seed that completed and reached the target has its time (``key``). On a seed where
    the other arm reached the target, a miss or a divergence counts as a miss: the arm's
    whole budget (``budget_of``: the step budget, or the run's wall time), a lower bound
    of its true time. Seeds where neither arm reached the target (both missed or diverged),
    or where a capped side's budget is unknown, are None (they drop out of the pairs).
    """
    def reached(v: dict | None) -> bool:
        return v is not None and v.get("status") == "completed" and _finite(v.get(key))

    def value(v: dict, other: dict | None) -> float | None:
        if reached(v):
            return v[key]
        if v.get("status") in ("completed", "diverged") and reached(other):
            budget = budget_of(v)
            return budget if _finite(budget) else None
        return None

    return ({s: value(v, bs.get(s)) for s, v in rs.items()},
            {s: value(v, rs.get(s)) for s, v in bs.items()})


def _by_seed(t: TrialRecord) -> dict[int, dict[str, Any]]:
    return {int(s["seed"]): s for s in t.per_seed if "seed" in s}


def _est(e: stats.Estimate) -> dict[str, Any]:
    return {"value": e.value, "lo": e.lo, "hi": e.hi, "n": e.n, "method": e.method}


def _metric(arm: dict[int, Any], base: dict[int, Any] | None, stat: str,
            is_baseline: bool) -> dict[str, Any]:
    """An arm's estimate over its seeds with a value, and the paired difference vs the
    baseline over the seeds both have a value for (none for the baseline itself)."""
    vals = [v for v in arm.values() if _finite(v)]
    out = _est(stats.bootstrap_ci(vals, stat))
    out["of"] = len(arm)
    if base is None or is_baseline:
        out["delta"] = None
        return out
    pairs = stats.pair_by_seed({s: v if _finite(v) else None for s, v in arm.items()},
                               {s: v if _finite(v) else None for s, v in base.items()})
    out["delta"] = _est(stats.paired_diff_ci(pairs))
    return out


def _arm_metrics(t: TrialRecord, base: TrialRecord | None, is_baseline: bool) -> dict:
    ps = _by_seed(t)
    bs = _by_seed(base) if base is not None else None

    def col(d, key):
        return {s: v.get(key) for s, v in d.items()}

    # Only seeds that completed have a final loss; a diverged seed has none (None here, so
    # it still counts among the seeds a row reports "n of").
    def final(d):
        return {s: v.get("final_val_loss") if v.get("status") == "completed" else None
                for s, v in d.items()}

    succ = _success(ps)
    k = int(sum(succ.values()))
    success = _est(stats.rate_ci(k, len(succ)))
    success["k"] = k
    success["delta"] = None
    if bs is not None and not is_baseline:
        pairs = stats.pair_by_seed(succ, _success(bs))
        success["delta"] = _est(stats.paired_rate_diff_ci(pairs))
    return {
        "spikes": _metric(col(ps, "events_per_1k"), bs and col(bs, "events_per_1k"), "mean",
                          is_baseline),
        "steps_to_target": _metric(col(ps, "steps_to_target"),
                                   bs and col(bs, "steps_to_target"), "median", is_baseline),
        "seconds_to_target": _metric(col(ps, "seconds_to_target"),
                                     bs and col(bs, "seconds_to_target"), "median",
                                     is_baseline),
        "final_loss": _metric(final(ps), bs and final(bs), "mean", is_baseline),
        "success": success,
    }


NO_COMPARISON = ("this study has no designed comparison (no [comparison] table in its sweep "
                 "file, so no baseline and single-strategy arms on matched seeds); strategy "
                 "effects are not estimated from search trials, whose settings change "
                 "together and are chosen by the sampler")


def strategy_table_info(study: Study) -> dict[str, Any]:
    """Rows of the headline table: the baseline, each comparison arm and the recipe.

    Per row: the strategy it tests (see :func:`classify_arm`), the article's columns for
    it, the number of seeds and diverged seeds, and five measurements, each with a 95% CI
    and the paired difference vs the baseline over matched seeds:

    - ``spikes``: spike events per 1,000 steps (mean over seeds; a diverged seed counts
      one more event, as in the sweep's scoring);
    - ``steps_to_target`` / ``seconds_to_target``: median over the seeds that reached the
      target (``n`` of ``of`` reached); a missed seed has no time;
    - ``final_loss``: mean final validation loss over seeds that completed;
    - ``success``: share of seeds that completed and reached the target, exact CI; its
      paired difference uses Newcombe's score interval (:func:`stats.paired_rate_diff_ci`).

    An arm with no completed trial (not run yet, failed) is a row with ``status`` and no
    measurements. No baseline arm in the spec: unavailable, with the reason.
    """
    arms = study.arms
    if "baseline" not in arms or len(arms) < 2:
        return _unavailable(NO_COMPARISON, rows=[])
    base = study.arm_trial("baseline")
    rows = []
    for arm in arms:
        cls = classify_arm(study, arm)
        claim = claimsmod.claim_for(cls["key"])
        t = study.arm_trial(arm)
        row: dict[str, Any] = {
            "arm": arm, **cls, "trial": t.number if t else None,
            "claim": {"name": claim.name or cls["label"], "applies": claim.applies,
                      "effect": claim.effect, "difficulty": claim.difficulty,
                      "in_article": claim.in_article},
        }
        if t is None:
            states = sorted({x.state.lower() for x in study.trials if x.arm == arm})
            row["status"] = ("not run yet" if not states else "no completed trial ("
                             + ", ".join(states) + ")")
            rows.append(row)
            continue
        row["status"] = "complete"
        row["seeds"] = len(t.per_seed)
        row["diverged"] = sum(s.get("status") == "diverged" for s in t.per_seed)
        row.update(_arm_metrics(t, base, arm == "baseline"))
        rows.append(row)
    notes = [claimsmod.SOURCE_NOTE]
    if base is None:
        notes.append("the baseline arm has no completed trial, so no differences are shown")
    if len(study.seeds) == 1:
        notes.append("with 1 seed per arm there is no interval: an estimate is one run")
    elif len(study.seeds) <= 5:
        notes.append(f"with {len(study.seeds)} seeds per arm, bootstrap intervals are little "
                     "more than the range of the seeds and cover less than 95% of the time; "
                     "read them as a floor on the uncertainty")
    return {"available": True, "reason": "", "rows": rows, "notes": notes,
            "target_loss": study.spec.get("target_loss"), "steps": study.steps,
            "baseline_complete": base is not None}


# --------------------------------------------------------------------------- claims


def claims_info(study: Study) -> dict[str, Any]:
    """The article's headline claims for the combined recipe, measured against the baseline.

    For each claim (see :data:`claims.HEADLINES`): the baseline and recipe values, the
    change over matched seeds with its 95% CI, and a verdict (:func:`stats.verdict`, which
    needs :data:`stats.MIN_SEEDS` matched seeds to say supported or not). Success pairs
    every common seed (1 = completed and reached) and its change is the difference in
    rate with Newcombe's paired score interval (:func:`stats.paired_rate_diff_ci`); time
    is the relative change recipe / baseline - 1 with a paired bootstrap CI (ratio of
    means), over the seeds where at least one arm reached the target (a miss or a
    divergence counts the arm's whole run, see :func:`_capped_pairs`). Unavailable without
    a designed comparison, a recipe arm, or completed baseline and recipe trials.
    """
    if "baseline" not in study.arms or len(study.arms) < 2:
        return _unavailable(NO_COMPARISON, rows=[], rules=stats.VERDICT_RULES)
    if "recipe" not in study.arms:
        return _unavailable("the designed comparison has no recipe arm (the combined "
                            "strategies), so the article's claims about it are not tested",
                            rows=[], rules=stats.VERDICT_RULES)
    base, recipe = study.arm_trial("baseline"), study.arm_trial("recipe")
    if base is None or recipe is None:
        missing = " and ".join(a for a, t in (("baseline", base), ("recipe", recipe))
                               if t is None)
        return _unavailable(f"the {missing} arm has no completed trial yet", rows=[],
                            rules=stats.VERDICT_RULES)
    bs, rs = _by_seed(base), _by_seed(recipe)
    budget = study.spec.get("steps")
    series = {
        "success": (_success(rs), _success(bs)),
        "time_seconds": _capped_pairs(rs, bs, "seconds_to_target",
                                      lambda v: _whole_run_seconds(v, budget)),
        "time_steps": _capped_pairs(rs, bs, "steps_to_target", lambda v: budget),
    }
    rows = []
    for h in claimsmod.HEADLINES:
        r, b = series[h.key]
        pairs = stats.pair_by_seed({s: v if _finite(v) else None for s, v in r.items()},
                                   {s: v if _finite(v) else None for s, v in b.items()})
        rel = (stats.paired_rate_diff_ci(pairs) if h.scale == "absolute"
               else stats.paired_relative_ci(pairs))
        v = stats.verdict(rel, h.claimed)
        rows.append({
            "key": h.key, "claim": h.text, "metric": h.metric, "claimed": h.claimed,
            "baseline": float(np.mean([p[2] for p in pairs])) if pairs else None,
            "recipe": float(np.mean([p[1] for p in pairs])) if pairs else None,
            "n_pairs": len(pairs), "of": len(set(r) & set(b)),
            "relative": _est(rel), "scale": h.scale,
            "verdict": v.verdict, "seeds_needed": v.seeds_needed,
            "seeds_capped": v.seeds_needed == stats.SEEDS_CAP, "why": v.reason,
        })
    notes = ["success: the paired difference in success rate over every seed both arms "
             "ran, in percentage points (defined even when the baseline never succeeds), "
             "with Newcombe's (1998) score interval for paired proportions (method 10)",
             "time: on a seed where one arm reached the target, the other arm, whether it "
             "missed the target or diverged, counts its whole run (the step budget, or the "
             "run's wall time, scaled to the whole budget for a run that diverged early) as "
             "its time to target, a lower bound of the true time; only seeds where both arms "
             "missed or diverged drop out"]
    labels = {(study.metas.get(recipe.number) or {}).get("precision", "")}
    if any("emulated" in str(x) for x in labels):
        notes.append("the recipe's half precision is emulated on this device: its wall time "
                     "includes the emulation's overhead and is no measure of real bf16 "
                     "speed; steps to target is the hardware-independent comparison")
    return {"available": True, "reason": "", "rows": rows, "rules": stats.VERDICT_RULES,
            "notes": notes, "baseline_trial": base.number, "recipe_trial": recipe.number}


# --------------------------------------------------------------------------- trials


def trials_table_info(study: Study) -> dict[str, Any]:
    """Every trial: number, state, arm, parameter values, scores and a note (error/cause).

    ``param_keys`` are the union of the trials' parameter names in first-seen order; a
    trial without a parameter (e.g. ``optim.clip`` when clipping is off) has None there.
    """
    keys: list[str] = []
    for t in study.trials:
        keys += [k for k in t.params if k not in keys]
    rows = []
    for t in study.trials:
        a = t.attrs
        finals = [s.get("final_val_loss") for s in t.per_seed if _finite(s.get("final_val_loss"))]
        rows.append({
            "number": t.number, "state": t.state.lower(), "arm": t.arm,
            "params": {k: t.params.get(k) for k in keys},
            "spikes": a.get("spikes"), "convergence": a.get("convergence"),
            "events_median": a.get("n_events_median"), "diverged_seeds": a.get("diverged_seeds"),
            "reached_seeds": a.get("reached_seeds"), "seeds": a.get("seeds"),
            "final_loss": statistics.median(finals) if finals else None,
            "duration_s": t.duration_s,
            "note": str(a.get("error") or a.get("cause") or ""),
        })
    return {"available": True, "param_keys": keys, "rows": rows,
            "spike_metric": study.spec.get("spike_metric", "severity")}


# --------------------------------------------------------------------------- pareto


def pareto_mask(xs: list[float], ys: list[float]) -> list[bool]:
    """True for points no other point dominates (both minimised): q dominates p when q is
    <= p in both and < in one. Duplicated front points are all on the front."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size == 0:
        return []
    le = (x[:, None] <= x[None, :]) & (y[:, None] <= y[None, :])
    lt = (x[:, None] < x[None, :]) | (y[:, None] < y[None, :])
    return (~(le & lt).any(axis=0)).tolist()


def spike_axis_label(study: Study) -> str:
    if study.spec.get("spike_metric") == "events":
        return "spike events (median over seeds)"
    return "spike severity (median total loss-spike area, nats x steps)"


CONVERGENCE_LABEL = ("convergence (median steps to target; a miss: steps x final/target loss;"
                     " diverged: 3 x steps)")


CONVERGENCE_SHORT = "convergence (steps; lower is better)"


def pareto_info(study: Study) -> dict[str, Any]:
    """Completed trials in (spikes, convergence), and which lie on the Pareto front.

    The front is computed here from the trials' spike and convergence scores (both
    objectives of a multi-objective study; for a single-objective study spikes are a
    constraint, and the front still shows the trade-off). Fewer than one completed trial
    with both scores: unavailable.
    """
    pts = [t for t in study.trials if t.complete and _finite(t.attrs.get("spikes"))
           and _finite(t.attrs.get("convergence"))]
    if not pts:
        return _unavailable("no completed trial with spike and convergence scores yet")
    xs = [float(t.attrs["spikes"]) for t in pts]
    ys = [float(t.attrs["convergence"]) for t in pts]
    mask = pareto_mask(xs, ys)
    points = [{"number": t.number, "arm": t.arm, "spikes": x, "convergence": y, "front": m,
               "diverged": bool(t.attrs.get("diverged_seeds"))}
              for t, x, y, m in zip(pts, xs, ys, mask, strict=True)]
    front = sorted((p for p in points if p["front"]), key=lambda p: (p["spikes"],
                                                                     p["convergence"]))
    return {"available": True, "points": points, "front": [p["number"] for p in front],
            "x_label": spike_axis_label(study), "y_label": CONVERGENCE_LABEL,
            "y_short": CONVERGENCE_SHORT}


# --------------------------------------------------------------------------- importance


def importance_info(study: Study) -> dict[str, Any]:
    """Optuna's parameter importances (its default evaluator, PED-ANOVA) per objective.

    Needs the Optuna study and at least two completed trials whose parameters vary;
    Optuna's errors (too few trials, a single value everywhere) become an unavailable
    section with its message rather than a crash. Conditional parameters (``optim.clip``
    exists only when clipping is on) are assessed by PED-ANOVA over the trials that have
    them.
    """
    import optuna

    st = study.optuna_study
    done = [t for t in study.trials if t.complete]
    if st is None or len(done) < 2:
        return _unavailable("needs at least two completed trials")
    names = (["spikes", "convergence"] if len(study.directions) == 2 else
             ["convergence"] if len(study.directions) == 1 else
             [f"objective {i}" for i in range(len(study.directions))])
    objectives = []
    for i, name in enumerate(names):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = optuna.importance.get_param_importances(
                    st, target=lambda t, i=i: t.values[i])
        except Exception as e:  # noqa: BLE001 - an optional section must not end the report
            return _unavailable(f"Optuna could not compute importances "
                                f"({type(e).__name__}: {e})")
        objectives.append({"name": name, "importances": {k: float(v) for k, v in imp.items()}})
    if not any(o["importances"] for o in objectives):
        return _unavailable("no parameter varies across the completed trials")
    return {"available": True, "evaluator": "PED-ANOVA (Optuna's default)",
            "objectives": objectives, "n_trials": len(done)}


# --------------------------------------------------------------------------- curves


def rank_scores(study: Study) -> dict[int, float]:
    """Mean of each completed trial's rank percentiles in spikes and convergence (0 best).

    One number to pick "best" and "worst" trials by in a two-objective study without
    preferring either objective; ties share the average rank.
    """
    pts = [t for t in study.trials if t.complete and _finite(t.attrs.get("spikes"))
           and _finite(t.attrs.get("convergence"))]
    if not pts:
        return {}

    def pct(vals: list[float]) -> list[float]:
        order = sorted(vals)
        n = len(vals)
        # Average rank of ties: mean of first and last index of the value in sorted order.
        first = {v: order.index(v) for v in set(vals)}
        last = {v: n - 1 - order[::-1].index(v) for v in set(vals)}
        return [((first[v] + last[v]) / 2) / max(1, n - 1) for v in vals]

    a = pct([float(t.attrs["spikes"]) for t in pts])
    b = pct([float(t.attrs["convergence"]) for t in pts])
    return {t.number: (x + y) / 2 for t, x, y in zip(pts, a, b, strict=True)}


def pick_curve_trials(study: Study) -> list[tuple[str, TrialRecord]]:
    """(roles, trial) for the baseline, the best and the worst trial by :func:`rank_scores`
    (ties: lower trial number). A trial in several roles appears once, roles joined."""
    scores = rank_scores(study)
    by_number = {t.number: t for t in study.trials}
    picks: dict[int, list[str]] = {}
    base = study.arm_trial("baseline")
    if base is not None:
        picks.setdefault(base.number, []).append("baseline")
    if scores:
        best = min(scores, key=lambda n: (scores[n], n))
        worst = max(scores, key=lambda n: (scores[n], -n))
        picks.setdefault(best, []).append("best")
        if worst != best:
            picks.setdefault(worst, []).append("worst")
    return [(", ".join(roles), by_number[n]) for n, roles in picks.items()]


def _thin(steps: list[int], values: list[float], max_points: int) -> tuple[list, list]:
    if len(steps) <= max_points:
        return steps, values
    stride = math.ceil(len(steps) / max_points)
    return steps[::stride], values[::stride]


def curves_info(study: Study, *, max_points: int = 2000) -> dict[str, Any]:
    """Loss curves of the baseline, best and worst trials, every seed, events marked.

    Per seed: training loss (thinned to ``max_points`` by stride; spikes stay marked
    because events come from the summary, not the thinned curve), validation loss, the
    events of ``summary.json`` (onset, peak, metric, recovery, peak loss value) and the
    injected faults (first..last step). A seed without logs is listed with no points.
    """
    picks = pick_curve_trials(study)
    scores = rank_scores(study)
    if not picks:
        return _unavailable("no baseline and no completed trial to draw")
    panels = []
    for roles, t in picks:
        seeds = []
        seed_list = [int(s["seed"]) for s in t.per_seed if "seed" in s] or [
            int(d.name[5:]) for d in seed_dirs(t)]
        for seed in seed_list:
            log = seed_log(t, seed) or {"rows": [], "summary": None, "meta": None}
            rows = log["rows"]
            train = [(int(r["step"]), float(r["train/loss"])) for r in rows
                     if _finite(r.get("train/loss")) and "step" in r]
            val = [(int(r["step"]), float(r["val/loss"])) for r in rows
                   if _finite(r.get("val/loss")) and "step" in r]
            loss_at = dict(train)
            summary = log["summary"] or {}
            events = []
            for e in (summary.get("spikes") or {}).get("events") or []:
                if not isinstance(e, dict) or not _finite(e.get("peak")):
                    continue
                events.append({"onset": e.get("onset"), "peak": e.get("peak"),
                               "metric": str(e.get("metric", "")),
                               "recovery_steps": e.get("recovery_steps"),
                               "recovered": e.get("recovered"),
                               "injected": bool(e.get("injected")),
                               "loss_at_peak": loss_at.get(int(e["peak"]))})
            injections = [{"kind": str(i.get("kind", "")), "first": i.get("first_step"),
                           "last": i.get("last_step")}
                          for i in (log["meta"] or {}).get("injections") or []
                          if isinstance(i, dict) and _finite(i.get("first_step"))]
            steps, loss = _thin([s for s, _ in train], [v for _, v in train], max_points)
            seeds.append({"seed": seed, "status": summary.get("status"),
                          "diverged_step": summary.get("diverged_step"),
                          "steps": steps, "loss": loss, "val_steps": [s for s, _ in val],
                          "val_loss": [v for _, v in val], "events": events,
                          "injections": injections})
        panels.append({"roles": roles, "number": t.number, "arm": t.arm,
                       "score": scores.get(t.number), "seeds": seeds})
    return {"available": True, "panels": panels,
            "selection": "best and worst are picked by the mean of their rank percentiles in "
                         "spikes and convergence (0 = best in both)"}


# --------------------------------------------------------------------------- spike counts


def _values_of(t: TrialRecord, study: Study) -> dict[str, Any]:
    # The sweep records each trial's resolved space values as "overrides"; the comparison
    # arms' values are in the spec for trials that failed before recording them.
    ov = t.attrs.get("overrides")
    if isinstance(ov, dict):
        return ov
    return study.arms.get(t.arm, {})


def spike_counts_info(study: Study) -> dict[str, Any]:
    """Spike events by strategy, two ways.

    ``arms``: each comparison arm's loss-spike events per seed (a diverged seed counts
    one more), with the mean per seed; ``features``: over every completed trial (search
    included), the mean events per seed of trials with a strategy on vs off. The second
    is descriptive only: in search trials strategies vary together.
    """
    arms = []
    for arm in study.arms:
        t = study.arm_trial(arm)
        if t is None:
            continue
        ev = [int(s.get("n_events") or 0) for s in t.per_seed]
        arms.append({"arm": arm, "label": classify_arm(study, arm)["label"], "trial": t.number,
                     "events": ev, "mean": float(np.mean(ev)) if ev else None,
                     "diverged": sum(s.get("status") == "diverged" for s in t.per_seed)})
    done = [t for t in study.trials if t.complete and t.per_seed]
    per_trial = {t.number: float(np.mean([int(s.get("n_events") or 0) for s in t.per_seed]))
                 for t in done}
    active: dict[int, dict[str, str]] = {}
    for t in done:
        vals = _values_of(t, study)
        kind = _schedule_kind(study, vals)
        found = (strategy_of(k, v, schedule_kind=kind) for k, v in vals.items())
        active[t.number] = {f[0]: f[1] for f in found if f is not None and f[0] != "unknown"}
    labels: dict[str, str] = {}
    for a in active.values():
        for k, lab in a.items():
            # Clipping at different thresholds is one feature here.
            labels.setdefault(k, "clipping (any threshold)" if k == "clip" else lab)
    features = []
    for k, lab in labels.items():
        on = [per_trial[n] for n in per_trial if k in active[n]]
        off = [per_trial[n] for n in per_trial if k not in active[n]]
        features.append({"key": k, "label": lab, "on_trials": len(on), "off_trials": len(off),
                         "on_mean": float(np.mean(on)) if on else None,
                         "off_mean": float(np.mean(off)) if off else None})
    if not arms and not features:
        return _unavailable("no completed trial yet")
    return {"available": True, "arms": arms, "features": features}


# --------------------------------------------------------------------------- LR


LR_KEY = "optim.lr"


def lr_bins(points: list[dict[str, Any]], n_bins: int = 6) -> list[dict[str, Any]]:
    """Points grouped into up to ``n_bins`` log-spaced LR bins (empty bins dropped), with
    median spikes and convergence and how many trials had a diverged seed. One distinct
    LR: one bin."""
    lrs = np.log10([p["lr"] for p in points])
    lo, hi = float(lrs.min()), float(lrs.max())
    edges = np.linspace(lo, hi, n_bins + 1) if hi > lo else np.array([lo, hi])
    idx = np.clip(np.searchsorted(edges, lrs, side="right") - 1, 0, len(edges) - 2)
    out = []
    for b in range(len(edges) - 1):
        members = [p for p, i in zip(points, idx, strict=True) if i == b]
        if not members:
            continue

        def med(key, members=members):
            vals = [m[key] for m in members if _finite(m[key])]
            return statistics.median(vals) if vals else None

        out.append({"lo": float(10 ** edges[b]), "hi": float(10 ** edges[b + 1]),
                    "trials": len(members), "spikes": med("spikes"),
                    "convergence": med("convergence"),
                    "diverged_trials": sum(m["diverged_seeds"] > 0 for m in members)})
    return out


def lr_sensitivity_info(study: Study) -> dict[str, Any]:
    """Spikes, convergence and final loss against the learning rate, one point per
    completed trial, when the study swept ``optim.lr``; unavailable otherwise."""
    if not any(p.get("key") == LR_KEY for p in study.space):
        return _unavailable("the study did not sweep the learning rate (optim.lr is not in "
                            "its search space)")
    pts = []
    for t in study.trials:
        lr = t.params.get(LR_KEY, _values_of(t, study).get(LR_KEY))
        if not t.complete or not _finite(lr) or lr <= 0:
            continue
        finals = [s.get("final_val_loss") for s in t.per_seed if _finite(s.get("final_val_loss"))]
        pts.append({"number": t.number, "arm": t.arm, "lr": float(lr),
                    "spikes": t.attrs.get("spikes"), "convergence": t.attrs.get("convergence"),
                    "final_loss": statistics.median(finals) if finals else None,
                    "diverged_seeds": int(t.attrs.get("diverged_seeds") or 0),
                    "seeds": int(t.attrs.get("seeds") or len(t.per_seed))})
    if not pts:
        return _unavailable("no completed trial with a learning rate yet")
    pts.sort(key=lambda p: p["lr"])
    return {"available": True, "points": pts, "bins": lr_bins(pts),
            "x_label": "learning rate (optim.lr)",
            "spikes_label": spike_axis_label(study), "convergence_label": CONVERGENCE_SHORT}


# --------------------------------------------------------------------------- header


def describe_param(p: dict[str, Any]) -> str:
    """One search-space dimension in words (as ``spikebench sweep --dry-run`` prints it).

    The stored spec drops falsy fields (a ``low`` of 0.0 is absent), so missing bounds
    read as 0.
    """
    if p.get("choices") is not None:
        return "one of " + ", ".join(str(c) for c in p["choices"])
    lo, hi = p.get("low") or 0.0, p.get("high") or 0.0
    text = f"{'int' if p.get('integer') else 'float'} in [{lo:g}, {hi:g}]"
    text += " log-uniform" if p.get("log") else ""
    return text + (' or "off"' if p.get("off") else "")


def _distinct(values) -> list[str]:
    out: list[str] = []
    for v in values:
        if v is not None and str(v) not in out:
            out.append(str(v))
    return out


def _first_config(study: Study) -> dict[str, Any]:
    for t in study.trials:
        if t.folder is not None:
            job = read_json(t.folder / "trial.json")
            if job and isinstance(job.get("config"), dict):
                return job["config"]
    return {}


def _fault_text(inj: dict[str, Any]) -> str:
    where = f" ({inj['target']})" if inj.get("target") else ""
    if _finite(inj.get("first_step")) and _finite(inj.get("last_step")):
        return f"{inj.get('kind', '?')}{where} at steps {inj['first_step']}-{inj['last_step']}"
    return f"{inj.get('kind', '?')}{where}"


def header_info(study: Study) -> dict[str, Any]:
    """Study, environment, search space, arms and how a spike was defined.

    Environment values are collected over every trial's first seed ``meta.json``; where
    trials disagree (a sweep resumed on another machine or commit) all distinct values are
    listed. Values no trial recorded are empty lists.
    """
    metas = list(study.metas.values())
    envs = [m.get("environment") or {} for m in metas]
    corp = [m.get("corpus") or {} for m in metas]
    states: dict[str, int] = {}
    for t in study.trials:
        states[t.state.lower()] = states.get(t.state.lower(), 0) + 1
    spikes_cfg = _first_config(study).get("spikes") or {}
    rule = str(spikes_cfg.get("detector", "default"))
    gap = spikes_cfg.get("gap", 5)
    metric = study.spec.get("spike_metric", "severity")
    definition = (
        f"rule {rule!r}: {RULE_TEXT.get(rule, 'see spikebench.detectors')}, on the training "
        f"loss and on log(grad norm); flagged steps with at most {gap} unflagged log rows "
        "between them form one event. Counts and severity use loss events only (grad-norm events are precursors). "
        + ("The spike objective is the total severity: the area between the loss and its "
           "pre-spike trend over each event and its recovery (nats x steps; steps on an "
           "injected faulty batch add no area, so it measures damage on clean batches), "
           if metric == "severity" else "The spike objective is the number of loss events, ")
        + "median over seeds; a diverged seed adds one event and the area of a loss stuck at "
        "its initial value for the rest of the budget.")
    spec = study.spec
    return {
        "study": study.name, "folder": str(study.folder), "n_trials": len(study.trials),
        "states": states, "objective": study.objective, "directions": study.directions,
        "spike_metric": metric, "target_loss": spec.get("target_loss"),
        "spike_limit": spec.get("spike_limit"), "steps": spec.get("steps"),
        "eval_every": spec.get("eval_every"), "seeds": study.seeds,
        "sampler": spec.get("sampler"), "pruner": spec.get("pruner"),
        "sweep_file": spec.get("path"), "notes": spec.get("notes") or "",
        "has_spec": bool(spec),
        "environment": {
            "device": _distinct(e.get("device") for e in envs),
            "gpu": _distinct(e.get("gpu") for e in envs),
            "precision": _distinct(m.get("precision") for m in metas),
            "torch": _distinct(e.get("torch") for e in envs),
            "python": _distinct(e.get("python") for e in envs),
            "platform": _distinct(e.get("platform") for e in envs),
            "git": _distinct(e.get("git") for e in envs),
            "corpus": _distinct(f"{c.get('source', '?')} ({c.get('bytes', '?')} bytes)"
                                for c in corp if c),
            "corpus_sha256": _distinct(c.get("sha256") for c in corp),
        },
        "faults": _distinct(_fault_text(i) for m in metas for i in m.get("injections") or []
                            if isinstance(i, dict)),
        "space": [{"key": str(p.get("key")), "describe": describe_param(p)} for p in study.space],
        "base": dict(spec.get("base") or {}),
        "arms": {a: classify_arm(study, a)["label"] for a in study.arms},
        "spike_definition": definition,
    }


# --------------------------------------------------------------------------- all


def report_info(study: Study) -> dict[str, Any]:
    """Every section's data, in report order."""
    return {
        "header": header_info(study),
        "strategy": strategy_table_info(study),
        "claims": claims_info(study),
        "spike_counts": spike_counts_info(study),
        "curves": curves_info(study),
        "pareto": pareto_info(study),
        "importance": importance_info(study),
        "lr": lr_sensitivity_info(study),
        "trials": trials_table_info(study),
    }
