"""The precursor signals the scorecard knows, and each one's warning rule.

Each signal is scored by a :class:`~spikebench.precursors.rule.WarningRule` over its own
values: the log of a scale (a doubling counts the same at any level), the value itself for
a logit, a log-normaliser or a share. ``window`` counts values, so a probe logged every k
steps looks back k times further than the loss. The loss is the baseline every other
signal must beat.
"""

from __future__ import annotations

import re

from spikebench import metrics as M
from spikebench.precursors.rule import WarningRule

LOSS = M.TRAIN_LOSS
# (signal, transform): the order of the scorecard's rows.
KNOWN = (
    (LOSS, "log"),
    (M.GRAD_NORM, "log"),
    (M.UPDATE_NORM, "log"),
    (M.UPDATE_RATIO, "log"),
    (M.ATTN_LOGIT_MAX + "*", "none"),
    (M.LOG_Z, "none"),
    (M.ADAM_G2V, "log"),
    (M.ADAM_EPS_SHARE, "none"),
)
WINDOW = 32
LAYER = re.compile(re.escape(M.ATTN_LOGIT_MAX) + r"\d+$")


def rule_for(signal: str, window: int = WINDOW) -> WarningRule:
    """The scorecard's rule for ``signal`` (its threshold is set later, by the budget)."""
    transform = dict(KNOWN).get(signal)
    if transform is None:
        transform = "none" if LAYER.match(signal) else "log"
    return WarningRule(signal, window=window, threshold=0.0, transform=transform)


def present(columns: set[str], per_layer: bool = True) -> list[str]:
    """The signals a set of runs logged, in the scorecard's order: the known ones, then
    each attention layer's own where ``per_layer``."""
    out = []
    for signal, _ in KNOWN:
        if signal.endswith("*"):
            if any(c.startswith(signal[:-1]) for c in columns):
                out.append(signal)
        elif signal in columns:
            out.append(signal)
    if per_layer:
        layers = sorted((c for c in columns if LAYER.match(c)),
                        key=lambda c: int(c.rsplit("/", 1)[1]))
        out += layers
    return out
