"""``spikebench spikes --plot``: a log's curves with its spike events marked."""

from __future__ import annotations

from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from spikebench.spikes.logs import Log


def plot_events(log: Log, events: list[dict[str, Any]], detector: str, out: str) -> None:
    """Loss (and grad norm, log scale) against step, each event shaded from onset over its
    recovery; written as a PNG to ``out``."""
    keys = ["loss"] + (["grad_norm"] if log.has_grad_norm else [])
    fig = Figure(figsize=(10, 3.2 * len(keys)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(keys), 1, sharex=True, squeeze=False)[:, 0]
    f = log.frame
    for ax, k in zip(axes, keys, strict=True):
        ax.plot(f["step"], f[k], lw=0.7, color="C0")
        for e in events:
            if e["metric"] != k:
                continue
            ax.axvspan(e["onset"], e["onset"] + max(e["recovery_steps"], 1), color="C3",
                       alpha=0.15)
            ax.axvline(e["onset"], color="C3", lw=0.8)
        ax.set_ylabel(k)
        if k == "grad_norm":
            ax.set_yscale("log")
    axes[-1].set_xlabel("step")
    axes[0].set_title(f"{log.path} — {len(events)} events ({detector})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
