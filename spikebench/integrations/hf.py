"""spikebench in a Hugging Face ``Trainer``: one callback.

::

    from spikebench.integrations.hf import SpikebenchCallback

    trainer = Trainer(model=model, args=TrainingArguments(..., logging_steps=1),
                      train_dataset=train, eval_dataset=val,
                      callbacks=[SpikebenchCallback(params={"lr": 3e-4})])
    trainer.train()

Each log of the Trainer (``loss``, ``grad_norm``, ``learning_rate``, and
``num_input_tokens_seen`` if counted) becomes a step of the run (:func:`spikebench.init`,
made at train begin from the callback's keyword arguments, or the ``run`` you give); an
evaluation's ``eval_loss`` joins its step. The Trainer's logged values are floats already
(its own read-back), so the run decides at every log (``sync_every=1``).

Log-only on spikes. ``control.should_training_stop`` is set when the sweep prunes the
trial (checked at every step: a file's existence) and, if ``stop_on_divergence``, at a
non-finite logged loss. The run finishes at train end: ``pruned``, ``diverged`` or
``completed``. Every rank logs (the Trainer's logs are the mean over ranks); only world
rank 0 (``args.process_index``) writes.

Checkpoints: the callback is an ``ExportableState``, so each checkpoint's
``trainer_state.json`` holds the run's state (:meth:`spikebench.api.Run.state_dict`);
``trainer.train(resume_from_checkpoint=...)`` continues the run folder from it, without a
duplicate step. It reads that state itself: ``restore_callback_states_from_checkpoint`` is
not needed. With it, the Trainer replaces the callback by one it remakes from the arguments
saved in the checkpoint: that works for a callback made from ``spikebench.init`` arguments,
and is a one-line error when the checkpoint's callback was given a ``run``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError:
    raise ImportError("spikebench.integrations.hf needs transformers: "
                      "pip install 'spikebench[hf]'") from None
try:
    from transformers.trainer_callback import ExportableState
except ImportError:  # transformers < 4.41: no callback state in checkpoints
    ExportableState = object  # type: ignore[misc,assignment]

from spikebench.api.run import Run
from spikebench.errors import UserError
from spikebench.integrations.loop import SpikebenchLoop
from spikebench.precursors.rule import WarningRule

STATE = "spikebench_state"  # the attribute trainer_state.json keeps the run's state under


class SpikebenchCallback(TrainerCallback, ExportableState):
    """Logs the Trainer's steps and evaluations to a spikebench run; see the module.

    ``run``: a run you made (``spikebench.init(...)``), else one is made at train begin
    from ``init_kwargs`` (:func:`spikebench.init`'s arguments; ``sync_every`` 1 unless
    given). ``stop_on_divergence``: stop training at a non-finite logged loss (default
    True; the Trainer's ``logging_nan_inf_filter``, on by default, logs a NaN loss as the
    previous mean: turn it off for a divergence to reach the run). ``val_metric``: the
    evaluation metric logged as the validation loss (``eval_loss``). ``warning``: the
    run's early-warning rule (:func:`spikebench.init`'s); ``on_warning``: called with each
    read-back's newest warning (:class:`~spikebench.integrations.loop.SpikebenchLoop`);
    ``loop.last_decision`` is the newest log's decision.
    """

    def __init__(self, run: Run | None = None, *, stop_on_divergence: bool = True,
                 val_metric: str = "eval_loss", unrestorable: str | None = None,
                 on_warning: Callable[[dict[str, Any]], Any] | None = None,
                 **init_kwargs: Any):
        if unrestorable:
            raise UserError(
                f"SpikebenchCallback: restore_callback_states_from_checkpoint=True cannot "
                f"remake this callback ({unrestorable}); leave it False: the callback "
                "restores its state from the checkpoint itself")
        if not isinstance(val_metric, str) or not val_metric:
            raise UserError(f"SpikebenchCallback(val_metric={val_metric!r}): must be a "
                            "metric name")
        if run is None:
            init_kwargs.setdefault("sync_every", 1)
        self.loop = SpikebenchLoop(run, stop_on_divergence=stop_on_divergence,
                                   on_warning=on_warning, **init_kwargs)
        self.val_metric = val_metric
        self.spikebench_state: dict[str, Any] | None = None  # set by the Trainer's restore
        self._args = _remake_args(run, init_kwargs, stop_on_divergence=stop_on_divergence,
                                  val_metric=val_metric, on_warning=on_warning)

    @property
    def run(self) -> Run | None:
        """The run: the one given, or the one made at train begin (None before)."""
        return self.loop.run if self.loop.started else None

    # ------------------------------------------------------------------ hooks

    def on_train_begin(self, args, state, control, **kwargs):
        saved = self.spikebench_state
        if saved is None and state.global_step > 0:  # resuming: the checkpoint's state
            entry = (state.stateful_callbacks or {}).get(type(self).__name__)
            if isinstance(entry, list):
                entry = entry[0] if entry else None
            saved = ((entry or {}).get("attributes") or {}).get(STATE)
        self.spikebench_state = None
        if saved is not None:
            self.loop.load_state_dict(saved)
        self.loop.start(rank=args.process_index)

    def on_step_end(self, args, state, control, **kwargs):
        if self.loop.started and not self.loop.should_stop and self.loop.run.should_prune():
            self.loop.stop_reason = "pruned"
        self._stop(control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        values = {"loss": logs["loss"], "grad_norm": logs.get("grad_norm"),
                  "lr": logs.get("learning_rate"), "tokens": logs.get("num_input_tokens_seen")}
        if control.should_evaluate:  # the evaluation of this step comes next: it joins
            self.loop.hold(state.global_step, **values)
        else:
            self.loop.log(state.global_step, **values)
        self._stop(control)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        val = (metrics or {}).get(self.val_metric)
        if val is None:
            self.loop.flush()
        elif self.loop.can_log(state.global_step):
            self.loop.log(state.global_step, val_loss=val)
        self._stop(control)

    def on_train_end(self, args, state, control, **kwargs):
        self.loop.finish()

    def _stop(self, control) -> None:
        if self.loop.should_stop:
            control.should_training_stop = True

    # ------------------------------------------------------------------ checkpoints

    def state(self) -> dict[str, Any]:
        """What a checkpoint's ``trainer_state.json`` keeps (``ExportableState``)."""
        return {"args": self._args, "attributes": {
            STATE: self.loop.state_dict() if self.loop.has_state else None}}


def _remake_args(run: Run | None, init_kwargs: dict[str, Any], **own: Any) -> dict[str, Any]:
    """The arguments the Trainer remakes the callback with (JSON): a given run or an
    argument that is not JSON cannot be remade, and says so if the Trainer tries."""
    if run is not None:
        return {"unrestorable": "it was given a run"}
    if own.pop("on_warning") is not None:
        return {"unrestorable": "it was given an on_warning function"}
    kwargs = {k: str(v) if isinstance(v, Path) else v for k, v in init_kwargs.items()}
    if isinstance(kwargs.get("warning"), WarningRule):
        kwargs["warning"] = kwargs["warning"].to_mapping()
    try:
        json.dumps(kwargs, allow_nan=False)
    except (TypeError, ValueError):
        return {"unrestorable": "an argument of spikebench.init is not JSON"}
    return {**own, **kwargs}
