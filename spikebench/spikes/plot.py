"""``spikebench spikes --plot``: a log's curves with its spike events marked."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.spikes.logs import Log


def check_plot_path(out: str, log: str | None = None) -> None:
    """Refuse, before any work, a ``--plot`` path the PNG cannot be written to: not a .png
    name, a folder, a FIFO or device (writing would block or go nowhere), a name too long
    for the file system, a folder that does not exist, or the log itself."""
    p = Path(out)
    if not out or p.suffix.lower() != ".png":
        raise UserError(f"--plot {out!r}: must be the path of a .png file")
    try:
        st = os.stat(p)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise UserError(f"--plot {out!r}: file name too long") from None
        if e.errno != errno.ENOENT:
            raise UserError(f"--plot {out!r}: cannot write there ({e.strerror})") from None
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UserError(f"--plot {out!r}: must be the path of a .png file")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UserError(f"--plot {out!r}: exists and is not a regular file")
    parent = p.parent
    if not os.path.isdir(parent):
        raise UserError(f"--plot {out!r}: no folder {str(parent)!r} to write it in")
    if st is not None and log is not None and _same(out, log):
        raise UserError(f"--plot {out!r}: is the log itself")


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def plot_events(log: Log, events: list[dict[str, Any]], detector: str, out: str) -> None:
    """Loss (and grad norm, log scale) against step, each event shaded from onset over its
    recovery; written as a PNG to ``out``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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
