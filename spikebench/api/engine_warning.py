"""The built-in loop's early warning: the ``[warning]`` table as a sink that acts.

The rule lives above the training loop in the package's layers, so the loop is handed it,
as it is handed the Prometheus sink: ``spikebench train`` and a sweep's trials add
:func:`sinks_for` to the sinks they give :func:`spikebench.train.loop.train`. The loop
lets a sink with ``observe`` see each record first, at the read-back (host floats: the
rule costs no sync), and scales the LR by the product of ``lr_factor(step)``.

A resumed run rebuilds the state from its log as the checkpoint cut it (the rule is a
function of the values it was fed, the response of the warnings), so no checkpoint format
changes. ``summary.json`` gets ``warnings`` (with the response's stretches).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spikebench.api.warning import Watch
from spikebench.config import Config
from spikebench.errors import UserError
from spikebench.precursors.rule import WarningRule
from spikebench.responses.lower_lr import LowerLR
from spikebench.study import layout as L
from spikebench.train.sinks import Sink


def sinks_for(cfg: Config) -> list[Sink]:
    """The warning sink of ``cfg``'s ``[warning]`` table (none without a signal)."""
    return [WarningSink(cfg)] if cfg.warning.signal else []


class WarningSink(Sink):
    def __init__(self, cfg: Config):
        w = cfg.warning
        try:
            rule = WarningRule.from_mapping(w.rule())
        except UserError as e:  # the table was checked at load; the rule's own words here
            raise UserError(f"[warning]: {e}") from None
        self.watch = Watch(rule)
        self.response = LowerLR(w.lr_factor, w.lr_steps) if w.response == "lower_lr" else None

    def start(self, run: dict[str, Any]) -> None:
        """On a resume, replay the log the checkpoint kept (the loop has cut it there)."""
        partial = Path(run["run_dir"]) / L.PARTIAL
        if partial.is_file() and partial.stat().st_size:
            with open(partial) as f:
                for line in f:
                    self.observe(json.loads(line))

    def observe(self, rec: dict[str, Any]) -> None:
        """Feed one record (adds ``spikes/warnings`` and ``spikes/warning_score``)."""
        if self.watch.observe(rec) and self.response is not None:
            self.response.warn(int(rec["step"]))

    def lr_factor(self, step: int) -> float:
        return self.response.factor(step) if self.response is not None else 1.0

    def close(self, summary: dict[str, Any] | None = None) -> None:
        if summary is not None:
            summary["warnings"] = {**self.watch.summary(), "response": (
                self.response.summary() if self.response is not None else {"kind": "log"})}
