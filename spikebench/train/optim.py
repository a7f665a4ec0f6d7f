"""AdamW with decoupled weight decay on matrices only, and the update-to-weight ratio probe."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spikebench.config import Config


def param_groups(model: torch.nn.Module, cfg: Config) -> list[dict]:
    """AdamW's two groups: matrices decay, embeddings and norms/biases opt in by config.

    A parameter shared between modules (a language model's output head tied to its token
    embedding, as GPT-2's is) goes in once, by the first module that holds it (the
    embedding, which comes first): AdamW refuses a parameter in two groups.
    """
    o = cfg.optim
    decay, no_decay = [], []
    seen: set[int] = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            if isinstance(module, torch.nn.Embedding):
                wants = o.wd_embeddings
            elif isinstance(module, torch.nn.LayerNorm | torch.nn.RMSNorm) or name == "bias":
                wants = o.wd_norms
            else:
                wants = p.dim() >= 2
            (decay if wants else no_decay).append(p)
    return [{"params": decay, "weight_decay": o.weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: torch.nn.Module, cfg: Config) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`. Fused: one kernel per step, and it honours
    ``found_inf``, so skipping a bad step needs no host sync."""
    o = cfg.optim
    return torch.optim.AdamW(param_groups(model, cfg), lr=o.lr, betas=(o.beta1, o.beta2),
                             eps=o.eps, fused=True)


def update_ratio(params: Sequence[torch.Tensor], before: Sequence[torch.Tensor]) -> torch.Tensor:
    """RMS of the update over RMS of the weights, over all parameters (a device scalar)."""
    diff = torch.stack([(p - b).pow(2).sum() for p, b in zip(params, before, strict=True)]).sum()
    norm = torch.stack([b.pow(2).sum() for b in before]).sum()
    return (diff / norm.clamp_min(1e-30)).sqrt()
