"""Section 4, loss curves of the baseline, the best and the worst trial, every seed, events marked.

Best and worst are ranked by the mean of each trial's rank percentiles in spikes and
convergence, so neither objective is preferred. Spike events come from each seed's summary,
not from the thinned curve, so thinning a long run never hides a spike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from spikebench.metrics import STEP, TRAIN_LOSS, VAL_LOSS
from spikebench.report.blocks import Block, image, para
from spikebench.report.data import Study, TrialRecord, seed_dirs, seed_log
from spikebench.report.figures import figure, png, tex
from spikebench.report.scores import scored_trials
from spikebench.report.sections.section import Info
from spikebench.values import finite

SELECTION = ("best and worst are picked by the mean of their rank percentiles in spikes and "
             "convergence (0 = best in both)")
SELECTION_GROUPS = ("every group of runs is drawn, the baseline first, each with every run "
                    "of it, cut to the steps they share")
MAX_GROUPS = 12  # panels drawn for a comparison of runs read from disk


@dataclass(frozen=True, kw_only=True)
class CurvesInfo(Info):
    panels: list[dict[str, Any]] = field(default_factory=list)
    selection: str = SELECTION


def rank_scores(study: Study) -> dict[int, float]:
    """Mean of each scored trial's rank percentiles in spikes and convergence (0 best);
    ties share the average rank."""
    pts = scored_trials(study)
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
    base = study.arm_trial(study.baseline_arm)
    if base is not None:
        picks.setdefault(base.number, []).append("baseline")
    if study.compare is not None:
        # Groups of runs read from disk: a handful, each drawn, the baseline first.
        for arm in study.arms:
            t = study.arm_trial(arm)
            if t is not None and t is not base:
                picks.setdefault(t.number, []).append(
                    "recipe" if arm == study.recipe_arm else "group")
        return [(", ".join(roles), by_number[n]) for n, roles in picks.items()][:MAX_GROUPS]
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


def _series(rows: list[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    return [(int(r[STEP]), float(r[key])) for r in rows if finite(r.get(key)) and STEP in r]


def _seed(t: TrialRecord, seed: int, max_points: int) -> dict[str, Any]:
    log = seed_log(t, seed) or {"rows": [], "summary": None, "meta": None}
    train, val = _series(log["rows"], TRAIN_LOSS), _series(log["rows"], VAL_LOSS)
    loss_at = dict(train)
    summary = log["summary"] or {}
    events = []
    for e in (summary.get("spikes") or {}).get("events") or []:
        if not isinstance(e, dict) or not finite(e.get("peak")):
            continue
        events.append({"onset": e.get("onset"), "peak": e.get("peak"),
                       "metric": str(e.get("metric", "")),
                       "recovery_steps": e.get("recovery_steps"),
                       "recovered": e.get("recovered"), "injected": bool(e.get("injected")),
                       "loss_at_peak": loss_at.get(int(e["peak"]))})
    injections = [{"kind": str(i.get("kind", "")), "first": i.get("first_step"),
                   "last": i.get("last_step")}
                  for i in (log["meta"] or {}).get("injections") or []
                  if isinstance(i, dict) and finite(i.get("first_step"))]
    steps, loss = _thin([s for s, _ in train], [v for _, v in train], max_points)
    return {"seed": seed, "status": summary.get("status"),
            "diverged_step": summary.get("diverged_step"), "steps": steps, "loss": loss,
            "val_steps": [s for s, _ in val], "val_loss": [v for _, v in val],
            "events": events, "injections": injections}


def info(study: Study, *, max_points: int = 2000) -> CurvesInfo:
    """Per picked trial and seed: training loss (thinned to ``max_points`` by stride),
    validation loss, the events of ``summary.json`` (onset, peak, metric, recovery, loss at
    the peak) and the injected faults (first..last step). A seed without logs has no points.
    """
    picks = pick_curve_trials(study)
    scores = rank_scores(study)
    if not picks:
        return CurvesInfo.unavailable("no baseline and no completed trial to draw")
    panels = [{"roles": roles, "number": t.number, "arm": t.arm,
               "score": scores.get(t.number), "seeds": trial_seeds(t, max_points)}
              for roles, t in picks]
    if study.compare is not None:
        for p in panels:  # a run's name says more than the label it was given as a seed
            names = _run_names(study, p["arm"])
            for s in p["seeds"]:
                s["name"] = names.get(s["seed"])
            p["title"] = f"{p['roles']}: group {p['arm']} ({len(p['seeds'])} runs)"
        return CurvesInfo(panels=panels, selection=SELECTION_GROUPS)
    return CurvesInfo(panels=panels)


def _run_names(study: Study, arm: str) -> dict[int, str]:
    """``{seed label: run name}`` of a group of runs read from disk."""
    group = ((study.compare or {}).get("groups") or {}).get(arm)
    runs = group.get("runs") if isinstance(group, dict) else None
    return {r["label"]: str(r.get("name")) for r in runs or []
            if isinstance(r, dict) and isinstance(r.get("label"), int)}


def trial_seeds(t: TrialRecord, max_points: int = 2000) -> list[dict[str, Any]]:
    """Every seed of a trial as :func:`info` draws it (seeds without logs: no points)."""
    seeds = list(t.by_seed()) or [int(d.name[5:]) for d in seed_dirs(t)]
    return [_seed(t, s, max_points) for s in seeds]


def blocks(cv: CurvesInfo, images: frozenset[str]) -> list[Block]:
    shown = "; ".join(f"{p['roles']} #{p['number']} ({p['arm']})" for p in cv.panels)
    return [para(f"{cv.selection[0].upper()}{cv.selection[1:]}. Shown: {shown}."),
            *image("curves", "Training loss curves with spike events marked", images)]


def _draw_events(ax, events: list[dict[str, Any]]) -> None:
    for e in events:
        if e["loss_at_peak"] is None:
            continue
        grad = "grad" in e["metric"]
        # Hollow: the event began on an injected (faulty) batch.
        ax.plot([e["peak"]], [e["loss_at_peak"]], "v" if grad else "X",
                color="C1" if grad else "C3", ms=7 if not grad else 5,
                mfc="none" if e.get("injected") else None,
                mec="C3" if e.get("injected") else "black",
                mew=1.0 if e.get("injected") else 0.4, zorder=5)


def plot(info: CurvesInfo) -> bytes:
    panels = info.panels
    fig = figure(9, 2.9 * len(panels))
    for i, panel in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        spans = set()
        for j, s in enumerate(panel["seeds"]):
            color = f"C{j % 10}"
            name = tex(s["name"]) if s.get("name") else f"seed {s['seed']}"
            ax.plot(s["steps"], s["loss"], lw=0.8, color=color, alpha=0.8,
                    label=name + (" (diverged)" if s["status"] == "diverged" else ""))
            if s["val_steps"]:
                ax.plot(s["val_steps"], s["val_loss"], "o", ms=3, color=color, alpha=0.9)
            for inj in s["injections"]:
                key = (inj["first"], inj["last"])
                if key not in spans and inj["last"] is not None:
                    spans.add(key)
                    ax.axvspan(inj["first"], inj["last"], color="0.85", zorder=0)
            _draw_events(ax, s["events"])
        ax.set_title(tex(panel.get("title") or
                         f"{panel['roles']}: trial #{panel['number']} ({panel['arm']})"),
                     fontsize=9)
        ax.set_ylabel("train loss", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if panel["seeds"]:
            ax.legend(fontsize=6, loc="upper right")
    if panels:
        fig.axes[-1].set_xlabel("step (grey: injected fault; X: loss-spike peak, hollow if "
                                "it began on an injected batch; v: grad-norm spike peak; "
                                "dots: validation loss)", fontsize=7)
    return png(fig)
