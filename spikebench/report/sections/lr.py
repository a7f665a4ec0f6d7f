"""Section 7, learning-rate sensitivity: spikes and convergence against ``optim.lr``.

Only a study that swept the learning rate has this section; one point per completed trial,
grouped into log-spaced bins for the table, because the learning rate is where spikes and
divergence usually start and the bins show where that begins.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spikebench.report.arms import trial_values
from spikebench.report.blocks import Block, Cell, Table, image, num
from spikebench.report.data import Study
from spikebench.report.figures import figure, png, tex
from spikebench.report.scores import CONVERGENCE_SHORT, spike_axis_label
from spikebench.report.sections.section import Info
from spikebench.values import finite

LR_KEY = "optim.lr"


@dataclass(frozen=True, kw_only=True)
class LrInfo(Info):
    points: list[dict[str, Any]] = field(default_factory=list)  # by learning rate
    bins: list[dict[str, Any]] = field(default_factory=list)
    x_label: str = f"learning rate ({LR_KEY})"
    spikes_label: str = ""
    convergence_label: str = CONVERGENCE_SHORT


def lr_bins(points: list[dict[str, Any]], n_bins: int = 6) -> list[dict[str, Any]]:
    """Points grouped into up to ``n_bins`` log-spaced LR bins (empty bins dropped), with
    median spikes and convergence and how many trials had a diverged seed. One distinct
    LR: one bin."""
    lrs = np.log10([p["lr"] for p in points])
    lo, hi = float(lrs.min()), float(lrs.max())
    edges = np.linspace(lo, hi, n_bins + 1) if hi > lo else np.array([lo, hi])
    idx = np.clip(np.searchsorted(edges, lrs, side="right") - 1, 0, len(edges) - 2)
    out = []
    for b in range(len(edges) - 1):
        members = [p for p, i in zip(points, idx, strict=True) if i == b]
        if not members:
            continue

        def med(key, members=members):
            vals = [m[key] for m in members if finite(m[key])]
            return statistics.median(vals) if vals else None

        out.append({"lo": float(10 ** edges[b]), "hi": float(10 ** edges[b + 1]),
                    "trials": len(members), "spikes": med("spikes"),
                    "convergence": med("convergence"),
                    "diverged_trials": sum(m["diverged_seeds"] > 0 for m in members)})
    return out


def info(study: Study) -> LrInfo:
    """Spikes, convergence and final loss per completed trial with a positive LR."""
    if not any(p.key == LR_KEY for p in study.space):
        return LrInfo.unavailable(f"the study did not sweep the learning rate ({LR_KEY} is "
                                  "not in its search space)")
    pts = []
    for t in study.trials:
        lr = t.params.get(LR_KEY, trial_values(t, study).get(LR_KEY))
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
    return LrInfo(points=pts, bins=lr_bins(pts), spikes_label=spike_axis_label(study))


def blocks(lr: LrInfo, images: frozenset[str]) -> list[Block]:
    rows = [[Cell(f"{num(b['lo'])} – {num(b['hi'])}"), Cell(str(b["trials"])),
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
