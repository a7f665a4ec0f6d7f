"""The Prometheus metrics a run or a sweep exports, and how a log record updates them.

Names follow Prometheus conventions: a ``spikebench_`` prefix, base units (bytes, seconds,
nats), ``_total`` on counters, and only low-cardinality labels (the trial number and its
arm; never the step). One :class:`Exporter` owns one registry; ``train`` feeds it from its
sinks, the sweep driver and workers from the logs their trials write (:mod:`.follow`), at the
read-back the loop already does, so the training loop pays nothing for it.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from spikebench import metrics as M
from spikebench.values import finite

LABELS = ("trial", "arm")
# Gauges set from a record: (metric name, help, record key).
GAUGES = (
    ("spikebench_train_loss", "Training loss of the last logged step (nats).", M.TRAIN_LOSS),
    ("spikebench_grad_norm", "Pre-clip global gradient norm of the last logged step.",
     M.GRAD_NORM),
    ("spikebench_learning_rate", "Learning rate of the last logged step.", M.LR),
    ("spikebench_loss_scale", "fp16 loss scale (1 without scaling).", M.LOSS_SCALE),
    ("spikebench_tokens_per_second", "Training throughput over the last log interval.",
     M.TOKENS_PER_S),
    ("spikebench_step", "The last logged training step.", M.STEP),
    ("spikebench_val_loss", "Validation loss of the last evaluation (nats).", M.VAL_LOSS),
    ("spikebench_resident_memory_bytes", "Resident memory of the training process.",
     M.MEM_RSS),
    ("spikebench_cuda_memory_allocated_bytes", "CUDA memory allocated by tensors.",
     M.CUDA_ALLOCATED),
    ("spikebench_cuda_memory_reserved_bytes", "CUDA memory reserved by the caching allocator.",
     M.CUDA_RESERVED),
)
COUNTERS = (
    ("spikebench_spike_events_total", "Loss-spike events the online monitor confirmed."),
    ("spikebench_spike_reports_total",
     "Loss spikes told at their first sure row (provisional; some are later withdrawn)."),
    ("spikebench_spike_withdrawn_total",
     "Provisional loss-spike reports the multi-step rule withdrew."),
    ("spikebench_rollbacks_total", "Rollbacks to a recent good state."),
    ("spikebench_spike_warnings_total",
     "Early warnings of a spike the run's precursor rule gave (log-only unless acted on)."),
)
SWEEP = ("spikebench_sweep_trials", "Trials of the sweep by state (done, running, failed).")


def metric_names() -> list[str]:
    """Every name this exporter publishes (a counter ``x_total`` is scraped as ``x_total``)."""
    return [g[0] for g in GAUGES] + [c[0] for c in COUNTERS] + [SWEEP[0]]


class Exporter:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.gauges = {key: Gauge(name, doc, LABELS, registry=self.registry)
                       for name, doc, key in GAUGES}
        # prometheus_client adds the _total suffix itself: name the counter without it.
        self.counters = {name: Counter(name.removesuffix("_total"), doc, LABELS,
                                       registry=self.registry) for name, doc in COUNTERS}
        self.sweep = Gauge(SWEEP[0], SWEEP[1], ("state",), registry=self.registry)
        self._events: dict[Any, int] = {}  # last cumulative count per (labels, source)

    def observe(self, rec: dict[str, Any], trial: str = "", arm: str = "",
                source: Any = None) -> None:
        """Update from one log record; ``source`` names the run the record's cumulative
        counts belong to (one seed's log), so counts of successive seeds add up."""
        labels = {"trial": trial, "arm": arm}
        for counter in self.counters.values():  # exported from 0, so increase() sees event 1
            counter.labels(**labels)
        for key, gauge in self.gauges.items():
            v = rec.get(key)
            if finite(v):
                gauge.labels(**labels).set(v)
        if rec.get(M.ROLLBACK):
            self.counters["spikebench_rollbacks_total"].labels(**labels).inc()
        for key, name in ((M.SPIKE_EVENTS, "spikebench_spike_events_total"),
                          (M.SPIKE_REPORTED, "spikebench_spike_reports_total"),
                          (M.SPIKE_WITHDRAWN, "spikebench_spike_withdrawn_total"),
                          (M.WARNINGS, "spikebench_spike_warnings_total")):
            n = rec.get(key)
            if isinstance(n, int) and not isinstance(n, bool):
                k = (trial, arm, source, key)
                new = n - self._events.get(k, 0)
                if new > 0:
                    self.counters[name].labels(**labels).inc(new)
                self._events[k] = max(n, self._events.get(k, 0))

    def sweep_progress(self, done: int, running: int, failed: int) -> None:
        for state, n in (("done", done), ("running", running), ("failed", failed)):
            self.sweep.labels(state=state).set(n)
