"""Section 3, spike counts by strategy: per designed comparison arm, and strategy on vs off.

The arm counts are the designed measurement. The on/off split over every completed trial
(search included) is descriptive only: in search trials the strategies vary together, so a
difference there is not an effect of one strategy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spikebench.report.arms import classify_arm, known_strategies, table_arms, trial_values
from spikebench.report.blocks import Block, Cell, Table, image, interval, num, para, signed
from spikebench.report.data import Study
from spikebench.report.exact import (
    shift_interval,
    sign_flip_p,
    two_sample_p,
    two_sample_shift_interval,
)
from spikebench.report.figures import figure, png, tex
from spikebench.report.sections.section import Info

# What a spike response did on each seed (per_seed keys), and how the table names it.
RESPONSES = {"rollbacks": "Rollbacks", "redone_steps": "Steps redone",
             "skipped_batches": "Batches skipped", "skipped_updates": "Updates skipped"}


@dataclass(frozen=True, kw_only=True)
class SpikeCountsInfo(Info):
    arms: list[dict[str, Any]] = field(default_factory=list)
    features: list[dict[str, Any]] = field(default_factory=list)
    compare: bool = False  # groups of runs read from disk (spikebench compare)


def _events(t) -> list[int]:
    return [int(s.get("n_events") or 0) for s in t.per_seed]


def _severity(study: Study, t, base, paired: bool = True) -> dict[str, Any]:
    """Per seed the total loss-spike severity (nats x steps), its mean, and the mean paired
    difference from the baseline with the exact sign-flip interval and p-value (``paired``
    False: the difference in means, exact two-sample permutation interval and p)."""
    sev = {int(s["seed"]): float(s.get("severity") or 0.0) for s in t.per_seed if "seed" in s}
    out: dict[str, Any] = {"per_seed": [sev[k] for k in sorted(sev)],
                           "mean": float(np.mean(list(sev.values()))) if sev else None}
    if base is not None and base is not t:
        b = {int(s["seed"]): float(s.get("severity") or 0.0) for s in base.per_seed
             if "seed" in s}
        if not paired:
            x, y = [sev[k] for k in sorted(sev)], [b[k] for k in sorted(b)]
            iv = two_sample_shift_interval(x, y)
            out["delta"] = {"value": iv.value, "lo": iv.lo, "hi": iv.hi, "n": iv.n, "m": iv.m,
                            "p": two_sample_p(x, y) if x and y else None, "paired": False}
            return out
        diffs = [sev[k] - b[k] for k in sorted(sev) if k in b]
        iv = shift_interval(diffs)
        out["delta"] = {"value": iv.value, "lo": iv.lo, "hi": iv.hi, "n": iv.n,
                        "p": sign_flip_p(diffs) if diffs else None, "paired": True}
    return out


def info(study: Study) -> SpikeCountsInfo:
    """``arms``: each comparison arm's loss-spike events per seed (a diverged seed counts
    one more) and their mean; ``features``: over every completed trial, the mean events per
    seed of trials with a strategy on vs off."""
    arms = []
    for arm in table_arms(study):
        t = study.arm_trial(arm)
        if t is None:
            continue
        ev = _events(t)
        arms.append({"arm": arm, "label": classify_arm(study, arm)["label"], "trial": t.number,
                     "events": ev, "mean": float(np.mean(ev)) if ev else None,
                     "diverged": sum(s.get("status") == "diverged" for s in t.per_seed),
                     "responses": {k: [int(s.get(k) or 0) for s in t.per_seed]
                                   for k in RESPONSES},
                     "severity": _severity(study, t, study.arm_trial(study.baseline_arm),
                                           study.paired(arm))})
    done = [t for t in study.trials if t.complete and t.per_seed]
    per_trial = {t.number: float(np.mean(_events(t))) for t in done}
    active = {t.number: dict(known_strategies(study, trial_values(t, study))) for t in done}
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
        return SpikeCountsInfo.unavailable("no completed trial yet")
    return SpikeCountsInfo(arms=arms, features=features, compare=study.compare is not None)


def blocks(k: SpikeCountsInfo, images: frozenset[str]) -> list[Block]:
    out = image("spike_counts", "Spike events per seed by comparison arm", images)
    if k.arms:
        out += [para("Groups of runs:" if k.compare else "Designed comparison:"), Table(
            ["Group" if k.compare else "Arm", "Name" if k.compare else "Strategy",
             f"Loss-spike events per {'run' if k.compare else 'seed'}",
             f"Mean per {'run' if k.compare else 'seed'}", "Diverged"],
            [[Cell(a["arm"]), Cell(a["label"]), Cell(", ".join(map(str, a["events"]))),
              Cell(num(a["mean"]), a["mean"]), Cell(str(a["diverged"]))] for a in k.arms])]
        out += _severity_blocks(k)
    acted = [a for a in k.arms if any(any(v) for v in a["responses"].values())]
    if acted:
        out += [para("Spike responses and their cost, per seed (a rollback's redone steps "
                     "count against the budget and the time to target):"), Table(
            ["Arm", *RESPONSES.values()],
            [[Cell(a["arm"])] + [Cell(", ".join(map(str, a["responses"][key])))
                                 for key in RESPONSES] for a in acted])]
    if k.features:
        out += [para("Every completed trial, strategy on vs off (descriptive only: in "
                     "search trials the strategies vary together):"), Table(
            ["Strategy", "Trials with it", "Mean events / seed with it", "Trials without",
             "Mean events / seed without"],
            [[Cell(f["label"]), Cell(str(f["on_trials"])), Cell(num(f["on_mean"])),
              Cell(str(f["off_trials"])), Cell(num(f["off_mean"]))] for f in k.features])]
    return out


def _delta(d: dict[str, Any] | None) -> str:
    if not d or d["value"] is None:
        return ""
    how = f" ({d['n']} vs {d.get('m')} runs, unpaired)" if d.get("paired") is False else ""
    return f"{interval(d, signed, explain=False)}, p = {num(d['p'])}{how}"


def _severity_blocks(k: SpikeCountsInfo) -> list[Block]:
    rows = [[Cell(a["arm"]), Cell(", ".join(num(v) for v in a["severity"]["per_seed"])),
             Cell(num(a["severity"]["mean"]), a["severity"]["mean"]),
             Cell(_delta(a["severity"].get("delta")))] for a in k.arms]
    unpaired = any((a["severity"].get("delta") or {}).get("paired") is False for a in k.arms)
    paired = any((a["severity"].get("delta") or {}).get("paired") is True for a in k.arms)
    text = ("Spike severity (total loss-spike area over the run, nats x steps; the "
            "damage on clean batches), per seed; Δ: mean paired difference from the "
            "baseline over matched seeds [exact sign-flip 95% interval] and the test's "
            "two-sided p (unadjusted; no interval under 6 pairs):")
    if unpaired:
        text = ("Spike severity (total loss-spike area over the run, nats x steps), per run; "
                "Δ vs the baseline: " + ("paired by seed, the mean paired difference [exact "
                                          "sign-flip 95% interval, none under 6 pairs]; "
                                          if paired else "")
                + "unpaired, the difference in means [the exact two-sample permutation test's "
                "95% interval, none where the groups are too small for it to reject "
                "anything]; each with the test's two-sided p (unadjusted):")
    return [para(text), Table(["Group" if k.compare else "Arm",
                               "Severity per run" if k.compare else "Severity per seed",
                               "Mean", "Δ vs baseline"], rows)]


def plot(info: SpikeCountsInfo) -> bytes | None:
    """Events per seed by comparison arm (bars: mean; dots: seeds); None without arms."""
    arms = info.arms
    if not arms:
        return None
    fig = figure(max(5.0, 1.1 * len(arms) + 2), 3.4)
    ax = fig.add_subplot()
    xs = range(len(arms))
    ax.bar(list(xs), [a["mean"] or 0 for a in arms], color="C0", alpha=0.6,
           label="mean per seed")
    for x, a in zip(xs, arms, strict=True):
        n = len(a["events"])
        jitter = [x + (k - (n - 1) / 2) * 0.08 for k in range(n)]
        ax.plot(jitter, a["events"], "o", color="black", ms=3)
    ax.set_xticks(list(xs), [tex(a["arm"]) for a in arms], rotation=25, ha="right",
                  fontsize=7)
    ax.set_ylabel("loss-spike events per seed", fontsize=8)
    ax.set_title("Spike events by strategy (designed comparison; dots: seeds)", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    return png(fig)
