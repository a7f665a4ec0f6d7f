"""Curricula: short sequences first (seq-len warmup, Li et al. 2022) and easy windows first.

Both ramp over the first ``R = curriculum.ratio * train.steps`` steps and never break the
pairing of runs: a seq-len row is the baseline's window truncated, and an easy-first batch
is picked from a pool whose first ``B`` windows are the baseline's batch.
"""

from __future__ import annotations

import torch

from spikebench.config import Config
from spikebench.data.windows import gather_windows


def window_entropy(windows: torch.Tensor) -> torch.Tensor:
    """Unigram entropy (nats) of the tokens in each row of ``windows`` (2-D).

    Tokens are first relabelled to ``0..U-1`` over the distinct ids present, so the count
    matrix is ``(rows, U)`` whatever the vocabulary size (bytes or a 50k BPE vocab).
    """
    values, ids = torch.unique(windows, return_inverse=True)
    counts = torch.zeros(windows.shape[0], values.numel())
    counts.scatter_add_(1, ids, torch.ones(ids.shape))
    p = counts / windows.shape[1]
    return -torch.special.xlogy(p, p).sum(1)


class Curriculum:
    """``curriculum.kind``: ``seqlen``, ``easy_first``, ``both`` or ``off``.

    * ``seqlen``: the window length grows linearly from ``seqlen_start`` (step 0) to
      ``data.seq_len`` (step ``R``), rounded down to a multiple of 8 and clamped to
      ``[seqlen_start, seq_len]``.
    * ``easy_first``: after the baseline's offsets, the step's generator draws
      ``(pool_factor - 1) * B`` more, a pool of ``pool_factor * B`` windows. Windows are
      ranked by unigram entropy (ties by draw order); the easiest ``max(B, round(frac *
      pool))`` are eligible, ``frac`` growing linearly from ``1 / pool_factor`` at step 0 to
      1 at step ``R``; the batch is the first ``B`` eligible windows in draw order. From step
      ``R`` on the batch is the baseline's exactly (the extra draws are skipped; they come
      after the baseline's, so that changes nothing).
    * ``both``: easy_first selection, ranking the truncated windows of the seqlen schedule.
    """

    def __init__(self, cfg: Config):
        c = cfg.curriculum
        self.seq_len = cfg.data.seq_len
        self.batch_size = cfg.data.batch_size
        self.start = c.seqlen_start
        self.pool_factor = c.pool_factor
        self.ramp = c.ratio * cfg.train.steps
        self.seqlen = c.kind in ("seqlen", "both")
        self.easy_first = c.kind in ("easy_first", "both") and c.pool_factor > 1

    def seq_len_at(self, step: int) -> int:
        """Tokens per row at ``step`` (``data.seq_len`` unless the seqlen curriculum ramps)."""
        if not self.seqlen or step >= self.ramp:
            return self.seq_len
        grown = self.start + (self.seq_len - self.start) * step / self.ramp
        return min(self.seq_len, max(self.start, int(grown) // 8 * 8))

    def selects(self, step: int) -> bool:
        """Whether :meth:`easiest` picks the batch at ``step``."""
        return self.easy_first and step < self.ramp

    def easiest(self, windows: torch.Tensor, g: torch.Generator, step: int, tokens,
                max_offset: int) -> torch.Tensor:
        """The first B eligible windows (in draw order) of the pool ``windows + extra``."""
        b, length = self.batch_size, windows.shape[1]
        extra = torch.randint(0, max_offset, ((self.pool_factor - 1) * b,), generator=g)
        pool = torch.cat([windows, gather_windows(tokens, extra, length)])
        inv = 1.0 / self.pool_factor
        frac = inv + (1.0 - inv) * min(1.0, step / self.ramp)
        k = max(b, round(frac * len(pool)))
        easiest = torch.argsort(window_entropy(pool), stable=True)[:k]
        eligible = torch.zeros(len(pool), dtype=torch.bool)
        eligible[easiest] = True
        return pool[eligible.nonzero().squeeze(1)[:b]]
