"""LR sensitivity (Wortsman et al. 2023): how much a setting loses away from its best LR.

Pure functions over one seed's final losses on a grid of learning rates. A run that ended
above its initial loss, or diverged and has no final loss, counts at its initial loss, so
one divergence cannot make the mean unbounded and a setting is never scored worse than not
training at all.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from spikebench.values import finite


def capped_final(final: float | None, initial: float | None) -> float | None:
    """min(final, initial); a diverged run (no final loss) counts at its initial loss.
    None when neither is known."""
    if not finite(initial):
        return float(final) if finite(final) else None
    return min(float(final), float(initial)) if finite(final) else float(initial)


def lr_sensitivity(finals: Sequence[float | None], initials: Sequence[float | None]) -> float | None:
    """Mean over the grid of min(final, initial) minus the best of them (the final loss at
    the setting's best LR). 0: the LR does not matter on this grid; None if any grid
    point has neither loss (a seed missing a point cannot be compared with one that has
    it)."""
    capped = [capped_final(f, i) for f, i in zip(finals, initials, strict=True)]
    if not capped or any(c is None for c in capped):
        return None
    return statistics.fmean(capped) - min(capped)
