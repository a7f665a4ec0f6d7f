"""ZClip for any loop: clip the gradient norm to a bound from its own recent history.

``clip = ZClipper()`` then, between ``backward()`` and ``optimizer.step()``,
``bound = clip(model.parameters())``: the built-in loop's algorithm
(:class:`spikebench.train.zclip.ZClip`, Kumar et al. 2025), the same code, with the global
grad norm measured here (``torch.nn.utils.get_total_norm``) unless given. Every operation
is a device tensor op: no host sync.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from spikebench.train.zclip import ZClip


class ZClipper(ZClip):
    """``ZClipper(alpha=0.97, z=2.5, warmup=25)``; ``clip(parameters, norm=None)`` scales
    the gradients down to the bound and returns the bound applied (a device scalar, +inf
    during the warmup). ``norm`` is the gradients' global norm when the loop has it already
    (e.g. after a fixed clip, the norm as clipped); :attr:`norm` is the last one judged.

    The statistics live on the device of the first gradients clipped (or ``device``);
    ``state_dict``/``load_state_dict`` carry them.
    """

    def __init__(self, alpha: float = 0.97, z: float = 2.5, warmup: int = 25,
                 device: torch.device | str | None = None):
        if not 0 < alpha < 1:
            raise ValueError(f"ZClipper: alpha = {alpha}; must be in (0, 1)")
        if not z > 0:
            raise ValueError(f"ZClipper: z = {z}; must be > 0")
        if warmup < 1:
            raise ValueError(f"ZClipper: warmup = {warmup}; at least 1")
        super().__init__(alpha, z, warmup, torch.device(device or "cpu"))
        self._placed = device is not None
        self.norm: torch.Tensor | None = None

    def __call__(self, parameters: Iterable[torch.Tensor] | torch.Tensor,
                 norm: torch.Tensor | float | None = None) -> torch.Tensor:
        params = [parameters] if torch.is_tensor(parameters) else list(parameters)
        grads = [p.grad for p in params if p.grad is not None]
        if not self._placed and grads:
            self.to(grads[0].device)
            self._placed = True
        if norm is None:
            norm = torch.nn.utils.get_total_norm(grads, foreach=True) if grads else \
                torch.zeros((), device=self.mean.device)
        elif not torch.is_tensor(norm):
            norm = torch.tensor(float(norm), device=self.mean.device)
        self.norm = norm
        with torch.no_grad():
            return self.clip_(grads, norm)
