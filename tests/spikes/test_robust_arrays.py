"""The windowed statistics' array forms are their one-window forms bit for bit: the
sorting-network medians (consecutive windows) and the sort per window (any ends) alike."""

from __future__ import annotations

import numpy as np
import pytest

from spikebench.spikes import robust as R


@pytest.mark.parametrize("length", [2, 3, 5, 8, 13, 16, 17])
def test_medians_are_median_of_each_window(length):
    rng = np.random.default_rng(length)
    # Ties, zeros of both signs, infinities and a wide spread: what a sort handles.
    a = np.concatenate([rng.integers(-3, 4, 3000).astype(float), rng.normal(size=3000),
                        [np.inf, -0.0, 0.0, -np.inf] * 20, rng.lognormal(0, 20, 3000)])
    ends = np.arange(length, len(a) + 1)
    want = np.array([R.median(a[e - length:e].tolist()) for e in ends])
    with np.errstate(invalid="ignore"):  # inf + -inf: NaN in both forms
        got = R.medians(a, ends, length)
    assert np.array_equal(got, want, equal_nan=True)
    picked = ends[::7][::-1]  # not consecutive: the sort per window
    with np.errstate(invalid="ignore"):
        got = R.medians(a, picked, length)
    assert np.array_equal(got, want[::7][::-1], equal_nan=True)
