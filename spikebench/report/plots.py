"""Plots of the report's sections: each renderer takes a section's info and returns PNG bytes.

Figures are built with ``matplotlib.figure.Figure`` on the Agg canvas directly, not through
pyplot: no global backend switch, no figure registry to leak, safe on a headless server
and in threads. User strings (arm names) are escaped for mathtext, where a ``$`` would
otherwise start a formula and can make drawing fail.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100


def _t(text: Any) -> str:
    return str(text).replace("\\", "\\\\").replace("$", r"\$")


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def pareto_png(info: dict[str, Any]) -> bytes:
    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.add_subplot()
    pts = info["points"]
    groups = {"search": [p for p in pts if p["arm"] == "search" and not p["diverged"]],
              "comparison arm": [p for p in pts if p["arm"] != "search" and not p["diverged"]],
              "a seed diverged": [p for p in pts if p["diverged"]]}
    style = {"search": dict(c="0.6", marker="o"), "comparison arm": dict(c="C0", marker="s"),
             "a seed diverged": dict(c="C3", marker="x")}
    for name, ps in groups.items():
        if ps:
            ax.scatter([p["spikes"] for p in ps], [p["convergence"] for p in ps], s=22,
                       label=name, **style[name])
    front = sorted((p for p in pts if p["front"]), key=lambda p: (p["spikes"],
                                                                  p["convergence"]))
    ax.plot([p["spikes"] for p in front], [p["convergence"] for p in front], "-o", c="C2",
            ms=7, mfc="none", lw=1.2, label="Pareto front", drawstyle="steps-post")
    for p in pts:
        if p["arm"] not in ("search",) or p["front"]:
            ax.annotate(_t(p["arm"] if p["arm"] != "search" else f"#{p['number']}"),
                        (p["spikes"], p["convergence"]), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel(_t(info["x_label"]), fontsize=8)
    ax.set_ylabel(_t(info["y_short"]), fontsize=8)
    ax.set_title("Spikes vs convergence (lower-left is better)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)


def importance_png(info: dict[str, Any]) -> bytes:
    objs = info["objectives"]
    fig = Figure(figsize=(4.2 * len(objs), 3.2))
    for i, o in enumerate(objs):
        ax = fig.add_subplot(1, len(objs), i + 1)
        items = sorted(o["importances"].items(), key=lambda kv: kv[1])
        ax.barh([_t(k) for k, _ in items], [v for _, v in items], color="C0")
        ax.set_title(_t(f"importance for {o['name']}"), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlim(0, max([v for _, v in items] + [1e-9]) * 1.1)
    return _png(fig)


def curves_png(info: dict[str, Any]) -> bytes:
    panels = info["panels"]
    fig = Figure(figsize=(9, 2.9 * len(panels)))
    for i, panel in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        spans = set()
        for j, s in enumerate(panel["seeds"]):
            color = f"C{j % 10}"
            ax.plot(s["steps"], s["loss"], lw=0.8, color=color, alpha=0.8,
                    label=f"seed {s['seed']}" + (" (diverged)" if s["status"] == "diverged"
                                                 else ""))
            if s["val_steps"]:
                ax.plot(s["val_steps"], s["val_loss"], "o", ms=3, color=color, alpha=0.9)
            for inj in s["injections"]:
                key = (inj["first"], inj["last"])
                if key not in spans and inj["last"] is not None:
                    spans.add(key)
                    ax.axvspan(inj["first"], inj["last"], color="0.85", zorder=0)
            for e in s["events"]:
                if e["loss_at_peak"] is None:
                    continue
                grad = "grad" in e["metric"]
                # Hollow: the event began on an injected (faulty) batch.
                ax.plot([e["peak"]], [e["loss_at_peak"]], "v" if grad else "X",
                        color="C1" if grad else "C3", ms=7 if not grad else 5,
                        mfc="none" if e.get("injected") else None,
                        mec="C3" if e.get("injected") else "black",
                        mew=1.0 if e.get("injected") else 0.4, zorder=5)
        ax.set_title(_t(f"{panel['roles']}: trial #{panel['number']} ({panel['arm']})"),
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
    return _png(fig)


def spike_counts_png(info: dict[str, Any]) -> bytes:
    arms = info["arms"]
    fig = Figure(figsize=(max(5.0, 1.1 * len(arms) + 2), 3.4))
    ax = fig.add_subplot()
    xs = range(len(arms))
    ax.bar(list(xs), [a["mean"] or 0 for a in arms], color="C0", alpha=0.6,
           label="mean per seed")
    for x, a in zip(xs, arms, strict=True):
        n = len(a["events"])
        jitter = [x + (k - (n - 1) / 2) * 0.08 for k in range(n)]
        ax.plot(jitter, a["events"], "o", color="black", ms=3)
    ax.set_xticks(list(xs), [_t(a["arm"]) for a in arms], rotation=25, ha="right",
                  fontsize=7)
    ax.set_ylabel("loss-spike events per seed", fontsize=8)
    ax.set_title("Spike events by strategy (designed comparison; dots: seeds)", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    return _png(fig)


def lr_png(info: dict[str, Any]) -> bytes:
    pts = info["points"]
    fig = Figure(figsize=(9, 3.3))
    for i, (key, label) in enumerate((("spikes", info["spikes_label"]),
                                      ("convergence", info["convergence_label"]))):
        ax = fig.add_subplot(1, 2, i + 1)
        ok = [p for p in pts if p[key] is not None and not p["diverged_seeds"]]
        bad = [p for p in pts if p[key] is not None and p["diverged_seeds"]]
        ax.scatter([p["lr"] for p in ok], [p[key] for p in ok], s=16, c="C0", label="trial")
        if bad:
            ax.scatter([p["lr"] for p in bad], [p[key] for p in bad], s=22, c="C3",
                       marker="x", label="a seed diverged")
        ax.set_xscale("log")
        ax.set_xlabel(_t(info["x_label"]), fontsize=8)
        ax.set_ylabel(_t(label), fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)


RENDERERS = {"spike_counts": spike_counts_png, "curves": curves_png, "pareto": pareto_png,
             "importance": importance_png, "lr": lr_png}


def render_all(report: dict[str, Any]) -> dict[str, bytes]:
    """PNG bytes of every plot whose section is available (and, for spike counts, has
    comparison arms to draw)."""
    out = {}
    for name, fn in RENDERERS.items():
        info = report.get(name) or {}
        if not info.get("available"):
            continue
        if name == "spike_counts" and not info.get("arms"):
            continue
        out[name] = fn(info)
    return out
