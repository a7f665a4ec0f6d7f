"""The deterministic training batch stream: paired randomness, curricula, stream faults.

The batch at step ``t`` is a pure function of ``(train.seed, t, data settings)``: its window
offsets come from a fresh generator seeded ``derive_seed(seed, "data", t)``. Two runs with
the same seed therefore see identical batches whatever their optimiser, precision or
clipping (paired runs), and a resumed run needs no saved data-loader state.
"""

from __future__ import annotations

import torch

from spikebench.config import Config
from spikebench.data.corpus import Corpus
from spikebench.data.curriculum import Curriculum
from spikebench.data.faults import StreamFaults
from spikebench.data.seeds import derive_seed
from spikebench.data.windows import gather_windows
from spikebench.errors import UserError


class BatchStream:
    """Training batches ``(x, y)`` of shape ``(data.batch_size, seq_len_at(step))``, int64,
    on ``device``; ``y`` is ``x`` shifted by one token.

    Offsets: ``data.batch_size`` drawn uniformly from ``[0, n_train - seq_len)`` with
    ``torch.randint`` on the step's generator; each window holds ``seq_len + 1`` tokens.
    Then the curriculum (:class:`~spikebench.data.curriculum.Curriculum`) may truncate or
    re-pick the windows, and a stream fault
    (:class:`~spikebench.data.faults.StreamFaults`) may overwrite rows. On CUDA each batch
    is copied from pinned memory with ``non_blocking=True``; nothing in :meth:`batch` waits
    for the device.
    """

    def __init__(self, corpus: Corpus, cfg: Config, device: torch.device | str):
        self.corpus = corpus
        self.cfg = cfg
        self.device = torch.device(device)
        self.batch_size = cfg.data.batch_size
        self.seq_len = cfg.data.seq_len
        self.seed = cfg.train.seed
        self._memmap = not isinstance(corpus.train, torch.Tensor)
        self._pin = self.device.type == "cuda"
        self.sequential = cfg.data.order == "sequential"
        self.curriculum = Curriculum(cfg)
        # Offsets are drawn from [0, n_train - seq_len): every full window fits.
        self._max_offset = len(corpus.train) - self.seq_len
        if self._max_offset < 1:
            raise UserError(
                f"data.seq_len = {self.seq_len}: the train split has only {len(corpus.train)} "
                "tokens, needs more than seq_len + 1"
            )
        self._val: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.faults = StreamFaults(cfg, corpus.train, corpus.vocab_size, self._max_offset)

    @property
    def fault_steps(self) -> range:
        """0-based indices of the batches a stream fault overwrites."""
        return self.faults.steps

    @property
    def injections(self) -> list[dict]:
        """The stream fault in logged step numbers (empty when none)."""
        return self.faults.record()

    def seq_len_at(self, step: int) -> int:
        return self.curriculum.seq_len_at(step)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)`` for 0-based ``step``; a pure function of seed, step and data settings."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        length = self.seq_len_at(step) + 1
        g = torch.Generator().manual_seed(derive_seed(self.seed, "data", step))
        if self.sequential:
            first = step * self.batch_size
            offsets = (torch.arange(first, first + self.batch_size) * self.seq_len
                       ) % self._max_offset
        else:
            offsets = torch.randint(0, self._max_offset, (self.batch_size,), generator=g)
        windows = self._check_ids(gather_windows(self.corpus.train, offsets, length),
                                  f"at step {step + 1}")
        if self.curriculum.selects(step):
            windows = self.curriculum.easiest(windows, g, step, self.corpus.train,
                                              self._max_offset)
        self.faults.apply(windows, step)
        return self._to_device(windows)

    def _check_ids(self, windows: torch.Tensor, where: str) -> torch.Tensor:
        """Refuse a token id outside the model's vocabulary (a .bin corpus is only sampled
        when loaded) before it can become an index error. Host-side, before the copy to the
        device: no GPU sync."""
        if self._memmap and int(windows.max()) >= self.corpus.vocab_size:
            raise UserError(f"data.corpus = {self.cfg.data.corpus!r}: token id "
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
                raise UserError(
                    f"data.seq_len = {self.seq_len}: the val split has only {len(val)} tokens"
                )
            # Integer spacing: exact at any corpus size (float linspace is not, past 2**24).
            offsets = torch.arange(count) * (len(val) - length) // max(1, count - 1)
            windows = self._check_ids(gather_windows(val, offsets, length),
                                      "in the validation batches")
            self._val = [self._to_device(w) for w in windows.split(self.batch_size)]
        return self._val
