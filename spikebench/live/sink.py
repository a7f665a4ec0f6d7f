"""The sink that feeds ``spikebench train --metrics-port``: each record the loop writes at
its read-back updates the exporter (no extra read from the device)."""

from __future__ import annotations

from typing import Any

from spikebench.live.exporter import Exporter
from spikebench.train.sinks import Sink


class PrometheusSink(Sink):
    def __init__(self, exporter: Exporter, trial: str = "", arm: str = ""):
        self.exporter, self.trial, self.arm = exporter, trial, arm

    def write(self, metrics: dict[str, Any]) -> None:
        self.exporter.observe(metrics, self.trial, self.arm, source="run")
