import math

import pytest

from spikebench.scoring.lr import capped_final, lr_sensitivity


def test_capped_final_counts_a_divergence_and_a_rise_at_the_initial_loss():
    assert capped_final(3.0, 5.5) == 3.0
    assert capped_final(7.0, 5.5) == 5.5  # ended above where it started
    assert capped_final(None, 5.5) == 5.5  # diverged: no final loss
    assert capped_final(math.nan, 5.5) == 5.5
    assert capped_final(3.0, None) == 3.0
    assert capped_final(None, None) is None


def test_lr_sensitivity_is_mean_capped_minus_best():
    # Wortsman et al. 2023: E_lr[min(final, initial)] - min_lr final.
    assert lr_sensitivity([3.0, 2.8, 4.0], [5.5] * 3) == pytest.approx((3.0 + 2.8 + 4.0) / 3 - 2.8)
    assert lr_sensitivity([3.0, 2.8, None], [5.5] * 3) == pytest.approx((3.0 + 2.8 + 5.5) / 3 - 2.8)
    assert lr_sensitivity([2.9, 2.9], [5.5, 5.5]) == 0.0
    # A diverged best would be no best: every run diverged scores 0, not a negative number.
    assert lr_sensitivity([None, None], [5.5, 5.5]) == 0.0
    assert lr_sensitivity([3.0, None], [5.5, None]) is None
    assert lr_sensitivity([], []) is None
