"""Spikes and convergence against ``optim.lr``, one point per completed trial.

Only a study that varied the learning rate has this section. The table groups trials by
LR: at their own values where the LR takes a few (a categorical dimension or comparison
arms), else into log-spaced bins, because a continuous LR is where spikes and divergence
usually start and the bins show where that begins.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spikebench.report.blocks import Block, Cell, Table, image, num
from spikebench.report.data import Study
from spikebench.report.figures import figure, png, tex
from spikebench.report.lr_grid import LR_KEY, grid_values, lr_text, trial_config
from spikebench.report.scores import CONVERGENCE_SHORT, spike_axis_label
from spikebench.report.sections.section import Info, own_params
from spikebench.values import finite


@dataclass(frozen=True, kw_only=True)
class LrInfo(Info):
    points: list[dict[str, Any]] = field(default_factory=list)  # by learning rate
    bins: list[dict[str, Any]] = field(default_factory=list)
    x_label: str = f"learning rate ({LR_KEY})"
    spikes_label: str = ""
    convergence_label: str = CONVERGENCE_SHORT


def lr_bins(points: list[dict[str, Any]], n_bins: int = 6,
            values: list[float] | None = None) -> list[dict[str, Any]]:
    """Points grouped by LR, with median spikes and convergence and how many trials had a
    diverged seed: one group per value of ``values`` (its ``lo`` = ``hi``), else up to
    ``n_bins`` log-spaced bins (empty bins dropped; one distinct LR: one bin)."""
    if values:
        groups = [(v, v, [p for p in points if p["lr"] == v]) for v in values]
    else:
        lrs = np.log10([p["lr"] for p in points])
        lo, hi = float(lrs.min()), float(lrs.max())
        edges = np.linspace(lo, hi, n_bins + 1) if hi > lo else np.array([lo, hi])
        idx = np.clip(np.searchsorted(edges, lrs, side="right") - 1, 0, len(edges) - 2)
        groups = [(float(10 ** edges[b]), float(10 ** edges[b + 1]),
                   [p for p, i in zip(points, idx, strict=True) if i == b])
                  for b in range(len(edges) - 1)]
    out = []
    for lo_, hi_, members in groups:
        if not members:
            continue

        def med(key, members=members):
            vals = [m[key] for m in members if finite(m[key])]
            return statistics.median(vals) if vals else None

        out.append({"lo": lo_, "hi": hi_, "trials": len(members), "spikes": med("spikes"),
                    "convergence": med("convergence"),
                    "diverged_trials": sum(m["diverged_seeds"] > 0 for m in members)})
    return out


def info(study: Study) -> LrInfo:
    """Spikes, convergence and final loss per completed trial with a positive LR."""
    if study.own_trainer:
        return LrInfo.unavailable(own_params(study, "is the learning rate"))
    grid = grid_values(study)
    if not any(p.key == LR_KEY for p in study.space) and len(grid) < 2:
        return LrInfo.unavailable(f"the study did not vary the learning rate ({LR_KEY} is "
                                  "not in its search space, and its arms share one)")
    pts = []
    for t in study.trials:
        lr = t.params.get(LR_KEY, trial_config(study, t).get(LR_KEY))
        if not t.complete or not finite(lr) or lr <= 0:
            continue
        pts.append({"number": t.number, "arm": t.arm, "lr": float(lr),
                    "spikes": t.attrs.get("spikes"), "convergence": t.attrs.get("convergence"),
                    "final_loss": t.final_loss_median,
                    "diverged_seeds": int(t.attrs.get("diverged_seeds") or 0),
                    "seeds": int(t.attrs.get("seeds") or len(t.per_seed))})
    if not pts:
        return LrInfo.unavailable("no completed trial with a learning rate yet")
    pts.sort(key=lambda p: p["lr"])
    # At their own values where every point's LR is one of the grid's.
    own = grid if grid and all(p["lr"] in grid for p in pts) else None
    return LrInfo(points=pts, bins=lr_bins(pts, values=own), spikes_label=spike_axis_label(study))


def blocks(lr: LrInfo, images: frozenset[str]) -> list[Block]:
    rows = [[Cell(lr_text(b["lo"]) if b["lo"] == b["hi"] else f"{num(b['lo'])} – {num(b['hi'])}"),
             Cell(str(b["trials"])),
             Cell(num(b["spikes"])), Cell(num(b["convergence"])),
             Cell(f"{b['diverged_trials']}/{b['trials']}")] for b in lr.bins]
    return [*image("lr", "Spikes and convergence against the learning rate", images),
            Table(["Learning rate", "Trials", "Spikes (median)", "Convergence (median)",
                   "Trials with a diverged seed"], rows)]


def plot(info: LrInfo) -> bytes:
    pts = info.points
    fig = figure(9, 3.3)
    for i, (key, label) in enumerate((("spikes", info.spikes_label),
                                      ("convergence", info.convergence_label))):
        ax = fig.add_subplot(1, 2, i + 1)
        ok = [p for p in pts if p[key] is not None and not p["diverged_seeds"]]
        bad = [p for p in pts if p[key] is not None and p["diverged_seeds"]]
        ax.scatter([p["lr"] for p in ok], [p[key] for p in ok], s=16, c="C0", label="trial")
        if bad:
            ax.scatter([p["lr"] for p in bad], [p[key] for p in bad], s=22, c="C3",
                       marker="x", label="a seed diverged")
        ax.set_xscale("log")
        ax.set_xlabel(tex(info.x_label), fontsize=8)
        ax.set_ylabel(tex(label), fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return png(fig)
