"""Seeded, labelled synthetic training logs for validating spike detectors.

A log has a loss and a grad norm per step:

- **loss trend**: power-law decay from ln(vocab) (vocab 256 or 50257) towards a floor of
  1.5-3.0 nats, with a linear LR warmup of 0-500 steps that slows the early drop (progress
  is measured in accumulated LR);
- **noise**: Gaussian, scale shrinking over training (4x the final scale at step 0, final
  scale 0.01-0.05 nats), plus occasional heavy-tailed steps (0.5% of steps get an extra
  +-1.5-3 sigma, either sign);
- **level shifts that are not spikes** (persistent): small steps up (1-3 sigma), steps down
  (2-15 sigma, like an LR decay), slow ramps up (2-6 sigma over 20-100 steps);
- **grad norm**: log-normal around a decaying level, log-scale noise 0.05-0.15 (doubled
  early), with its own heavy-tailed steps and level shifts;
- **injected spikes** (labels), heights log-uniform in [6, 40] sigma of the local noise:
  ``single`` (one step), ``burst`` (2-5 consecutive steps), ``slow`` (sharp rise, then
  exponential recovery over 20-200 steps), ``grad_only`` (grad norm only); loss spikes
  carry a grad-norm spike half the time (labelled separately). Optionally an ``early``
  jump of 1.7-11 nats in steps 1-15 (as small GPTs at high LR without warmup do), which
  decays over 3-20 steps.

:func:`evaluate` scores detected events against the labels, event by event.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from spikebench import metrics as M

HEAVY_P = 0.005


@dataclass
class InjectedSpike:
    """A labelled spike: ``metric`` is 'loss' or 'grad_norm'; steps are inclusive."""

    metric: str
    shape: str
    onset: int
    end: int
    height_sigma: float


@dataclass
class SyntheticLog:
    seed: int
    steps: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    spikes: list[InjectedSpike] = field(default_factory=list)
    shifts: list[tuple[int, str, str, float]] = field(default_factory=list)  # step, metric, kind, sigma

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"step": self.steps, "loss": self.loss, "grad_norm": self.grad_norm})

    def records(self, loss_key: str = M.TRAIN_LOSS, grad_key: str = M.GRAD_NORM):
        """Flat per-step dicts, as the trainer logs them."""
        return [
            {"step": int(s), loss_key: float(a), grad_key: float(b)}
            for s, a, b in zip(self.steps, self.loss, self.grad_norm, strict=True)
        ]

    def spike_mask(self, metric: str) -> np.ndarray:
        """True on rows whose step is inside a labelled spike of ``metric`` (onset..end;
        rows and steps differ in a log that keeps every n-th step)."""
        m = np.zeros(len(self.steps), dtype=bool)
        for sp in self.spikes:
            if sp.metric == metric:
                m |= (self.steps >= sp.onset) & (self.steps <= sp.end)
        return m


def _loguniform(rng, lo, hi):
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def generate(
    seed: int = 0,
    n_steps: int = 10_000,
    *,
    spike_every: int = 1500,
    early_jump: bool | None = None,
    shifts: bool = True,
    heavy_p: float = HEAVY_P,
    min_height: float = 6.0,
    max_height: float = 40.0,
) -> SyntheticLog:
    """One labelled log; the same ``seed`` and arguments give the same log.

    ``spike_every`` is the mean spacing of injected spikes (0 disables them);
    ``early_jump`` None draws it with probability 1/2.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=float)
    vocab = int(rng.choice([256, 50257]))
    l0, l_inf = math.log(vocab), rng.uniform(1.5, 3.0)
    warmup = int(rng.integers(0, 501))
    lr = np.minimum(1.0, (t + 1) / warmup) if warmup > 0 else np.ones(n_steps)
    eff = np.cumsum(lr) - lr[0]
    tau = rng.uniform(20, 200)
    decay = (1 + eff / tau) ** -rng.uniform(0.4, 0.8)
    trend = l_inf + (l0 - l_inf) * decay
    sig = rng.uniform(0.01, 0.05) * (1 + 3 * (1 + eff / tau) ** -0.5)

    g_level = np.log(rng.uniform(0.2, 1.0) * (1 + 3 * (1 + eff / tau) ** -0.5))
    gsig = rng.uniform(0.05, 0.15) * (1 + (1 + eff / tau) ** -0.5)

    def heavy():
        mask = rng.random(n_steps) < heavy_p
        return mask * rng.choice([-1.0, 1.0], n_steps) * rng.uniform(1.5, 3.0, n_steps)

    loss = trend + sig * (rng.standard_normal(n_steps) + heavy())
    logg = g_level + gsig * (rng.standard_normal(n_steps) + heavy())
    log = SyntheticLog(seed, np.arange(n_steps), loss, logg)

    busy: list[tuple[int, int]] = []  # spans where shifts must not land
    if early_jump is None:
        early_jump = bool(rng.random() < 0.5)
    if early_jump and n_steps > 40:
        j = int(rng.integers(1, 16))
        jump = rng.uniform(1.7, 11.0)
        tr = rng.uniform(3, 20)
        k = np.arange(n_steps - j)
        loss[j:] += jump * np.exp(-k / tr)
        end = j + int(math.ceil(tr * math.log(jump / (0.3 * sig[j]))))
        log.spikes.append(InjectedSpike("loss", "early", j, min(end, n_steps - 1), jump / sig[j]))
        busy.append((0, end))

    pos = int(rng.integers(200, 200 + max(spike_every, 1))) if spike_every else n_steps
    while spike_every and pos < n_steps - 300:
        shape = str(rng.choice(["single", "burst", "slow", "grad_only"], p=[0.3, 0.25, 0.25, 0.2]))
        h = _loguniform(rng, min_height, max_height)
        if shape in ("single", "grad_only"):
            prof = np.array([h])
        elif shape == "burst":
            prof = h * rng.uniform(1.0, 1.5, int(rng.integers(2, 6)))
        else:
            rise = int(rng.integers(1, 4))
            tr = rng.uniform(20, 200)
            n_dec = int(math.ceil(tr * math.log(h / 0.3)))
            prof = np.concatenate([h * np.arange(1, rise + 1) / rise, h * np.exp(-np.arange(1, n_dec) / tr)])
        if shape == "grad_only" and rng.random() < 0.5:
            prof = h * rng.uniform(1.0, 1.5, int(rng.integers(2, 5)))
        n = min(len(prof), n_steps - pos)
        if shape == "grad_only":
            logg[pos : pos + n] += prof[:n] * gsig[pos]
            log.spikes.append(InjectedSpike("grad_norm", shape, pos, pos + n - 1, h))
        else:
            loss[pos : pos + n] += prof[:n] * sig[pos]
            log.spikes.append(InjectedSpike("loss", shape, pos, pos + n - 1, h))
            if rng.random() < 0.5:
                hg = _loguniform(rng, min_height, max_height)
                ng = int(rng.integers(1, 4))
                logg[pos : pos + ng] += hg * gsig[pos]
                log.spikes.append(InjectedSpike("grad_norm", "co", pos, pos + ng - 1, hg))
        busy.append((pos - 60, pos + n + 60))
        pos += n + int(rng.integers(200, 2 * spike_every))

    if shifts:
        n_shift = max(1, n_steps // 2500)
        for _ in range(n_shift * 4):
            if len(log.shifts) >= n_shift * 2:
                break
            s0 = int(rng.integers(300, max(301, n_steps - 100)))
            if any(a <= s0 <= b + 100 for a, b in busy):
                continue
            metric = "loss" if rng.random() < 0.7 else "grad_norm"
            arr, scale = (loss, sig) if metric == "loss" else (logg, gsig)
            kind = str(rng.choice(["step_up", "step_down", "ramp_up"]))
            if kind == "step_up":
                size = rng.uniform(1.0, 3.0)
                arr[s0:] += size * scale[s0]
            elif kind == "step_down":
                size = -rng.uniform(2.0, 15.0)
                arr[s0:] += size * scale[s0]
            else:
                size = rng.uniform(2.0, 6.0)
                length = int(rng.integers(20, 101))
                ramp = np.minimum(1.0, np.arange(n_steps - s0) / length)
                arr[s0:] += size * scale[s0] * ramp
            log.shifts.append((s0, metric, kind, float(size)))
            busy.append((s0 - 100, s0 + 200))

    log.loss = loss
    log.grad_norm = np.exp(logg)
    return log


def matches(event, metric: str, spike: InjectedSpike, slack: int = 5) -> bool:
    """Whether a detected ``event`` (of ``metric``) matches a labelled ``spike``; see evaluate."""
    return (
        spike.metric == metric
        and event.onset <= spike.end + slack
        and event.end >= spike.onset - 1
    )


@dataclass
class Match:
    n_true: int = 0
    n_detected: int = 0
    true_found: int = 0
    detected_matched: int = 0
    false_alarms: int = 0
    spike_free_steps: int = 0  # log rows outside every labelled spike (not metric-steps)

    def __iadd__(self, o: Match) -> Match:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(o, k))
        return self

    @property
    def precision(self) -> float:
        return self.detected_matched / self.n_detected if self.n_detected else 1.0

    @property
    def recall(self) -> float:
        return self.true_found / self.n_true if self.n_true else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def fa_per_10k(self) -> float:
        """False alarms (all metrics) per 10,000 spike-free training steps (log rows)."""
        return 1e4 * self.false_alarms / max(self.spike_free_steps, 1)


def evaluate(
    events: Iterable, log: SyntheticLog, metric_names: dict[str, str] | None = None, slack: int = 5
) -> Match:
    """Event-level matching of detected ``events`` against ``log.spikes``.

    A detected event (onset..end of its flagged steps) matches a labelled spike of the same
    metric when the spans overlap, the label's span widened by 1 step before and ``slack``
    after (rules such as ``persistent`` confirm late). Unmatched detections (of any metric)
    are false alarms; :attr:`Match.fa_per_10k` is their number per 10k spike-free training
    steps, i.e. log rows outside every labelled spike (of either metric), each row counted
    once however many metrics the rule runs on.
    ``metric_names`` maps the monitor's keys to 'loss'/'grad_norm' (identity by default).
    """
    names = metric_names or {}
    res = Match()
    spikes = log.spikes
    found = [False] * len(spikes)
    for ev in events:
        metric = names.get(ev.metric, ev.metric)
        res.n_detected += 1
        hit = False
        for i, sp in enumerate(spikes):
            if matches(ev, metric, sp, slack):
                found[i] = hit = True
        if hit:
            res.detected_matched += 1
        else:
            res.false_alarms += 1
    res.n_true = len(spikes)
    res.true_found = sum(found)
    # Rows (training steps) outside every labelled spike, each counted once whatever the
    # number of metrics: the rate is per training step, not per metric-step.
    res.spike_free_steps = int((~(log.spike_mask("loss") | log.spike_mask("grad_norm"))).sum())
    return res
