"""A small GPT with the stability knobs the literature sweeps. No training code lives here.

Pre-LayerNorm blocks, causal attention through ``scaled_dot_product_attention``, GELU MLP,
tied input/output embeddings. Knobs: qk-layernorm, z-loss, init scheme. ``forward`` returns
``(logits, loss)``.

Instability precursors are read by :func:`probe`, which runs one extra no-grad forward with
explicit attention scores; the hot path never materialises the attention matrix.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from spikebench import metrics as M
from spikebench.config import ModelConfig
from spikebench.errors import UserError
from spikebench.signals import sigint_seen


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.proj.residual_out = True
        # qk-layernorm bounds the attention logits, the failure Wortsman et al. 2023 and
        # Dehghani et al. 2023 trace large-LR divergence to.
        self.q_norm = nn.LayerNorm(self.head_dim, bias=cfg.bias) if cfg.qk_norm else None
        self.k_norm = nn.LayerNorm(self.head_dim, bias=cfg.bias) if cfg.qk_norm else None
        self.dropout = cfg.dropout
        self.probing = False
        self.max_logit: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, nh, T, hd)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.probing:  # beside the attention, outside the graph: training is unchanged
            with torch.no_grad():
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, nh, T, T)
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                self.max_logit = scores.masked_fill(~mask, float("-inf")).amax().float()
        drop = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.proj.residual_out = True
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.probing = False
        self.log_z: torch.Tensor | None = None
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        std = self.cfg.init_std
        if isinstance(module, nn.Linear):
            # depth_scaled: GPT-2's 1/sqrt(2 * n_layer) on the projections that write into the
            # residual stream, so its variance does not grow with depth.
            if self.cfg.init == "depth_scaled" and getattr(module, "residual_out", False):
                std = std / math.sqrt(2 * self.cfg.n_layer)
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # tied embeddings: (B, T, vocab)
        if self.probing:
            with torch.no_grad():
                self.log_z = torch.logsumexp(logits.float(), dim=-1).mean()
        if targets is None:
            return logits, None
        flat = logits.float().view(-1, logits.size(-1))
        loss = F.cross_entropy(flat, targets.reshape(-1))
        if self.cfg.z_loss > 0:
            # PaLM's z-loss keeps log Z near 0 so the softmax normaliser cannot drift.
            loss = loss + self.cfg.z_loss * torch.logsumexp(flat, dim=-1).pow(2).mean()
        return logits, loss

    def num_params(self) -> int:
        # Tied embeddings count once; position embeddings count as in nanoGPT.
        return sum(p.numel() for p in self.parameters())


@contextlib.contextmanager
def probing(model: nn.Module) -> Iterator[None]:
    """Forwards inside record the instability precursors as they go: the max pre-softmax
    attention logit per layer and log Z, computed without grad beside the forward (so the
    training step itself can carry the probe, with no extra forward). Works for any model
    whose attention modules expose ``probing``/``max_logit`` and whose top module exposes
    ``probing``/``log_z``; read them with :func:`probed`."""
    flagged = [m for m in model.modules() if hasattr(m, "probing")]
    for m in flagged:
        m.probing = True
    try:
        yield
    finally:
        for m in flagged:
            m.probing = False


@torch.no_grad()
def probe(model: nn.Module, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """The precursors of one no-grad, eval-mode forward of ``idx`` (see :func:`probing`)."""
    was_training = model.training
    model.eval()
    try:
        with probing(model):
            model(idx)
    finally:
        model.train(was_training)
    return probed(model)


def probed(model: nn.Module) -> dict[str, torch.Tensor]:
    """What the last probing forward recorded, as device tensors so the caller chooses when
    to sync; an empty dict for a model without probes."""
    out = {}
    attn = [m for m in model.modules() if getattr(m, "max_logit", None) is not None]
    for i, m in enumerate(attn):
        out[f"{M.ATTN_LOGIT_MAX}{i}"] = m.max_logit
    if getattr(model, "log_z", None) is not None:
        out[M.LOG_Z] = model.log_z
    return out


def _dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _first_line(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0][:200]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def model_class(cfg: ModelConfig) -> type:
    """The class ``cfg.cls`` names (``package.module:Class``, absolute), imported. A module
    that cannot be imported (missing, a syntax error, an exception or ``sys.exit`` while it
    is imported) is one line naming it."""
    mod_name, _, cls_name = cfg.cls.partition(":")
    if not _dotted(mod_name) or not _dotted(cls_name):
        raise UserError(f"model.cls = {cfg.cls!r}: must look like package.module:Class "
                        "(an absolute module path of Python names, then the class)")
    seen: list[bool] = [True]
    try:
        with sigint_seen() as seen:
            obj: object = importlib.import_module(mod_name)
            for part in cls_name.split("."):
                obj = getattr(obj, part)
    except KeyboardInterrupt:
        if seen:  # a real Ctrl-C while importing: the command's own "interrupted"
            raise
        raise UserError(f"model.cls = {cfg.cls!r}: cannot import (module {mod_name!r} raised "
                        "KeyboardInterrupt while being imported, with no Ctrl-C)") from None
    except (ImportError, AttributeError) as e:
        raise UserError(f"model.cls = {cfg.cls!r}: cannot import ({e})") from None
    except SystemExit as e:
        raise UserError(f"model.cls = {cfg.cls!r}: cannot import (module {mod_name!r} "
                        f"called sys.exit({e.code!r}) while being imported)") from None
    except Exception as e:  # noqa: BLE001 - a user's module can fail in any way
        raise UserError(f"model.cls = {cfg.cls!r}: cannot import ({_first_line(e)})") from None
    return obj  # type: ignore[return-value]


def build_model(cfg: ModelConfig) -> nn.Module:
    """Instantiate ``cfg.cls`` (``package.module:Class``) with the model config."""
    return model_class(cfg)(cfg)
