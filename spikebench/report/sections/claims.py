"""Section 2, the article's headline claims for the combined recipe, measured against the baseline.

Each claim gets the change over matched seeds with its 95% CI and a verdict that needs
:data:`~spikebench.report.stats.MIN_SEEDS` matched seeds before it says supported or not.
A seed where only one arm reached the target stays in the time claims (the other arm counts
its whole run), so a recipe that avoids misses is not judged on its easy seeds alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from spikebench.report import article, stats
from spikebench.report.arms import NO_COMPARISON, has_comparison
from spikebench.report.blocks import DASH, Block, Cell, Span, Table, interval, notes, num, para, pct
from spikebench.report.data import Study
from spikebench.report.scores import success
from spikebench.report.sections.section import Info
from spikebench.values import finite

NO_RECIPE = ("the designed comparison has no recipe arm (the combined strategies), so the "
             "article's claims about it are not tested")


@dataclass(frozen=True, kw_only=True)
class ClaimsInfo(Info):
    rows: list[dict[str, Any]] = field(default_factory=list)
    rules: str = stats.VERDICT_RULES
    notes: list[str] = field(default_factory=list)
    baseline_trial: int | None = None
    recipe_trial: int | None = None


def _whole_run_seconds(v: dict, budget: int | None) -> float | None:
    """A seed's wall time for the whole step budget: a diverged run stopped early, so its
    time is scaled to the budget at the pace it ran (else an early divergence would look
    faster than a run that reached the target)."""
    sec, done = v.get("seconds"), v.get("diverged_step")
    if v.get("status") == "diverged" and finite(sec) and budget and done:
        return sec * budget / done
    return sec


def _capped_pairs(rs: dict, bs: dict, key: str,
                  budget_of: Callable[[dict], float | None]) -> tuple[dict, dict]:
    """Per-seed times to target for the time claims, recipe (``rs``) and baseline (``bs``).

    On a seed where the other arm reached the target, a miss or a divergence counts the
    arm's whole budget (``budget_of``), a lower bound of its true time, so the seed stays in
    the comparison. Seeds where neither arm reached the target, or where a capped side's
    budget is unknown, are None (they drop out of the pairs)."""
    def reached(v: dict | None) -> bool:
        return v is not None and v.get("status") == "completed" and finite(v.get(key))

    def value(v: dict, other: dict | None) -> float | None:
        if reached(v):
            return v[key]
        if v.get("status") in ("completed", "diverged") and reached(other):
            budget = budget_of(v)
            return budget if finite(budget) else None
        return None

    return ({s: value(v, bs.get(s)) for s, v in rs.items()},
            {s: value(v, rs.get(s)) for s, v in bs.items()})


NOTES = ["success: the paired difference in success rate over every seed both arms ran, in "
         "percentage points (defined even when the baseline never succeeds), with Newcombe's "
         "(1998) score interval for paired proportions (method 10)",
         "time: on a seed where one arm reached the target, the other arm, whether it missed "
         "the target or diverged, counts its whole run (the step budget, or the run's wall "
         "time, scaled to the whole budget for a run that diverged early) as its time to "
         "target, a lower bound of the true time; only seeds where both arms missed or "
         "diverged drop out"]
EMULATED = ("the recipe's half precision is emulated on this device: its wall time includes "
            "the emulation's overhead and is no measure of real bf16 speed; steps to target "
            "is the hardware-independent comparison")


def info(study: Study) -> ClaimsInfo:
    """For each claim of :data:`~spikebench.report.article.HEADLINES`: baseline and recipe
    values, the change over matched seeds with its CI, and :func:`stats.verdict`.

    Success pairs every common seed (1 = completed and reached): a difference in rate with
    Newcombe's paired score interval. Time: recipe / baseline - 1, a paired bootstrap of
    the ratio of means over the seeds where at least one arm reached the target.
    """
    if not has_comparison(study):
        return ClaimsInfo.unavailable(NO_COMPARISON)
    if "recipe" not in study.arms:
        return ClaimsInfo.unavailable(NO_RECIPE)
    base, recipe = study.arm_trial("baseline"), study.arm_trial("recipe")
    if base is None or recipe is None:
        missing = " and ".join(a for a, t in (("baseline", base), ("recipe", recipe))
                               if t is None)
        return ClaimsInfo.unavailable(f"the {missing} arm has no completed trial yet")
    bs, rs = base.by_seed(), recipe.by_seed()
    budget = study.steps
    series = {
        "success": (success(rs), success(bs)),
        "time_seconds": _capped_pairs(rs, bs, "seconds_to_target",
                                      lambda v: _whole_run_seconds(v, budget)),
        "time_steps": _capped_pairs(rs, bs, "steps_to_target", lambda v: budget),
    }
    rows = []
    for h in article.HEADLINES:
        r, b = series[h.key]
        pairs = stats.pair_by_seed({s: v if finite(v) else None for s, v in r.items()},
                                   {s: v if finite(v) else None for s, v in b.items()})
        rel = (stats.paired_rate_diff_ci(pairs) if h.scale == "absolute"
               else stats.paired_relative_ci(pairs))
        v = stats.verdict(rel, h.claimed)
        rows.append({
            "key": h.key, "claim": h.text, "metric": h.metric, "claimed": h.claimed,
            "baseline": float(np.mean([p[2] for p in pairs])) if pairs else None,
            "recipe": float(np.mean([p[1] for p in pairs])) if pairs else None,
            "n_pairs": len(pairs), "of": len(set(r) & set(b)),
            "relative": asdict(rel), "scale": h.scale,
            "verdict": v.verdict, "seeds_needed": v.seeds_needed,
            "seeds_capped": v.seeds_needed == stats.SEEDS_CAP, "why": v.reason,
        })
    texts = list(NOTES)
    if "emulated" in str((study.metas.get(recipe.number) or {}).get("precision", "")):
        texts.append(EMULATED)
    return ClaimsInfo(rows=rows, notes=texts, baseline_trial=base.number,
                      recipe_trial=recipe.number)


COLUMNS = ["Claim (article)", "Measured as", "Baseline", "Recipe", "Matched seeds",
           "Change [95% CI]", "Verdict", "Seeds to settle"]


def _row(r: dict[str, Any]) -> list[Cell]:
    fmt = pct if r["key"] == "success" else num
    if r["seeds_needed"] is None:
        need = DASH if r["verdict"] != "inconclusive" else "unknown"
    else:
        need = ("≥" if r["seeds_capped"] else "") + str(r["seeds_needed"])
    if r.get("scale") == "absolute":
        rel = interval(r["relative"], lambda v: pct(v, sign=True).replace("%", " pp"))
    else:
        rel = interval(r["relative"], lambda v: pct(v, sign=True))
    return [Cell(f"{r['claim']} ({pct(r['claimed'], sign=True)})"), Cell(r["metric"]),
            Cell(fmt(r["baseline"])), Cell(fmt(r["recipe"])),
            Cell(f"{r['n_pairs']}/{r['of']}"), Cell(rel),
            Cell(f"{r['verdict']}\n({r['why']})"), Cell(need)]


def blocks(c: ClaimsInfo, images: frozenset[str]) -> list[Block]:
    return [Table(COLUMNS, [_row(r) for r in c.rows]), *notes(c.notes),
            para(Span("How verdicts are decided: ", True), c.rules)]
