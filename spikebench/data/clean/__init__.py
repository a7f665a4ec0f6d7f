"""Cleaning a byte corpus: near-duplicate removal and quality filters, scored against the
contamination the engine planted. Each cleaner is a pure function over units of text."""

from spikebench.data.clean.dedup import near_duplicates
from spikebench.data.clean.quality import QUALITY_RULES, quality_flags
from spikebench.data.clean.score import removal_scores
from spikebench.data.clean.units import Unit, split_units

__all__ = ["QUALITY_RULES", "Unit", "near_duplicates", "quality_flags", "removal_scores",
           "split_units"]
