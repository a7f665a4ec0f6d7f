"""What the run API accepts, checked at the call that gives it: one ``UserError`` line
naming the argument, the value and what is allowed.

:func:`init_args` checks ``spikebench.init``'s arguments without touching the disk (the
callbacks call it when they are built); :func:`value` checks one logged value on the host
only: a tensor's element count and dtype are metadata, so a CUDA tensor is never read here
(it is read back with the others every ``sync_every`` steps).
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.spikes.rules import RULES

INIT_ARGS = ("params", "seed", "run_dir", "detector", "gap", "target_loss", "sync_every",
             "sinks", "metrics_port", "device", "out_dir", "warning")
# Columns the run writes itself: a logged metric of that name would move or hide them.
RESERVED = (M.STEP, M.SPIKE_EVENTS, M.SPIKE_REPORTED, M.SPIKE_WITHDRAWN, M.WARNINGS,
            M.WARNING_SCORE)
# Short names a loop may log under, and the metric names every reader uses.
ALIASES = {"loss": M.TRAIN_LOSS, "train_loss": M.TRAIN_LOSS, "grad_norm": M.GRAD_NORM,
           "lr": M.LR, "val_loss": M.VAL_LOSS, "tokens": M.TOKENS}
ALLOWED = "a real number (int, float, numpy scalar, or a one-element tensor), or None"


def short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(name: str, v: Any, low: int, high: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low or (
            high is not None and v > high):
        top = f" and <= {high}" if high is not None else ""
        raise UserError(f"{name}={short(v)}: must be an integer >= {low}{top}")
    return int(v)


def init_args(kwargs: Mapping[str, Any], where: str = "spikebench.init") -> dict[str, Any]:
    """``kwargs`` checked and normalised (numpy integers to int); unknown names refused."""
    from spikebench.train.sinks import Sink

    unknown = sorted(k for k in kwargs if k not in INIT_ARGS)
    if unknown:
        raise UserError(f"{where}: unknown argument {unknown[0]!r} (allowed: "
                        + ", ".join(INIT_ARGS) + ")")
    out = dict(kwargs)
    params = kwargs.get("params")
    if params is not None:
        if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
            raise UserError(f"params={short(params)}: must be a dict of named parameters")
        try:
            json.dumps(dict(params), allow_nan=True)
        except (TypeError, ValueError, RecursionError) as e:
            raise UserError(f"params={short(params)}: cannot be saved as JSON "
                            f"({str(e).splitlines()[0][:80]})") from None
    if kwargs.get("seed") is not None:
        out["seed"] = _int("seed", kwargs["seed"], 0, 2**32 - 1)
    detector = kwargs.get("detector", "default")
    if not isinstance(detector, str) or detector not in RULES:
        raise UserError(f"detector={short(detector)}: not a spike rule (allowed: "
                        + ", ".join(RULES) + ")")
    if "gap" in kwargs:
        out["gap"] = _int("gap", kwargs["gap"], 0)
    if "sync_every" in kwargs:
        out["sync_every"] = _int("sync_every", kwargs["sync_every"], 1)
    target = kwargs.get("target_loss")
    if target is not None:
        if isinstance(target, bool) or not isinstance(target, numbers.Real) or not (
                math.isfinite(float(target))):
            raise UserError(f"target_loss={short(target)}: must be a finite number or None")
        out["target_loss"] = float(target)
    sinks = kwargs.get("sinks", ())
    if isinstance(sinks, str | bytes | Mapping) or not hasattr(sinks, "__iter__") or not all(
            isinstance(s, Sink) for s in sinks):
        raise UserError(f"sinks={short(sinks)}: must be a list of spikebench.train.sinks.Sink")
    if kwargs.get("metrics_port") is not None:
        out["metrics_port"] = _int("metrics_port", kwargs["metrics_port"], 0, 65535)
    if "warning" in kwargs:
        from spikebench.api.warning import rule_of

        out["warning"] = rule_of(kwargs["warning"])
    for name in ("run_dir", "out_dir"):
        path = kwargs.get(name)
        if path is not None and (not isinstance(path, str | os.PathLike) or not str(path)
                                 or "\0" in str(path)):
            raise UserError(f"{name}={short(path)}: must be a folder path (str or Path)")
    return out


def is_tensor(v: Any) -> bool:
    return hasattr(v, "detach") and hasattr(v, "device")


def value(key: Any, v: Any) -> Any:
    """A logged value as the run keeps it: a float or int, or a one-element real tensor
    (kept as is, read back later). Anything else is refused here, at the call."""
    t = type(v)
    if t is float:
        return v
    if t is int:
        if -2**63 <= v < 2**63:
            return v
        raise UserError(f"log({key}={short(v)}): too large for a metric (allowed: {ALLOWED})")
    if is_tensor(v):
        dtype = str(getattr(v, "dtype", ""))
        if v.numel() != 1 or "complex" in dtype or dtype == "torch.bool":
            raise UserError(f"log({key}=a tensor of shape {tuple(v.shape)}, {dtype}): "
                            f"allowed: {ALLOWED}")
        return v
    if isinstance(v, bool) or getattr(v, "dtype", None) is not None and str(v.dtype) == "bool":
        raise UserError(f"log({key}={short(v)}): a boolean is not a metric (allowed: "
                        f"{ALLOWED})")
    if hasattr(v, "dtype") and getattr(v, "size", 0) == 1 and hasattr(v, "item"):
        v = v.item()  # a numpy scalar or one-element array, on the host
        if isinstance(v, bool | complex) or not isinstance(v, numbers.Real):
            raise UserError(f"log({key}={short(v)}): allowed: {ALLOWED}")
    if isinstance(v, numbers.Integral):
        return value(key, int(v))
    if isinstance(v, numbers.Real):
        try:
            return float(v)
        except (OverflowError, ValueError):
            raise UserError(f"log({key}={short(v)}): too large for a metric (allowed: "
                            f"{ALLOWED})") from None
    raise UserError(f"log({key}={short(v)}): a {t.__name__} is not a metric (allowed: "
                    f"{ALLOWED})")


def step(step: Any, last: int | None) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise UserError(f"log(step={short(step)}): steps must be increasing integers "
                        f"(last {last})")
    return int(step)


def add(row: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Add ``values`` to ``row`` under their metric names, each checked (:mod:`.checks`);
    a name given twice (``loss`` and ``train/loss``) or one the run writes is refused."""
    for k, v in values.items():
        if v is None:
            continue
        name = ALIASES.get(k, k) if type(k) is str else None
        if not name or name in RESERVED or name in row:
            why = ("a metric name must be a non-empty string" if not name else
                   "the run writes that column itself" if name in RESERVED else
                   "given twice in one step")
            raise UserError(f"log({short(k)}=...): {why}"
                            + (f" (as {name!r})" if name and name != k else ""))
        row[name] = value(k, v)
