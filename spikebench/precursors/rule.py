"""The warning rule: a precursor signal far above its own recent past warns of a spike.

The statistic is a robust z-score of the signal (its log by default: the precursors are
scales, and a doubling should count the same at any level) against the trailing ``window``
values before it: (y - median) / sigma, with sigma the noise scale of the window from the
MAD of its step-to-step differences (``scale="noise"``, the detector's own sigma: a steady
drift is not noise, so sustained growth scores high) or from the MAD of its values
(``scale="spread"``). The pieces are the detector core's (:mod:`spikebench.spikes.robust`,
:class:`spikebench.spikes.rolling.Ring`), so the array form and the online form give the
same verdicts bit for bit. A non-finite value always warns.

``window`` counts the values the rule is fed: steps for a signal logged every step, probe
intervals for a probe. A key ending in ``/*`` reads the largest of the per-layer keys it
matches (``probe/attn_logit_max/*``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from spikebench.errors import UserError
from spikebench.spikes.robust import SQRT2, mad_sigma, mad_sigmas, median, medians, pymax
from spikebench.spikes.rolling import Ring

TRANSFORMS = ("log", "none")
SCALES = ("noise", "spread")
# log() of a value at or below zero (a share that is 0) is taken at this floor.
TINY = 1e-30


def _transform(x: np.ndarray | list[float], kind: str) -> np.ndarray:
    # math.log per value, as the online form takes it: numpy's vectorised log may differ
    # by an ulp, and a verdict is a comparison with a threshold.
    if kind == "log":
        return np.array([math.log(v if v > TINY else TINY) for v in x], dtype=float)
    return np.asarray(x, dtype=float)


def _one(v: float, kind: str) -> float:
    return math.log(v if v > TINY else TINY) if kind == "log" else v


@dataclass(frozen=True)
class WarningRule:
    """Warn where ``signal``'s robust z-score over its trailing ``window`` values passes
    ``threshold``. ``warmup``: values after the first full window that never warn (early
    training moves every signal). ``min_sigma``: a floor on sigma, in transformed units.
    ``two_sided``: a fall warns as well as a rise."""

    signal: str
    window: int = 32
    threshold: float = 6.0
    transform: str = "log"
    scale: str = "noise"
    min_sigma: float = 0.01
    warmup: int = 0
    two_sided: bool = False

    def __post_init__(self) -> None:
        _check(self)

    # --- the rows of a log ---------------------------------------------------------------

    def value(self, record: Mapping[str, Any]) -> float | None:
        """The signal's value in one record (None where the record has none)."""
        if self.signal.endswith("/*"):
            prefix = self.signal[:-1]
            vals = [float(v) for k, v in record.items()
                    if k.startswith(prefix) and v is not None]
            if not vals:
                return None
            # As column() reads a table: a NaN layer is no value, unless every layer is NaN.
            kept = [v for v in vals if not math.isnan(v)]
            return max(kept) if kept else math.nan
        v = record.get(self.signal)
        return None if v is None else float(v)

    def column(self, table: Mapping[str, np.ndarray]) -> np.ndarray:
        """The signal's column from named columns (NaN where missing); ``/*``: the row max
        over the matching columns (NaN only where all are missing)."""
        if self.signal.endswith("/*"):
            prefix = self.signal[:-1]
            cols = [np.asarray(v, dtype=float) for k, v in table.items() if k.startswith(prefix)]
            if not cols:
                raise UserError(f"signal = {self.signal!r}: no column matches {prefix}*")
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN row: NaN, as meant
                return np.nanmax(np.vstack(cols), axis=0)
        if self.signal not in table:
            raise UserError(f"signal = {self.signal!r}: no such column")
        return np.asarray(table[self.signal], dtype=float)

    # --- the array form --------------------------------------------------------------------

    def scores(self, values: np.ndarray) -> np.ndarray:
        """The statistic a fresh :meth:`online` would return for each value, in order: 0.0
        before it can warn, inf at a non-finite value."""
        x = np.asarray(values, dtype=float)
        out = np.zeros(len(x))
        fin = np.isfinite(x)
        out[~fin] = math.inf
        y = _transform(x[fin].tolist(), self.transform)
        w = self.window
        first = w + self.warmup
        if len(y) <= first:
            out[fin] = 0.0
            return out
        ends = np.arange(first, len(y))
        with np.errstate(all="ignore"):
            med = medians(y, ends, w)
            if self.scale == "noise":
                dy = y[1:] - y[:-1]
                sig = mad_sigmas(dy, ends - 1, w - 1)
            else:
                sig = mad_sigmas(y, ends, w) * SQRT2
            z = (y[first:] - med) / pymax(sig, self.min_sigma)
        if self.two_sided:
            z = np.abs(z)
        zf = np.zeros(len(y))
        zf[first:] = z
        out[fin] = zf
        return out

    def warns(self, values: np.ndarray) -> np.ndarray:
        """The verdict for each value: its score passes the threshold."""
        return self.scores(values) > self.threshold

    # --- the online form -------------------------------------------------------------------

    def online(self) -> OnlineWarning:
        return OnlineWarning(self)

    # --- a mapping (TOML/JSON) -------------------------------------------------------------

    def to_mapping(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> WarningRule:
        if not isinstance(d, Mapping):
            raise UserError(f"warning rule = {d!r}: must be a table of fields")
        known = {f.name: f for f in fields(cls)}
        for k in d:
            if k not in known:
                raise UserError(f"warning rule: unknown field {k!r} (allowed: "
                                f"{', '.join(known)})")
        if "signal" not in d:
            raise UserError("warning rule: signal is missing (a metric key, e.g. "
                            "'probe/update_norm' or 'probe/attn_logit_max/*')")
        return cls(**dict(d))


class OnlineWarning:
    """One step at a time: ``update(value) -> (warns, score)``, a fixed window of state."""

    def __init__(self, rule: WarningRule):
        self.rule = rule
        self.ring = Ring(rule.window)
        self.seen = 0  # finite values fed

    def update(self, value: float) -> tuple[bool, float]:
        r = self.rule
        v = float(value)
        if not math.isfinite(v):
            return True, math.inf
        y = _one(v, r.transform)
        z = 0.0
        if self.seen >= r.window + r.warmup:
            vals = self.ring.last(r.window)
            if r.scale == "noise":
                sig = mad_sigma([b - a for a, b in zip(vals[:-1], vals[1:], strict=True)])
            else:
                sig = mad_sigma(vals) * SQRT2
            z = (y - median(vals)) / pymax(sig, r.min_sigma)
            if r.two_sided:
                z = abs(z)
        self.ring.push(y)
        self.seen += 1
        return z > r.threshold, z

    def state_dict(self) -> dict[str, Any]:
        return {"rule": self.rule.to_mapping(), "ring": self.ring.state_dict(),
                "seen": self.seen}

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        if WarningRule.from_mapping(d["rule"]) != self.rule:
            raise UserError(f"warning state: saved for rule {d['rule']!r}, not "
                            f"{self.rule.to_mapping()!r}")
        self.ring.load_state_dict(d["ring"])
        self.seen = int(d["seen"])


def _check(r: WarningRule) -> None:
    def bad(field: str, allowed: str) -> UserError:
        return UserError(f"warning rule: {field} = {getattr(r, field)!r}: must be {allowed}")

    if not isinstance(r.signal, str) or not r.signal or r.signal == "/*":
        raise bad("signal", "a metric key (a key ending in /* reads the max over its layers)")
    for name, lo in (("window", 4), ("warmup", 0)):
        v = getattr(r, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise bad(name, f"an integer >= {lo}")
    for name, positive in (("threshold", False), ("min_sigma", True)):
        v = getattr(r, name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or (
                positive and v <= 0):
            raise bad(name, "a finite number" + (" > 0" if positive else ""))
    if r.transform not in TRANSFORMS:
        raise bad("transform", f"one of {', '.join(TRANSFORMS)}")
    if r.scale not in SCALES:
        raise bad("scale", f"one of {', '.join(SCALES)}")
    if not isinstance(r.two_sided, bool):
        raise bad("two_sided", "true or false")

