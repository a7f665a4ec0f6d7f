"""The article's strategy table and headline claims, as data (paraphrased, not quoted).

A widely shared article on "taming loss spikes" prints one row per stabilisation strategy
(where it applies, its expected effect, its difficulty) and claims the combined recipe
raised training success by 40% and cut training time by 25%. The report prints these beside
the measurements; a strategy the article does not list says so rather than invent a claim.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE_NOTE = ("The article's columns (where it applies, expected effect, difficulty) "
               "paraphrase the article's strategy table; they are its claims, not measurements.")


@dataclass(frozen=True)
class Claim:
    """One row of the article's table: what it says about a strategy."""

    name: str
    applies: str
    effect: str
    difficulty: str
    in_article: bool = True


NOT_IN_ARTICLE = "not in the article's table"

# Keys are the strategy keys of arms.classify_arm.
CLAIMS: dict[str, Claim] = {
    "baseline": Claim("Baseline (none of the strategies)", "reference", "reference",
                      "reference", in_article=False),
    "warmup_cosine": Claim("Warmup + cosine decay", "all pretraining, early steps",
                           "stable start, fewer early spikes", "low"),
    "clip": Claim("Gradient clipping (clip value 1.0)", "exploding gradients",
                  "prevents gradient explosions", "low"),
    "bf16": Claim("BF16 mixed precision", "modern GPUs",
                  "fp32 range at half cost, no loss scaling", "low"),
    "fp16_loss_scaling": Claim("FP16 + loss scaling", "older GPUs without bf16",
                               "half-precision speed; scaling avoids gradient underflow",
                               "medium"),
    "curriculum": Claim("Curriculum (short/easy data first)", "short/easy data first",
                        "smoother early training, fewer early spikes", "medium"),
    "data_cleaning": Claim("Data dedup & cleaning", "noisy web corpora",
                           "fewer data-induced spikes", "medium"),
    "rollback": Claim("Checkpoints + automatic rollback", "loss above its mean + 3 sigma",
                      "recover from a spike without restarting the run", "medium"),
    "skip_step": Claim("Skip the update of an outlier step", NOT_IN_ARTICLE, NOT_IN_ARTICLE,
                       NOT_IN_ARTICLE, in_article=False),
    "adaptive_clip": Claim("Adaptive gradient clipping", NOT_IN_ARTICLE, NOT_IN_ARTICLE,
                           NOT_IN_ARTICLE, in_article=False),
    "recipe": Claim("Combined recipe", "all of the above together",
                    "+40% training success, -25% training time", "medium"),
}

GENERIC = Claim("", NOT_IN_ARTICLE, NOT_IN_ARTICLE, NOT_IN_ARTICLE, in_article=False)


def claim_for(key: str) -> Claim:
    """The article's row for a strategy key; a generic 'not in the article' row otherwise."""
    return CLAIMS.get(key, GENERIC)


@dataclass(frozen=True)
class Headline:
    """A headline claim about the combined recipe vs the baseline, as a relative change.

    ``claimed`` is the relative change the article promises (+0.40 = +40%); its sign is the
    direction that counts as better.
    """

    key: str
    text: str
    metric: str
    claimed: float


HEADLINES: tuple[Headline, ...] = (
    Headline("success", "+40% training success",
             "success rate (completed, no divergence, target reached)", 0.40),
    Headline("time_steps", "-25% training time",
             "steps to target (restricted mean: a miss or divergence counts the budget)", -0.25),
    Headline("time_seconds", "-25% training time",
             "wall time to target, s (restricted mean: a miss counts the whole run)", -0.25),
)
