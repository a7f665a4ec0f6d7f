"""Rollback (PaLM): on a detected loss spike, return to a recent good state and skip batches.

Every ``response.every`` steps the run keeps its state (model, optimizer, loss scaler, RNG
streams, ZClip and skip-step statistics) in a ring of ``response.ring``: cloned on the
device (``storage = "memory"``) or in the checkpoint format (``"disk"``). A trigger rule
(``response.detector``) watches the training loss at each read-back. When it opens an
event, the newest state from before the event's onset comes back, the next
``response.skip_batches`` batches are skipped (the stream moves on), and the LR may be
scaled by ``lr_factor`` for ``cooldown`` steps. At most ``max_rollbacks`` times.

Logged steps count steps worked, redone ones included, so the budget and time to target
pay for a rollback; ``train/position`` is the position in the LR schedule.

The trigger (:func:`loss_trigger`), the kept states (:class:`Snapshot`) and the choice of
the state to go back to (:func:`split_ring`) are shared with the public
:class:`spikebench.responses.Rollback`, which a team's own loop drives.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from spikebench import metrics as M
from spikebench.config import ResponseConfig
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.train import checkpoint

FOLDER = "rollback"


@dataclass
class Snapshot:
    position: int
    # In memory, or the file it was written to (the public helper: the loop's token).
    state: dict[str, Any] | Path | Any
    trigger: dict[str, Any]  # the trigger rule's state then: it must not remember the spike
    # Losses of steps up to ``position`` the trigger had not been fed yet (public helper).
    pending: list[tuple[int, Any]] = field(default_factory=list)


def loss_trigger(detector: str, gap: int) -> SpikeMonitor:
    """The rollback's trigger: rule ``detector`` on the training loss. One scale only: a
    rollback must act at the read-back that sees the spike, not after the rows the default
    rule's multi-step evidence waits for."""
    return SpikeMonitor(detector, (M.TRAIN_LOSS,), gap=gap, rule_kwargs={
        "multi": False} if detector == "default" else None)


def split_ring(ring: list[Snapshot], onset: int) -> tuple[list[Snapshot], list[Snapshot]]:
    """The kept states from before ``onset`` (the newest of them is the one to go back to)
    and those from the onset on (damaged, or no older than it: dropped)."""
    return ([s for s in ring if s.position < onset], [s for s in ring if s.position >= onset])


class Rollback:
    def __init__(self, cfg: ResponseConfig, gap: int, run_dir: Path):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.trigger = loss_trigger(cfg.detector, gap)
        self.ring: list[Snapshot] = []
        self.offset = 0  # batches skipped so far
        self.cool_until = 0  # last position at lr_factor
        self.events: list[dict[str, Any]] = []
        self._seen = 0  # trigger events already acted on
        self._positions: dict[int, int] = {}  # schedule position of each step fed since

    def batch(self, position: int) -> int:
        """The 0-based batch index of a 1-based schedule position."""
        return position - 1 + self.offset

    def lr_factor(self, position: int) -> float:
        return self.cfg.lr_factor if position <= self.cool_until else 1.0

    def keep(self, position: int, state: dict[str, Any]) -> None:
        """Add the state after ``position`` to the ring (the caller clones nothing)."""
        if self.cfg.storage == "disk":
            kept: dict[str, Any] | Path = checkpoint.save(
                self.run_dir, position, state, self.cfg.ring, name=FOLDER)[0]
        else:
            kept = copy.deepcopy(state)
        self.ring = [*self.ring, Snapshot(position, kept, self.trigger.state_dict())]
        self.ring = self.ring[-self.cfg.ring:]

    def triggered(self, records: list[dict[str, Any]], act: bool = True) -> int | None:
        """Feed one read-back's records; the schedule position of a new event's onset.
        ``act`` False (an extra read-back, e.g. for a checkpoint) only feeds: rollbacks are
        decided at the regular read-backs, so checkpointing never changes when they happen."""
        for r in records:
            self.trigger.update(r[M.STEP], r)
            self._positions[r[M.STEP]] = r[M.POSITION]
        if not act:
            return None
        events = self.trigger.events
        new, self._seen = events[self._seen:], len(events)
        at, self._positions = self._positions, {}
        if not new or len(self.events) >= self.cfg.max_rollbacks:
            return None
        return at.get(new[0].onset, records[0][M.POSITION])

    def roll_back(self, onset: int, position: int, step: int,
                  restore: Callable[[dict[str, Any]], None]) -> int | None:
        """Restore the newest state from before ``onset``; returns its position (None when
        the ring holds none)."""
        before, _ = split_ring(self.ring, onset)
        if not before:
            return None
        snap = before[-1]
        # A copy: the optimizer takes the restored tensors as its own and would update the
        # kept state in place, spoiling a second rollback to it.
        state = copy.deepcopy(snap.state) if isinstance(snap.state, dict) else torch.load(
            snap.state, map_location="cpu", weights_only=True)
        restore(state)
        self.trigger.load_state_dict(snap.trigger)
        self._seen = len(self.trigger.events)
        self.ring = before
        if self.cfg.storage == "disk":  # states from after it are gone from disk too
            for path in checkpoint.saved(self.run_dir, FOLDER):
                if int(path.stem.split("-")[1]) > snap.position:
                    path.unlink(missing_ok=True)
                    path.with_suffix(".sha256").unlink(missing_ok=True)
        self.offset += self.cfg.skip_batches
        self.cool_until = snap.position + self.cfg.cooldown
        self.events.append({"kind": "rollback", "step": step, "onset_position": onset,
                            "to_position": snap.position,
                            "redone_steps": position - snap.position,
                            "skipped_batches": self.cfg.skip_batches})
        return snap.position

    def state_dict(self) -> dict[str, Any]:
        """For checkpoints: the counters, the trigger, the events and the ring (its states
        themselves in memory storage, their file names on disk), so a resumed run rolls
        back exactly as an uninterrupted one."""
        ring = [{"position": s.position, "trigger": s.trigger,
                 "state": s.state if isinstance(s.state, dict) else str(s.state)}
                for s in self.ring]
        return {"offset": self.offset, "cool_until": self.cool_until, "seen": self._seen,
                "events": self.events, "trigger": self.trigger.state_dict(), "ring": ring,
                "positions": [[k, v] for k, v in self._positions.items()]}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.offset, self.cool_until = int(d["offset"]), int(d["cool_until"])
        self.events = list(d["events"])
        self.trigger.load_state_dict(d["trigger"])
        self._seen = int(d["seen"])
        self._positions = {int(k): int(v) for k, v in d["positions"]}
        self.ring = [Snapshot(int(s["position"]), s["state"] if isinstance(s["state"], dict)
                              else Path(s["state"]), s["trigger"]) for s in d["ring"]]
