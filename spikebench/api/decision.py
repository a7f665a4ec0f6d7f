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
    ``WARNING``: the run's early-warning rule (``spikebench.init(warning=...)``) fired on a
    row of this read-back (:attr:`Run.last_warning`, :attr:`Run.warnings`); log-only unless
    the loop acts on it (e.g. lowers the LR for a while).

    One decision per read-back, the first that applies of ``DIVERGED``, ``PRUNE``,
    ``SPIKE``, ``WARNING``, ``CONTINUE``: a warning in the read-back of a spike, a prune or
    a divergence is still counted (``Run.warnings``, the rows' ``spikes/warnings``).
    """

    CONTINUE = "continue"
    SPIKE = "spike"
    PRUNE = "prune"
    DIVERGED = "diverged"
    WARNING = "warning"


class TrialPruned(optuna.TrialPruned):
    """Raised by :meth:`Run.check_prune` (Optuna's idiom); an Optuna objective that lets
    it propagate marks its trial pruned, and ``with spikebench.init(...)`` records the run
    as pruned."""
