"""spikebench in a hand-written training loop, and the part every integration shares.

:class:`SpikebenchLoop` wraps one :class:`~spikebench.api.Run` (``spikebench.init``'s)::

    with SpikebenchLoop(params={"lr": 3e-4}) as sb:
        for step in range(1, steps + 1):
            loss = train_step()                     # backward done, before optimizer.step()
            sb.log(step, loss=loss, grad_norm=grad_norm(model.parameters()),
                   lr=opt.param_groups[0]["lr"], val_loss=val if step % 100 == 0 else None)
            if sb.should_stop:                      # the sweep pruned it, or it diverged
                break

Tensors go to the run as they are (read back together every ``sync_every`` steps). A
spike is logged only (``run.last_event`` says where), and so is an early warning
(``warning=``: ``last_decision`` is ``Decision.WARNING``, ``on_warning`` is called); the
loop is asked to stop (:attr:`~SpikebenchLoop.should_stop`) when the sweep prunes the
trial, and when the loss is not finite if ``stop_on_divergence`` (the default). Leaving the ``with`` block finishes
the run: ``pruned`` if the sweep pruned it, else ``completed`` or ``diverged``; an
exception leaves the run folder unfinished, as a kill does, so that a resume from the last
checkpoint continues it (:meth:`state_dict` goes in the checkpoint,
:meth:`load_state_dict` restores it).

The framework callbacks (:mod:`.hf`, :mod:`.lightning`) are this object driven by the
framework's hooks; they also *hold* a step's row (:meth:`hold`) until the validation that
the framework runs after it, so the validation loss joins its step.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from spikebench.api import checks
from spikebench.api.decision import Decision, TrialPruned
from spikebench.api.run import Run
from spikebench.errors import UserError
from spikebench.values import dec_float, enc_float

PRUNED, DIVERGED = "pruned", "diverged"


def grad_norm(parameters: Iterable[Any]) -> Any:
    """The global L2 norm of the gradients of ``parameters`` as a 0-d tensor, on their
    device, without a host sync: ``torch.nn.utils.get_total_norm``'s value; None if no
    parameter has a gradient. Call it after ``backward()`` and before ``optimizer.step()``
    (and before clipping, for the pre-clip norm: ``clip_grad_norm_`` returns that one too,
    so a loop that clips passes that and calls nothing). Give a list kept from
    ``model.parameters()``: walking the module tree again each step costs more than the
    norm on a small model."""
    import torch

    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    elif parameters is None or isinstance(parameters, str | bytes) or not hasattr(
            parameters, "__iter__"):
        raise UserError(f"grad_norm({checks.short(parameters)}): give the model's "
                        "parameters (model.parameters())")
    grads = [p.grad for p in parameters if getattr(p, "grad", None) is not None]
    if not grads:
        return None
    return _total_norm(torch, grads)


def _total_norm(torch: Any, grads: list[Any]) -> Any:
    """``get_total_norm(grads)``, bit for bit: where the gradients are plain tensors of one
    device and dtype it is one ``_foreach_norm`` and the norm of those norms, done here
    without its grouping and ``no_grad`` (about a third of its time on a small model)."""
    total = getattr(torch.nn.utils, "get_total_norm", None)
    if total is None:  # torch < 2.6
        return torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g.detach()) for g in grads]))
    dtype, device = grads[0].dtype, grads[0].get_device()
    if all(type(g) is torch.Tensor and g.dtype is dtype and not g.requires_grad
           and g.get_device() == device for g in grads):
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    return total(grads)


@contextlib.contextmanager
def _as_rank(rank: int | None) -> Iterator[None]:
    """``RANK`` as the framework knows it, while a run is made (the run reads ``RANK``; a
    launcher that does not set it would make every process rank 0, and all would write)."""
    old = os.environ.get("RANK")
    if rank is None or int(old or 0) == rank:
        yield
        return
    os.environ["RANK"] = str(rank)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("RANK", None)
        else:
            os.environ["RANK"] = old


def _finite_float(v: Any) -> bool:
    """False for a non-finite Python number; tensors are not looked at (no host sync)."""
    return not isinstance(v, float) or math.isfinite(v)


def _encode_row(row: tuple[int, dict[str, Any]] | None) -> list | None:
    if row is None:
        return None
    step, values = row
    out = {}
    for k, v in values.items():
        if hasattr(v, "detach") and hasattr(v, "device"):  # a tensor: one read-back
            v = float(v.detach().float().reshape(()).item())
        out[k] = enc_float(v) if isinstance(v, float) else v
    return [step, out]


def _decode_row(row: list | None) -> tuple[int, dict[str, Any]] | None:
    if row is None:
        return None
    step, values = row
    return int(step), {k: dec_float(v) for k, v in values.items()}


class SpikebenchLoop:
    """One run of a training loop, with the stop rules of the integrations.

    ``run``: a run you made (``spikebench.init(...)``, e.g. to read ``run.params`` first);
    else one is made at the first :meth:`log` (or :meth:`start`) from ``init_kwargs``,
    :func:`spikebench.init`'s arguments (inside a sweep its context wins, as there).
    ``stop_on_divergence``: ask the loop to stop at a non-finite loss (default True).
    ``on_warning``: called with :attr:`Run.last_warning` (a dict: ``step``, ``score``,
    ``value``) once per read-back in which the run's early-warning rule (``warning=``,
    :mod:`spikebench.api.warning`) fired, also where a spike's decision hides it; the
    place to act on a warning (lower the LR, save a checkpoint). Log-only without it.
    """

    def __init__(self, run: Run | None = None, *, stop_on_divergence: bool = True,
                 on_warning: Callable[[dict[str, Any]], Any] | None = None,
                 **init_kwargs: Any):
        where = type(self).__name__
        if run is not None and not isinstance(run, Run):
            raise UserError(f"{where}(run={checks.short(run)}): must be a spikebench.init() "
                            "run, or left out")
        if run is not None and init_kwargs:
            raise UserError(f"{where}: give a run or spikebench.init's arguments ("
                            + ", ".join(sorted(init_kwargs)) + "), not both")
        if not isinstance(stop_on_divergence, bool):
            raise UserError(f"{where}(stop_on_divergence={checks.short(stop_on_divergence)}): "
                            "must be True or False")
        if on_warning is not None and not callable(on_warning):
            raise UserError(f"{where}(on_warning={checks.short(on_warning)}): must be a "
                            "function of the warning (a dict), or left out")
        checks.init_args(init_kwargs, where)  # refused now, not at the first step
        self._run = run
        self.init_kwargs = init_kwargs
        self.stop_on_divergence = stop_on_divergence
        self.stop_reason: str | None = None  # "pruned" or "diverged", once decided
        self.spikes = 0  # SPIKE decisions so far (log-only: nothing else happens)
        self.on_warning = on_warning
        self.last_decision: Decision = Decision.CONTINUE  # of the newest logged row
        self._warned = 0  # the run's warnings handed to on_warning
        self._held: tuple[int, dict[str, Any]] | None = None
        self._last: int | None = None  # the last step given to the run
        self._restore: dict[str, Any] | None = None

    # ------------------------------------------------------------------ the run

    @property
    def run(self) -> Run:
        """The run (made now if it was not given and no step was logged yet)."""
        return self.start()

    @property
    def started(self) -> bool:
        """Whether the run exists (given, or made)."""
        return self._run is not None

    @property
    def has_state(self) -> bool:
        """Whether there is a state to checkpoint: a run, or a state loaded for one."""
        return self._run is not None or self._restore is not None

    def start(self, rank: int | None = None) -> Run:
        """Make the run if there is none (``rank``: the framework's global rank, which
        decides who writes) and apply a state :meth:`load_state_dict` was given."""
        if self._run is None:
            with _as_rank(rank):
                self._run = Run(**self.init_kwargs)
        if self._restore is not None:
            d, self._restore = self._restore, None
            self._run.load_state_dict(d["run"])
            self._held = _decode_row(d.get("held"))
            self._last = d["run"].get("last_step")
            self._warned = self._run.warnings
        return self._run

    def _restored(self) -> None:
        """Apply a state loaded for the run (it may hold a row) before anything is logged."""
        if self._restore is not None:
            self.start()

    @property
    def should_stop(self) -> bool:
        """True once the sweep pruned the trial, or (``stop_on_divergence``) it diverged."""
        return self.stop_reason is not None

    # ------------------------------------------------------------------ logging

    def can_log(self, step: int) -> bool:
        """Whether :meth:`log` takes step ``step`` now: the run is not finished and the step
        is the held one or later than every step logged."""
        self._restored()
        if self._run is not None and self._run.status is not None:
            return False
        if self._held is not None:
            return step >= self._held[0]
        return self._last is None or step > self._last

    def log(self, step: int, **values: Any) -> Decision:
        """Log step ``step`` (``loss``, ``grad_norm``, ``lr``, ``val_loss``, any metric;
        floats or 0-d tensors; None values are left out) and apply the stop rules. A held
        row of the same step joins it; one of an earlier step is logged first."""
        self._restored()
        values = {k: v for k, v in values.items() if v is not None}
        if self._held is not None:
            held_step, held = self._held
            if held_step == step:
                self._held = None
                values = {**held, **values}
            else:
                self.flush()
        return self._log(step, values)

    def hold(self, step: int, **values: Any) -> Decision:
        """Keep step ``step``'s row until a :meth:`log` of the same step adds to it (the
        validation after it), a later step comes, or :meth:`flush`; a held row of an
        earlier step is logged now (its decision is returned)."""
        self._restored()
        decision = Decision.CONTINUE
        if self._held is not None and self._held[0] != step:
            decision = self.flush()
        values = {k: v for k, v in values.items() if v is not None}
        if self._held is not None:
            values = {**self._held[1], **values}
        self._held = (step, values)
        return decision

    def flush(self) -> Decision:
        """Log the held row, if any."""
        self._restored()
        if self._held is None:
            return Decision.CONTINUE
        (step, values), self._held = self._held, None
        return self._log(step, values)

    def _log(self, step: int, values: dict[str, Any]) -> Decision:
        run = self.start()
        decision = run.log(step, **values)
        self._last = step
        self.last_decision = decision
        self.observe(decision, values)
        if run.warnings > self._warned:  # counted by the run: a spike's decision may hide one
            self._warned = run.warnings
            if self.on_warning is not None:
                self.on_warning(run.last_warning)
        return decision

    @property
    def warnings(self) -> int:
        """The early warnings the run's rule gave so far (0 without a rule)."""
        return self._run.warnings if self._run is not None else 0

    def observe(self, decision: Decision, values: dict[str, Any] | None = None) -> None:
        """Apply the stop rules to a decision (and the logged values: a non-finite float
        loss is a divergence on every rank, where only rank 0's run decides)."""
        if decision is Decision.SPIKE:
            self.spikes += 1
        elif decision is Decision.PRUNE:
            self.stop_reason = PRUNED
        loss = (values or {}).get("loss")
        if self.stop_on_divergence and self.stop_reason is None and (
                decision is Decision.DIVERGED or not _finite_float(loss)):
            self.stop_reason = DIVERGED

    # ------------------------------------------------------------------ the end

    def finish(self, status: str | None = None, *, steps: int | None = None
               ) -> dict[str, Any] | None:
        """Log the held row and finish the run: ``pruned`` if the sweep pruned it, else
        ``status`` or what the run says (``completed``, ``diverged``); ``steps``: see
        :meth:`Run.finish`. Returns the summary (None on ranks other than 0)."""
        if self._run is None and self._held is None and self._restore is None:
            return None  # nothing was logged: no run folder either
        if self._run is not None and self._run.status is not None:
            return self._run.summary
        run = self.start()
        self.flush()
        if status is None and (self.stop_reason == PRUNED or run.should_prune()):
            status = PRUNED
        return run.finish(status, steps=steps)

    def __enter__(self) -> SpikebenchLoop:
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None:
            self.finish()
        elif issubclass(kind, TrialPruned):
            self.finish(PRUNED)
        else:
            self.abandon()
        return False

    def abandon(self) -> None:
        """After an exception: the run stays unfinished, as a kill leaves it, for a resume
        from a checkpoint; its folder is freed for that resume (:meth:`Run.abandon`)."""
        if self._run is not None:
            self._run.abandon()

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """For the loop's checkpoint: the run's state (:meth:`Run.state_dict`) and the
        held row. Plain JSON. A state loaded before the run was made is that state."""
        if self._run is None and self._restore is not None:
            return self._restore
        return {"version": 1, "run": self.run.state_dict(), "held": _encode_row(self._held)}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        """Continue from a checkpoint's :meth:`state_dict`: applied now if the run exists,
        else when it is made (before the first step is logged)."""
        if not isinstance(d, dict) or d.get("version") != 1 or "run" not in d:
            raise UserError("SpikebenchLoop.load_state_dict: not a SpikebenchLoop.state_dict()")
        self._restore = d
        if self._run is not None:
            self.start()

    def __repr__(self) -> str:
        return f"SpikebenchLoop(run={self._run!r}, stop_reason={self.stop_reason!r})"
