"""The spike rules, by name: each one object with an online form fed one finite value at a
time (``update``) and an array form over a whole series (``flags``), the same rule
(:mod:`.rule_base`). The published rules are in :mod:`.published_rules`, the default in
:mod:`.default_rule`.

Rules (``RULES``), with the 0-based index of the first value each can flag (``first_step``,
counting finite values the rule has seen):

========================  ===========================================================  =====
name                      rule                                                         first
========================  ===========================================================  =====
``zscore``                value > mean + 3 sd of the previous 100 values               100
``olmo``                  |value - mean| >= 7 sd of the previous 1000 (OLMo 2 score)   1000
``olmo_online``           value > mean + 6 sd of the previous 128 (OLMo-core)          128
``loss_ratio``            value / min(previous) > 1.1 (Li et al. 2022), loss only      1
``persistent``            > 2x mean of previous 100 for more than 4 steps (LLM Foundry) 104
``default``               robust residual, multi-step evidence on the loss; jump rule  1 / 16
========================  ===========================================================  =====
"""

from __future__ import annotations

from typing import Any

from spikebench.spikes.default_rule import DefaultRule
from spikebench.spikes.published_rules import (
    LossRatioRule,
    OlmoOnlineRule,
    OlmoRule,
    PersistentRule,
    ZScoreRule,
)
from spikebench.spikes.rule_base import GRAD_NORM, LOSS, NeverRule, Rule, metric_kind

__all__ = ["GRAD_NORM", "LOSS", "RULES", "DefaultRule", "LossRatioRule", "NeverRule",
           "OlmoOnlineRule", "OlmoRule", "PersistentRule", "Rule", "ZScoreRule", "make_rule",
           "metric_kind"]

RULES: dict[str, type[Rule]] = {
    r.name: r
    for r in (DefaultRule, ZScoreRule, OlmoRule, OlmoOnlineRule, LossRatioRule, PersistentRule)
}


def make_rule(name: str, kind: str = LOSS, **kwargs: Any) -> Rule:
    """Build rule ``name`` for a metric of ``kind``; ValueError lists the rules if unknown."""
    if name not in RULES:
        raise ValueError(f"unknown spike rule {name!r}; choose from: {', '.join(RULES)}")
    cls = RULES[name]
    if kind not in cls.kinds:
        return NeverRule(kind)
    return cls(kind, **kwargs)
