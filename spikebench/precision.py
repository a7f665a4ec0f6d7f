"""Numeric precision modes: fp32, bf16, fp16 with dynamic loss scaling, fp16 without it.

On CUDA the half modes use real ``torch.autocast``. On most CPUs real half matmuls are many
times slower than fp32 (``benchmarks/precision_speed.py``), so there the default is an
*emulation* that computes in fp32 but rounds to the half format wherever autocast's
half-precision ops would (:mod:`spikebench.emulation`). Which one ``"auto"`` runs on a CPU is measured once per
machine (:mod:`spikebench.precision_auto`).

Usage, with ``p = make_precision(cfg.precision, device)``::

    with p.autocast():                 # forward and loss only, not the backward
        logits, loss = model(idx, targets)
    if p.scaler is not None:           # mode "fp16" only
        p.scaler.scale(loss).backward()
        p.scaler.unscale_(opt); clip(...); p.scaler.step(opt); p.scaler.update()
    else:
        loss.backward(); clip(...); opt.step()

The emulated grads are fp32 tensors, so ``GradScaler`` works on CPU unchanged: it scales the
loss and skips the steps whose (emulated) fp16 gradients overflowed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from spikebench.config import PrecisionConfig
from spikebench.emulation import HALF_DTYPES, EmulatedAutocast, round_to

__all__ = ["HALF_DTYPES", "EmulatedAutocast", "Precision", "loss_scale_tensor",
           "make_precision", "round_to"]

_LABELS = {"bf16": "bf16", "fp16": "fp16+scaling", "fp16_noscale": "fp16 no scaling"}


@dataclass
class Precision:
    """A resolved precision mode; see :func:`make_precision`.

    ``scaler`` is an enabled ``GradScaler`` for mode ``"fp16"`` only, None otherwise.
    ``device_type`` (``"cpu"``, ``"cuda"``...) is where real autocast applies.
    """

    mode: str
    impl: str
    label: str
    scaler: torch.amp.GradScaler | None
    device_type: str = "cpu"
    flash_rounding: bool = True
    why: str = ""  # how "auto" chose impl, for the run's meta ("" when it was not auto)

    def autocast(self) -> contextlib.AbstractContextManager:
        """A fresh context to wrap the forward pass and loss in (the backward needs none).

        ``nullcontext`` for fp32, ``torch.autocast`` for impl ``"real"``, an
        :class:`EmulatedAutocast` for impl ``"emulated"``.
        """
        if self.impl == "none":
            return contextlib.nullcontext()
        dtype = HALF_DTYPES[self.mode]
        if self.impl == "real":
            return torch.autocast(device_type=self.device_type, dtype=dtype)
        return EmulatedAutocast(dtype, flash_rounding=self.flash_rounding)


def make_precision(cfg: PrecisionConfig, device: torch.device | str) -> Precision:
    """Resolve ``cfg`` for ``device``.

    impl ``"auto"`` means real autocast on CUDA; on CPU, real autocast where the CPU has the
    half format natively and it measured faster, emulation elsewhere
    (:mod:`spikebench.precision_auto`); emulation on any other device. Mode
    ``"fp32"`` always gives impl ``"none"`` whatever ``cfg.impl`` says. ``"real"`` on CPU is
    allowed (correct but slow). The label names the mode and, for half modes, the impl, e.g.
    ``"bf16 (real autocast)"`` or ``"fp16 no scaling (emulated)"``; put it in every output.
    The scaler is ``GradScaler(device.type, init_scale=cfg.init_scale)``; note that GradScaler
    disables itself (with a warning) on a CUDA device when CUDA is unavailable.
    """
    device = torch.device(device)
    why = ""
    if cfg.mode == "fp32":
        impl, label = "none", "fp32"
    else:
        impl = cfg.impl
        if impl == "auto" and device.type == "cpu":
            from spikebench.precision_auto import choose

            impl, why = choose(cfg.mode)
        elif impl == "auto":
            impl = "real" if device.type == "cuda" else "emulated"
        suffix = "real autocast" if impl == "real" else "emulated"
        label = f"{_LABELS[cfg.mode]} ({suffix})"
    scaler = None
    if cfg.mode == "fp16":
        scaler = torch.amp.GradScaler(device.type, init_scale=cfg.init_scale)
    return Precision(cfg.mode, impl, label, scaler, device_type=device.type,
                     flash_rounding=cfg.emulated_attention == "kernel", why=why)


def loss_scale_tensor(scaler: torch.amp.GradScaler | None) -> torch.Tensor | None:
    """The current loss scale as a 0-d fp32 tensor, read without a host sync; None if unscaled.

    ``scaler.get_scale()`` is the public API but calls ``.item()``, a device sync. This reads
    the private ``scaler._scale`` (0-d in torch 2.13, shape (1,) in older releases; both come
    back 0-d), which ``update()`` changes in place, so the value is cloned: a snapshot you can
    stack into a metrics buffer. Before the first ``scaler.scale(loss)`` that tensor does not
    exist yet and the initial scale is returned, on the scaler's device. Returns None for no
    scaler or a disabled one.
    """
    if scaler is None or not scaler.is_enabled():
        return None
    scale = getattr(scaler, "_scale", None)
    if scale is None:
        return torch.full((), scaler.get_scale(), dtype=torch.float32, device=scaler._device)
    return scale.detach().clone().reshape(())
