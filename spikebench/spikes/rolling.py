"""Fixed-size state for the spike rules: a ring buffer and rolling moments, O(1) per push."""

from __future__ import annotations

import math


class Ring:
    """Fixed-capacity ring buffer over a preallocated list; ``push`` returns the evicted value."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"ring size must be >= 1, got {size}")
        self.size = size
        self.buf = [0.0] * size
        self.pos = 0  # next write index
        self.count = 0

    def push(self, x: float) -> float | None:
        old = self.buf[self.pos] if self.count == self.size else None
        self.buf[self.pos] = x
        self.pos = (self.pos + 1) % self.size
        self.count = min(self.count + 1, self.size)
        return old

    def last(self, m: int) -> list[float]:
        """The most recent ``min(m, count)`` values, oldest first."""
        m = min(m, self.count)
        start = self.pos - m
        if start >= 0:
            return self.buf[start : self.pos]
        return self.buf[start:] + self.buf[: self.pos]

    def state_dict(self) -> dict:
        return {"size": self.size, "values": self.last(self.count)}

    def load_state_dict(self, d: dict) -> None:
        self.__init__(d["size"])
        for v in d["values"]:
            self.push(float(v))


class RollingMoments:
    """Mean and sample sd of the last ``size`` values via running sums, O(1) per push.

    Sums are taken around a reference value (the first one seen) so squares stay small, and
    are recomputed exactly every ``size`` pushes so round-off cannot drift over long runs.
    """

    def __init__(self, size: int):
        self.ring = Ring(size)
        self.ref: float | None = None
        self.s1 = 0.0
        self.s2 = 0.0
        self._since_exact = 0

    @property
    def count(self) -> int:
        return self.ring.count

    def push(self, x: float) -> None:
        if self.ref is None:
            self.ref = x
        old = self.ring.push(x)
        d = x - self.ref
        self.s1 += d
        self.s2 += d * d
        if old is not None:
            od = old - self.ref
            self.s1 -= od
            self.s2 -= od * od
        self._since_exact += 1
        if self._since_exact >= self.ring.size:
            self._since_exact = 0
            ds = [v - self.ref for v in self.ring.last(self.ring.count)]
            self.s1 = sum(ds)
            self.s2 = sum(v * v for v in ds)

    def mean(self) -> float:
        return self.ref + self.s1 / self.count

    def std(self) -> float:
        n = self.count
        if n < 2:
            return 0.0
        var = (self.s2 - self.s1 * self.s1 / n) / (n - 1)
        return math.sqrt(max(var, 0.0))

    def state_dict(self) -> dict:
        # The running sums too: recomputing them on load would round differently, and a
        # resumed run must decide every spike exactly as an uninterrupted one.
        return {"ring": self.ring.state_dict(), "ref": self.ref, "since": self._since_exact,
                "s1": self.s1, "s2": self.s2}

    def load_state_dict(self, d: dict) -> None:
        self.ring = Ring(1)
        self.ring.load_state_dict(d["ring"])
        self.ref = d["ref"]
        if "s1" in d:
            self.s1, self.s2 = d["s1"], d["s2"]
        else:  # a state saved before the sums were
            ds = [v - self.ref for v in self.ring.last(self.ring.count)] if self.ref is not None else []
            self.s1 = sum(ds)
            self.s2 = sum(v * v for v in ds)
        self._since_exact = d["since"]
