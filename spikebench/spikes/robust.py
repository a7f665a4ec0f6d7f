"""Robust statistics of a short series: median, MAD noise scale, a never-rising trend.

Shared by the default rule (its sigma) and the events (pre-spike level, noise and trend), so
online detection and offline scoring use one definition. Each statistic a rule takes over
windows has its array form beside it (:func:`medians`, :func:`mad_sigmas`), bit for bit
the same: a verdict is a comparison with a threshold, so a value one ulp off could add or
drop an event. They use the same IEEE operations in the same order (numpy's elementwise
arithmetic rounds as Python floats do; ``np.partition`` and ``np.sort`` pick the element
``sorted`` does; sums are sequential, never pairwise).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

# Noise scale for a normal distribution from a median absolute deviation.
MAD_TO_SIGMA = 1.4826
SQRT2 = math.sqrt(2.0)
# Python's sum() is a plain left-to-right sum before 3.12 and compensated since: numpy's
# cumsum may stand in for it only in the first case.
PLAIN_SUM = sum([1e16, 1.0, -1e16]) == 0.0
# Elements per chunk where windows are copied out: small enough to stay in cache.
CHUNK_ELEMS = 1 << 16
# Longest window whose medians a sorting network takes (its compare-exchanges grow as
# n log^2 n: past this a sort per window is as fast).
NETWORK_MAX = 16
NETWORK_CHUNK = 1 << 14  # windows per piece: its columns stay in cache


def pymax(a, b):
    """Python's ``max(a, b)``, on floats or elementwise on arrays: ``a`` unless ``b > a``
    (so NaN and -0.0 behave as in the online rules, unlike ``np.maximum``)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.where(b > a, b, a)
    return b if b > a else a


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
    return MAD_TO_SIGMA * mad / SQRT2


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


def medians(a: np.ndarray, ends: np.ndarray, length: int) -> np.ndarray:
    """:func:`median` of ``a[e - length:e]`` for each ``e`` in ``ends``."""
    if 1 < length <= NETWORK_MAX and len(ends) > 1 and (np.diff(ends) == 1).all() and not (
            np.isnan(a).any()):  # consecutive windows, no NaN (a network would spread it)
        return _network_medians(a, int(ends[0]), len(ends), length)
    out = np.empty(len(ends))
    h = length // 2
    view = sliding_window_view(a, length)
    step = max(1, 8 * CHUNK_ELEMS // length)
    for c in range(0, len(ends), step):
        # A full sort of a short window beats a partition at picking two elements.
        w = np.sort(view[ends[c:c + step] - length], axis=1)
        out[c:c + step] = w[:, h] if length % 2 else 0.5 * (w[:, h - 1] + w[:, h])
    return out


def _network_medians(a: np.ndarray, first: int, m: int, length: int) -> np.ndarray:
    """:func:`medians` at the consecutive ends ``first .. first + m - 1``: a sorting network
    run on whole columns (window position j is ``a`` shifted by j), so each compare-exchange
    is one ``np.minimum`` and one ``np.maximum`` over all windows instead of a sort per
    window. The middle values are the sorted window's (without NaN; only a zero's sign
    could land elsewhere, and the median compares alike either way)."""
    h, net = length // 2, _median_network(length)
    out = np.empty(m)
    for c in range(0, m, NETWORK_CHUNK):  # in pieces that stay in cache
        k = min(NETWORK_CHUNK, m - c)
        start = first - length + c
        cols = [a[start + j:start + j + k] for j in range(length)]
        for i, j in net:
            cols[i], cols[j] = np.minimum(cols[i], cols[j]), np.maximum(cols[i], cols[j])
        out[c:c + k] = cols[h] if length % 2 else 0.5 * (cols[h - 1] + cols[h])
    return out


@functools.cache
def _median_network(n: int) -> tuple[tuple[int, int], ...]:
    """The compare-exchanges of Batcher's merge-exchange sort of ``n`` wires (Knuth, TAOCP
    5.2.2, Algorithm M) that the middle wires depend on (the rest dropped)."""
    pairs = []
    t = (n - 1).bit_length()
    p = 1 << (t - 1)
    while p > 0:
        q, r, d = 1 << (t - 1), 0, p
        while True:
            pairs += [(i, i + d) for i in range(n - d) if i & p == r]
            if q == p:
                break
            d, q, r = q - p, q >> 1, p
        p >>= 1
    need, kept = {n // 2, (n - 1) // 2}, []
    for i, j in reversed(pairs):
        if i in need or j in need:
            kept.append((i, j))
            need |= {i, j}
    return tuple(reversed(kept))


def mad_sigmas(dy: np.ndarray, ends: np.ndarray, length: int) -> np.ndarray:
    """:func:`mad_sigma` of ``dy[e - length:e]`` for each ``e`` in ``ends``."""
    out = np.empty(len(ends))
    h = length // 2
    kth = [h] if length % 2 else [h - 1, h]
    view = sliding_window_view(dy, length)
    step = max(1, CHUNK_ELEMS // length)
    for c in range(0, len(ends), step):
        w = view[ends[c:c + step] - length]
        p = np.partition(w, kth, axis=1)
        m = p[:, h] if length % 2 else 0.5 * (p[:, h - 1] + p[:, h])
        dev = np.abs(w - m[:, None])
        p = np.partition(dev, kth, axis=1)
        mad = p[:, h] if length % 2 else 0.5 * (p[:, h - 1] + p[:, h])
        zero = np.flatnonzero(mad == 0.0)
        if len(zero):  # a flat window: the mean absolute deviation, summed as sum() does
            z = dev[zero]
            if PLAIN_SUM:
                mad[zero] = np.cumsum(z, axis=1)[:, -1] / length
            else:
                mad[zero] = [sum(r) / length for r in z.tolist()]
        out[c:c + step] = MAD_TO_SIGMA * mad / SQRT2
    return out
