"""Fixed-size state for the spike rules: a ring buffer and rolling moments, O(1) per push,
and the moments' array form (every push of a series at once, bit for bit the same)."""

from __future__ import annotations

import math

import numpy as np

from spikebench.spikes.robust import PLAIN_SUM, pymax

BLOCK_ELEMS = 1 << 16  # pushes whose running sums are computed at a time


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

    @staticmethod
    def series(x: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """``mean()`` and ``std()`` after each push of ``x`` into a fresh
        ``RollingMoments(size)``, exactly as :meth:`push` computes them.

        Within a block of ``size`` pushes the sums change by ``+d`` then ``-old`` per push,
        starting from the exact sums recomputed at the end of the previous block: one
        sequential cumsum per block over those terms interleaved reproduces every rounding.
        """
        n = len(x)
        if n == 0:
            return np.empty(0), np.empty(0)
        ref = float(x[0])
        d = x - ref
        nb = -(-n // size)
        dp = np.zeros(nb * size)
        dp[:n] = d
        dp = dp.reshape(nb, size)
        d2 = dp * dp
        s1 = _block_sums(dp, _exact_sums(dp[:n // size]))[:n]
        s2 = _block_sums(d2, _exact_sums(d2[:n // size]))[:n]
        count = np.minimum(np.arange(1, n + 1), size).astype(float)
        with np.errstate(all="ignore"):
            mean = ref + s1 / count
            var = (s2 - s1 * s1 / count) / (count - 1)
            std = np.where(count < 2, 0.0, np.sqrt(pymax(var, 0.0)))
        return mean, std


def _exact_sums(rows: np.ndarray) -> np.ndarray:
    """``sum(row)`` for each row, as Python computes it (from an integer 0)."""
    if not PLAIN_SUM:
        return np.array([sum(r) for r in rows.tolist()])
    t = np.zeros((rows.shape[0], rows.shape[1] + 1))
    t[:, 1:] = rows
    return np.cumsum(t, axis=1)[:, -1]


def _block_sums(terms: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """A running sum after each push; ``terms`` is (blocks, size), ``exact`` the
    recomputed sum at the end of each complete block."""
    nb, size = terms.shape
    out = np.empty((nb, size))
    # Blocks are independent given the exact sums: a few at a time, so the interleaved
    # terms and their cumsum stay small instead of twice the series.
    step = max(1, BLOCK_ELEMS // size)
    for a in range(0, nb, step):
        b = min(nb, a + step)
        t = np.empty((b - a, 1 + 2 * size))
        t[:, 1::2] = terms[a:b]
        # Each block starts from the exact sum of the one before and evicts the value
        # pushed `size` pushes earlier; the first block evicts nothing, and adding -0.0
        # changes no sum.
        if a == 0:
            t[0, 0] = 0.0
            t[0, 2::2] = -0.0
        lo = max(a, 1)
        t[lo - a:, 0] = exact[lo - 1:b - 1]
        t[lo - a:, 2::2] = -terms[lo - 1:b - 1]
        out[a:b] = np.cumsum(t, axis=1)[:, 2::2]
    out[: len(exact), -1] = exact  # the push that fills a block recomputes the sums
    return out.reshape(-1)
