"""What every spike rule is: one object with two forms of the same rule.

``update(value) -> (is_spike, score)`` is the online form, fed one finite value at a time in
step order; its state lives in fixed-size ring buffers and running sums (:mod:`.rolling`),
so an update costs the same at step 10 and at step 10 million. ``flags(x)`` is the offline
form, the verdicts ``update`` would give on every value of an array, vectorised where that
pays; each rule states its threshold once and both forms use it. Non-finite values never
reach a rule without delay: the monitor flags them itself (``verdicts`` does too).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from spikebench.values import dec_float, enc_float

LOSS, GRAD_NORM = "loss", "grad_norm"


def metric_kind(key: str) -> str:
    """'grad_norm' for grad-norm-like keys (``optim/grad_norm``, ``gradnorm``), else 'loss'."""
    k = key.lower().replace("-", "_")
    return GRAD_NORM if ("grad_norm" in k or "gradnorm" in k) else LOSS


class Unsupported(Exception):
    """A series a rule's array form cannot score bit for bit (the caller feeds ``update``)."""


class Rule(ABC):
    """A spike rule for one metric series.

    ``update(value)`` takes the next *finite* value and returns ``(is_spike, score)``; the
    score is the rule's own statistic (a z-score, a ratio), 0.0 before the rule can fire.
    ``first_step`` is the 0-based index (among finite values fed) of the first value the
    rule can flag. ``kinds`` lists the metric kinds the rule applies to; on other kinds the
    monitor uses :class:`NeverRule` (only non-finite values count there).
    """

    name: ClassVar[str] = "rule"
    kinds: ClassVar[frozenset[str]] = frozenset({LOSS, GRAD_NORM})
    _state: ClassVar[tuple[str, ...]] = ()  # attributes saved by state_dict
    # Rows a verdict comes late. A rule with delay > 0 is fed every value, non-finite ones
    # too, and its update returns the verdict for the value `delay` rows back (None before
    # there is one); flush() returns the verdicts still held, at the end of the data.
    delay: int = 0
    # With delay > 0: the one-scale flag of the value just fed (the row is sure enough to
    # tell an online user at once; the delayed verdict confirms or withdraws it).
    now: bool = False

    def __init__(self, kind: str = LOSS):
        self.kind = kind

    first_step: int = 0

    @abstractmethod
    def update(self, value: float) -> tuple[bool, float]: ...

    def flags(self, x: np.ndarray) -> np.ndarray:
        """The verdicts of a fresh rule without delay on the finite values ``x``, in order:
        what ``update`` returns for each. Rules override this with an array form; this
        one feeds ``update``."""
        return np.fromiter((self.update(v)[0] for v in x.tolist()), bool, len(x))

    def verdicts(self, values: np.ndarray) -> np.ndarray:
        """The final verdict of a fresh rule on every row of a series (a non-finite row is
        a spike), as the monitor pairs them with its rows."""
        fin = np.isfinite(values)
        out = np.ones(len(values), dtype=bool)
        out[fin] = self.flags(values[fin])
        return out

    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self._state:
            v = getattr(self, k)
            out[k] = v.state_dict() if hasattr(v, "state_dict") else enc_float(v)
        return out

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        for k in self._state:
            cur = getattr(self, k)
            if hasattr(cur, "load_state_dict"):
                cur.load_state_dict(d[k])
            else:
                setattr(self, k, dec_float(d[k]))


class NeverRule(Rule):
    """Flags nothing; used where a rule does not apply (e.g. ``loss_ratio`` on grad norms)."""

    name = "never"
    first_step = 2**62

    def update(self, value: float) -> tuple[bool, float]:
        return False, 0.0

    def flags(self, x: np.ndarray) -> np.ndarray:
        return np.zeros(len(x), dtype=bool)
