"""What a logged step tells the training loop, and the exception that ends a pruned run."""

from __future__ import annotations

import enum

import optuna


class Decision(enum.StrEnum):
    """The answer of :meth:`~spikebench.api.Run.log`.

    ``CONTINUE``: nothing new. ``SPIKE``: a loss spike was told at its first sure row
    (:attr:`Run.last_report`: provisional, then confirmed or withdrawn as the default
    rule's verdicts arrive 73 logged steps later; :attr:`Run.last_event` is the newest
    event they confirmed). The trainer may roll back or skip with its own checkpoints.
    ``PRUNE``: the sweep stopped this trial; finish and return (or raise :class:`TrialPruned`).
    ``DIVERGED``: the training loss is not finite; the run is recorded as diverged.
    """

    CONTINUE = "continue"
    SPIKE = "spike"
    PRUNE = "prune"
    DIVERGED = "diverged"


class TrialPruned(optuna.TrialPruned):
    """Raised by :meth:`Run.check_prune` (Optuna's idiom); an Optuna objective that lets
    it propagate marks its trial pruned, and ``with spikebench.init(...)`` records the run
    as pruned."""
