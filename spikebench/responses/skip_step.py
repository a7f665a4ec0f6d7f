"""Skip-step for any loop: an optimizer wrapper that skips the update of an outlier step.

``SkipStepOptimizer(torch.optim.AdamW(...), window=128, k=6.0)`` judges each step with the
built-in loop's detector (:class:`spikebench.train.skip_step.SkipStep`, OLMo-core's rule:
a step whose loss or grad norm is more than ``k`` standard deviations above the mean of
the last ``window`` steps, once half the window is filled) and, on such a step, leaves the
weights and the optimizer state (moments, step counts) exactly as they were. The decision
stays on the device: nothing is read back to the host.

How the update is skipped without a host sync:

- **Fused Adam/AdamW** (``torch.optim.Adam``/``AdamW`` with ``fused=True``): through the
  optimizer's ``found_inf`` tensor, as the built-in loop does (GradScaler's contract: the
  fused kernel skips the update and takes the step count back). No copy.
- **Any other optimizer**: the weights and every tensor of the optimizer state of the
  parameters about to be updated are copied to persistent buffers before the inner step,
  and put back after it with ``torch.where(skip, kept, new)``: exact to the bit, whatever
  the optimizer does. It costs one copy of the weights and of their optimizer state per
  step (memory and bandwidth). The ``found_inf`` attribute cannot be used there: the
  non-fused torch optimizers refuse it, and other optimizers ignore it.

Where the values come from, at each ``step()``:

- the **grad norm**: ``step(grad_norm=...)`` or :meth:`observe`; otherwise measured here
  (``torch.nn.utils.get_total_norm``, device-side) on the gradients as they are at the
  step, and, with ``max_norm``, the gradients are then clipped to it (the built-in loop's
  order: the pre-clip norm is judged);
- the **loss**: ``step(loss=...)``, :meth:`observe`, the closure's return value, or the
  training forwards of a model given to :meth:`watch` (summed since the last step: with
  gradient accumulation a fixed multiple of the step's mean, which the rule's scale-free
  test does not mind). With ``on=("grad_norm",)`` the loss is not needed.

Under the Hugging Face Trainer (which calls ``optimizer.step()`` with no arguments):
``opt.watch(model)`` for the loss, ``max_grad_norm=0`` in ``TrainingArguments`` and the
clipping in the wrapper (``max_norm=1.0``). The Trainer clips *before* ``step()``, so with
its clipping on, the norm measured here would be the clipped one: it cannot rise above
the bound, and where clipping acts it differs between steps by round-off only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from spikebench.train.skip_step import SkipStep

SERIES = ("loss", "grad_norm")
STATE_KEY = "spikebench_skip_step"


class SkipStepOptimizer(torch.optim.Optimizer):
    """Wrap ``optimizer``; its ``step`` skips an outlier step's update on the device.

    - ``window``, ``k``: the rule (OLMo-core's defaults: 128 steps, 6 standard deviations).
    - ``on``: the series judged, ``("loss", "grad_norm")`` or one of them.
    - ``max_norm``: clip the gradients to this global norm after measuring it (only when
      the wrapper measures the norm itself).
    - ``skip_nonfinite``: also skip a step whose loss or grad norm is NaN or infinite
      (counted in :attr:`skipped`); the rule itself keeps such values out of its window.

    ``skipped`` is a device counter of skipped updates, ``last_skip`` the last step's
    device bool and ``last_grad_norm`` its (pre-clip) grad norm; read them when you log.
    ``state_dict`` is the inner optimizer's with the detector's window added under
    ``"spikebench_skip_step"``; ``load_state_dict`` takes both.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, window: int = 128,
                 k: float = 6.0, on: Iterable[str] = SERIES, max_norm: float | None = None,
                 skip_nonfinite: bool = True):
        if isinstance(optimizer, SkipStepOptimizer):
            raise TypeError("SkipStepOptimizer: the optimizer is already wrapped")
        on = tuple(on)
        if not on or len(set(on)) != len(on) or not set(on) <= set(SERIES):
            raise ValueError(f"SkipStepOptimizer: on = {on!r}; choose 'loss', 'grad_norm' "
                             "or both")
        if window < 2:
            raise ValueError(f"SkipStepOptimizer: window = {window}; at least 2")
        if not k > 0:
            raise ValueError(f"SkipStepOptimizer: k = {k}; must be > 0")
        if max_norm is not None and not max_norm > 0:
            raise ValueError(f"SkipStepOptimizer: max_norm = {max_norm}; must be > 0 or None")
        # Deliberately not Optimizer.__init__: the inner optimizer owns the parameter
        # groups and the state; this is an Optimizer for isinstance checks (LR schedulers,
        # the HF Trainer) and delegates.
        self.optimizer = optimizer
        self.on, self.max_norm, self.skip_nonfinite = on, max_norm, skip_nonfinite
        device = self._first_device()
        self.detector = SkipStep(window, k, device, rows=len(on))
        self.skipped = torch.zeros((), dtype=torch.long, device=device)
        self.last_skip = torch.zeros((), dtype=torch.bool, device=device)
        self.last_grad_norm: torch.Tensor | None = None
        self._observed: dict[str, torch.Tensor] = {}
        self._watched: torch.Tensor | None = None
        self._hooks: list[Any] = []
        self._kept: dict[tuple[int, str], torch.Tensor] = {}  # the restore path's buffers

    # -- what the inner optimizer owns ---------------------------------------------------

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, groups: list[dict[str, Any]]) -> None:
        self.optimizer.param_groups = groups

    @property
    def state(self) -> Any:
        return self.optimizer.state

    @state.setter
    def state(self, state: Any) -> None:
        self.optimizer.state = state

    @property
    def defaults(self) -> dict[str, Any]:
        return self.optimizer.defaults

    @defaults.setter
    def defaults(self, defaults: dict[str, Any]) -> None:
        self.optimizer.defaults = defaults

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        self.optimizer.add_param_group(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def __repr__(self) -> str:
        return (f"SkipStepOptimizer(window={self.detector.window}, k={self.detector.k}, "
                f"on={self.on}, method={self.method!r}, {self.optimizer!r})")

    def __getattr__(self, name: str) -> Any:
        """Public attributes the wrapper lacks come from the inner optimizer (a schedule-free
        optimizer's ``train``/``eval``, which the HF Trainer looks for), so ``hasattr``
        answers as for the inner one."""
        inner = self.__dict__.get("optimizer")
        if name.startswith("_") or inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __getstate__(self) -> dict[str, Any]:  # hooks and buffers are not state
        return {**self.__dict__, "_hooks": [], "_kept": {}}

    def __setstate__(self, state: dict[str, Any]) -> None:  # not Optimizer's: no patching
        self.__dict__.update(state)

    @property
    def method(self) -> str:
        """How a skip is done: ``"found_inf"`` (fused Adam/AdamW) or ``"restore"``."""
        fused = type(self.optimizer) in (torch.optim.Adam, torch.optim.AdamW) and all(
            g.get("fused") for g in self.optimizer.param_groups)
        return "found_inf" if fused else "restore"

    # -- the values of the step ------------------------------------------------------------

    def observe(self, loss: torch.Tensor | float | None = None,
                grad_norm: torch.Tensor | float | None = None) -> None:
        """Give the next ``step()`` its loss and/or pre-clip grad norm (device tensors:
        nothing is read back). For loops whose ``step()`` is called by other code."""
        if loss is not None:
            self._observed["loss"] = _scalar(loss)
        if grad_norm is not None:
            self._observed["grad_norm"] = _scalar(grad_norm)

    def watch(self, model: torch.nn.Module,
              loss_of: Callable[[Any], torch.Tensor | None] | None = None) -> SkipStepOptimizer:
        """Take the step's loss from ``model``'s training forwards (a forward hook; eval
        forwards and those under ``no_grad`` are ignored): the output's ``.loss`` or
        ``["loss"]`` (a transformers model given labels), or ``loss_of(output)``. The
        losses of the forwards since the last step are summed. Returns self."""
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            if not (module.training and torch.is_grad_enabled()):
                return
            loss = loss_of(output) if loss_of is not None else _loss_of(output)
            if loss is None:
                return
            loss = loss.detach().float()
            self._watched = loss if self._watched is None else self._watched + loss
        self._hooks.append(model.register_forward_hook(hook))
        return self

    def unwatch(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    # -- the step --------------------------------------------------------------------------

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None, *,
             loss: torch.Tensor | float | None = None,
             grad_norm: torch.Tensor | float | None = None) -> Any:
        """Judge the step, then step the inner optimizer, its update skipped on the device
        when the rule says so. Returns the closure's loss (None without a closure)."""
        closure_loss, inner_closure = None, None
        if closure is not None:
            with torch.enable_grad():
                closure_loss = closure()
            inner_closure = _reuse_first(closure, closure_loss)
        values = self._values(loss, grad_norm, closure_loss)
        device = values[0].device
        if self.skipped.device != device:
            self.detector.to(device)
            self.skipped, self.last_skip = self.skipped.to(device), self.last_skip.to(device)
        skip = self.detector.check(*values)
        if self.skip_nonfinite:
            skip = skip | ~torch.isfinite(torch.stack([v.float() for v in values]).sum())
        if self.method == "found_inf":
            opt = self.optimizer
            opt.grad_scale, opt.found_inf = None, skip.float()
            try:
                self.optimizer.step(inner_closure)
            finally:
                del opt.grad_scale, opt.found_inf
        else:
            self._step_restoring(skip, inner_closure)
        self.skipped += skip.long()
        self.last_skip = skip
        return closure_loss

    def _values(self, loss: Any, grad_norm: Any, closure_loss: Any) -> list[torch.Tensor]:
        """The judged values, in ``on``'s order; clears what was observed or watched."""
        observed, watched = self._observed, self._watched
        self._observed, self._watched = {}, None
        if loss is None:
            loss = observed.get("loss", watched if watched is not None else closure_loss)
        if loss is None and "loss" in self.on:  # refused before the gradients are clipped
            raise ValueError(
                "SkipStepOptimizer.step: no loss for this step; pass step(loss=...), "
                "call observe(loss=...) first, watch(model), step with a closure, or "
                "judge the grad norm alone (on=('grad_norm',))")
        if grad_norm is None:
            grad_norm = observed.get("grad_norm")
        if grad_norm is None:
            grad_norm = self._measure_and_clip()
        grad_norm = _scalar(grad_norm)
        self.last_grad_norm = grad_norm
        if "loss" in self.on:
            loss = _scalar(loss).to(grad_norm.device)
        return [loss if name == "loss" else grad_norm for name in self.on]

    def _measure_and_clip(self) -> torch.Tensor:
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return torch.zeros((), device=self.skipped.device)
        norm = torch.nn.utils.get_total_norm(grads, foreach=True)
        if self.max_norm is not None and math.isfinite(self.max_norm):
            torch.nn.utils.clip_grads_with_norm_(
                [p for g in self.param_groups for p in g["params"] if p.grad is not None],
                self.max_norm, norm, foreach=True)
        return norm

    def _step_restoring(self, skip: torch.Tensor, closure: Callable[[], Any] | None) -> None:
        """Keep the weights and state of the parameters with a gradient, step, put them
        back where ``skip``: one copy in, one ``torch.where`` per tensor out."""
        state = self.optimizer.state
        params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
        slots: list[tuple[torch.Tensor, str, torch.Tensor]] = []  # (param, key, before)
        others: list[tuple[torch.Tensor, str, Any]] = []  # non-tensor state
        for p in params:
            slots.append((p, "", p))
            for key, v in (state.get(p) or {}).items():  # .get: no entry made
                if torch.is_tensor(v):
                    slots.append((p, key, v))
                else:
                    others.append((p, key, v))
        kept = [self._buffer(p, key, t) for p, key, t in slots]
        if kept:
            torch._foreach_copy_(kept, [t.detach() for _, _, t in slots])
        self.optimizer.step(closure)
        conds: dict[torch.device, torch.Tensor] = {skip.device: skip}
        for (p, key, before), old in zip(slots, kept, strict=True):
            now = p if key == "" else state[p].get(key)
            if not torch.is_tensor(now):
                raise RuntimeError(f"SkipStepOptimizer: the optimizer's state[{key!r}] was "
                                   "a tensor and is not any more; cannot restore it")
            if now.device not in conds:  # e.g. a non-capturable Adam's CPU step count
                conds[now.device] = skip.to(now.device)  # a host sync: see the docs
            cond = conds[now.device]
            if now is before:
                torch.where(cond, old, now.detach(), out=now.detach())
            else:  # the optimizer replaced the tensor
                state[p][key] = torch.where(cond, old, now)
        for p, key, v in others:
            if state[p].get(key) != v:
                raise RuntimeError(
                    f"SkipStepOptimizer: {type(self.optimizer).__name__} keeps state "
                    f"[{key!r}] as a Python value its step changes; a skip cannot take it "
                    "back on the device (use an optimizer whose state is tensors)")

    def _buffer(self, p: torch.Tensor, key: str, like: torch.Tensor) -> torch.Tensor:
        slot = (id(p), key)
        buf = self._kept.get(slot)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype or \
                buf.device != like.device:
            buf = self._kept[slot] = torch.empty_like(like, memory_format=torch.preserve_format)
        return buf

    def _first_device(self) -> torch.device:
        for g in self.optimizer.param_groups:
            for p in g["params"]:
                return p.device
        return torch.device("cpu")

    # -- checkpoints -----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The inner optimizer's state dict, plus the detector's window and the counter."""
        return {**self.optimizer.state_dict(), STATE_KEY: {
            "on": list(self.on), "window": self.detector.window, "k": self.detector.k,
            **self.detector.state_dict(), "skipped": self.skipped}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict from :meth:`state_dict`; a bare inner optimizer's state dict
        loads too (the detector is then left as it is)."""
        d = dict(state_dict)
        mine = d.pop(STATE_KEY, None)
        if mine is not None and (tuple(mine["on"]) != self.on
                                 or int(mine["window"]) != self.detector.window):
            raise ValueError(f"SkipStepOptimizer.load_state_dict: saved with on="
                             f"{tuple(mine['on'])}, window={mine['window']}; this one has "
                             f"on={self.on}, window={self.detector.window}")
        self.optimizer.load_state_dict(d)
        if mine is not None:
            device = self.skipped.device
            self.detector.load_state_dict({"values": mine["values"], "n": mine["n"]})
            self.detector.to(device)
            self.skipped = mine["skipped"].to(device)


def _scalar(x: torch.Tensor | float) -> torch.Tensor:
    t = x.detach() if torch.is_tensor(x) else torch.tensor(float(x))
    return t.float().reshape(())


def _loss_of(output: Any) -> torch.Tensor | None:
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    return loss if torch.is_tensor(loss) else None


def _reuse_first(closure: Callable[[], Any], first: Any) -> Callable[[], Any]:
    """The closure for the inner optimizer: its first call returns the loss already
    computed (the gradients are in place); later calls (L-BFGS) evaluate again."""
    called = False

    def again() -> Any:
        nonlocal called
        if not called:
            called = True
            return first
        with torch.enable_grad():
            return closure()
    return again
