"""Final loss and the largest attention logit against the learning rate, one curve per setting.

The picture of Wortsman et al. (2023): as the LR grows a small Transformer's attention
logits grow without bound and its final loss rises, unless a strategy keeps them in check.
Each grid point is one trial, over the study's seeds; LRs are shown at their own values.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from spikebench.report import exact
from spikebench.report.blocks import Block, Cell, Table, image, interval, notes, num, para
from spikebench.report.data import Study, TrialRecord
from spikebench.report.figures import figure, png, tex
from spikebench.report.lr_grid import LR_KEY, lr_grid, lr_text
from spikebench.report.sections.section import Info, own_params
from spikebench.scoring.lr import capped_final
from spikebench.values import finite

CAPPED = ("final loss: each seed's final validation loss, or its initial loss where that is "
          "lower or the run diverged (Wortsman et al. 2023), so a divergence counts as no "
          "progress rather than as an unbounded loss")


@dataclass(frozen=True, kw_only=True)
class LrCurvesInfo(Info):
    lrs: list[float] = field(default_factory=list)
    # Per setting: label, baseline, and per LR its cell (None where it has no trial).
    settings: list[dict[str, Any]] = field(default_factory=list)
    x_label: str = f"learning rate ({LR_KEY})"


def _cell(t: TrialRecord) -> dict[str, Any]:
    """One grid point over its seeds: the capped final loss (mean, t-interval), how many
    seeds diverged, and the largest attention logit (median, min and max over seeds)."""
    seeds = t.per_seed
    finals = [capped_final(s.get("final_val_loss") if s.get("status") == "completed"
                           else None, s.get("initial_val_loss")) for s in seeds]
    logits = [float(s["max_attn_logit"]) for s in seeds if finite(s.get("max_attn_logit"))]
    return {"trial": t.number, "arm": t.arm, "seeds": len(seeds),
            "final": asdict(exact.t_interval([f for f in finals if f is not None])),
            "diverged": sum(s.get("status") == "diverged" for s in seeds),
            "attn": {"median": statistics.median(logits), "lo": min(logits),
                     "hi": max(logits), "n": len(logits)} if logits else None}


def info(study: Study) -> LrCurvesInfo:
    if study.own_trainer:
        return LrCurvesInfo.unavailable(own_params(study, "is the learning rate"))
    grid = lr_grid(study)
    if grid is None:
        return LrCurvesInfo.unavailable(
            f"no learning-rate grid: it needs completed trials at two or more values of "
            f"{LR_KEY}, from comparison arms (e.g. a [comparison] grid) or from a "
            "categorical search dimension")
    rows = [{"label": s.label, "baseline": s.baseline,
             "cells": [_cell(s.trials[lr]) if lr in s.trials else None for lr in grid.lrs]}
            for s in grid.settings]
    return LrCurvesInfo(lrs=grid.lrs, settings=rows)


def _final_text(c: dict[str, Any] | None) -> str:
    if c is None:
        return "—"
    text = interval(c["final"], explain=False)
    return text + (f"\n{c['diverged']}/{c['seeds']} diverged" if c["diverged"] else "")


def _attn_text(c: dict[str, Any] | None) -> str:
    if c is None or c["attn"] is None:
        return "—"
    a = c["attn"]
    return f"{num(a['median'])} ({num(a['lo'])}–{num(a['hi'])})"


def blocks(info: LrCurvesInfo, images: frozenset[str]) -> list[Block]:
    head = ["Setting"] + [f"LR {lr_text(lr)}" for lr in info.lrs]

    def table(text):
        return Table(head, [[Cell(s["label"])] + [Cell(text(c)) for c in s["cells"]]
                            for s in info.settings])
    return [*image("lr_curves", "Final loss and largest attention logit against the LR",
                   images),
            para("Final validation loss by learning rate: mean over seeds [95% t-interval]."),
            table(_final_text),
            para("Largest pre-softmax attention logit seen by the probes during the run: "
                 "median over seeds (smallest–largest)."),
            table(_attn_text),
            *notes([CAPPED])]


def plot(info: LrCurvesInfo) -> bytes:
    fig = figure(10, 3.6)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for i, s in enumerate(info.settings):
        color = "black" if s["baseline"] else f"C{i % 10}"
        pts = [(lr, c) for lr, c in zip(info.lrs, s["cells"], strict=True) if c is not None]
        fin = [(lr, c["final"]) for lr, c in pts if c["final"]["value"] is not None]
        ax1.plot([lr for lr, _ in fin], [f["value"] for _, f in fin], "o-", color=color,
                 ms=3, lw=1.2, label=tex(s["label"]))
        band = [(lr, f) for lr, f in fin if f["lo"] is not None]
        if band:
            ax1.fill_between([lr for lr, _ in band], [f["lo"] for _, f in band],
                             [f["hi"] for _, f in band], color=color, alpha=0.12, lw=0)
        att = [(lr, c["attn"]) for lr, c in pts if c["attn"] is not None]
        if att:
            ax2.plot([lr for lr, _ in att], [a["median"] for _, a in att], "o-", color=color,
                     ms=3, lw=1.2)
            ax2.fill_between([lr for lr, _ in att], [a["lo"] for _, a in att],
                             [a["hi"] for _, a in att], color=color, alpha=0.12, lw=0)
    for ax, title in ((ax1, "final val loss (mean, 95% t band)"),
                      (ax2, "largest attention logit (median, min-max band)")):
        ax.set_xscale("log")
        ax.set_xlabel(tex(info.x_label), fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    logits = [c["attn"]["lo"] for s in info.settings for c in s["cells"] if c and c["attn"]]
    if logits and min(logits) > 0:
        ax2.set_yscale("log")
    ax1.legend(fontsize=6)
    return png(fig)
