"""Token windows cut from a 1-D token array: what every batch, curriculum and fault is made of."""

from __future__ import annotations

import numpy as np
import torch


def gather_windows(tokens, offsets: torch.Tensor, length: int) -> torch.Tensor:
    """Rows ``tokens[o : o + length]`` for each offset, as an int64 CPU tensor.

    ``tokens`` is a 1-D torch tensor or a numpy array / memmap; for the latter only the
    requested windows are read from disk.
    """
    idx = offsets[:, None] + torch.arange(length)
    if isinstance(tokens, torch.Tensor):
        return tokens[idx].long()
    return torch.from_numpy(np.asarray(tokens[idx.numpy()], dtype=np.int64))
