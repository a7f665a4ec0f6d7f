import pytest
from fixtures import GRID_FINALS, LR_GRID

from spikebench.report.sections import lr_curves


def _strip(info):
    # Trial numbers and arm names differ between the two ways of running the grid.
    return [{**s, "cells": [{k: v for k, v in c.items() if k not in ("trial", "arm")}
                            for c in s["cells"]]} for s in info.settings]


def test_final_loss_per_setting_and_lr_with_a_t_interval(lr_arms):
    info = lr_curves.info(lr_arms)
    assert info.lrs == LR_GRID
    rows = {s["label"]: s for s in info.settings}
    assert list(rows) == ["baseline", "clipping at 1", "qk-layernorm"]
    qk = rows["qk-layernorm"]["cells"]
    for i, cell in enumerate(qk):
        # Seeds 0..5 add 0.01 x seed to the setting's final loss at that LR.
        assert cell["final"]["value"] == pytest.approx(GRID_FINALS["qk-layernorm"][i] + 0.025)
        assert cell["final"]["lo"] < cell["final"]["value"] < cell["final"]["hi"]
        assert cell["seeds"] == 6 and cell["diverged"] == 0
    # The baseline's seed 5 diverged at the top LR: it counts at its initial loss (5.5).
    top = rows["baseline"]["cells"][2]
    assert top["diverged"] == 1
    assert top["final"]["value"] == pytest.approx((sum(4.0 + 0.01 * s for s in range(5))
                                                   + 5.5) / 6)


def test_largest_attention_logit_per_setting(lr_arms):
    rows = {s["label"]: s for s in lr_curves.info(lr_arms).settings}
    base = [c["attn"]["median"] for c in rows["baseline"]["cells"]]
    assert base[0] < base[1] < base[2]  # grows with the LR
    assert all(c["attn"]["median"] == 10.0 for c in rows["qk-layernorm"]["cells"])
    low = rows["baseline"]["cells"][0]["attn"]
    assert low["lo"] == 5.0 and low["hi"] == pytest.approx(5.0 * 1.5) and low["n"] == 6


def test_reads_the_same_from_arms_and_from_search_trials(lr_arms, lr_search):
    assert _strip(lr_curves.info(lr_arms)) == _strip(lr_curves.info(lr_search))


def test_unavailable_without_a_grid(study, nocomp):
    for s in (study, nocomp):
        info = lr_curves.info(s)
        assert not info.available and "two or more values of optim.lr" in info.reason


def test_plot_draws(lr_arms):
    assert lr_curves.plot(lr_curves.info(lr_arms))[:4] == b"\x89PNG"
