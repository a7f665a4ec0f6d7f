"""AdamW with decoupled weight decay on matrices only, and the probes of the update and of
Adam's state (spike precursors, recorded on probe steps only)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from spikebench import metrics as M
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
    return update_probes(params, before)[M.UPDATE_RATIO]


def update_probes(params: Sequence[torch.Tensor],
                  before: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The global update norm and the update-to-weight ratio (device scalars, no sync)."""
    diff = torch.stack([(p - b).pow(2).sum() for p, b in zip(params, before, strict=True)]).sum()
    norm = torch.stack([b.pow(2).sum() for b in before]).sum()
    return {M.UPDATE_NORM: diff.sqrt(), M.UPDATE_RATIO: (diff / norm.clamp_min(1e-30)).sqrt()}


# A coordinate's bias-corrected sqrt(v) within this factor of eps counts as "near eps": there
# the update stops being a normalised step (Molybog et al. 2023).
EPS_FACTOR = 10.0


@torch.no_grad()
def adam_probes(opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Adam's second moment against the gradients about to be applied, before the step:
    the mean of g^2 / (v_hat + eps^2) (1 in a steady state; large when gradients outgrow
    the v that normalises them, as Bai et al. 2025 describe before a spike) and the share
    of coordinates whose sqrt(v_hat) is within ``EPS_FACTOR`` of eps. Device scalars, no
    sync; empty before Adam has state (the first step)."""
    ratio, near, count = [], [], 0
    for group in opt.param_groups:
        beta2, eps = group["betas"][1], group["eps"]
        for p in group["params"]:
            st = opt.state.get(p)
            if p.grad is None or not st or "exp_avg_sq" not in st:
                continue
            v_hat = st["exp_avg_sq"] / (1 - beta2 ** st["step"])
            ratio.append((p.grad.float().pow(2) / (v_hat + eps * eps)).sum())
            near.append((v_hat.sqrt() < EPS_FACTOR * eps).sum())
            count += p.numel()
    if not count:
        return {}
    return {M.ADAM_G2V: torch.stack(ratio).sum() / count,
            M.ADAM_EPS_SHARE: torch.stack(near).sum().float() / count}
