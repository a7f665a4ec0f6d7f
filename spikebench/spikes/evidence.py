"""Multi-step evidence for the default rule: a spike 4 sigma high that lasts 5 rows carries
far more evidence than its peak shows, and one that never comes back is a level shift.

The default rule feeds every finite row here with its residual against the moving level
(its ``score``). A *run* opens at a row ``open`` sigma above both the moving level and the
median of the last ``base_window`` rows (the *base*; the moving level instead where it
lies ``drop`` sigma under it, after a step down); its residuals are then taken against
that base, frozen, because the moving median absorbs a spike within a few rows. The run
ends in one of three ways:

- *back*: the mean of its last ``confirm`` residuals is at most ``back`` sigma above the
  base.
  The rows before them are the spike part. ``post`` rows later the part is judged;
- *decaying*: at ``max_len`` rows it is still up, but its last quarter is well under its
  first (under ``decay`` of it, by more than ``k_decay`` standard errors): a sharp rise
  recovering slowly, judged at once;
- otherwise it is a level shift, and nothing is flagged.

*Judged*: the part is a spike if its peak exceeds ``k_peak``, or its evidence (the best
sum of consecutive residuals over the square root of their number) exceeds ``k_multi``,
both in units of the larger of the long-run sigma and the local noise over ``k_noise``.
The local noise is the largest MAD-sigma of the ``pre`` differences before the onset, the
differences after the part and those within it: in a burst of extra noise, moderate peaks
are not spikes. A row above ``k_big`` is a spike at once (the rule
flags it); nothing judged here can unflag it.

Verdicts come ``delay`` = ``max_len`` + ``post`` + 1 rows late: the rows are held here,
so events keep their true onsets, the same online and offline. The work per row is O(1)
amortised: a run holds at most ``delay`` residuals, and the O(length^2) segment search
runs only when a run ends. Over a whole series (:func:`evidence_flags`) this same code is
fed only the rows where a run can open and the rows that follow each, which are rare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from spikebench.spikes.robust import mad_sigma, median
from spikebench.spikes.rolling import Ring
from spikebench.spikes.rule_base import Unsupported
from spikebench.values import dec_float, enc_float


@dataclass(frozen=True)
class EvidenceParams:
    """Thresholds in sigmas, windows in rows; chosen by ``benchmarks/detector_tune.py``."""

    k_peak: float = 5.72
    k_multi: float = 6.11
    k_big: float = 8.48
    k_noise: float = 1.55
    open: float = 2.88
    floor: float = 1.0
    confirm: int = 6
    back: float = 0.43
    max_len: int = 64
    post: int = 8
    pre: int = 16
    drop: float = 2.32
    decay: float = 0.5
    k_decay: float = 4.5
    base_window: int = 32
    min_noise: int = 6  # differences a noise window needs


class Evidence:
    """The held verdicts and the open run of one loss series (see the module docstring).

    ``diffs`` is the rule's ring of first differences, read here for the local noise.
    Per row: :meth:`hold` its verdict, :meth:`observe` it if it is finite, then
    :meth:`release` the verdict ``delay`` rows back.
    """

    def __init__(self, params: EvidenceParams, diffs: Ring):
        self.p = params
        self.diffs = diffs
        self.delay = params.max_len + params.post + 1
        # Verdicts not yet released, oldest first: [spike, score] per row.
        self.held: list[list] = []
        # The open run: [base, sigma, residuals, part] (part None while it lasts), or [].
        self.run: list = []
        self.base = Ring(params.base_window)

    def hold(self, spike: bool, score: float) -> None:
        self.held.append([spike, score])

    def reset(self) -> None:
        """A non-finite row (flagged itself) ends the open run: it is judged on the rows it
        has, so a rise that ends in a divergence keeps its onset."""
        self._end_run(still_up=True)

    def release(self) -> tuple[bool, float] | None:
        """The verdict ``delay`` rows back, once there is one."""
        return tuple(self.held.pop(0)) if len(self.held) > self.delay else None

    def flush(self) -> list[tuple[bool, float]]:
        """The verdicts still held; a run already back at its base is judged first (one
        still up at the end of the data could be a level shift)."""
        self._end_run(still_up=False)
        out = [(bool(f), sc) for f, sc in self.held]
        self.held = []
        return out

    def _end_run(self, still_up: bool) -> None:
        """Judge the open run now, on the rows it has: one back at its base always, one
        still up only if ``still_up`` (all its rows are then the part)."""
        if self.run and (self.run[3] is not None or still_up):
            zs, part = self.run[2], self.run[3]
            part = len(zs) if part is None else part
            self._judge(zs[:part], len(zs), len(zs) - part)
        self.run = []

    def observe(self, y: float, score: float | None, level: float, sig: float) -> None:
        """The finite row ``y``; ``score`` is its residual against the moving ``level`` in
        sigmas, None before the rule has a level (the row then only enters the base)."""
        if score is not None:
            self._extend(y, score, level, sig)
        self.base.push(y)

    def _extend(self, y: float, score: float, level: float, sig: float) -> None:
        p = self.p
        if not self.run:
            if score > p.open:  # (the base only then)
                base = median(self.base.last(self.base.count))
                if level < base - p.drop * sig:
                    base = level  # a step down inside the longer window
                z = (y - base) / sig
                if z > p.open:
                    self.run = [base, sig, [z], None]
            return
        base, sg, zs, part = self.run
        zs.append((y - base) / sg)
        n, m = len(zs), p.confirm
        if part is None:
            if n > m and sum(zs[-m:]) <= p.back * m:  # back at its base
                part = n - m
                while part > 1 and zs[part - 1] <= p.floor:
                    part -= 1
                if not self._spike(zs[:part], 1.0):
                    self.run = []  # noise: no need to wait for the rows after it
                    return
                self.run[3] = part
            elif n >= p.max_len:  # still up: a slow recovery, or a level shift
                if self._decaying(zs):
                    self._judge(zs, n, 0)
                self.run = []
                return
        if part is not None and n - part >= p.post:
            self._judge(zs[:part], n, n - part)
            self.run = []

    def _decaying(self, zs: list[float]) -> bool:
        """The run's last quarter is well under its first: it is coming back."""
        w = len(zs) // 4
        first, last = sum(zs[:w]), sum(zs[-w:])
        return last < self.p.decay * first and first - last > self.p.k_decay * math.sqrt(2 * w)

    def _judge(self, part: list[float], rows: int, after: int) -> None:
        """Flag the spike in ``part`` (its first row ``rows`` rows back, ``after`` rows
        after it) if it stands out of the local noise."""
        scale = max(1.0, self._local_noise(rows, len(part), after) / self.p.k_noise)
        span = self._spike(part, scale)
        if span:
            for h in self.held[-rows:][span[0]: span[1]]:
                h[0] = True

    def _spike(self, part: list[float], scale: float) -> tuple[int, int] | None:
        """The rows [i, j) of ``part`` that are the spike, if its peak or its evidence (the
        best sum of consecutive residuals over sqrt(their number)) over ``scale`` sigmas
        is above its threshold; else None. A run may open on a noise blip before the
        spike: the best segment leaves the blip out."""
        best, i0, j0 = -math.inf, 0, 1
        for i in range(len(part)):
            total = 0.0
            for j in range(i, len(part)):
                total += part[j]
                ev = total / math.sqrt(j - i + 1)
                if ev > best:
                    best, i0, j0 = ev, i, j + 1
        peak = max(range(len(part)), key=part.__getitem__)
        if part[peak] / scale > self.p.k_peak:
            return min(i0, peak), max(j0, peak + 1)
        return (i0, j0) if best / scale > self.p.k_multi else None

    def _local_noise(self, rows: int, length: int, after: int) -> float:
        """The noise around the part, in the run's sigmas: the largest scale of the
        ``pre`` differences before the onset, those after the part, and those within it."""
        p = self.p
        d = self.diffs.last(rows + p.pre)
        start = len(d) - rows  # the onset's difference
        windows = (d[:start], d[len(d) - after + 1:] if after > 1 else [],
                   d[start + 1: start + length])
        return max(mad_sigma(x) if len(x) >= p.min_noise else 0.0 for x in windows) / max(
            self.run[1], 1e-12)

    def state_dict(self) -> dict[str, Any]:
        run = self.run and [enc_float(self.run[0]), enc_float(self.run[1]),
                            [enc_float(z) for z in self.run[2]], self.run[3]]
        return {"held": [[bool(f), enc_float(sc)] for f, sc in self.held], "run": run,
                "base": self.base.state_dict()}

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        self.held = [[bool(f), float(dec_float(sc))] for f, sc in d["held"]]
        run = d["run"]
        # A state from before this module (1a52de4) held a run of another shape: it is
        # dropped, unjudged; its held verdicts stand, so the monitor's rows stay paired.
        if run and not isinstance(run[2], list):
            run = []
        self.run = run and [float(dec_float(run[0])), float(dec_float(run[1])),
                            [float(dec_float(z)) for z in run[2]], run[3]]
        self.base.load_state_dict(d["base"])


# ------------------------------------------------------------- over a whole series


class _DiffsAt:
    """The rule's ring of first differences as :class:`Evidence` reads it, at
    the row being observed (``k`` differences pushed so far)."""

    def __init__(self, dy: np.ndarray, size: int):
        self.dy, self.size, self.k = dy, size, 0

    def last(self, m: int) -> list[float]:
        m = min(m, self.k, self.size)
        return self.dy[self.k - m:self.k].tolist()


class _BaseAt:
    """The evidence's ring of recent values (``base``), positioned at the observed row."""

    def __init__(self, y: np.ndarray, size: int):
        self.y, self.size, self.i = y, size, 0

    @property
    def count(self) -> int:
        return min(self.i, self.size)

    def last(self, m: int) -> list[float]:
        m = min(m, self.count)
        return self.y[self.i - m:self.i].tolist()

    def push(self, _value: float) -> None:
        self.i += 1


def evidence_flags(p: EvidenceParams, st, fin: np.ndarray, min_periods: int,
                   diff_size: int) -> np.ndarray:
    """The default rule's final verdicts with multi-step evidence on every row of a series
    (non-finite ones, ``~fin``, included: they are spikes and end a run), as the monitor
    pairs them. ``st`` holds the rule's per-row statistics over the finite rows (its
    array form, :class:`.default_rule.DefaultStats`): ``y``, ``dy``, ``score``, ``level``,
    ``sig`` and the one-scale verdict ``spike``.

    A row's verdict only changes from False to True when a run it belongs to is judged,
    and a run opens only on a row whose residual exceeds ``open``: this very evidence code
    is fed those rows and the run that follows each, nothing else.
    """
    nfin = int(fin.sum())
    flags = np.ones(len(fin), dtype=bool)
    flags[fin] = st.spike
    fidx = np.cumsum(fin) - 1  # finite index of each finite row
    robust = np.zeros(len(fin), dtype=bool)
    robust[fin] = np.arange(nfin) >= min_periods
    cands = np.flatnonzero(robust)
    cands = cands[st.score[fidx[cands]] > p.open]
    if not len(cands):
        return flags
    diffs = _DiffsAt(st.dy, diff_size)
    base = _BaseAt(st.y, p.base_window)
    ev = Evidence(p, diffs)
    ev.base = base  # type: ignore[assignment]  # the positioned view stands in for the ring
    n, c, rows = len(fin), 0, ev.delay  # no run lasts `delay` rows (its verdicts' delay)
    while c < len(cands):
        start = int(cands[c])
        f0 = int(fidx[start])
        # Rows of a run are finite but for a last non-finite one (which ends it), so the
        # finite index of its k-th row is f0 + k.
        sl, fl = slice(start, start + rows), slice(f0, f0 + rows)
        fin_r, flag_r = fin[sl].tolist(), flags[sl].tolist()
        y, sc, lv, sg = st.y[fl].tolist(), st.score[fl].tolist(), st.level[fl].tolist(), \
            st.sig[fl].tolist()
        ev.held = []
        held = None
        for k, finite in enumerate(fin_r):
            if finite:
                diffs.k = base.i = f0 + k
                ev.hold(flag_r[k], sc[k])
                ev.observe(y[k], sc[k], lv[k], sg[k])
            else:
                ev.reset()
                ev.hold(True, math.inf)
            if not ev.run:
                held = ev.held
                break
        if held is None:
            if start + len(fin_r) < n:
                raise Unsupported("an evidence run longer than its delay")
            held = ev.flush()  # end of data: what the rule's flush() judges
        for k, h in enumerate(held):
            if h[0]:
                flags[start + k] = True
        c = int(np.searchsorted(cands, start + len(held)))
    return flags
