"""Robust statistics of a short series: median, MAD noise scale, a never-rising trend.

Shared by the default rule (its sigma) and the events (pre-spike level, noise and trend), so
online detection and offline scoring use one definition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Noise scale for a normal distribution from a median absolute deviation.
MAD_TO_SIGMA = 1.4826


def median(xs: Sequence[float]) -> float:
    """Median of a non-empty sequence (sorting a few dozen floats beats numpy's overhead)."""
    s = sorted(xs)
    n = len(s)
    h = n // 2
    return s[h] if n % 2 else 0.5 * (s[h - 1] + s[h])


def mad_sigma(diffs: Sequence[float]) -> float:
    """Noise scale from first differences: MAD x 1.4826 / sqrt(2).

    For white noise of scale s the differences have scale s x sqrt(2), hence the division.
    A perfectly flat series has MAD 0 and falls back to the mean absolute deviation.
    """
    m = median(diffs)
    dev = [abs(x - m) for x in diffs]
    mad = median(dev)
    if mad == 0.0:
        mad = sum(dev) / len(dev)
    return MAD_TO_SIGMA * mad / math.sqrt(2.0)


def robust_sigma_from_diffs(values: Sequence[float]) -> float | None:
    """Local noise scale of a series from the MAD of its first differences.

    Differencing removes a locally linear trend (the loss curve's slope), and the median
    ignores the odd outlier, so this measures step-to-step noise, not the trend. None with
    fewer than 4 values (3 differences), where no scale is meaningful.
    """
    if len(values) < 4:
        return None
    return mad_sigma([b - a for a, b in zip(values[:-1], values[1:], strict=True)])


def trend_slope(values: Sequence[float]) -> float:
    """Slope per observation of a recent series, robust and never rising; 0.0 with < 8 values.

    The median of the newer half minus the median of the older half, over the distance
    between the halves' centres: medians of many values shrug off noise and the odd
    outlier, where a median of single differences would be too noisy to extrapolate.
    """
    h = len(values) // 2
    if h < 4:
        return 0.0
    slope = (median(values[-h:]) - median(values[-2 * h:-h])) / h
    return min(slope, 0.0)
