import math

import pytest

from spikebench.config import ScheduleConfig
from spikebench.train.schedule import lr_factor, warmup_steps


def test_warmup_then_cosine_known_values():
    cfg = ScheduleConfig(kind="cosine", warmup_ratio=0.1, min_lr_ratio=0.1)
    n = 100
    assert warmup_steps(cfg, n) == 10
    assert lr_factor(0, n, cfg) == pytest.approx(0.1)
    assert lr_factor(4, n, cfg) == pytest.approx(0.5)
    assert lr_factor(9, n, cfg) == pytest.approx(1.0)
    assert lr_factor(10, n, cfg) == pytest.approx(1.0)
    mid = 10 + (n - 10 - 1) / 2
    assert lr_factor(int(mid), n, cfg) == pytest.approx(
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * int(mid - 10) / 89)))
    assert lr_factor(n - 1, n, cfg) == pytest.approx(0.1)


def test_linear_and_constant():
    lin = ScheduleConfig(kind="linear", warmup_ratio=0.0, min_lr_ratio=0.0)
    assert lr_factor(0, 11, lin) == pytest.approx(1.0)
    assert lr_factor(5, 11, lin) == pytest.approx(0.5)
    assert lr_factor(10, 11, lin) == pytest.approx(0.0)
    const = ScheduleConfig(kind="constant", warmup_ratio=0.5)
    assert lr_factor(0, 10, const) == pytest.approx(0.2)
    assert lr_factor(9, 10, const) == 1.0


def test_monotone_decay_and_full_warmup():
    cfg = ScheduleConfig(kind="cosine", warmup_ratio=0.0, min_lr_ratio=0.0)
    vals = [lr_factor(s, 50, cfg) for s in range(50)]
    assert all(a >= b for a, b in zip(vals, vals[1:], strict=False))
    full = ScheduleConfig(warmup_ratio=1.0)
    assert lr_factor(99, 100, full) == pytest.approx(1.0)
