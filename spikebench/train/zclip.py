"""ZClip (Kumar et al. 2025): clip the gradient norm to a bound from its own recent history.

The device keeps an exponential moving mean and variance of the global grad norm (decay
``alpha``); once ``warmup`` steps have set them (their plain mean and variance), a norm
more than ``z`` standard deviations above the mean is scaled down to mean + z * sd, and the
statistics take the clipped norm. Every operation is a device tensor op: no host sync.

The public :class:`spikebench.responses.ZClipper` is this class with the norm measured.
"""

from __future__ import annotations

import torch


class ZClip:
    def __init__(self, alpha: float, z: float, warmup: int, device: torch.device):
        self.alpha, self.z, self.warmup = alpha, z, warmup
        self.mean = torch.zeros((), device=device)
        self.var = torch.zeros((), device=device)
        self.m2 = torch.zeros((), device=device)  # sum of squared deviations, during warmup
        self.n = torch.zeros((), dtype=torch.long, device=device)

    def bound(self) -> torch.Tensor:
        """The largest norm allowed now: +inf until the warmup has set the statistics."""
        ready = self.n >= self.warmup
        return torch.where(ready, self.mean + self.z * self.var.clamp_min(0).sqrt(),
                           torch.full_like(self.mean, float("inf")))

    def clip_(self, grads: list[torch.Tensor], norm: torch.Tensor) -> torch.Tensor:
        """Scale ``grads`` (whose global norm is ``norm``) down to the bound; update the
        statistics with the norm as clipped. Returns the bound that was applied."""
        bound = self.bound()
        coef = (bound / (norm + 1e-6)).clamp(max=1.0)
        coef = torch.where(torch.isfinite(coef), coef, torch.ones_like(coef))
        if grads:
            torch._foreach_mul_(grads, coef)
        self._update(torch.minimum(norm, bound))
        return bound

    def _update(self, g: torch.Tensor) -> None:
        g = g.float()
        n1 = self.n + 1
        w_mean = self.mean + (g - self.mean) / n1  # Welford, during warmup
        w_m2 = self.m2 + (g - self.mean) * (g - w_mean)
        e_mean = self.alpha * self.mean + (1 - self.alpha) * g
        e_var = self.alpha * self.var + (1 - self.alpha) * (g - e_mean) ** 2
        warm = self.n < self.warmup
        ok = torch.isfinite(g)  # a non-finite norm (divergence) leaves the statistics alone
        self.mean = torch.where(ok, torch.where(warm, w_mean, e_mean), self.mean)
        self.var = torch.where(ok, torch.where(warm, w_m2 / n1, e_var), self.var)
        self.m2 = torch.where(ok & warm, w_m2, self.m2)
        self.n = torch.where(ok, n1, self.n)

    def to(self, device: torch.device) -> ZClip:
        """Move the statistics to ``device`` (no-op where they are)."""
        self.mean, self.var, self.m2, self.n = (t.to(device) for t in (
            self.mean, self.var, self.m2, self.n))
        return self

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean, "var": self.var, "m2": self.m2, "n": self.n}

    def load_state_dict(self, d: dict[str, torch.Tensor]) -> None:
        dev = self.mean.device
        self.mean, self.var, self.m2, self.n = (d[k].to(dev) for k in ("mean", "var", "m2", "n"))
