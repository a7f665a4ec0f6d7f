"""Rollback for any loop: keep good states, and go back to one before a loss spike (PaLM).

The loop keeps its own state; this helper decides *when* and *to which* kept state:

.. code-block:: python

    rb = Rollback(save=save, load=load, every=10, keep=4)
    step = 0
    while step < steps:
        step += 1
        loss = train_step(next_batch(step + rb.offset))
        back = rb.step(step, loss)  # may call save(step), or load(token)
        if back is not None:        # the state after back.step is in place again
            step = back.step

- ``save(step) -> token`` is called after the step's update every ``every`` steps; the
  ``keep`` newest tokens are kept (``drop(token)``, if given, is called for one that
  leaves). A token is anything ``load`` understands: an in-memory copy, a file name; if
  ``save`` returns None the token is the step.
- The trigger is the built-in rollback's (:func:`spikebench.train.rollback.loss_trigger`:
  the rule ``detector`` on the loss, at one scale), fed every ``read_every`` steps.
- On a new spike event it calls ``load(token)`` with the newest kept state from before the
  event's onset, and returns a :class:`RolledBack` naming it; the loop continues from
  ``back.step + 1`` and moves its data on by ``skip_batches`` (:attr:`offset` sums them).
  At most ``max_rollbacks`` times; after that spikes are only counted in :attr:`events`.

Host cost: a float loss costs nothing more. A tensor loss is kept on the device (a
reference to the detached scalar) and the losses of ``read_every`` steps are read back
together, one host transfer per ``read_every`` steps; pass host floats if the loop reads
its loss back anyway. ``save`` and ``load`` cost what the loop's functions cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from spikebench import metrics as M
from spikebench.train.rollback import Snapshot, loss_trigger, split_ring
from spikebench.values import dec_float, enc_float


@dataclass(frozen=True)
class RolledBack:
    """What :meth:`Rollback.step` did: the state after ``step`` is back (``token``, as
    ``save`` returned it); the spike's onset was ``onset``; skip ``skip_batches``."""

    step: int
    token: Any = field(repr=False)
    onset: int
    skip_batches: int
    redone_steps: int


class Rollback:
    """The rollback response, driven by the loop's own ``save(step)``/``load(token)``."""

    def __init__(self, save: Callable[[int], Any], load: Callable[[Any], None], *,
                 every: int = 10, keep: int = 4, read_every: int = 10,
                 detector: str = "default", gap: int = 5, skip_batches: int = 20,
                 max_rollbacks: int = 3, drop: Callable[[Any], None] | None = None):
        for name, v, lo in (("every", every, 1), ("keep", keep, 1), ("read_every", read_every, 1),
                            ("gap", gap, 1), ("skip_batches", skip_batches, 0),
                            ("max_rollbacks", max_rollbacks, 0)):
            if not isinstance(v, int) or v < lo:
                raise ValueError(f"Rollback: {name} = {v!r}; an integer >= {lo}")
        if every * keep <= read_every:
            # As the built-in's config check: no kept state could predate a detected onset.
            raise ValueError(f"Rollback: keep = {keep} states every {every} steps reach "
                             f"{every * keep} steps back, not past one read_every "
                             f"({read_every}); raise keep or every")
        self.save_fn, self.load_fn, self.drop_fn = save, load, drop
        self.every, self.keep, self.read_every = every, keep, read_every
        self.skip_batches, self.max_rollbacks = skip_batches, max_rollbacks
        self.trigger = loss_trigger(detector, gap)
        self.ring: list[Snapshot] = []
        self.pending: list[tuple[int, Any]] = []  # (step, loss) not fed to the trigger yet
        self.offset = 0  # batches skipped so far
        self.events: list[dict[str, Any]] = []  # one per rollback
        self.spikes = 0  # trigger events seen (acted on or not)
        self._seen = 0

    def step(self, step: int, loss: torch.Tensor | float) -> RolledBack | None:
        """Record ``step``'s training loss; every ``read_every`` steps judge the losses
        since the last read (a rollback then, maybe); every ``every`` steps keep the state
        (``save(step)``), unless this call rolled back."""
        self.pending.append((step, loss.detach() if torch.is_tensor(loss) else float(loss)))
        if step % self.read_every == 0:
            back = self._judge(step)
            if back is not None:
                return back
        if step % self.every == 0 and not (self.ring and self.ring[-1].position >= step):
            self._keep(step)
        return None

    def _keep(self, step: int) -> None:
        token = self.save_fn(step)
        self.ring.append(Snapshot(step, step if token is None else token,
                                  self.trigger.state_dict(), list(self.pending)))
        while len(self.ring) > self.keep:
            self._drop(self.ring.pop(0))

    def _drop(self, snap: Snapshot) -> None:
        if self.drop_fn is not None:
            self.drop_fn(snap.state)

    def _feed(self) -> None:
        """Read the pending losses back (one transfer for the tensors) and feed them."""
        pending, self.pending = self.pending, []
        tensors = [v for _, v in pending if torch.is_tensor(v)]
        host = iter(torch.stack([t.float().reshape(()) for t in tensors]).tolist()
                    if tensors else [])
        for s, v in pending:
            self.trigger.update(s, {M.TRAIN_LOSS: next(host) if torch.is_tensor(v) else v})

    def _judge(self, step: int) -> RolledBack | None:
        self._feed()
        events = self.trigger.events
        new, self._seen = events[self._seen:], len(events)
        self.spikes += len(new)
        if not new or len(self.events) >= self.max_rollbacks:
            return None
        onset = new[0].onset
        before, after = split_ring(self.ring, onset)
        if not before:
            return None
        snap = before[-1]
        self.load_fn(snap.state)
        for dropped in after:
            self._drop(dropped)
        self.ring = before
        # The trigger as it was at the kept state, with the losses it had not judged then:
        # it does not remember the spike, and judges the redone steps afresh.
        self.trigger.load_state_dict(snap.trigger)
        self.pending = list(snap.pending)
        self._seen = len(self.trigger.events)
        self.offset += self.skip_batches
        back = RolledBack(snap.position, snap.state, onset, self.skip_batches,
                          step - snap.position)
        self.events.append({"step": step, "onset": onset, "to": snap.position,
                            "redone_steps": back.redone_steps,
                            "skipped_batches": self.skip_batches})
        return back

    def state_dict(self) -> dict[str, Any]:
        """Counters, events, the trigger and the ring (the tokens as they are, so a token
        should be something a checkpoint can hold: a file name, a step). Pending tensor
        losses are read back here."""
        def host(pending: list[tuple[int, Any]]) -> list[list[Any]]:
            return [[s, enc_float(float(v))] for s, v in pending]
        return {"offset": self.offset, "events": list(self.events), "spikes": self.spikes,
                "seen": self._seen, "trigger": self.trigger.state_dict(),
                "pending": host(self.pending),
                "ring": [{"step": s.position, "token": s.state, "trigger": s.trigger,
                          "pending": host(s.pending)} for s in self.ring]}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.offset, self.spikes, self._seen = int(d["offset"]), int(d["spikes"]), int(d["seen"])
        self.events = list(d["events"])
        self.trigger.load_state_dict(d["trigger"])
        self.pending = [(int(s), dec_float(v)) for s, v in d["pending"]]
        self.ring = [Snapshot(int(r["step"]), r["token"], r["trigger"],
                              [(int(s), dec_float(v)) for s, v in r["pending"]])
                     for r in d["ring"]]
