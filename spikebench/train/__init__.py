"""Training: the loop and its step, the optimizer, LR schedule, metrics buffer and sinks.

The names below import lazily, so a module that needs only a sink (the trial runner, which
must set its parent-death signal before torch loads) does not import torch.
"""

_EXPORTS = {"train": "loop", "train_step": "loop", "preflight": "setup",
            "resolve_device": "setup"}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"spikebench.train.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'spikebench.train' has no attribute {name!r}")


__all__ = list(_EXPORTS)
