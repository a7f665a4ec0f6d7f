"""Section 2, the article's headline claims for the combined recipe, measured against the
baseline on matched seeds, each with a verdict from an exact paired test and its p-value.

Time to target is censored (a miss is "at least the budget"), so a time verdict must hold
whatever the censored times are; wall time is judged only on real (not emulated) precision.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from spikebench.report import article, stats, verdicts
from spikebench.report.arms import NO_COMPARISON, has_comparison
from spikebench.report.blocks import DASH, Block, Cell, Span, Table, interval, notes, num, para, pct
from spikebench.report.data import Study
from spikebench.report.scores import success
from spikebench.report.sections.section import Info
from spikebench.values import finite

NO_RECIPE = ("the designed comparison has no recipe arm (the combined strategies), so the "
             "article's claims about it are not tested")
EMULATED = ("wall time is not judged: a compared arm's half precision is emulated on this "
            "device, so its wall time measures the emulation, not bf16; steps to target is the "
            "hardware-independent comparison")


@dataclass(frozen=True, kw_only=True)
class ClaimsInfo(Info):
    rows: list[dict[str, Any]] = field(default_factory=list)
    rules: str = verdicts.RULES
    notes: list[str] = field(default_factory=list)
    baseline_trial: int | None = None
    recipe_trial: int | None = None


def whole_run_seconds(v: dict, budget: int | None) -> float | None:
    """A seed's wall time for the whole step budget: a diverged run stopped early, so its time
    is scaled to the budget at the pace it ran (else an early divergence looks fast)."""
    sec, done = v.get("seconds"), v.get("diverged_step")
    if v.get("status") == "diverged" and finite(sec) and budget and done:
        return sec * budget / done
    return sec


def censored_times(rs: dict, bs: dict, key: str, bound_of) -> dict[str, tuple[list, list]]:
    """Paired times to target over the seeds both arms ran: a reached time as it is, a miss
    or a divergence censored at its bound (``bound_of``: the budget, or the whole run's
    wall time). ``shown`` puts misses at the bound; ``worst`` (for the claim "faster") puts
    the recipe's misses at +inf and the baseline's at the bound; ``best`` the other way."""
    out: dict[str, tuple[list, list]] = {"shown": ([], []), "worst": ([], []),
                                         "best": ([], [])}
    for s in sorted(set(rs) & set(bs)):
        r, b = rs[s], bs[s]
        vals = []
        for v in (r, b):
            hit = v.get("status") == "completed" and finite(v.get(key))
            bound = bound_of(v)
            if not hit and not finite(bound):
                break  # a run with no known time at all: the pair drops out
            vals.append((float(v[key]), None) if hit else (float(bound), float(bound)))
        if len(vals) < 2:
            continue
        (rv, rc), (bv, bc) = vals
        for name, r_miss, b_miss in (("shown", rc, bc), ("worst", math.inf, bc),
                                     ("best", rc, math.inf)):
            out[name][0].append(rv if rc is None else r_miss)
            out[name][1].append(bv if bc is None else b_miss)
    return out


def _success_pairs(rs: dict, bs: dict) -> tuple[list[float], list[float]]:
    r, b = success(rs), success(bs)
    seeds = sorted(set(r) & set(b))
    return [r[s] for s in seeds], [b[s] for s in seeds]


def _emulated(study: Study, *trials) -> bool:
    return any("emulated" in str((study.metas.get(t.number) or {}).get("precision", ""))
               for t in trials)


def info(study: Study) -> ClaimsInfo:
    """For each claim of :data:`~spikebench.report.article.HEADLINES`: the baseline's and the
    recipe's means on matched seeds, the relative change with its exact interval, the
    verdict (:func:`~spikebench.report.verdicts.judge`) and its p-values; for success also
    the difference in percentage points (Newcombe's paired interval)."""
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
    emulated = _emulated(study, base, recipe)
    rows = []
    for h in article.HEADLINES:
        extra: dict[str, Any] = {}
        if h.key == "success":
            shown = _success_pairs(rs, bs)
            v = verdicts.judge_success(shown, h.claimed)
            pairs = [(i, x, y) for i, (x, y) in enumerate(zip(*shown, strict=True))]
            extra["points"] = asdict(stats.paired_rate_diff_ci(pairs))
        else:
            key = "steps_to_target" if h.key == "time_steps" else "seconds_to_target"
            bound = ((lambda v: budget) if h.key == "time_steps"
                     else (lambda v: whole_run_seconds(v, budget)))
            times = censored_times(rs, bs, key, bound)
            shown = times["shown"]
            v = (verdicts.not_judged(shown, "emulated precision") if h.key == "time_seconds"
                 and emulated else verdicts.judge(shown, h.claimed, worst=times["worst"],
                                                  best=times["best"]))
        a, b = shown
        rows.append({
            "key": h.key, "claim": h.text, "metric": h.metric, "claimed": h.claimed,
            "baseline": sum(b) / len(b) if b else None,
            "recipe": sum(a) / len(a) if a else None,
            "n_pairs": len(a), "of": len(set(rs) & set(bs)),
            "relative": asdict(v.interval), "verdict": v.verdict, "why": v.reason,
            "p_no_change": v.p_no_change, "p_claim": v.p_claim,
            "seeds_needed": v.seeds_needed,
            "seeds_capped": v.seeds_needed == verdicts.SEEDS_CAP, **extra,
        })
    texts = ["success: the share of seeds that completed without divergence and reached the "
             "target; the verdict judges the ratio of the two rates (the claim is relative: "
             "+40% of the baseline's rate); the difference in percentage points, with "
             "Newcombe's (1998) paired score interval, is shown beside it",
             "time: the restricted mean time to target (a miss or a divergence counted at the "
             "budget, a lower bound of its time); the verdict respects the censoring"]
    if emulated:
        texts.append(EMULATED)
    return ClaimsInfo(rows=rows, notes=texts, baseline_trial=base.number,
                      recipe_trial=recipe.number)


COLUMNS = ["Claim (article)", "Measured as", "Baseline", "Recipe", "Matched seeds",
           "Change [95% CI]", "p (no change; claim)", "Verdict", "Seeds to settle"]


def _p(x: float | None) -> str:
    return DASH if x is None else f"{x:.3g}"


def _row(r: dict[str, Any]) -> list[Cell]:
    fmt = pct if r["key"] == "success" else num
    if r["seeds_needed"] is None:
        need = DASH if r["verdict"] != "inconclusive" else "unknown"
    else:
        need = ("≥" if r["seeds_capped"] else "") + str(r["seeds_needed"])
    change = interval(r["relative"], lambda v: pct(v, sign=True))
    if "points" in r:
        change += (" (ratio of rates)\n"
                   + interval(r["points"], lambda v: pct(v, sign=True).replace("%", " pp"))
                   + " (difference)")
    return [Cell(f"{r['claim']} ({pct(r['claimed'], sign=True)})"), Cell(r["metric"]),
            Cell(fmt(r["baseline"])), Cell(fmt(r["recipe"])),
            Cell(f"{r['n_pairs']}/{r['of']}"), Cell(change),
            Cell(f"{_p(r['p_no_change'])}; {_p(r['p_claim'])}"),
            Cell(f"{r['verdict']}\n({r['why']})"), Cell(need)]


def blocks(c: ClaimsInfo, images: frozenset[str]) -> list[Block]:
    return [Table(COLUMNS, [_row(r) for r in c.rows]), *notes(c.notes),
            para(Span("How verdicts are decided: ", True), c.rules)]
