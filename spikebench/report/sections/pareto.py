"""Section 5, the Pareto front of spikes vs convergence over every scored trial.

The front is computed here from the trials' two scores, not taken from Optuna, so it is the
same for a multi-objective study and for a single-objective one (where spikes are a
constraint and the front still shows the trade-off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spikebench.report import scores
from spikebench.report.blocks import Block, Cell, Table, image, num, para
from spikebench.report.data import Study
from spikebench.report.figures import figure, png, tex
from spikebench.report.sections.section import Info


@dataclass(frozen=True, kw_only=True)
class ParetoInfo(Info):
    points: list[dict[str, Any]] = field(default_factory=list)
    front: list[int] = field(default_factory=list)  # trial numbers, by spikes then convergence
    x_label: str = ""
    y_label: str = scores.CONVERGENCE_LABEL
    y_short: str = scores.CONVERGENCE_SHORT


def pareto_mask(xs: list[float], ys: list[float]) -> list[bool]:
    """True for points no other point dominates (both minimised): q dominates p when q is
    <= p in both and < in one. Duplicated front points are all on the front."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size == 0:
        return []
    le = (x[:, None] <= x[None, :]) & (y[:, None] <= y[None, :])
    lt = (x[:, None] < x[None, :]) | (y[:, None] < y[None, :])
    return (~(le & lt).any(axis=0)).tolist()


def _by_position(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((p for p in points if p["front"]), key=lambda p: (p["spikes"],
                                                                    p["convergence"]))


def info(study: Study) -> ParetoInfo:
    """Scored trials in (spikes, convergence) and which of them lie on the front."""
    pts = scores.scored_trials(study)
    if not pts:
        return ParetoInfo.unavailable("no completed trial with spike and convergence scores "
                                      "yet")
    xs = [float(t.attrs["spikes"]) for t in pts]
    ys = [float(t.attrs["convergence"]) for t in pts]
    mask = pareto_mask(xs, ys)
    points = [{"number": t.number, "arm": t.arm, "spikes": x, "convergence": y, "front": m,
               "diverged": bool(t.attrs.get("diverged_seeds"))}
              for t, x, y, m in zip(pts, xs, ys, mask, strict=True)]
    return ParetoInfo(points=points, front=[p["number"] for p in _by_position(points)],
                      x_label=scores.spike_axis_label(study))


def blocks(p: ParetoInfo, images: frozenset[str]) -> list[Block]:
    by = {q["number"]: q for q in p.points}
    rows = [[Cell(str(n), n), Cell(by[n]["arm"]), Cell(num(by[n]["spikes"]), by[n]["spikes"]),
             Cell(num(by[n]["convergence"]), by[n]["convergence"])] for n in p.front]
    return [*image("pareto", "Pareto front of spikes vs convergence", images),
            para(f"x: {p.x_label}; y: {p.y_label}. Trials on the front:"),
            Table(["#", "Arm", "Spikes", "Convergence"], rows)]


def plot(info: ParetoInfo) -> bytes:
    fig = figure(7.5, 4.8)
    ax = fig.add_subplot()
    pts = info.points
    groups = {"search": [p for p in pts if p["arm"] == "search" and not p["diverged"]],
              "comparison arm": [p for p in pts if p["arm"] != "search" and not p["diverged"]],
              "a seed diverged": [p for p in pts if p["diverged"]]}
    style = {"search": dict(c="0.6", marker="o"), "comparison arm": dict(c="C0", marker="s"),
             "a seed diverged": dict(c="C3", marker="x")}
    for name, ps in groups.items():
        if ps:
            ax.scatter([p["spikes"] for p in ps], [p["convergence"] for p in ps], s=22,
                       label=name, **style[name])
    front = _by_position(pts)
    ax.plot([p["spikes"] for p in front], [p["convergence"] for p in front], "-o", c="C2",
            ms=7, mfc="none", lw=1.2, label="Pareto front", drawstyle="steps-post")
    for p in pts:
        if p["arm"] not in ("search",) or p["front"]:
            ax.annotate(tex(p["arm"] if p["arm"] != "search" else f"#{p['number']}"),
                        (p["spikes"], p["convergence"]), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel(tex(info.x_label), fontsize=8)
    ax.set_ylabel(tex(info.y_short), fontsize=8)
    ax.set_title("Spikes vs convergence (lower-left is better)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return png(fig)
