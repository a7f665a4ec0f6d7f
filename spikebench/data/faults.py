"""Fault injection, all of it: bad-data bursts in the batch stream, contamination planted in
the corpus, and the LR shock; each recorded so a report can tell injected spikes from
spontaneous ones.

Every draw comes from a stream derived from ``train.seed`` and the fault's name (and step),
so every arm of a seed sees the same faults at the same steps. Injections are recorded in
logged step numbers: the batch at 0-based index i trains logged step i + 1, and
``first_step``/``last_step`` are both inclusive.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from spikebench.config import Config
from spikebench.data.seeds import derive_seed
from spikebench.data.sources import BYTE_VOCAB, read_text_source
from spikebench.data.windows import gather_windows
from spikebench.errors import UserError

# Generated "domain" text for stream faults: enough that windows rarely repeat.
_DOMAIN_POOL_BYTES = 1 << 18


class StreamFaults:
    """A burst of bad rows in the batch stream (``faults.target = "stream"``).

    For steps in ``[int(at * steps), min(start + length, steps))`` the first
    ``ceil(rows * B)`` rows of the batch are replaced (x and y together) by fault windows
    drawn from a generator seeded ``derive_seed(seed, "faults", step)``: ``random_bytes``
    uniform ids in ``[0, vocab_size)``; ``repeat`` one fixed window of the train split, the
    same for every row and step; ``domain`` random windows of :func:`domain_text` (its byte
    values taken as token ids modulo ``vocab_size`` for .bin corpora). ``steps`` is empty
    when no stream burst is configured.
    """

    def __init__(self, cfg: Config, train_tokens, vocab_size: int, max_offset: int):
        f, n_steps = cfg.faults, cfg.train.steps
        self.burst = f.burst
        self.seed = cfg.train.seed
        self.seq_len = cfg.data.seq_len
        self.vocab_size = vocab_size
        self.steps = range(0)
        if f.target != "stream" or f.burst == "none":
            return
        start = int(f.at * n_steps)
        self.steps = range(start, min(start + f.length, n_steps))
        batch = cfg.data.batch_size
        # The epsilon keeps e.g. 0.3 * 10 = 3.0000000000000004 from becoming 4 rows.
        self.rows = min(batch, math.ceil(f.rows * batch - 1e-9))
        if f.burst == "repeat":
            g = torch.Generator().manual_seed(derive_seed(self.seed, "faults", "repeat"))
            at = torch.randint(0, max_offset, (1,), generator=g)
            self._repeat_doc = gather_windows(train_tokens, at, self.seq_len + 1)[0]
        elif f.burst == "domain":
            rng = np.random.default_rng(derive_seed(self.seed, "faults", "domain"))
            text = domain_text(cfg, rng, max(_DOMAIN_POOL_BYTES, self.seq_len + 1))
            ids = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
            self._domain = ids % vocab_size

    def record(self) -> list[dict]:
        """The injection as logged steps (empty when the range is empty)."""
        if not len(self.steps):
            return []
        return [{"kind": self.burst, "target": "stream", "first_step": self.steps.start + 1,
                 "last_step": self.steps.stop, "rows": self.rows}]

    def apply(self, windows: torch.Tensor, step: int) -> None:
        """Overwrite the first fault rows of ``windows`` in place if ``step`` is faulted."""
        if step not in self.steps:
            return
        n, length = self.rows, windows.shape[1]
        g = torch.Generator().manual_seed(derive_seed(self.seed, "faults", step))
        if self.burst == "random_bytes":
            windows[:n] = torch.randint(0, self.vocab_size, (n, length), generator=g)
        elif self.burst == "repeat":
            windows[:n] = self._repeat_doc[:length]
        elif self.burst == "domain":
            at = torch.randint(0, len(self._domain) - self.seq_len, (n,), generator=g)
            windows[:n] = gather_windows(self._domain, at, length)


def lr_shock_steps(cfg: Config) -> range:
    """0-based indices of the steps whose LR is multiplied by ``faults.lr_shock_factor``."""
    f = cfg.faults
    if f.lr_shock_at is None:
        return range(0)
    start = int(f.lr_shock_at * cfg.train.steps)
    return range(start, min(start + f.lr_shock_steps, cfg.train.steps))


def injections(cfg: Config, stream: StreamFaults, contamination: list[dict]) -> list[dict]:
    """Every injection of a run, for its ``meta.json``: stream burst, LR shock, corpus."""
    out = stream.record()
    shocked = lr_shock_steps(cfg)
    if shocked:
        out.append({"kind": "lr_shock", "factor": cfg.faults.lr_shock_factor,
                    "first_step": shocked.start + 1, "last_step": shocked.stop})
    if contamination:
        out.append({"kind": cfg.faults.burst, "target": "corpus",
                    "segments": len(contamination)})
    return out


def numeric_table_text(rng: np.random.Generator, n_bytes: int) -> bytes:
    """``n_bytes`` of CSV-like numeric tables ("12.5,3,-0.75\\n" rows), a domain far from
    prose or code. Each table has its own column count and per-column decimals; tables are
    separated by a blank line. Deterministic given ``rng``'s state."""
    parts: list[bytes] = []
    size = 0
    while size < n_bytes:
        n_rows, n_cols = int(rng.integers(8, 64)), int(rng.integers(2, 9))
        decimals = rng.integers(0, 4, n_cols)
        scale = 10.0 ** rng.integers(0, 4, n_cols)
        values = rng.standard_normal((n_rows, n_cols)) * scale
        rows = (
            ",".join(f"{v:.{d}f}" for v, d in zip(row, decimals, strict=True)) for row in values
        )
        table = ("\n".join(rows) + "\n\n").encode()
        parts.append(table)
        size += len(table)
    return b"".join(parts)[:n_bytes]


def domain_text(cfg: Config, rng: np.random.Generator, min_bytes: int) -> bytes:
    """Text of another domain for the ``domain`` burst, at least ``min_bytes`` long.

    ``faults.domain_corpus`` (any text source, ``"stdlib"`` included, capped at
    ``data.max_bytes``) repeated as needed to reach ``min_bytes``; when empty, generated
    numeric tables drawn from ``rng``.
    """
    source = cfg.faults.domain_corpus
    if not source:
        return numeric_table_text(rng, min_bytes)
    if Path(source).suffix.lower() == ".bin":
        raise UserError(f"faults.domain_corpus = {source!r}: must be text, not a .bin file")
    data = read_text_source(source, cfg, "faults.domain_corpus").data
    return data * math.ceil(min_bytes / len(data))


def contaminate(train: torch.Tensor, cfg: Config) -> list[dict]:
    """Overwrite ~``faults.corpus_share`` of ``train`` (in place) with bad segments.

    ``round(corpus_share * n / segment_bytes)`` segments (at least 1, at most ``n //
    segment_bytes``) of ``segment_bytes`` tokens each, non-overlapping (they may touch),
    uniformly placed. Content by ``faults.burst``: ``random_bytes`` uniform bytes;
    ``repeat`` one segment-sized window of the clean train split, copied into every segment;
    ``domain`` windows of :func:`domain_text`. Segments replace tokens, so lengths and the
    validation split are unchanged. All draws come from one RNG seeded with
    ``derive_seed(train.seed, "faults")``: positions first, then content. Returns the
    segments as ``{"start", "end", "kind"}`` token offsets (end exclusive), sorted by start.
    """
    f = cfg.faults
    n, seg = len(train), f.segment_bytes
    if seg > n:
        raise UserError(f"faults.segment_bytes = {seg}: must be <= the train split ({n} tokens)")
    rng = np.random.default_rng(derive_seed(cfg.train.seed, "faults"))
    n_seg = min(max(1, round(f.corpus_share * n / seg)), n // seg)
    if f.corpus_layout == "block":
        # End to end from where a sequential reader is at step int(at * steps).
        reader = int(f.at * cfg.train.steps) * cfg.data.batch_size * cfg.data.seq_len
        first = min(reader % max(1, n - cfg.data.seq_len), n - n_seg * seg)
        starts = first + np.arange(n_seg) * seg
    else:
        # Sorted gaps in the free space, shifted by the segments before them: no overlaps.
        gaps = np.sort(rng.integers(0, n - n_seg * seg + 1, n_seg))
        starts = gaps + np.arange(n_seg) * seg
    content = _segment_content(f.burst, n_seg, seg, train, cfg, rng)
    idx = torch.from_numpy(starts[:, None] + np.arange(seg))
    train[idx] = torch.from_numpy(content)
    return [{"start": int(s), "end": int(s) + seg, "kind": f.burst} for s in starts]


def _segment_content(kind, n_seg, seg, train, cfg, rng) -> np.ndarray:
    """``(n_seg, seg)`` uint8 contents for :func:`contaminate`."""
    if kind == "random_bytes":
        return rng.integers(0, BYTE_VOCAB, (n_seg, seg), dtype=np.uint8)
    if kind == "repeat":
        at = int(rng.integers(0, len(train) - seg + 1))
        doc = train[at : at + seg].numpy().copy()
        return np.broadcast_to(doc, (n_seg, seg)).copy()
    if kind == "domain":
        text = np.frombuffer(domain_text(cfg, rng, n_seg * seg), dtype=np.uint8)
        offsets = rng.integers(0, len(text) - seg + 1, n_seg)
        return text[offsets[:, None] + np.arange(seg)]
    raise ValueError(f"unknown burst kind {kind!r}")
def contamination_requested(cfg: Config) -> bool:
    return cfg.faults.target == "corpus" and cfg.faults.burst != "none"
