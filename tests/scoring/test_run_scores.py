import json
import math

import numpy as np
import pytest

from spikebench.scoring.run import (
    final_loss,
    loss_auc,
    max_loss_ratio,
    spike_score,
    spike_step_share,
    summarize,
    time_to_target,
)
from spikebench.spikes.synthetic import generate


def test_time_to_target_first_eval_at_or_below():
    evals = [
        {"step": 100, "val/loss": 3.5, "tokens": 1000, "time": 1.0},
        {"step": 200, "val/loss": 3.0, "tokens": 2000, "time": 2.0},
        {"step": 300, "val/loss": 2.9, "tokens": 3000, "time": 3.0},
        {"step": 400, "val/loss": 3.2},
    ]
    assert time_to_target(evals, 3.0) == {"steps": 200.0, "tokens": 2000.0, "seconds": 2.0}
    miss = time_to_target(evals, 2.0)
    assert all(math.isinf(v) for v in miss.values())
    assert time_to_target([{"step": 5, "val/loss": 1.0}], 2.0)["tokens"] is None
    assert math.isinf(time_to_target([{"step": 5, "val/loss": float("nan")}], 2.0)["steps"])


def test_final_loss_and_auc():
    assert final_loss([3.0, 2.0, 1.0]) == 1.0
    assert final_loss([3.0, 2.0, 1.0], tail=2) == 1.5
    assert math.isinf(final_loss([3.0, float("nan")])) and math.isinf(final_loss([]))
    assert loss_auc([0, 10], [2.0, 4.0]) == pytest.approx(3.0)
    assert loss_auc([0, 1, 3], [1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert loss_auc([0, 2], [4.0, float("nan")]) == pytest.approx(4.0)  # NaN -> initial
    assert loss_auc([7], [2.5]) == 2.5


def test_spike_score_and_ratio():
    x = 3 + 0.01 * np.random.default_rng(0).standard_normal(3000)
    assert spike_score(x) == 0.0
    x[2000] += 1.0
    assert spike_score(x) == pytest.approx(1 / 3000)
    assert spike_score(x[:800]) is None
    assert max_loss_ratio([4.0, 2.0, 2.4, 1.0]) == pytest.approx(1.2)
    assert max_loss_ratio([1.0]) is None


def test_summarize_is_json_safe_and_complete():
    lg = generate(4, 4000, early_jump=False)
    recs = lg.records()
    for r in recs:
        r["tokens"] = r["step"] * 512
        r["time"] = r["step"] * 0.01
    evals = [{"step": s, "val/loss": float(lg.loss[s])} for s in range(0, 4000, 250)]
    recs += evals
    recs.sort(key=lambda r: r["step"])
    recs.append({"step": 4000, "train/loss": float("nan"), "optim/grad_norm": float("nan")})
    target = float(lg.loss[2000])
    out = summarize(recs, target=target)
    json.dumps(out, allow_nan=False)
    assert out["diverged_step"] == 4000
    assert out["steps"] == 4001 and out["n_events"] >= 1
    assert out["n_events"] + out["n_grad_norm_events"] == len(out["events"])
    assert out["events"][-1]["onset"] == 4000 and not out["events"][-1]["recovered"]
    assert out["spike_score"]["loss"] is not None and out["spike_score"]["grad_norm"] is not None
    assert out["time_to_target"]["reached"] and out["time_to_target"]["steps"] <= 2000
    assert out["final_loss"] is None  # diverged: inf -> null
    assert 0 < out["spike_step_share"] < 0.2 and out["total_severity"] > 0
    assert out["recovery_steps"]["max"] <= out["recovery_steps"]["sum"]
    missed = summarize(recs, target=0.0)["time_to_target"]
    assert missed["reached"] is False and missed["steps"] is None


def test_spike_step_share():
    class E:
        onset, recovery_steps = 10, 5

    assert spike_step_share([E()], range(100)) == pytest.approx(0.05)
    assert spike_step_share([], range(10)) == 0.0
