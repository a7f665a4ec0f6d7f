"""Section 2, the article's strategy table, measured: one row per designed comparison arm.

A compact table leads: per arm and measure one value and its paired difference vs the
baseline, marked where the exact test rejects no change, with the article's expected
effect and the verdicts on its claims beside it. A detail table below holds each value's
interval, the seeds behind it and the difference's interval. Without a designed comparison
the section says so: effects are never estimated from search trials.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from spikebench.report import article, exact, stats
from spikebench.report.arms import (
    NO_COMPARISON,
    classify_arm,
    has_comparison,
    table_arms,
    unfinished_status,
)
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
from spikebench.report.sections import claims
from spikebench.report.sections.claims import whole_run_seconds
from spikebench.report.sections.section import Info
from spikebench.values import finite

NO_INTERVAL = ("(no interval): one seed, every seed equal, or, for a paired difference, fewer "
               f"than {exact.MIN_PAIRS} pairs (an exact test cannot reject anything with fewer)")
NO_INTERVAL_TWO = ("(no interval), unpaired: groups too small for the exact two-sample test to "
                   "reject anything (1 / C(n + m, n) must be below "
                   f"{exact.ALPHA / 2:g}: at least {exact.MIN_RUNS} and {exact.MIN_RUNS} runs), "
                   "or every run of each group equal")
SIGN_FLIP = "the sign-flip permutation test on matched seeds"
TWO_SAMPLE = ("the exact two-sample permutation test of the difference in means, over every "
              "split of the two groups' runs")


def unadjusted(tests: int) -> str:
    """The marks' multiplicity, stated: how many tests, and how many false marks chance
    alone would give if no arm changed anything."""
    return (f"marks and intervals are unadjusted for multiplicity: {tests} tests (arms x "
            f"measures), each at two-sided p < {exact.ALPHA:g}; if no arm changed anything, "
            f"about {exact.ALPHA * tests:.1f} false marks would be expected (at most: the "
            "exact tests are conservative)")
BETTER, WORSE = "✓", "✗"
# Measures of the compact table: (key, column, higher is better).
MEASURES = (("spikes", "Spikes / 1k steps", False), ("steps_to_target", "Steps to target", False),
            ("seconds_to_target", "Wall time to target (s)", False),
            ("final_loss", "Final val loss", False), ("success", "Success", True))


@dataclass(frozen=True, kw_only=True)
class StrategyInfo(Info):
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target_loss: float | None = None
    steps: int = 0
    baseline_complete: bool = False
    compare: bool = False  # groups of runs read from disk (spikebench compare), not arms
    baseline: str = "baseline"
    unpaired: list[str] = field(default_factory=list)  # arms compared without pairing


def _unpaired_delta(a: list[float], b: list[float]) -> dict[str, Any]:
    """Difference in means of two independent groups, its exact two-sample permutation
    interval and the test's two-sided p."""
    return {**asdict(exact.two_sample_shift_interval(a, b)),
            "p": exact.two_sample_p(a, b) if a and b else None, "paired": False}


def _metric(arm: dict[int, Any], base: dict[int, Any] | None, is_baseline: bool,
            bounds: tuple[float | None, float | None] = (0.0, None), *,
            paired: bool = True) -> dict:
    """An arm's mean over its seeds with a value (t-interval truncated to ``bounds``), and
    the mean paired difference vs the baseline over the seeds both have a value for (exact
    sign-flip interval, and the test's two-sided p); none for the baseline itself.
    ``paired`` False: the difference in means of every value of each (the exact two-sample
    permutation interval and p)."""
    out = asdict(exact.t_interval([v for v in arm.values() if finite(v)], *bounds))
    out["of"] = len(arm)
    out["delta"] = None
    if base is not None and not is_baseline and not paired:
        out["delta"] = _unpaired_delta([float(v) for v in arm.values() if finite(v)],
                                       [float(v) for v in base.values() if finite(v)])
    elif base is not None and not is_baseline:
        seeds = sorted(s for s in set(arm) & set(base) if finite(arm[s]) and finite(base[s]))
        diffs = [arm[s] - base[s] for s in seeds]
        out["delta"] = {**asdict(exact.shift_interval(diffs)),
                        "p": exact.sign_flip_p(diffs) if diffs else None, "paired": True}
    return out


def _spike_rate(d: dict[int, dict], budget: int) -> dict:
    """Spontaneous events per 1k steps pooled over the seeds (each runs the budget), with
    the exact Poisson (Garwood) interval of the pooled count: never below zero."""
    counts = [int(v["n_events"]) for v in d.values() if finite(v.get("n_events"))]
    if not counts or budget <= 0:
        return asdict(exact.Interval(None, None, None, 0, "exact Poisson", "no values"))
    scale = 1000.0 / (len(counts) * budget)
    lo, hi = stats.poisson_ci(sum(counts))
    return asdict(exact.Interval(sum(counts) * scale, lo * scale, hi * scale, len(counts),
                                 "exact Poisson (Garwood), pooled over seeds"))


def _times(d: dict[int, dict], key: str, bound_of) -> dict[int, float | None]:
    """Per seed: the time to target, or for a miss or a divergence its bound (the budget, or
    the whole run's wall time): the restricted time the claims section uses too."""
    out = {}
    for s, v in d.items():
        hit = v.get("status") == "completed" and finite(v.get(key))
        out[s] = v[key] if hit else bound_of(v)
    return out


def _arm_metrics(t: TrialRecord, base: TrialRecord | None, is_baseline: bool,
                 budget: int, paired: bool = True) -> dict:
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
    if bs is not None and not is_baseline and not paired:
        kb, nb = int(sum(success(bs).values())), len(bs)
        # Newcombe's interval is approximate; the mark rests on Fisher's exact test.
        rate["delta"] = {**asdict(stats.newcombe_diff_ci(k, len(succ), kb, nb)), "n": len(succ),
                         "m": nb, "p": stats.fisher_p(k, len(succ), kb, nb), "paired": False}
    elif bs is not None and not is_baseline:
        pairs = stats.pair_by_seed(succ, success(bs))
        # Newcombe's interval is approximate; the mark rests on McNemar's exact test.
        rate["delta"] = {**asdict(stats.paired_rate_diff_ci(pairs)),
                         "p": exact.sign_flip_p([x - y for _, x, y in pairs]) if pairs
                         else None, "paired": True}
    spikes = _metric(col(ps, "events_per_1k"), bs and col(bs, "events_per_1k"), is_baseline,
                     paired=paired)
    spikes.update(_spike_rate(ps, budget))
    out = {
        "spikes": spikes,
        "steps_to_target": _metric(steps(ps), bs and steps(bs), is_baseline,
                                   (0.0, float(budget)), paired=paired),
        "seconds_to_target": _metric(seconds(ps), bs and seconds(bs), is_baseline,
                                     paired=paired),
        "final_loss": _metric(final(ps), bs and final(bs), is_baseline, paired=paired),
        "success": rate,
    }
    for key in ("steps_to_target", "seconds_to_target"):
        out[key]["reached"] = sum(v.get("status") == "completed" and finite(v.get(key))
                                  for v in ps.values())
    return out


def info(study: Study) -> StrategyInfo:
    """One row per arm: its strategy, the article's columns, and ``spikes`` (events per 1k
    steps pooled over seeds, exact Poisson interval), ``steps_to_target`` and
    ``seconds_to_target`` (restricted mean: a miss counts the budget; ``reached`` of
    ``of``), ``final_loss`` (mean over completed seeds) and ``success`` (exact CI; its
    difference with Newcombe's approximate paired interval and McNemar's exact p). The
    recipe's row carries the verdicts on the article's headline claims. An arm with no
    completed trial is a row with ``status`` and no measurements, not a missing row.
    """
    if not has_comparison(study):
        return StrategyInfo.unavailable(NO_COMPARISON)
    base_arm = study.baseline_arm
    base = study.arm_trial(base_arm)
    claimed = claims.info(study)
    compare = study.compare is not None
    rows = []
    unpaired = []
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
            row["status"] = unfinished_status(study, arm)
            rows.append(row)
            continue
        row["status"] = "complete"
        row["seeds"] = len(t.per_seed)
        row["diverged"] = sum(s.get("status") == "diverged" for s in t.per_seed)
        paired = study.paired(arm)
        row["paired"] = paired if arm != base_arm else None
        if arm != base_arm and not paired:
            unpaired.append(arm)
        row.update(_arm_metrics(t, base, arm == base_arm, study.steps, paired))
        if arm == study.recipe_arm and claimed.available:
            row["verdicts"] = [(c["claim"], c["metric"].split(" (")[0], c["verdict"])
                               for c in claimed.rows]
        rows.append(row)
    tests = sum(1 for r in rows if r.get("status") == "complete" for key, _, _ in MEASURES
                if (r[key].get("delta") or {}).get("p") is not None)
    texts = ([] if compare else [article.SOURCE_NOTE]) + [unadjusted(tests), NO_INTERVAL]
    if unpaired:
        texts.append(NO_INTERVAL_TWO)
    if base is None:
        texts.append("the baseline arm has no completed trial, so no differences are shown")
    n_paired = [r["seeds"] for r in rows if r.get("paired")] if compare else (
        [len(study.seeds)] if len(study.arms) > 1 else [])
    if n_paired and min(n_paired) < exact.MIN_PAIRS:
        texts.append(f"with {min(n_paired)} seed(s) per arm no paired difference has an "
                     f"exact 95% interval (it needs {exact.MIN_PAIRS} differing pairs); run "
                     f"{exact.MIN_PAIRS} or more seeds for intervals and verdicts")
    if compare:
        pairing = study.compare.get("pairing")
        for arm, entry in (pairing if isinstance(pairing, dict) else {}).items():
            if isinstance(entry, dict) and entry.get("why") and arm in unpaired:
                texts.append(f"{arm} vs {base_arm}: unpaired ({entry['why']})")
    return StrategyInfo(rows=rows, notes=texts, target_loss=study.spec.target_loss,
                        steps=study.steps, baseline_complete=base is not None,
                        compare=compare, baseline=base_arm, unpaired=unpaired)


COMPACT = ["Strategy", "Seeds", *(c for _, c, _ in MEASURES), "Article: expected effect",
           "Verdicts on the article's claims"]
COLUMNS = ["Strategy", "Arm", "Seeds", "Spike events / 1k steps", "Steps to target",
           "Wall time to target (s)", "Final val loss", "Success rate",
           "Article: where it applies", "Article: expected effect", "Article: difficulty"]


def _sort(m: dict[str, Any] | None) -> float | None:
    return m.get("value") if m else None


def mark(d: dict[str, Any] | None, higher_is_better: bool) -> str:
    """✓ where the exact test rejects no change (two-sided p < ALPHA) and the arm is
    better, ✗ where it is worse; "" where the test does not reject or there is none."""
    if not d or d.get("p") is None or d["p"] >= exact.ALPHA or not d.get("value"):
        return ""
    return BETTER if (d["value"] > 0) == higher_is_better else WORSE


def _compact_cell(m: dict[str, Any], higher_is_better: bool, fmt, dfmt) -> Cell:
    d = m.get("delta")
    text = fmt(m.get("value"))
    if d and d.get("value") is not None:
        text += f" (Δ {dfmt(d['value'])}{' ' + mark(d, higher_is_better) if mark(d, higher_is_better) else ''})"
    return Cell(text, _sort(m))


def _compact_row(r: dict[str, Any], compare: bool = False) -> list[Cell]:
    head = [Cell(r["label"])]
    effect = [] if compare else [Cell(r["claim"]["effect"])]
    if r.get("status") != "complete":
        return head + [Cell(r["status"])] + [Cell(DASH)] * len(MEASURES) + effect + [Cell(DASH)]
    cells = []
    for key, _, higher in MEASURES:
        if key == "success":
            cells.append(_compact_cell(r[key], higher, pct, points))
        else:
            cells.append(_compact_cell(r[key], higher, num, signed))
    verdicts = "\n".join(f"{claim} ({metric}): {v}" for claim, metric, v in
                         r.get("verdicts", [])) or DASH
    return head + [Cell(str(r["seeds"]), r["seeds"])] + cells + effect + [Cell(verdicts)]


def _row(r: dict[str, Any], compare: bool = False) -> list[Cell]:
    claim = r["claim"]
    art = [] if compare else [Cell(claim["applies"]), Cell(claim["effect"]),
                              Cell(claim["difficulty"])]
    head = [Cell(r["label"]), Cell(r["arm"])]
    if r.get("status") != "complete":
        return head + [Cell(r["status"])] + [Cell(DASH)] * 5 + art
    seeds = f"{r['seeds']}" + (f" ({r['diverged']} diverged)" if r["diverged"] else "")
    if compare and r.get("paired") is not None:
        seeds += "\npaired by seed" if r["paired"] else "\nunpaired"

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


def _columns(s: StrategyInfo) -> tuple[list[str], list[str]]:
    """The compact and the detail table's columns; a comparison of runs read from disk
    has groups of runs, and no article columns (its groups are not the article's
    strategies)."""
    if not s.compare:
        return COMPACT, COLUMNS
    compact = ["Group", "Runs", *(c for _, c, _ in MEASURES), "Verdicts on the article's claims"]
    return compact, ["Group", "Name", "Runs", *COLUMNS[3:8]]


def _intro(s: StrategyInfo) -> str:
    """What the table compares and by which tests, naming the tests actually used."""
    measures = ("Spikes: spontaneous loss-spike events per 1,000 steps, pooled over seeds "
                "(events that overlap an injected fault are the fault's, counted apart); time "
                f"to target (validation loss {num(s.target_loss)}): restricted mean at the "
                f"budget ({s.steps} steps), a miss or a divergence counting the budget (steps) "
                "or the whole run (seconds); final loss: mean over completed seeds; success: "
                "completed without divergence and reached the target, Δ in percentage "
                "points. The verdicts are those of the claims section.")
    if not s.compare:
        return ("Each strategy alone added to the baseline, and the combined recipe, on "
                "the same seeds. Each cell: the arm's value and, in parentheses, its paired "
                f"difference Δ from the baseline over matched seeds; {BETTER} where the exact "
                f"test rejects no change (two-sided p < {exact.ALPHA:g}) and the arm is "
                f"better, {WORSE} where it is worse, no mark where the test does not reject "
                "(the sign-flip permutation test; McNemar's exact test for success). "
                + measures)
    groups = [r for r in s.rows if r["arm"] != s.baseline and r.get("status") == "complete"]
    paired = [r["arm"] for r in groups if r.get("paired")]
    tests = []
    if paired:
        tests.append(f"paired by seed ({', '.join(paired)}): the mean difference over "
                     f"matched seeds, by {SIGN_FLIP} (McNemar's exact test for success)")
    if s.unpaired:
        tests.append(f"unpaired ({', '.join(s.unpaired)}): the difference between the "
                     f"groups' means, by {TWO_SAMPLE} (Fisher's exact test for success; two-"
                     "sided p: twice the smaller one-sided p)")
    return (f"Each group of runs against the baseline group {s.baseline}, on the steps every "
            "run shares (see the header for what was cut). Each cell: the group's value "
            "and, in parentheses, its difference Δ from the baseline; "
            + "; ".join(tests) + f". {BETTER} where the test rejects no change (two-sided "
            f"p < {exact.ALPHA:g}) and the group is better, {WORSE} where it is worse, no "
            "mark where it does not reject. " + measures.replace("pooled over seeds",
                                                                 "pooled over runs"))


def _detail(s: StrategyInfo) -> str:
    paired_text = ("mean paired difference [exact sign-flip 95% interval], for success in "
                   "percentage points [Newcombe's paired score interval: approximate, so it "
                   "can exclude zero where McNemar's exact test does not reject; no mark or "
                   "verdict rests on it]")
    unpaired_text = ("difference in means [the exact two-sample permutation 95% interval: "
                     "every shift the test does not reject], for success in percentage points "
                     "[Newcombe's score interval for independent rates: approximate, so it can "
                     "exclude zero where Fisher's exact test does not reject; no mark or "
                     "verdict rests on it]")
    paired = not s.compare or any(r.get("paired") for r in s.rows)
    deltas = ("; ".join(([f"paired, {paired_text}"] if paired else [])
                        + [f"unpaired, {unpaired_text}"]) if s.unpaired else paired_text)
    return ("In the detail table: spikes [exact Poisson (Garwood) interval of the pooled "
            "count]; times and final loss: mean [95% t-interval over the arm's seeds, "
            "truncated to the values possible: 0 to the budget for steps, at least 0 "
            "otherwise]; success: rate [exact Clopper-Pearson interval]; Δ: "
            + deltas + ".")


def blocks(s: StrategyInfo, images: frozenset[str]) -> list[Block]:
    compact, columns = _columns(s)
    return [para(_intro(s)),
            Table(compact, [_compact_row(r, s.compare) for r in s.rows]),
            Table(columns, [_row(r, s.compare) for r in s.rows],
                  detail="Detail: each value with its 95% interval, the seeds behind it, and "
                         "its difference from the baseline with the difference's interval"),
            para(_detail(s)),
            *notes(s.notes)]
