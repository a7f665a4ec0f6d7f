"""The deterministic training batch stream: paired randomness, curricula, stream faults.

The batch at step ``t`` is a pure function of ``(train.seed, t, data settings)``: its window
offsets come from a fresh generator seeded ``derive_seed(seed, "data", t)``. Two runs with
the same seed therefore see identical batches whatever their optimiser, precision or
clipping, which makes their loss curves directly comparable (paired), and a resumed run
needs no saved data-loader state.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from spikebench.config import Config, ConfigError
from spikebench.corpus import Corpus, derive_seed, domain_text

# Generated "domain" text for stream faults: enough that windows rarely repeat.
_DOMAIN_POOL_BYTES = 1 << 18


def gather_windows(tokens, offsets: torch.Tensor, length: int) -> torch.Tensor:
    """Rows ``tokens[o : o + length]`` for each offset, as an int64 CPU tensor.

    ``tokens`` is a 1-D torch tensor or a numpy array / memmap; for the latter only the
    requested windows are read from disk.
    """
    idx = offsets[:, None] + torch.arange(length)
    if isinstance(tokens, torch.Tensor):
        return tokens[idx].long()
    return torch.from_numpy(np.asarray(tokens[idx.numpy()], dtype=np.int64))


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


class BatchStream:
    """Training batches ``(x, y)`` of shape ``(data.batch_size, seq_len_at(step))``, int64,
    on ``device``; ``y`` is ``x`` shifted by one token.

    Baseline: ``data.batch_size`` offsets drawn uniformly from ``[0, n_train - seq_len)``
    with ``torch.randint`` on the step's generator; each window holds ``seq_len + 1`` tokens.

    Curricula (``curriculum.kind``), ramping over the first ``R = ratio * train.steps`` steps:

    * ``seqlen``: the window length grows linearly from ``seqlen_start`` (step 0) to
      ``data.seq_len`` (step ``R``), rounded down to a multiple of 8 and clamped to
      ``[seqlen_start, seq_len]``. Rows are the baseline's windows truncated, so
      ``x[:, :T]`` equals the baseline's ``x[:, :T]`` (the run stays paired).
    * ``easy_first``: after the baseline's offsets, the same generator draws
      ``(pool_factor - 1) * B`` more, giving a pool of ``pool_factor * B`` windows whose first
      ``B`` are the baseline's. Windows are ranked by unigram token entropy (ties by draw
      order); the easiest ``max(B, round(frac * pool))`` are eligible, where ``frac`` grows
      linearly from ``1 / pool_factor`` at step 0 to 1 at step ``R``; the batch is the first
      ``B`` eligible windows in draw order. So step 0 gets the ``B`` easiest of the pool, and
      from step ``R`` on every window is eligible and the batch equals the baseline's exactly
      (the extra draws are then skipped; they come after the baseline's, so that changes
      nothing).
    * ``both``: easy_first selection, ranking the truncated windows of the seqlen schedule.

    Stream faults (``faults.target = "stream"``, ``burst != "none"``): for steps in
    ``[int(at * steps), min(start + length, steps))`` the first ``ceil(rows * B)`` rows are
    replaced (x and y together) by fault windows drawn from a generator seeded
    ``derive_seed(seed, "faults", step)``: ``random_bytes`` uniform ids in
    ``[0, vocab_size)``; ``repeat`` one fixed window of the train split, the same for every
    row and step; ``domain`` random windows of :func:`spikebench.corpus.domain_text` (its
    byte values taken as token ids modulo ``vocab_size`` for .bin corpora). The faulted
    batch indices are :attr:`fault_steps`; the injection is recorded in :attr:`injections`
    at construction (omitted when the range is empty) in logged step numbers: the batch at
    index i trains logged step i + 1, so ``first_step``/``last_step`` (both inclusive) are
    what a metrics log and a report show.

    On CUDA each batch is copied from pinned memory with ``non_blocking=True``; nothing in
    :meth:`batch` waits for the device.
    """

    def __init__(self, corpus: Corpus, cfg: Config, device: torch.device | str):
        self.corpus = corpus
        self.cfg = cfg
        self.device = torch.device(device)
        self.batch_size = cfg.data.batch_size
        self.seq_len = cfg.data.seq_len
        self.seed = cfg.train.seed
        self.injections: list[dict] = []
        self._memmap = not isinstance(corpus.train, torch.Tensor)
        self._pin = self.device.type == "cuda"
        self._ramp = cfg.curriculum.ratio * cfg.train.steps
        kind = cfg.curriculum.kind
        self._seqlen = kind in ("seqlen", "both")
        self._easy_first = kind in ("easy_first", "both") and cfg.curriculum.pool_factor > 1
        # Offsets are drawn from [0, n_train - seq_len): every full window fits.
        self._max_offset = len(corpus.train) - self.seq_len
        if self._max_offset < 1:
            raise ConfigError(
                f"data.seq_len = {self.seq_len}: the train split has only {len(corpus.train)} "
                "tokens, needs more than seq_len + 1"
            )
        self._val: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._setup_faults()

    # -- schedule --------------------------------------------------------------------------

    def seq_len_at(self, step: int) -> int:
        """Tokens per row at ``step`` (``data.seq_len`` unless the seqlen curriculum ramps)."""
        if not self._seqlen or step >= self._ramp:
            return self.seq_len
        start = self.cfg.curriculum.seqlen_start
        grown = start + (self.seq_len - start) * step / self._ramp
        return min(self.seq_len, max(start, int(grown) // 8 * 8))

    def _eligible_fraction(self, step: int) -> float:
        inv = 1.0 / self.cfg.curriculum.pool_factor
        return inv + (1.0 - inv) * min(1.0, step / self._ramp)

    # -- batches ---------------------------------------------------------------------------

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)`` for 0-based ``step``; a pure function of seed, step and data settings."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        length = self.seq_len_at(step) + 1
        g = torch.Generator().manual_seed(derive_seed(self.seed, "data", step))
        offsets = torch.randint(0, self._max_offset, (self.batch_size,), generator=g)
        windows = self._check_ids(gather_windows(self.corpus.train, offsets, length),
                                  f"at step {step + 1}")
        if self._easy_first and step < self._ramp:
            windows = self._easiest(windows, g, step, length)
        self._inject(windows, step)
        return self._to_device(windows)

    def _easiest(self, windows, g, step, length) -> torch.Tensor:
        """The first B eligible windows (in draw order) of the pool ``windows + extra``."""
        b = self.batch_size
        n_extra = (self.cfg.curriculum.pool_factor - 1) * b
        extra = torch.randint(0, self._max_offset, (n_extra,), generator=g)
        pool = torch.cat([windows, gather_windows(self.corpus.train, extra, length)])
        k = max(b, round(self._eligible_fraction(step) * len(pool)))
        easiest = torch.argsort(window_entropy(pool), stable=True)[:k]
        eligible = torch.zeros(len(pool), dtype=torch.bool)
        eligible[easiest] = True
        return pool[eligible.nonzero().squeeze(1)[:b]]

    def _check_ids(self, windows: torch.Tensor, where: str) -> torch.Tensor:
        """Refuse a token id outside the model's vocabulary (a .bin corpus is only sampled
        when loaded) before it can become an index error. Host-side, before the copy to the
        device: no GPU sync."""
        if self._memmap and int(windows.max()) >= self.corpus.vocab_size:
            raise ConfigError(f"data.corpus = {self.cfg.data.corpus!r}: token id "
                              f"{int(windows.max())} {where} is >= model.vocab_size = "
                              f"{self.corpus.vocab_size}")
        return windows

    def _to_device(self, windows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self._pin:
            windows = windows.pin_memory()
        windows = windows.to(self.device, non_blocking=True)
        # Contiguous copies: models commonly call .view() on targets.
        return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()

    def val_batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``train.eval_batches`` fixed validation batches of full ``data.seq_len``.

        Windows are evenly spaced over the validation split (no randomness, no seed), so every
        config with the same corpus, seq_len, batch_size and eval_batches evaluates on the
        same tokens; contamination and stream faults never touch them. Built once, cached.
        """
        if self._val is None:
            val, length = self.corpus.val, self.seq_len + 1
            count = self.cfg.train.eval_batches * self.batch_size
            if len(val) < length:
                raise ConfigError(
                    f"data.seq_len = {self.seq_len}: the val split has only {len(val)} tokens"
                )
            # Integer spacing: exact at any corpus size (float linspace is not, past 2**24).
            offsets = torch.arange(count) * (len(val) - length) // max(1, count - 1)
            windows = self._check_ids(gather_windows(val, offsets, length),
                                      "in the validation batches")
            self._val = [self._to_device(w) for w in windows.split(self.batch_size)]
        return self._val

    # -- stream faults ---------------------------------------------------------------------

    def _setup_faults(self) -> None:
        f, steps = self.cfg.faults, self.cfg.train.steps
        self.fault_steps = range(0)
        if f.target != "stream" or f.burst == "none":
            return
        start = int(f.at * steps)
        self.fault_steps = range(start, min(start + f.length, steps))
        # The epsilon keeps e.g. 0.3 * 10 = 3.0000000000000004 from becoming 4 rows.
        self._fault_rows = min(self.batch_size, math.ceil(f.rows * self.batch_size - 1e-9))
        if f.burst == "repeat":
            g = torch.Generator().manual_seed(derive_seed(self.seed, "faults", "repeat"))
            at = torch.randint(0, self._max_offset, (1,), generator=g)
            self._repeat_doc = gather_windows(self.corpus.train, at, self.seq_len + 1)[0]
        elif f.burst == "domain":
            rng = np.random.default_rng(derive_seed(self.seed, "faults", "domain"))
            text = domain_text(self.cfg, rng, max(_DOMAIN_POOL_BYTES, self.seq_len + 1))
            ids = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
            self._domain = ids % self.corpus.vocab_size
        if len(self.fault_steps):
            self.injections.append(
                {
                    "kind": f.burst,
                    "target": "stream",
                    "first_step": self.fault_steps.start + 1,
                    "last_step": self.fault_steps.stop,
                    "rows": self._fault_rows,
                }
            )

    def _inject(self, windows: torch.Tensor, step: int) -> None:
        """Overwrite the first fault rows of ``windows`` in place if ``step`` is faulted."""
        if step not in self.fault_steps:
            return
        n, length = self._fault_rows, windows.shape[1]
        g = torch.Generator().manual_seed(derive_seed(self.seed, "faults", step))
        burst = self.cfg.faults.burst
        if burst == "random_bytes":
            windows[:n] = torch.randint(0, self.corpus.vocab_size, (n, length), generator=g)
        elif burst == "repeat":
            windows[:n] = self._repeat_doc[:length]
        elif burst == "domain":
            at = torch.randint(0, len(self._domain) - self.seq_len, (n,), generator=g)
            windows[:n] = gather_windows(self._domain, at, length)
