"""The report's opening: what a person reads in ten seconds.

One sentence per headline claim with its verdict and the test behind it, a forest plot of
each arm's paired effect against the baseline (final loss, steps to target, spontaneous
spikes) with its interval, and the baseline's and the recipe's loss curves. Everything here
is computed by the sections it summarises, so the summary cannot disagree with the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spikebench.report.blocks import Block, Bullets, Span, image, num, para, pct
from spikebench.report.data import Study
from spikebench.report.exact import MIN_PAIRS, MIN_RUNS
from spikebench.report.figures import figure, png, tex
from spikebench.report.sections import claims, curves, strategy
from spikebench.report.sections.section import Info

# The paired effects the forest plot shows: (key in a strategy row, panel title).
EFFECTS = (("final_loss", "final val loss"), ("steps_to_target", "steps to target"),
           ("spikes", "spontaneous spikes / 1k steps"))


@dataclass(frozen=True, kw_only=True)
class SummaryInfo(Info):
    sentences: list[str] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)  # arms compared without pairing
    paired_any: bool = True
    forest: list[dict[str, Any]] = field(default_factory=list)  # one row per arm
    curves: list[dict[str, Any]] = field(default_factory=list)  # baseline and recipe seeds


def _sentence(r: dict[str, Any]) -> str:
    fmt = pct if r["key"] == "success" else num
    change = r["relative"]["value"]
    # The interval as the claims table prints it, so the verdict can be checked here too
    # (where there is none, the reason after the verdict says why).
    shown = ("no change measurable" if change is None else claims.change_text(r)
             if r["relative"].get("lo") is not None else claims.exact_pct(change, (0.0,)))
    measured = f"{fmt(r['baseline'])} → {fmt(r['recipe'])} ({shown})"
    over = (f"{r['n_pairs']} matched seeds" if r.get("paired", True) else
            f"{r['n_pairs']} and {r.get('n_baseline')} runs, unpaired")
    return (f"{r['claim']} ({r['metric']}): {r['verdict']}. Baseline → recipe: {measured} "
            f"over {over}; {r['why']}.")


def info(study: Study) -> SummaryInfo:
    c, s = claims.info(study), strategy.info(study)
    if not s.available:
        return SummaryInfo.unavailable(s.reason)
    forest = [{"arm": r["arm"], "label": r["label"],
               **{k: r[k]["delta"] for k, _ in EFFECTS}}
              for r in s.rows if r["arm"] != study.baseline_arm
              and r.get("status") == "complete"]
    picked = []
    for arm in (study.baseline_arm, study.recipe_arm):
        t = study.arm_trial(arm) if arm is not None else None
        if t is not None:
            picked.append({"arm": arm, "seeds": curves.trial_seeds(t)})
    return SummaryInfo(sentences=[_sentence(r) for r in c.rows] if c.available else
                       [f"The article's claims are not tested: {c.reason}."],
                       forest=forest, curves=picked, unpaired=list(s.unpaired),
                       paired_any=any(r.get("paired") is not False for r in s.rows
                                      if r["arm"] != study.baseline_arm))


def _forest_text(i: SummaryInfo) -> str:
    if not i.unpaired:
        return ("The forest plot shows each arm's mean paired difference from the baseline "
                "over matched seeds, with its exact 95% sign-flip interval where there are "
                f"at least {MIN_PAIRS} matched pairs and they do not all differ equally (a "
                "dot alone: no interval; left of zero is better on all three). Below it, "
                "every seed's training loss of the baseline and of the recipe.")
    paired = ("for groups paired by seed, the mean paired difference with its exact 95% "
              f"sign-flip interval (at least {MIN_PAIRS} matched pairs); "
              if i.paired_any else "")
    return ("The forest plot shows each group's difference from the baseline: " + paired
            + f"unpaired ({', '.join(i.unpaired)}), the difference between the groups' means "
            "with the 95% interval of the exact two-sample permutation test (groups too small "
            f"for it to reject anything, under {MIN_RUNS} and {MIN_RUNS} runs, get none). A "
            "dot alone: no interval; left of zero is better on all three. Below it, every "
            "run's training loss of the baseline and of the recipe.")


def blocks(i: SummaryInfo, images: frozenset[str]) -> list[Block]:
    return [Bullets([[Span(t)] for t in i.sentences]),
            para(_forest_text(i)),
            *image("summary", "Paired effects vs the baseline, and the baseline's and the "
                   "recipe's loss curves", images)]


def plot(i: SummaryInfo) -> bytes | None:
    if not i.forest and not i.curves:
        return None
    fig = figure(11, 3.0 + 0.35 * len(i.forest))
    grid = fig.add_gridspec(2, len(EFFECTS), height_ratios=[1 + 0.12 * len(i.forest), 1.1])
    labels = [tex(r["arm"]) for r in i.forest]
    for col, (key, title) in enumerate(EFFECTS):
        ax = fig.add_subplot(grid[0, col])
        for y, r in enumerate(i.forest):
            d = r[key] or {}
            if d.get("value") is None:
                continue
            if d.get("lo") is not None and d.get("hi") is not None:
                ax.plot([d["lo"], d["hi"]], [y, y], color="C0", lw=2)
            ax.plot([d["value"]], [y], "o", color="C0", ms=5)
        ax.axvline(0, color="0.5", lw=0.8)
        ax.set_yticks(range(len(labels)), labels if col == 0 else [""] * len(labels),
                      fontsize=7)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_title(f"Δ {title}", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(alpha=0.3, axis="x")
    ax = fig.add_subplot(grid[1, :])
    for color, c in zip(("C3", "C2"), i.curves, strict=False):
        for k, s in enumerate(c["seeds"]):
            ax.plot(s["steps"], s["loss"], lw=0.7, color=color, alpha=0.7,
                    label=c["arm"] if k == 0 else None)
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylabel("train loss", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if i.curves:
        ax.legend(fontsize=7)
    return png(fig)
