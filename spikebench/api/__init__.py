"""The public run API: spikebench inside a team's own training loop.

``run = spikebench.init(...)``; ``decision = run.log(step, loss=..., grad_norm=...)``;
``run.finish()``. See :mod:`spikebench.api.run`.
"""

from spikebench.api.decision import Decision, TrialPruned
from spikebench.api.run import Run, init

__all__ = ["Decision", "Run", "TrialPruned", "init"]
