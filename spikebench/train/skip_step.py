"""Skip-step (OLMo-core): skip the update of a step whose loss or grad norm is an outlier.

The device keeps the last ``window`` losses and grad norms, of skipped steps too (as
OLMo-core does, so a lasting shift of level stops counting as an outlier once the window
holds it). Once half the window is filled, a step more than ``k`` standard deviations above
either mean is skipped through the optimizer's ``found_inf`` (the contract the loop's
divergence guard uses): weights and optimizer state stay as they were, and nothing is read
back to the host.

The detector is shared with the public :class:`spikebench.responses.SkipStepOptimizer`,
which may judge one series (the grad norm alone) instead of two: ``rows``.
"""

from __future__ import annotations

import torch


class SkipStep:
    def __init__(self, window: int, k: float, device: torch.device, rows: int = 2):
        self.window, self.k = window, k
        self.values = torch.zeros(rows, window, device=device)  # losses, grad norms
        self.n = torch.zeros((), dtype=torch.long, device=device)

    def check(self, *values: torch.Tensor) -> torch.Tensor:
        """A device bool: skip this step. Then records the step's values (if all finite).
        One device scalar per row, in the rows' order: the loop's ``(loss, grad_norm)``."""
        if len(values) != len(self.values):
            raise ValueError(f"SkipStep.check: {len(values)} values for {len(self.values)} rows")
        x = torch.stack([v.float() for v in values])
        count = self.n.clamp(max=self.window)
        filled = (torch.arange(self.window, device=self.n.device) < count).float()
        mean = (self.values * filled).sum(dim=1) / count.clamp(min=1)
        sd = (((self.values - mean[:, None]) ** 2 * filled).sum(dim=1)
              / count.clamp(min=1)).sqrt()
        ready = self.n >= max(2, self.window // 2)
        skip = ready & (x > mean + self.k * sd).any()
        keep = torch.isfinite(x).all()
        slot = (self.n % self.window).view(1)
        old = self.values.index_select(1, slot).squeeze(1)
        self.values.index_copy_(1, slot, torch.where(keep, x, old).unsqueeze(1))
        self.n = self.n + keep.long()
        return skip

    def to(self, device: torch.device) -> SkipStep:
        """Move the window to ``device`` (no-op where it is)."""
        self.values, self.n = self.values.to(device), self.n.to(device)
        return self

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"values": self.values, "n": self.n}

    def load_state_dict(self, d: dict[str, torch.Tensor]) -> None:
        dev = self.values.device
        self.values, self.n = d["values"].to(dev), d["n"].to(dev)
