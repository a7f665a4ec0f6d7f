"""Skip-step (OLMo-core): skip the update of a step whose loss or grad norm is an outlier.

The device keeps the last ``window`` losses and grad norms of applied updates; once the
window is full, a step more than ``k`` standard deviations above either mean is skipped
through the optimizer's ``found_inf`` (the contract the loop's divergence guard uses), so
weights and optimizer state stay as they were and nothing is read back to the host.
"""

from __future__ import annotations

import torch


class SkipStep:
    def __init__(self, window: int, k: float, device: torch.device):
        self.window, self.k = window, k
        self.values = torch.zeros(2, window, device=device)  # losses, grad norms
        self.n = torch.zeros((), dtype=torch.long, device=device)

    def check(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> torch.Tensor:
        """A device bool: skip this step. Then records the step's values if it is applied."""
        x = torch.stack([loss.float(), grad_norm.float()])
        mean = self.values.mean(dim=1)
        sd = self.values.std(dim=1, correction=0)
        full = self.n >= self.window
        skip = full & (x > mean + self.k * sd).any()
        keep = ~skip & torch.isfinite(x).all()
        slot = (self.n % self.window).view(1)
        old = self.values.index_select(1, slot).squeeze(1)
        self.values.index_copy_(1, slot, torch.where(keep, x, old).unsqueeze(1))
        self.n = self.n + keep.long()
        return skip

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"values": self.values, "n": self.n}

    def load_state_dict(self, d: dict[str, torch.Tensor]) -> None:
        dev = self.values.device
        self.values, self.n = d["values"].to(dev), d["n"].to(dev)
