import pytest
from fixtures import SPACE, make_study

from spikebench.report.arms import classify_arm, strategy_of
from spikebench.report.data import load_study
from spikebench.report.sections import strategy


def test_arms_map_to_the_articles_strategies(study):
    got = {a: classify_arm(study, a)["key"] for a in study.arms}
    assert got == {"baseline": "baseline", "warmup + cosine": "warmup_cosine", "clip 1.0": "clip",
                   "bf16": "bf16", "fp16 + loss scaling": "fp16_loss_scaling",
                   "curriculum (seq-len warmup)": "curriculum", "recipe": "recipe"}
    clip = classify_arm(study, "clip 1.0")
    assert clip["label"] == "clipping at 1" and clip["changes"] == {"optim.clip": [None, 1.0]}
    assert "clipping at 1" in classify_arm(study, "recipe")["label"]


@pytest.mark.parametrize("key,value,expected", [
    ("schedule.warmup_ratio", 0.0, None),
    ("optim.clip", 0.5, ("clip", "clipping at 0.5")),
    ("optim.clip", None, None),
    ("precision.mode", "fp32", None),
    ("precision.mode", "fp16_noscale", ("fp16_noscale", "fp16 without loss scaling")),
    ("curriculum.kind", "easy_first", ("curriculum", "curriculum (easy_first)")),
    ("data.dedup", True, ("data_cleaning", "data dedup & cleaning")),
    ("data.clean", "off", None),
    ("train.rollback", True, ("rollback", "rollback")),
    ("optim.adaptive_clip", 0.01, ("adaptive_clip", "adaptive clipping")),
    ("optim.clip_mode", "adaptive", ("adaptive_clip", "adaptive clipping")),
    ("model.qk_norm", True, ("qk_norm", "qk-layernorm")),
    ("model.qk_norm", False, None),
    ("model.z_loss", 1e-4, ("z_loss", "z-loss 0.0001")),
    ("model.z_loss", 0.0, None),
    ("model.bias", True, ("unknown", "model.bias")),
    ("optim.clip_mode", "zclip", ("adaptive_clip", "ZClip adaptive clipping")),
    ("optim.clip_mode", "fixed", None),
    ("response.kind", "rollback", ("rollback", "rollback on a spike (PaLM)")),
    ("response.kind", "skip_step", ("skip_step", "skip-step on an outlier (OLMo-core)")),
    ("response.kind", "off", None),
])
def test_strategy_of_one_value(key, value, expected):
    assert strategy_of(key, value) == expected


def test_unknown_combined_and_identical_arms(root):
    arms = {"baseline": {}, "qk": {"model.bias": True},
            "two": {"optim.clip": 1.0, "precision.mode": "bf16"}, "same": {}}
    base = {**{"model.bias": False}, **{k: v for k, v in
                                          {"optim.clip": None, "precision.mode": "fp32"}.items()}}
    space = [SPACE[1], SPACE[2], {"key": "model.bias", "choices": [False, True]}]
    st = load_study(make_study(root, folder="odd", arms=arms, baseline=base, space=space,
                               search=0, seeds=(0,)))
    assert classify_arm(st, "qk") == {"key": "other", "label": "qk",
                                          "changes": {"model.bias": [False, True]}}
    two = classify_arm(st, "two")
    assert two["key"] == "combo" and two["label"] == "clipping at 1 + bf16 mixed precision"
    assert classify_arm(st, "same")["label"] == "same (identical to the baseline)"
    rows = strategy.info(st).rows
    assert rows[1]["claim"]["in_article"] is False
    # One seed: estimates without intervals, not crashes.
    assert rows[0]["final_loss"]["lo"] is None and rows[0]["success"]["n"] == 1
    assert rows[0]["spikes"]["lo"] >= 0  # an exact Poisson interval exists for one seed

