"""spikebench in a Lightning ``Trainer``: one callback.

::

    from spikebench.integrations.lightning import SpikebenchCallback

    trainer = L.Trainer(max_steps=1000, callbacks=[SpikebenchCallback(params={"lr": 3e-4})])
    trainer.fit(module, train_loader, val_loader)

Each optimizer step becomes a step of the run, numbered as Lightning's loggers number it
(``CSVLogger``'s ``step``: the first optimizer step is 0; ``summary.json``'s ``steps`` is
the number of optimizer steps) (:func:`spikebench.init`, made at train
start from the callback's keyword arguments, or the ``run`` you give): the training loss
(``training_step``'s return, or its ``"loss"``; the mean over accumulated batches), the
pre-clip gradient norm (computed in ``on_before_optimizer_step`` as a tensor:
``torch.nn.utils.get_total_norm``, no host sync; with ``grad_norm_every=k``, on every k-th
optimizer step only) and the learning rate of the step. Tensors
go to the run as they are and are read back together every ``sync_every`` steps (10).
A validation's ``val_loss`` (``self.log("val_loss", ...)``, from
``trainer.callback_metrics``) joins its step.

Log-only on spikes. ``trainer.should_stop`` is set when the sweep prunes the trial
(checked at every step: a file's existence) and,
if ``stop_on_divergence``, when the loss is not finite. The run finishes at train end:
``pruned``, ``diverged`` or ``completed``. Only global rank 0 writes; with several
processes the stop is agreed on every ``sync_every`` steps and at each validation (one
boolean reduction), so every rank stops at the same step.

Checkpoints: ``state_dict``/``load_state_dict`` keep the run's state
(:meth:`spikebench.api.Run.state_dict`) in Lightning's checkpoints;
``trainer.fit(..., ckpt_path=...)`` continues the run folder without a duplicate step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.trainer.states import TrainerFn
except ImportError:
    raise ImportError("spikebench.integrations.lightning needs lightning: "
                      "pip install 'spikebench[lightning]'") from None

from spikebench.api.run import Run
from spikebench.errors import UserError
from spikebench.integrations.loop import SpikebenchLoop, grad_norm


def _logger_step(trainer) -> int:
    """The step Lightning's loggers give the metrics of the optimizer step just taken and
    of the validation after it (the count of optimizer steps before it)."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    stepped = getattr(loop, "_batches_that_stepped", None)
    return stepped if isinstance(stepped, int) else trainer.global_step - 1


class SpikebenchCallback(Callback):
    """Logs a Lightning fit to a spikebench run; see the module.

    ``run``: a run you made (``spikebench.init(...)``), else one is made at train start from
    ``init_kwargs`` (:func:`spikebench.init`'s arguments). ``stop_on_divergence``: stop at a
    non-finite loss (default True). ``loss_key``: the key of the loss in a dict that
    ``training_step`` returns; ``val_metric``: the logged metric that is the validation loss.
    ``warning``: the run's early-warning rule (:func:`spikebench.init`'s); ``on_warning``:
    called with each read-back's newest warning
    (:class:`~spikebench.integrations.loop.SpikebenchLoop`); ``loop.last_decision`` is the
    newest log's decision. ``grad_norm_every``: compute the gradient norm on every k-th
    optimizer step only (default 1, every step); the other rows have none, and the
    grad-norm rule's window then spans k times the steps. On a small model the norm is
    most of the callback's cost (docs/performance.md).
    """

    def __init__(self, run: Run | None = None, *, stop_on_divergence: bool = True,
                 loss_key: str = "loss", val_metric: str = "val_loss",
                 on_warning: Callable[[dict[str, Any]], Any] | None = None,
                 grad_norm_every: int = 1, **init_kwargs: Any):
        for name, v in (("loss_key", loss_key), ("val_metric", val_metric)):
            if not isinstance(v, str) or not v:
                raise UserError(f"SpikebenchCallback({name}={v!r}): must be a metric name")
        if type(grad_norm_every) is not int or grad_norm_every < 1:
            raise UserError(f"SpikebenchCallback(grad_norm_every={grad_norm_every!r}): must "
                            "be an integer >= 1 (1: every optimizer step)")
        self.grad_norm_every = grad_norm_every
        self.loop = SpikebenchLoop(run, stop_on_divergence=stop_on_divergence,
                                   on_warning=on_warning, **init_kwargs)
        self.loss_key, self.val_metric = loss_key, val_metric
        self._loss: Any = None  # the step's loss so far (summed over accumulated batches)
        self._batches = 0
        self._grad_norm: Any = None
        self._lr: Any = None
        self._seen: int | None = None  # the global step of the last row
        self._params: tuple[Any, list[Any]] | None = None  # (module, its parameters) a fit

    @property
    def run(self) -> Run | None:
        """The run: the one given, or the one made at train start (None before)."""
        return self.loop.run if self.loop.started else None

    # ------------------------------------------------------------------ hooks

    def on_train_start(self, trainer, pl_module):
        self.loop.start(rank=trainer.global_rank)
        self._seen = trainer.global_step
        self._params = None

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if self._params is None or self._params[0] is not pl_module:
            # Kept for the fit: walking the module tree each step costs more than the norm.
            self._params = (pl_module, list(pl_module.parameters()))
        if trainer.global_step % self.grad_norm_every == 0:
            self._grad_norm = grad_norm(self._params[1])
        groups = getattr(optimizer, "param_groups", None)
        self._lr = groups[0].get("lr") if groups else None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs.get(self.loss_key) if isinstance(outputs, Mapping) else outputs
        if hasattr(loss, "detach"):
            loss = loss.detach()
            self._loss = loss if self._loss is None else self._loss + loss
            self._batches += 1
        step = trainer.global_step
        if step == self._seen:  # accumulating gradients: no optimizer step yet
            return
        self._seen = step
        if self._loss is not None and not pl_module.automatic_optimization:
            self._loss = self._loss / self._batches  # automatic: already divided
        self.loop.hold(_logger_step(trainer), loss=self._loss, grad_norm=self._grad_norm, lr=self._lr)
        self._loss, self._batches, self._grad_norm = None, 0, None
        if not self.loop.should_stop and self.loop.run.should_prune():  # a file's existence
            self.loop.stop_reason = "pruned"
        self._stop(trainer, agree=step % self.loop.run.sync_every == 0)

    def on_exception(self, trainer, pl_module, exception):
        self.loop.abandon()  # unfinished, as a kill leaves it: a resume continues it

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        val = trainer.callback_metrics.get(self.val_metric)
        step = _logger_step(trainer)
        if val is None:
            self.loop.flush()
        elif self.loop.can_log(step):
            self.loop.log(step, val_loss=val.detach() if hasattr(val, "detach") else val)
        self._stop(trainer, agree=True)

    def on_train_end(self, trainer, pl_module):
        self.loop.finish(steps=_logger_step(trainer))

    def _stop(self, trainer, agree: bool) -> None:
        """Set ``trainer.should_stop`` once the loop should stop; with several processes,
        only where all agree (``agree``: a step every rank reaches), by one reduction."""
        stop = self.loop.should_stop
        if trainer.world_size > 1:
            if not agree:
                return
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            trainer.should_stop = True

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        return self.loop.state_dict() if self.loop.has_state else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.loop.load_state_dict(state_dict)
