"""AdamW with decoupled weight decay on matrices only, and the update-to-weight ratio probe."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spikebench.config import Config


def make_optimizer(model: torch.nn.Module, cfg: Config) -> torch.optim.AdamW:
    """AdamW; matrices decay, embeddings and norms/biases opt in by config.

    Fused: one kernel per step, and it honours ``found_inf``, so skipping a bad step needs
    no host sync.
    """
    o = cfg.optim
    decay, no_decay = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if isinstance(module, torch.nn.Embedding):
                wants = o.wd_embeddings
            elif isinstance(module, torch.nn.LayerNorm | torch.nn.RMSNorm) or name == "bias":
                wants = o.wd_norms
            else:
                wants = p.dim() >= 2
            (decay if wants else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": o.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.eps, fused=True)


def update_ratio(params: Sequence[torch.Tensor], before: Sequence[torch.Tensor]) -> torch.Tensor:
    """RMS of the update over RMS of the weights, over all parameters (a device scalar)."""
    diff = torch.stack([(p - b).pow(2).sum() for p, b in zip(params, before, strict=True)]).sum()
    norm = torch.stack([b.pow(2).sum() for b in before]).sum()
    return (diff / norm.clamp_min(1e-30)).sqrt()
