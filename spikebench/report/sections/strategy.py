"""Section 1, the article's strategy table, measured: one row per designed comparison arm.

Each row prints the article's columns for the strategy the arm tests beside five
measurements, each with a 95% CI and the paired difference vs the baseline over matched
seeds, so claim and measurement sit side by side. Without a designed comparison the section
says so: effects are never estimated from search trials.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from spikebench.report import article, exact, stats
from spikebench.report.arms import NO_COMPARISON, classify_arm, has_comparison, table_arms
from spikebench.report.blocks import (
    DASH,
    Block,
    Cell,
    Table,
    delta,
    interval,
    notes,
    num,
    para,
    pct,
    points,
    signed,
)
from spikebench.report.data import Study, TrialRecord
from spikebench.report.scores import success
from spikebench.report.sections.claims import whole_run_seconds
from spikebench.report.sections.section import Info
from spikebench.values import finite

NO_INTERVAL = ("(no interval): one seed, every seed equal, or, for a paired difference, fewer "
               f"than {exact.MIN_PAIRS} pairs (an exact test cannot reject anything with fewer)")
UNADJUSTED = ("intervals are unadjusted for multiplicity: across arms and measures, some will "
              "exclude zero by chance")


@dataclass(frozen=True, kw_only=True)
class StrategyInfo(Info):
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target_loss: float | None = None
    steps: int = 0
    baseline_complete: bool = False


def _metric(arm: dict[int, Any], base: dict[int, Any] | None, is_baseline: bool) -> dict:
    """An arm's mean over its seeds with a value (t-interval), and the mean paired
    difference vs the baseline over the seeds both have a value for (exact sign-flip
    interval); none for the baseline itself."""
    out = asdict(exact.t_interval([v for v in arm.values() if finite(v)]))
    out["of"] = len(arm)
    out["delta"] = None
    if base is not None and not is_baseline:
        seeds = sorted(s for s in set(arm) & set(base) if finite(arm[s]) and finite(base[s]))
        out["delta"] = asdict(exact.shift_interval([arm[s] - base[s] for s in seeds]))
    return out


def _times(d: dict[int, dict], key: str, bound_of) -> dict[int, float | None]:
    """Per seed: the time to target, or for a miss or a divergence its bound (the budget, or
    the whole run's wall time): the restricted time the claims section uses too."""
    out = {}
    for s, v in d.items():
        hit = v.get("status") == "completed" and finite(v.get(key))
        out[s] = v[key] if hit else bound_of(v)
    return out


def _arm_metrics(t: TrialRecord, base: TrialRecord | None, is_baseline: bool,
                 budget: int) -> dict:
    ps = t.by_seed()
    bs = base.by_seed() if base is not None else None

    def col(d, key):
        return {s: v.get(key) for s, v in d.items()}

    # Only seeds that completed have a final loss; a diverged seed has none (None here, so
    # it still counts among the seeds a row reports "n of").
    def final(d):
        return {s: v.get("final_val_loss") if v.get("status") == "completed" else None
                for s, v in d.items()}

    def steps(d):
        return _times(d, "steps_to_target", lambda v: budget)

    def seconds(d):
        return _times(d, "seconds_to_target", lambda v: whole_run_seconds(v, budget))

    succ = success(ps)
    k = int(sum(succ.values()))
    rate = asdict(stats.rate_ci(k, len(succ)))
    rate["k"] = k
    rate["delta"] = None
    if bs is not None and not is_baseline:
        pairs = stats.pair_by_seed(succ, success(bs))
        rate["delta"] = asdict(stats.paired_rate_diff_ci(pairs))
    out = {
        "spikes": _metric(col(ps, "events_per_1k"), bs and col(bs, "events_per_1k"),
                          is_baseline),
        "steps_to_target": _metric(steps(ps), bs and steps(bs), is_baseline),
        "seconds_to_target": _metric(seconds(ps), bs and seconds(bs), is_baseline),
        "final_loss": _metric(final(ps), bs and final(bs), is_baseline),
        "success": rate,
    }
    for key in ("steps_to_target", "seconds_to_target"):
        out[key]["reached"] = sum(v.get("status") == "completed" and finite(v.get(key))
                                  for v in ps.values())
    return out


def info(study: Study) -> StrategyInfo:
    """One row per arm: its strategy, the article's columns, and ``spikes`` (events per 1k
    steps, mean), ``steps_to_target``/``seconds_to_target`` (median over the seeds that
    reached it, ``n`` of ``of``), ``final_loss`` (mean over completed seeds) and ``success``
    (exact CI; Newcombe's paired interval for its difference). An arm with no completed
    trial is a row with ``status`` and no measurements, not a missing row.
    """
    if not has_comparison(study):
        return StrategyInfo.unavailable(NO_COMPARISON)
    base = study.arm_trial("baseline")
    rows = []
    for arm in table_arms(study):
        cls = classify_arm(study, arm)
        claim = article.claim_for(cls["key"])
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
        row.update(_arm_metrics(t, base, arm == "baseline", study.steps))
        rows.append(row)
    texts = [article.SOURCE_NOTE, UNADJUSTED, NO_INTERVAL]
    if base is None:
        texts.append("the baseline arm has no completed trial, so no differences are shown")
    if len(study.seeds) < exact.MIN_PAIRS:
        texts.append(f"with {len(study.seeds)} seed(s) per arm no paired difference has an "
                     f"exact 95% interval (it needs {exact.MIN_PAIRS} differing pairs); run "
                     f"{exact.MIN_PAIRS} or more seeds for intervals and verdicts")
    return StrategyInfo(rows=rows, notes=texts, target_loss=study.spec.target_loss,
                        steps=study.steps, baseline_complete=base is not None)


COLUMNS = ["Strategy", "Arm", "Seeds", "Spike events / 1k steps", "Steps to target",
           "Wall time to target (s)", "Final val loss", "Success rate",
           "Article: where it applies", "Article: expected effect", "Article: difficulty"]


def _sort(m: dict[str, Any] | None) -> float | None:
    return m.get("value") if m else None


def _row(r: dict[str, Any]) -> list[Cell]:
    claim = r["claim"]
    art = [Cell(claim["applies"]), Cell(claim["effect"]), Cell(claim["difficulty"])]
    head = [Cell(r["label"]), Cell(r["arm"])]
    if r.get("status") != "complete":
        return head + [Cell(r["status"])] + [Cell(DASH)] * 5 + art
    seeds = f"{r['seeds']}" + (f" ({r['diverged']} diverged)" if r["diverged"] else "")

    def iv(m, fmt=num):
        return interval(m, fmt, explain=False)

    def dl(m, fmt=signed):
        return delta(m, fmt, explain=False)

    def reached(m):
        return f"{iv(m)}\n{m['reached']}/{m['of']} reached" + dl(m["delta"])

    s, fl = r["success"], r["final_loss"]
    return head + [
        Cell(seeds, r["seeds"]),
        Cell(iv(r["spikes"]) + dl(r["spikes"]["delta"]), _sort(r["spikes"])),
        Cell(reached(r["steps_to_target"]), _sort(r["steps_to_target"])),
        Cell(reached(r["seconds_to_target"]), _sort(r["seconds_to_target"])),
        Cell(iv(fl) + f"\n{fl['n']}/{fl['of']} completed" + dl(fl["delta"]), _sort(fl)),
        Cell(f"{iv(s, pct)} ({s['k']}/{s['n']})" + dl(s["delta"], points), s.get("value")),
    ] + art


def blocks(s: StrategyInfo, images: frozenset[str]) -> list[Block]:
    return [para("Each strategy alone added to the baseline, and the combined recipe, on "
                 "the same seeds. Cells: mean [95% t-interval over the arm's seeds]; Δ: mean "
                 "paired difference vs the baseline over matched seeds [exact sign-flip "
                 "95% interval]. Spike events: spontaneous loss-spike events per 1,000 "
                 "steps (events that overlap an injected fault are the fault's, counted "
                 f"apart); time to target (validation loss {num(s.target_loss)}): restricted "
                 "mean, a miss or a divergence counted at the budget (steps) or the whole "
                 "run (seconds), a lower bound; final loss: mean over completed seeds; "
                 "success: completed without divergence and reached the target (exact "
                 "Clopper-Pearson interval; Δ in percentage points, Newcombe's paired "
                 "score interval)."),
            Table(COLUMNS, [_row(r) for r in s.rows]), *notes(s.notes)]
