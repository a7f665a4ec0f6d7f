"""Data: corpus sources, the deterministic batch stream, curricula, fault injection, seeds."""

from spikebench.data.batches import BatchStream
from spikebench.data.corpus import Corpus, load_corpus
from spikebench.data.seeds import derive_seed

__all__ = ["BatchStream", "Corpus", "derive_seed", "load_corpus"]
