"""Section 3, the article's headline claims for the combined recipe, measured against the
baseline on matched seeds, each with its interval, the exact test the interval inverts, and
the verdict read off that interval (:mod:`spikebench.report.verdicts`); the judged claims
are one family (Bonferroni).

Time to target is judged as the restricted mean at the budget (a miss counts the budget);
wall time is judged only on real (not emulated) precision.
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
NO_RECIPE_GROUP = ("no recipe group was named (spikebench compare --recipe NAME), so the "
                   "article's claims are not tested")
EMULATED = ("wall time is not judged: a compared arm's half precision is emulated on this "
            "device, so its wall time measures the emulation, not bf16; steps to target is the "
            "hardware-independent comparison")


@dataclass(frozen=True, kw_only=True)
class ClaimsInfo(Info):
    rows: list[dict[str, Any]] = field(default_factory=list)
    rules: str = ""
    notes: list[str] = field(default_factory=list)
    baseline_trial: int | None = None
    recipe_trial: int | None = None
    paired: bool = True  # False: the recipe's and the baseline's runs share no seed


def whole_run_seconds(v: dict, budget: int | None) -> float | None:
    """A seed's wall time for the whole step budget: a diverged run stopped early, so its time
    is scaled to the budget at the pace it ran (else an early divergence looks fast)."""
    sec, done = v.get("seconds"), v.get("diverged_step")
    if v.get("status") == "diverged" and finite(sec) and budget and done:
        return sec * budget / done
    return sec


def restricted_times(rs: dict, bs: dict, key: str, bound_of
                     ) -> tuple[tuple[list, list], tuple[list, list]]:
    """Paired restricted times to target over the seeds both arms ran, and which of them
    are misses: a reached time as it is, a miss or a divergence at its bound
    (``bound_of``: the budget, or the whole run's wall time)."""
    shown: tuple[list, list] = ([], [])
    missed: tuple[list, list] = ([], [])
    for s in sorted(set(rs) & set(bs)):
        vals = []
        for v in (rs[s], bs[s]):
            hit = v.get("status") == "completed" and finite(v.get(key))
            bound = bound_of(v)
            if not hit and not finite(bound):
                break  # a run with no known time at all: the pair drops out
            vals.append((float(v[key]), False) if hit else (float(bound), True))
        if len(vals) < 2:
            continue
        for side, (value, miss) in enumerate(vals):
            shown[side].append(value)
            missed[side].append(miss)
    return shown, missed


def restricted_times_two(rs: dict, bs: dict, key: str, bound_of
                         ) -> tuple[tuple[list, list], tuple[list, list]]:
    """:func:`restricted_times` for two independent groups of runs: every run of each with
    a known time, unpaired (a run with no known time at all drops out)."""
    shown: tuple[list, list] = ([], [])
    missed: tuple[list, list] = ([], [])
    for side, runs in enumerate((rs, bs)):
        for s in sorted(runs):
            v = runs[s]
            hit = v.get("status") == "completed" and finite(v.get(key))
            bound = bound_of(v)
            if not hit and not finite(bound):
                continue
            shown[side].append(float(v[key]) if hit else float(bound))
            missed[side].append(not hit)
    return shown, missed


def _success_pairs(rs: dict, bs: dict, paired: bool = True) -> tuple[list[float], list[float]]:
    r, b = success(rs), success(bs)
    if not paired:
        return [r[s] for s in sorted(r)], [b[s] for s in sorted(b)]
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
    recipe_arm, base_arm = study.recipe_arm, study.baseline_arm
    if recipe_arm is None:
        return ClaimsInfo.unavailable(NO_RECIPE if study.compare is None else NO_RECIPE_GROUP)
    base, recipe = study.arm_trial(base_arm), study.arm_trial(recipe_arm)
    if base is None or recipe is None:
        missing = " and ".join(a for a, t in (("baseline", base), ("recipe", recipe))
                               if t is None)
        return ClaimsInfo.unavailable(f"the {missing} arm has no completed trial yet")
    bs, rs = base.by_seed(), recipe.by_seed()
    budget = study.steps
    emulated = _emulated(study, base, recipe)
    paired = study.paired(recipe_arm)
    measured: dict[str, tuple] = {}
    for h in article.HEADLINES:
        if h.key == "success":
            measured[h.key] = (_success_pairs(rs, bs, paired), None)
        else:
            key = "steps_to_target" if h.key == "time_steps" else "seconds_to_target"
            bound = ((lambda v: budget) if h.key == "time_steps"
                     else (lambda v: whole_run_seconds(v, budget)))
            measured[h.key] = (restricted_times if paired else restricted_times_two)(
                rs, bs, key, bound)
    # The judged claims are one family (Bonferroni): those with values on both arms and
    # not timed on an emulated precision.
    judged = {h.key for h in article.HEADLINES
              if all(measured[h.key][0]) and not (h.key == "time_seconds" and emulated)}
    family = max(1, len(judged))
    rows = []
    for h in article.HEADLINES:
        extra: dict[str, Any] = {}
        shown, missed = measured[h.key]
        if h.key == "success":
            v = verdicts.judge_success(shown, h.claimed, paired=paired, family=family)
            if paired:
                pairs = [(i, x, y) for i, (x, y) in enumerate(zip(*shown, strict=True))]
                extra["points"] = asdict(stats.paired_rate_diff_ci(pairs))
            else:
                extra["points"] = asdict(stats.newcombe_diff_ci(
                    int(sum(shown[0])), len(shown[0]), int(sum(shown[1])), len(shown[1])))
        else:
            extra["missed"] = [sum(missed[0]), sum(missed[1])]
            if h.key in judged:
                v = verdicts.judge(shown, h.claimed, misses=missed, paired=paired,
                                   family=family)
            else:
                v = verdicts.not_judged(shown, "emulated precision" if emulated and all(
                    shown) else "no values on both arms", misses=missed, paired=paired)
        a, b = shown
        rows.append({
            "key": h.key, "claim": h.text, "metric": h.metric, "claimed": h.claimed,
            "baseline": sum(b) / len(b) if b else None,
            "recipe": sum(a) / len(a) if a else None,
            "n_pairs": len(a), "n_baseline": len(b), "paired": paired,
            "of": len(set(rs) & set(bs)) if paired else len(rs) + len(bs),
            "relative": asdict(v.interval), "verdict": v.verdict, "why": v.reason,
            "test": v.test, "level": v.level, "open_lo": v.open_lo, "open_hi": v.open_hi,
            "budget_limits": v.budget_limits, "family": family,
            "seeds_needed": v.seeds_needed, "seeds_at_least": v.seeds_at_least, **extra,
        })
    unit = "seed" if paired else "run"
    texts = [f"success: the share of {unit}s that completed without divergence and reached "
             "the target; the verdict judges the ratio of the two rates (the claim is "
             f"relative: {pct(article.HEADLINES[0].claimed, sign=True)} of the baseline's "
             "rate); the difference in percentage points beside it has Newcombe's (1998) "
             + ("paired score interval" if paired else "score interval for independent rates")
             + ", approximate, and no verdict rests on it",
             f"time: the restricted mean time to target at the budget ({budget} steps): a miss "
             f"or a divergence counts the budget; a miss on either arm opens the interval's "
             "end on its side (…), printed as a one-sided bound",
             f"the {family} judged claim(s) are one family: each interval is at "
             f"{100 * (1 - verdicts.family_alpha(family)):.4g}% (Bonferroni), so together "
             "they cover at 95% at least"]
    if not paired:
        texts.insert(0, f"the recipe ({recipe_arm}) and the baseline ({base_arm}) share no "
                     "matched seeds, so they are compared as two independent groups of runs, "
                     "by the exact two-sample permutation test (times) and the exact ratio "
                     "test of the success rates")
    if emulated:
        texts.append(EMULATED)
    return ClaimsInfo(rows=rows, notes=texts, baseline_trial=base.number,
                      recipe_trial=recipe.number, paired=paired,
                      rules=verdicts.rules(paired=paired, family=family))


COLUMNS = ["Claim (article)", "Measured as", "Baseline", "Recipe", "Matched seeds",
           "Change [interval] (level)", "Test (the interval inverts it)", "Verdict",
           "Seeds to settle"]


def exact_pct(x: float, marks: tuple[float, ...]) -> str:
    """A relative change in percent with as many decimals as it takes to keep it on its
    side of every mark (no change, the claim): the printed interval gives the verdict."""
    if not math.isfinite(x):
        return pct(x, sign=True)
    for digits in range(1, 7):
        text = f"{100 * x:+.{digits}f}%"
        shown = round(100 * x, digits) / 100
        if all((shown > m) == (x > m) and (shown < m) == (x < m) for m in marks):
            break
    return text.replace("+0.0%", "0%") if x == 0 else text


def change_text(r: dict[str, Any]) -> str:
    """The relative change and its interval as the verdict reads it: an end opened by
    misses is printed as "…" (-100% below, +inf above) and the estimate as a bound."""
    iv, claimed = r["relative"], r["claimed"]

    def f(x):
        return exact_pct(x, (0.0, claimed))

    value, lo, hi = iv.get("value"), iv.get("lo"), iv.get("hi")
    level = f"{100 * r['level']:.4g}%"
    if value is None:
        return DASH
    if lo is None or hi is None:
        return f"{f(value)} (no {level} interval: {iv.get('why') or 'no spread'})"
    open_lo, open_hi = r.get("open_lo"), r.get("open_hi")
    if open_lo and open_hi:
        return f"unknown […, …] ({level}): misses on both arms leave it unbounded"
    est = ("≤ " if open_lo else "≥ " if open_hi else "") + f(value)
    text = f"{est} [{'…' if open_lo else f(lo)}, {'…' if open_hi else f(hi)}] ({level})"
    if open_lo:  # only the upper end is a bound: the change is at most hi
        text += (f": at least {f(-hi).lstrip('+')} shorter" if hi < 0 else
                 f": at most {f(hi)} longer") + ", one-sided"
    elif open_hi:
        text += (f": at least {f(lo)} longer" if lo > 0 else
                 f": at most {f(-lo).lstrip('+')} shorter") + ", one-sided"
    return text


def _row(r: dict[str, Any], paired: bool = True) -> list[Cell]:
    fmt = pct if r["key"] == "success" else num
    if r.get("budget_limits"):
        need = "a longer budget"
    elif r["seeds_needed"] is None:
        need = ("unknown" if r["verdict"] in (verdicts.INCONCLUSIVE, verdicts.CONSISTENT)
                else DASH)
    else:
        need = ("≥" if r["seeds_at_least"] else "") + str(r["seeds_needed"])
    change = change_text(r)
    if "points" in r:
        change += (" (ratio of rates)\n"
                   + interval(r["points"], lambda v: pct(v, sign=True).replace("%", " pp"))
                   + " (difference, approximate, no verdict)")
    missed = r.get("missed")
    counts = (f"{r['n_pairs']}/{r['of']}" if paired
              else f"{r['n_pairs']} and {r.get('n_baseline')}")
    if missed and any(missed):
        counts += f"\nmissed: recipe {missed[0]}, baseline {missed[1]}"
    return [Cell(f"{r['claim']} ({pct(r['claimed'], sign=True)})"), Cell(r["metric"]),
            Cell(fmt(r["baseline"])), Cell(fmt(r["recipe"])), Cell(counts), Cell(change),
            Cell(r["test"]), Cell(f"{r['verdict']}\n({r['why']})"), Cell(need)]


def blocks(c: ClaimsInfo, images: frozenset[str]) -> list[Block]:
    columns = COLUMNS if c.paired else [
        "Runs (recipe and baseline, unpaired)" if col == "Matched seeds" else
        "Runs to settle (per group)" if col == "Seeds to settle" else col for col in COLUMNS]
    return [Table(columns, [_row(r, c.paired) for r in c.rows]), *notes(c.notes),
            para(Span("How verdicts are decided: ", True), c.rules)]
