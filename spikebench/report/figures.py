"""Matplotlib helpers for the sections' plots: a figure, its PNG bytes, mathtext escaping.

Figures are ``matplotlib.figure.Figure`` objects on the Agg canvas, never pyplot: no global
backend switch and no figure registry to leak, so plotting is safe on a headless server and
in threads. User strings (arm names) go through :func:`tex`, because a ``$`` would start a
formula and can make drawing fail. Matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100


def tex(text: Any) -> str:
    """``text`` shown literally by mathtext (backslashes and dollars escaped)."""
    return str(text).replace("\\", "\\\\").replace("$", r"\$")


def figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def png(fig: Figure) -> bytes:
    """The figure laid out tightly and encoded as PNG at :data:`DPI`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()
